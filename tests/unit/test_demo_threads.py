"""The demo's torch thread count (align.demo.threads.choose), by hand-worked cases: every core
when idle, the cores the load leaves free, at least one, and OMP_NUM_THREADS when given."""

from __future__ import annotations

import pytest

from align.demo.threads import choose


@pytest.mark.parametrize(
    "cores, load, requested, want",
    [
        (2, 0.0, None, 2),  # idle: every core
        (2, 0.4, None, 2),
        (2, 0.8, None, 1),  # one core's worth of other work
        (2, 10.1, None, 1),  # a busy machine: one thread, never fewer
        (16, 3.2, None, 13),
        (16, 40.0, None, 1),
        (2, 10.1, "2", 2),  # the user's OMP_NUM_THREADS wins
        (2, 0.0, " 1 ", 1),
        (2, 0.8, "0", 1),  # not a positive count: the rule
        (2, 0.0, "many", 2),
    ],
)
def test_threads_follow_the_free_cores(cores, load, requested, want):
    threads, why = choose(cores, load, requested)
    assert threads == want
    assert why == (
        f"OMP_NUM_THREADS={requested.strip()}"
        if requested and requested.strip().isdigit() and int(requested) > 0
        else f"{cores} cores, load average {load:.1f}"
    )
