"""Where `align fit` runs: threads of this process (the default: no worker to start, no
statistics shipped between processes), a local Dask cluster it starts (--workers), an
existing cluster at a scheduler address, or this process alone ("synchronous"); and what that
costs in memory.

A local cluster gets at most one worker process per CPU core, and is sized against the
memory budget before any worker starts (`local_workers`); once up, its idle footprint is
measured (`Executor.idle`) and the fit plans the rest. Whatever ends a fit (an error in a
task, Ctrl-C, SIGTERM) cancels the running graph and stops the workers (in threads, the
running tasks stop at their next chunk: `align.fitting.runtime.tasks.stop_if_cancelled`), and Dask's own logs
never reach the user: the error is the one line the CLI prints.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
from dataclasses import dataclass

import numpy as np

import align.fitting.store_route.graph  # noqa: F401  (what a task runs: part of the warm footprint)
from align.errors import InputError
from align.fitting.planning.budget import human_bytes
from align.fitting.runtime.tasks import blas_limit, cpu_cores
from align.store import configure_zarr

SYNC = ("sync", "synchronous")
THREADS = "threads"  # this process, one thread per core: the default
GPU_FRACTION = 0.5  # of a GPU's free memory the accumulators may plan for
# Share of the memory left after the idle footprint that the plan fills, a margin for what
# `block_bytes` does not count (allocator slack, Dask's copies of results in transit). In
# bench/fit.py the measured peak above the idle footprint was ~70% of the planned bytes.
PLAN_FRACTION = 0.9


M_ARENA_MAX, M_MMAP_THRESHOLD = -8, -3  # glibc's mallopt parameters
ALLOCATOR = {M_ARENA_MAX: 1, M_MMAP_THRESHOLD: 32 << 20}


def tune_allocator() -> bool:
    """For a fit in threads of this process, glibc's malloc with one arena and a fixed mmap
    threshold of 32 MB: each thread's arena otherwise keeps what its tasks freed, and the
    dynamic threshold moves freed buffers of up to 32 MB into them. Measured with bench/fit.py's
    memory run (82k tokens, 600 MB budget): peak RSS 705 MB → 527–540 MB, 68 s → 50–52 s
    (fewer page faults); the 128k-token speed run unchanged. Process-wide and kept; returns False where
    there is no glibc (nothing changed)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return all(mallopt(k, v) == 1 for k, v in ALLOCATOR.items())


def local_workers(n_workers: int, limit: int, pair_bytes: int, client_extra: int, log) -> int:
    """How many worker processes a local cluster (--workers) gets, decided before any is
    started.

    At most one per CPU core this process may run on (`cpu_cores`): more would only share the
    cores, each holding its own idle memory; the log says so when --workers asked for more.
    Then memory: this process uses `_warm_rss` idle, each worker is estimated to use as much,
    and one boundary pair needs `pair_bytes` per worker; n workers fit `limit` when
    idle + n·worker_idle + client_extra + n·pair_bytes ≤ limit. When that fails, the worker's
    footprint is measured in a fresh interpreter that imports what a worker does
    (`_fresh_worker_rss`: this process may hold more, torch for one) before anything is
    refused: a --workers count that does not fit is refused, naming how many do. Once the
    workers are up, their footprint is measured and the plan redone on it."""
    cores = cpu_cores()
    n = n_workers
    if n > cores:
        log(
            f"align fit: `n_workers` {n} capped to {cores}, the CPU cores this process may run on (more worker "
            "processes would only share them, each with its own idle memory); for more, start a Dask cluster "
            "and pass `scheduler` ADDRESS"
        )
        n = cores
    import distributed  # noqa: F401  (every worker imports it: count it in this process's footprint too)

    idle = worker_idle = _warm_rss()

    def fits(k: int) -> bool:
        return idle + k * worker_idle + client_extra + k * pair_bytes <= limit

    if fits(n):
        return n
    worker_idle = min(idle, _fresh_worker_rss() or idle)
    if fits(n):
        return n
    most = next((k for k in range(n - 1, 0, -1) if fits(k)), 0)
    where = (
        f"this process uses {human_bytes(idle)} idle, each worker about {human_bytes(worker_idle)}, the split "
        f"{human_bytes(client_extra)}, and one boundary pair needs {human_bytes(pair_bytes)} per worker"
    )
    todo = (
        f"use `n_workers` {most} or fewer, or raise `memory_limit`"
        if most
        else f"raise `memory_limit` to at least {human_bytes(idle + worker_idle + client_extra + pair_bytes)}, "
        "or leave out `n_workers` (threads of this process)"
    )
    raise InputError(
        f"`memory_limit` {human_bytes(limit)} cannot hold {n} worker process(es) ({where}; estimated before "
        f"starting any): {todo}"
    )


def _fresh_worker_rss() -> int | None:
    """Warm RSS of a fresh interpreter that imports what a Dask worker of a fit does (its
    worker and nanny modules, then `_warm_rss`), in bytes; None if it cannot be measured."""
    import subprocess

    code = "import distributed.nanny, distributed.worker; from align.fitting.runtime.cluster import _warm_rss; print(_warm_rss())"
    try:
        p = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        return int(p.stdout.split()[-1])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def default_memory_limit() -> int:
    """The budget of a fit without --memory-limit: 60% of the memory available now (bytes)."""
    import psutil

    return int(psutil.virtual_memory().available * 0.6)


def _warm_rss() -> int:
    """RSS of this process once it has imported and run what a task uses (the idle footprint
    a worker keeps during the fit)."""
    import psutil

    configure_zarr()  # imports zarr, as reading a chunk will

    a = np.ones((64, 64))
    with blas_limit(1):
        a @ a
    return psutil.Process().memory_info().rss


def _tree_rss() -> int:
    """Summed RSS of this process and all its descendants (a local cluster's workers)."""
    import psutil

    me = psutil.Process()
    total = me.memory_info().rss
    for c in me.children(recursive=True):
        try:
            total += c.memory_info().rss
        except psutil.Error:
            pass
    return total


@dataclass
class Executor:
    """How a fit runs: run(graph, key) -> value; `seen` collects the workers that ran tasks.

    Memory: `limit` is the budget (bytes), of the whole fit (mode "sync" or "local") or per
    worker (mode "remote"); `idle` is the footprint measured once the workers were up and
    warm: this process and every worker it started (sync, local), or the largest worker
    (remote)."""

    run: object
    seen: set
    task_seconds: dict
    n_workers: int
    mode: str
    limit: int
    idle: int


def _quietly(close) -> None:
    """Close a Dask client or cluster on the way out of a fit; an error while closing (Dask's
    own, after an interrupt) must not replace the error that ended the fit."""
    with contextlib.suppress(Exception):
        close()


def _no_memory_guard() -> dict:
    """Dask's spill/pause/restart thresholds count a worker's idle footprint against its
    share; the fit's own plan keeps it within the budget, so the workers align starts run
    without them (a restart would redo the work, not save memory)."""
    return {
        f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause", "terminate")
    }


# Dask's own loggers in this process, and the level worker processes this fit starts get
# through dask's config (read from the environment when a worker imports distributed).
DASK_LOGGERS = ("distributed", "tornado", "bokeh")
WORKER_LOG_ENV = {
    "DASK_LOGGING__DISTRIBUTED": "critical",
    "DASK_LOGGING__ASYNCIO": "critical",
    "DASK_LOGGING__TORNADO": "critical",
}


@contextlib.contextmanager
def _quiet_dask():
    """Dask's logs never reach the user: an error in a task comes back as the task's
    exception (one line through the CLI), so the workers' "Compute Failed" tracebacks, the
    nanny's shutdown warnings and asyncio's "Task exception was never retrieved" (left by an
    interrupted gather) are silenced, here and in the worker processes started meanwhile.
    ALIGN_DEBUG=1 keeps them."""
    if os.environ.get("ALIGN_DEBUG"):
        yield
        return
    import gc

    saved_env = {k: os.environ.get(k) for k in WORKER_LOG_ENV}
    os.environ.update(WORKER_LOG_ENV)
    handlers = [(h, h.level) for name in DASK_LOGGERS for h in logging.getLogger(name).handlers]
    for h, _ in handlers:
        h.setLevel(logging.CRITICAL + 1)
    aio = logging.getLogger("asyncio")
    aio_was = aio.disabled
    aio.disabled = True
    try:
        yield
    finally:
        gc.collect()  # abandoned asyncio tasks report when collected: do it while silenced
        aio.disabled = aio_was
        for h, level in handlers:
            h.setLevel(level)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _signals_deferred():
    """While a local cluster starts (a few seconds). SIGINT is ignored, and its worker
    processes inherit that for their lifetime: a terminal's Ctrl-C goes to the whole process
    group, the workers are this process's to stop, and one interrupted while importing
    printed a traceback. (Python keeps an inherited SIG_IGN; a blocked mask would not
    survive the spawn.) A Ctrl-C in this window is lost: press it again once the cluster is
    up. SIGTERM is recorded and acted on once the cluster exists and can be closed: a
    half-started cluster left Dask's exit handler printing tracebacks."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got = []
    previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    previous_term = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)
    if got:
        if callable(previous_term):
            previous_term(signal.SIGTERM, None)  # the CLI's handler: unwinds like Ctrl-C
        elif previous_term == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGTERM)


@contextlib.contextmanager
def executor(scheduler, n_workers, memory_limit, log):
    """Yields an Executor for `scheduler` (see `fit`); `n_workers` is the local cluster's
    size, decided by `local_workers`. Whatever ends the fit (an error in a task, Ctrl-C or
    SIGTERM raised as KeyboardInterrupt) cancels what runs, closes the client and stops
    the workers it started before the exception goes on, with Dask's logs silenced."""
    from dask.utils import parse_bytes

    limit = parse_bytes(memory_limit) if isinstance(memory_limit, str) else memory_limit
    seen: set = set()
    if scheduler in SYNC or scheduler == THREADS:
        tune_allocator()
    if scheduler in SYNC:
        import dask.local

        def run_sync(dsk, key):
            seen.add("this process")
            return dask.local.get_sync(dsk, key)

        yield Executor(run_sync, seen, {}, 1, "sync", limit or default_memory_limit(), _warm_rss())
        return
    if scheduler == THREADS:
        import dask.threaded

        n = n_workers or cpu_cores()

        def run_threads(dsk, key):
            seen.add("this process")
            # each task limits BLAS to its fixed thread count and restores what it found on
            # exit: with one count for the whole run, tasks running side by side agree
            with blas_limit(1):
                return dask.threaded.get(dsk, key, num_workers=n)

        yield Executor(
            run_threads, seen, {}, n, "threads", limit or default_memory_limit(), _warm_rss()
        )
        return
    with contextlib.ExitStack() as stack:
        stack.enter_context(_quiet_dask())
        ex = _start_dask(stack, scheduler, n_workers, limit, seen, log)
        yield ex


def _start_dask(stack, scheduler, n_workers, limit, seen, log) -> Executor:
    """Start (or connect to) the Dask cluster; its closing is registered on `stack`."""
    import dask
    from distributed import Client, LocalCluster

    if scheduler is None:
        n = n_workers or cpu_cores()
        total = limit or default_memory_limit()
        with _signals_deferred(), dask.config.set(_no_memory_guard()):
            cluster = LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                memory_limit=total // n,
                dashboard_address=None,
                # the scheduler's HTTP server (health routes) still binds a port: any free one,
                # not 8787, which a second fit or a notebook's cluster may hold (distributed
                # then warns on stderr, and a fit's errors are one line)
                scheduler_kwargs={"dashboard": False, "dashboard_address": ":0"},
                silence_logs=logging.CRITICAL,
            )
        stack.callback(_quietly, cluster.close)
        client = Client(cluster)
        stack.callback(_quietly, client.close)
        client.run(_warm_rss)
        _warm_rss()
        ex = Executor(None, seen, {}, n, "local", total, _tree_rss())
        log(
            f"align fit: started a local Dask cluster of {n} worker processes; budget {human_bytes(total)}, "
            f"{human_bytes(ex.idle)} of it used idle by this process and the workers"
        )
    else:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as e:
            raise InputError(
                f"`scheduler` {scheduler}: cannot reach a Dask scheduler there ({e})"
            ) from None
        except (ValueError, TypeError) as e:  # not an address at all: "notaurl"
            raise InputError(
                f"`scheduler` {scheduler} is not a Dask scheduler address ({e}): give one such as "
                "tcp://host:8786, or `synchronous` to run in this process"
            ) from None
        stack.callback(_quietly, client.close)
        workers = client.scheduler_info().get("workers", {})
        if not workers:
            raise InputError(
                f"`scheduler` {scheduler}: the cluster has no workers; start some with `dask worker {scheduler}`"
            )
        per_worker = limit or min(
            int(w.get("memory_limit") or default_memory_limit()) for w in workers.values()
        )
        idle = max(client.run(_warm_rss).values())
        ex = Executor(None, seen, {}, len(workers), "remote", per_worker, idle)
        log(
            f"align fit: using the Dask cluster at {scheduler} ({len(workers)} workers, {human_bytes(per_worker)} each, "
            f"{human_bytes(idle)} of it used idle)"
        )

    def run(dsk, key):
        from distributed import get_task_stream

        with get_task_stream(client) as stream:
            futures = client.get(dsk, [key], sync=False)
            try:
                if getattr(sys.stderr, "isatty", lambda: False)():
                    from distributed import progress

                    progress(futures)
                value = client.gather(futures)[0]
            except BaseException:
                # stop the graph's other tasks now rather than when the cluster closes
                with contextlib.suppress(Exception):
                    client.cancel(futures, force=True)
                raise
        for t in stream.data:
            if "worker" in t:
                seen.add(t["worker"])
            k = t.get("key")
            kind = (
                str(k[0] if isinstance(k, tuple) else k).rstrip("0123456789").rstrip("-")
            )  # "stats-sum-3" -> "stats-sum"
            for s in t.get("startstops", ()):
                if s.get("action") == "compute":
                    ex.task_seconds[kind] = ex.task_seconds.get(kind, 0.0) + s["stop"] - s["start"]
        return value

    ex.run = run
    return ex


def device_budget(device: str) -> int:
    """Bytes the accumulators of a fit on a CUDA `device` may plan for: GPU_FRACTION of its
    free memory now."""
    import torch

    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return int(free * GPU_FRACTION)


def worker_budget_of(ex: Executor, client_extra: int) -> int:
    """Bytes per worker the accumulators may plan for: PLAN_FRACTION of (budget − idle
    footprint − the client's own data) / workers for a fit that owns its processes; per
    worker, PLAN_FRACTION of (budget − the largest worker's idle footprint) on an existing
    cluster."""
    if ex.mode == "remote":
        return int((ex.limit - ex.idle) * PLAN_FRACTION)
    return int((ex.limit - ex.idle - client_extra) * PLAN_FRACTION) // ex.n_workers


def refuse_memory(ex: Executor, client_extra: int, need: int, d_s: int, d_t: int, tokens: int):
    """Raise the one-line InputError of a budget that cannot hold one boundary pair once the
    workers are up (`need`: bytes per worker of the smallest plan), naming the minimum."""
    need = math.ceil(need / PLAN_FRACTION)
    if ex.mode == "remote":
        minimum = ex.idle + need
        where = f"per worker: a worker of this cluster uses {human_bytes(ex.idle)} idle"
    else:
        minimum = ex.idle + client_extra + ex.n_workers * need
        who = (
            "this process"
            if ex.mode in ("sync", "threads")
            else f"this process and its {ex.n_workers} workers"
        )
        where = f"{who} use {human_bytes(ex.idle)} idle and the split {human_bytes(client_extra)}"
    raise InputError(
        f"`memory_limit` {human_bytes(ex.limit)} is too small ({where}, and one boundary pair of d_source {d_s}, d_target {d_t} "
        f"with {tokens}-token tasks needs {human_bytes(need)} per worker): the minimum is {human_bytes(minimum)}; "
        "raise `memory_limit`" + ("" if ex.mode == "remote" else " or use fewer `n_workers`")
    )
