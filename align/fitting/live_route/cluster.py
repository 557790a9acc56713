"""The live route on a Dask cluster (`align fit --live --scheduler`): per block, document shards
of the batches on the workers, each loading both models once, their sums added in a tree fixed
by shard index, solved here (`align.fitting.live_route.pipeline` prepares and plans; `align.fitting.live_route.shards`
holds the tasks)."""

from __future__ import annotations

import functools
import time

from align.fitting.fit_options import FitRequest
from align.fitting.live_route.plan import sides_shape
from align.fitting.live_route.shards import (
    ShardTask,
    add_shard_heldout,
    shard_heldout_task,
    shard_statistics_task,
    shards_of,
    shift_task,
    worker_backend,
)
from align.fitting.measuring import rows_tasks, sampled
from align.fitting.measuring.measured import with_rotations
from align.fitting.results.dataset import pair_results
from align.fitting.results.solver import check_alphas, solve
from align.fitting.runtime.cluster import executor
from align.fitting.store_route.graph import add_task, tree


def run_on_cluster(p, options: FitRequest, log, plan_of) -> tuple:
    """The blocks of `plan` on the Dask cluster at options.run.scheduler: per block, document
    shards (runs of consecutive batches) on the workers, each loading both models once; the
    shards' sums added in a tree fixed by shard index (graph.tree), solved here, and the
    held-out sums of the shards added the same way, with the streamed measures' sums and the
    rows of the sampled tokens (`p.sample`, kept here as the one-process passes keep them).
    Held-out rows are forwarded again (rows are not kept between tasks). `p` is the live
    route's `Prepared`; the plan is made per worker by plan_of((limit, idle)) (--memory-limit
    per worker, or the workers' own limit, less the largest worker's idle footprint); then
    the row measures on the sample (`sampled_measures`). Returns (plan, results, statistics,
    rates, seconds, the sample's record or None)."""
    results, kept_stats, factors = {}, {}, {}
    t_loop = time.time()
    with executor(options.run.scheduler, None, options.run.memory_limit, log) as ex:
        plan = plan_of((ex.limit, ex.idle))
        for line in plan.lines(
            len(p.source_boundaries), len(p.target_boundaries), p.job.batch_size
        ):
            log(line)
        n = max(1, min(len(p.batches), 4 * ex.n_workers))
        unit = p.stream.window_of if p.apart else None
        train = shards_of([b for b in p.batches if b.n_train], n, unit)
        test = shards_of([b for b in p.batches if b.n_test], n, unit)
        first = next(b for b in p.batches if b.n_train)
        log(
            f"align fit --live: {len(train)} shard(s) of the training batches and {len(test)} of the held-out ones on "
            f"{ex.n_workers} Dask worker(s), each loading both models"
        )
        x_shift = None
        for k, block in enumerate(plan.blocks):
            I = tuple(p.source_boundaries)
            shifts = ex.run(
                {
                    "table": p.stream,
                    "shift": (shift_task, ShardTask(p.job, I, block, (first,)), "table", x_shift),
                },
                "shift",
            )
            if x_shift is None:
                check_alphas(
                    options.spec.alphas, shifts["scale"], p.split.n_select, p.split.n_train
                )
                x_shift = shifts["x"]
            dsk = {"table": p.stream, "shifts": shifts}
            keys = []
            for s, shard in enumerate(train):
                dsk[("stats", s)] = (
                    shard_statistics_task,
                    ShardTask(p.job, I, block, tuple(shard)),
                    "table",
                    "shifts",
                )
                keys.append(("stats", s))
            stats = ex.run(dsk, tree(dsk, "stats-sum", keys, add_task))
            fitted = solve(
                stats,
                options.spec.alphas,
                shifts["x"],
                shifts["y"],
                options.run.device,
                factors,
                options.spec.extend_alphas,
            )
            fitted = with_rotations(fitted, stats, options.spec.streamed)
            if options.hooks.keep_statistics:
                kept_stats[block] = stats
            dsk = {
                "table": p.stream,
                "fitted": fitted,
                "hdoc": p.split.heldout_index if options.spec.bootstrap else None,
                "sample": None if p.sample is None else p.sample.tokens,
            }
            keys = []
            for s, shard in enumerate(test):
                dsk[("heldout", s)] = (
                    shard_heldout_task,
                    ShardTask(
                        p.job, I, block, tuple(shard), options.spec.streamed, sample_sources=k == 0
                    ),
                    "table",
                    "fitted",
                    "hdoc",
                    "sample",
                )
                keys.append(("heldout", s))
            sums = ex.run(dsk, tree(dsk, "heldout-sum", keys, add_shard_heldout))
            rows_ = sums.pop("sample")
            if p.sample is not None:  # the sampled rows (the source's come with the first block)
                p.sample.put(rows_)
            fitted = (
                sampled.heldout_null_tasks(  # on the workers' devices, the sampled rows complete
                    ex.run, p.sample, fitted, functools.partial(worker_backend, p.job), str(k)
                )
            )
            results.update(pair_results(fitted, sums, p.split, options.spec.resampling))
            log(f"align fit --live: pass {k + 1} of {plan.passes} done on the cluster")
        record = sampled_measures(ex, p, options, results, log)
    return (
        plan,
        results,
        kept_stats,
        f"{plan.positions * plan.passes:,} positions forwarded on the cluster",
        time.time() - t_loop,
        record,
    )


def sampled_measures(ex, p, options: FitRequest, results: dict, log) -> dict | None:
    """The row measures and every measure's calibration on the sample (`sampled.attach`,
    into `results`), as the store route computes them on a cluster: the tasks of the
    workers of `ex` (`rows_tasks.runner`, on the device `--device` names there) where a
    worker's share of the budget holds them, else in this process, said in one line
    (`rows_tasks.held_back`). Returns the sample's record (None without a sample)."""
    if p.sample is None:
        return None
    shape = sampled.shape_of(p.sample, options.spec, sides_shape(p))
    why = rows_tasks.held_back(ex, shape)
    if why:
        log(f"align fit --live: {why}")
    tasks = rows_tasks.runner(ex, options.run.device, shape)  # None: in this process
    grid = (p.source_boundaries, p.target_boundaries)
    return sampled.attach(results, p.sample, options.spec, *grid, "cluster", tasks)
