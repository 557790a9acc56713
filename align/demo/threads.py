"""How many torch threads the demo trains with: every core when the machine is idle, one when
other jobs hold the cores.

On a 2-core machine the demo's training ran at about 2,400 tokens/s with one torch thread and
about 350 with two while other jobs held the cores: two threads wait on each other at every
operation whenever one of them is descheduled, so a busy machine collapses a run that uses
every core (docs/commands/demo.md, "Threads"; bench/demo_threads.py measures it). The rule:
the cores that the 1-minute load average leaves free, at least one; OMP_NUM_THREADS, when the
user sets it, wins.
"""

from __future__ import annotations

import os


def choose(cores: int, load: float, requested: str | None) -> tuple[int, str]:
    """(threads, why): max(1, cores − round(load)), or `requested` (OMP_NUM_THREADS) when it
    is a positive integer.

    Parameters
    ----------
    cores : int
        The CPU cores of the machine (os.cpu_count()).
    load : float
        The 1-minute load average before the demo's own work: the runnable jobs of others.
    requested : str or None
        OMP_NUM_THREADS as the user set it (None: unset).
    """
    if requested and requested.strip().isdigit() and int(requested) > 0:
        return int(requested), f"OMP_NUM_THREADS={requested.strip()}"
    threads = max(1, min(cores, cores - round(load)))
    return threads, f"{cores} cores, load average {load:.1f}"


def apply(log) -> int:
    """Set torch's thread count by `choose` from this machine's cores and load; log the choice
    when it is not every core; returns the count."""
    import torch

    cores = os.cpu_count() or 1
    threads, why = choose(cores, os.getloadavg()[0], os.environ.get("OMP_NUM_THREADS"))
    torch.set_num_threads(threads)
    if threads < cores:
        log(
            f"align demo: {threads} torch thread{'s' if threads > 1 else ''} ({why}): other jobs "
            "hold the cores; OMP_NUM_THREADS=N sets it"
        )
    return threads
