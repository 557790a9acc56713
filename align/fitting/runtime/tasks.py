"""What runs inside every fit task, on any worker: a fixed BLAS thread count, work spread over
threads of one process, and the stop of the tasks of a fit that has ended."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

from align.errors import InputError
from align.threads import side_by_side


@contextlib.contextmanager
def blas_limit(threads: int | None):
    """A fixed BLAS thread count inside a task: float sums must not depend on where they ran.
    Torch's own thread count too once torch is imported (its MKL is not one threadpoolctl
    sees)."""
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    if torch is not None and before != threads:
        torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads, user_api="blas"):
            yield
    finally:
        if torch is not None and before != threads:
            torch.set_num_threads(before)


def cpu_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threaded(f, items, threads: int | None = None) -> list:
    """[f(x) for x in items], on up to `threads` threads of this process (None: its cores)
    with one BLAS thread each (numpy's BLAS and LAPACK release the GIL): the decompositions
    of many pairs or sides side by side, each computed as one thread computes it, so the
    values do not depend on `threads`. The first error in the order of `items` is raised."""
    with blas_limit(1):
        return side_by_side(f, items, threads or cpu_cores())


_CANCELLED: set = set()  # the runs (Job.run) of this process that have ended by an error or Ctrl-C
_CANCELLED_LOCK = threading.Lock()


def cancel(run: str) -> None:
    """Mark a fit `run` of this process as ended: its tasks still running in threads stop at
    their next chunk (`stop_if_cancelled`). Other fits of the process are not affected."""
    with _CANCELLED_LOCK:
        _CANCELLED.add(run)


def stop_if_cancelled(run: str) -> None:
    """Called by a task between store chunks: once its fit has ended by an error or Ctrl-C
    (`cancel`), the task stops (a thread cannot be killed, and the interpreter would wait
    for it before exiting)."""
    if run in _CANCELLED:
        raise InputError("the fit was cancelled")
