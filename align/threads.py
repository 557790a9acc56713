"""Work side by side on the threads of one process: numpy's products, sorts and LAPACK, torch's
kernels and hashing release the GIL, so independent pieces (a fit's sources, a grid's
boundaries, a null's draws, a model's weight files) run on the cores of the process that holds
their inputs, without copying them to another."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor


def side_by_side(f, items, threads: int) -> list:
    """[f(x) for x in items], in order, on up to `threads` threads of this process (one
    thread, or one item: this thread). The first error in the order of `items` is raised.

    Parameters
    ----------
    f : callable
        Applied to each item.
    items : iterable
        The pieces of work.
    threads : int
        The most threads that run them at once.

    Returns
    -------
    list
        f(x) of each item, in the order of `items`.
    """
    items = list(items)
    if threads <= 1 or len(items) < 2:
        return [f(x) for x in items]
    with ThreadPoolExecutor(min(threads, len(items))) as pool:
        return list(pool.map(f, items))
