"""messages.heartbeat: a step that logs nothing for `every` seconds gets a "still running"
line; one that logs often gets none; nothing is said after the step ends."""

from __future__ import annotations

import re
import time

from align.messages import heartbeat


def test_a_silent_step_says_it_runs_and_stops_saying_it_after():
    lines = []
    with heartbeat(lines.append, "align study", every=0.1):
        time.sleep(0.6)
    said = len(lines)
    time.sleep(0.3)
    assert said >= 1 and len(lines) == said, lines
    assert all(re.fullmatch(r"align study: still running, \d+ s", line) for line in lines), lines


def test_a_step_that_speaks_gets_no_heartbeat():
    lines = []
    with heartbeat(lines.append, "align report", every=5.0) as log:
        for k in range(5):
            log(f"page {k}")
            time.sleep(0.02)
    assert lines == [f"page {k}" for k in range(5)]
