"""A study's units on a Dask cluster (`align study --scheduler ADDRESS`): each unit is one
task, submitted once every unit it reads has finished, so a fit runs after both of its
extractions; a unit that runs a model or solves on a device (`Unit.gpu`, or every such unit
with `[route] gpu_resource`) asks for the worker resource GPU, so a cluster of GPU and CPU
workers places it on a worker started with `--resources GPU=1`. The state is written here, by
the process that holds DIR's lock, as tasks finish; each task runs the unit through
`runners.run_unit`, the same library call as the local run, on workers that see DIR."""

from __future__ import annotations

import time

from align.errors import AlignError, InputError
from align.study.runners import run_unit

RESOURCE = "GPU"


def needs_gpu(u, study) -> bool:
    return u.gpu or (study.gpu_resource and u.kind in ("extract", "fit", "contrib", "lens", "skip"))


def remote_unit(u, study, root: str) -> tuple:
    """Run `u` on the worker this task landed on; (worker address, seconds)."""
    from distributed import get_worker

    t = time.time()
    run_unit(u, study, root, lambda line: None)
    return get_worker().address, time.time() - t


def run_on_cluster(ledger, scheduler: str, keep_going: bool) -> None:
    """Every unit of `ledger` on the cluster at `scheduler`, each submitted when its inputs are
    settled (done, skipped, failed or blocked)."""
    from distributed import Client, wait

    try:
        client = Client(scheduler, timeout="30s")
    except OSError as e:
        raise InputError(
            f"`scheduler` {scheduler}: no Dask scheduler answers there ({e})"
        ) from None
    study, root = ledger.study, ledger.root
    todo, running, settled = list(ledger.units), {}, set()
    try:
        while todo or running:
            for u in list(todo):
                if not set(u.inputs) <= settled:
                    continue
                todo.remove(u)
                if ledger.blocked(u) or not ledger.start(u):
                    settled.add(u.name)
                    continue
                resources = {RESOURCE: 1} if needs_gpu(u, study) else None
                future = client.submit(
                    remote_unit,
                    u,
                    study,
                    root,
                    resources=resources,
                    pure=False,
                    key=f"study-{u.key}",
                )
                running[future] = (u, time.time())
            if not running:
                continue
            finished, _ = wait(list(running), return_when="FIRST_COMPLETED")
            for future in finished:
                u, t = running.pop(future)
                settled.add(u.name)
                try:
                    worker, seconds = future.result()
                except AlignError as e:
                    ledger.failed(u, e, time.time() - t, keep_going)
                    continue
                ledger.done(u, seconds, worker)
    finally:
        for future in running:
            future.cancel()
        client.close()
