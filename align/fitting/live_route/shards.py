"""The live route's Dask tasks (`align fit --live --scheduler ADDRESS`): the corpus's batches cut
into document shards (`shards_of`, fixed by the batches alone), and per shard the shifts, the
statistics of its training rows and the held-out sums (with the streamed measures' sums and the
rows of the sampled tokens it forwards), each worker loading both models once.
live_cluster.run_on_cluster builds the graphs and adds the shards' sums in a tree fixed by shard index."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from align.faults import fault_point
from align.fitting.fit_options import LiveJob
from align.fitting.live_route.passes import (
    Models,
    load_models,
    paired,
    rows,
    training_scale,
    training_shift,
)
from align.fitting.measuring import sampled
from align.fitting.planning.split import TEST
from align.fitting.store_route.graph import add_heldout_all, heldout_of
from align.ridge.statistics import Statistics, chunk_statistics


@dataclass(frozen=True)
class ShardTask:
    """What one shard task needs (opaque to Dask: its tuples are no graph keys): the job, the
    source boundaries, the block of target boundaries, the shard's batches and the streamed
    measures whose sums the held-out task adds (`FitSpec.streamed`; the statistics task reads
    none); `sample_sources`: the held-out task keeps the source's rows of the sampled tokens
    too (the first block's task: every block has the same source rows)."""

    job: LiveJob
    source_boundaries: tuple
    block: tuple
    batches: tuple
    measures: tuple = ()
    sample_sources: bool = True


@functools.lru_cache(maxsize=1)
def worker_models(job: LiveJob) -> Models:
    """Both models, loaded once per worker process (on its own device, as the job says)."""
    return load_models(job)


def worker_backend(job: LiveJob):
    """The worker's `ridge.backend.Backend`: the device its models run on."""
    return worker_models(job).backend


def shift_task(task: ShardTask, table, x_shift) -> dict:
    """On a worker: the shifts of a block from the first batch with training rows (the
    source's only when `x_shift` is None) and the source's scale (check_alphas). `table`:
    what the models forward (passes.paired), as in every task here."""
    net = worker_models(task.job)
    b, xs, ys = next(
        paired(
            net, table, task.batches[:1], list(task.source_boundaries), task.block, None, "train"
        )
    )
    scale = training_scale(xs, task.source_boundaries, b) if x_shift is None else {}
    x = training_shift(xs, task.source_boundaries, b) if x_shift is None else x_shift
    return {"x": x, "y": training_shift(ys, task.block, b), "scale": scale}


def shard_statistics_task(task: ShardTask, table, shifts: dict) -> Statistics:
    """On a worker: the sums (numpy) of the training rows of the shard's batches."""
    net = worker_models(task.job)
    d_s, d_t = net.source.config.hidden_size, net.target.config.hidden_size
    stats = Statistics.zeros(task.source_boundaries, task.block, d_s, d_t, net.backend)
    for b, xs, ys in paired(
        net, table, list(task.batches), list(task.source_boundaries), task.block, None, "train"
    ):
        fault_point("fit_live_batch")
        part = np.where(b.part == TEST, -1, b.part)
        chunk_statistics(xs, ys, part, (shifts["x"], shifts["y"]), net.backend, into=stats)
        del xs, ys  # before the next forward
    return stats.numpy(net.backend)


def shard_heldout_task(task: ShardTask, table, fitted: dict, hdoc=None, sample=None) -> dict:
    """On a worker: the held-out sums of the shard's batches (a second forward of each), per
    held-out document too with `hdoc` (each token's held-out document index), the streamed
    measures' sums of `task.measures`, and with `sample` (the sampled tokens, sorted:
    `sampled.Sample.tokens`) the rows of those of them the shard forwards under "sample"
    (`sampled.found`: the block's, and the source's with `task.sample_sources`; None when it
    forwards none)."""
    net = worker_models(task.job)
    sums, rows_ = None, None
    for b, xs, ys in paired(
        net, table, list(task.batches), list(task.source_boundaries), task.block, None, "heldout"
    ):
        held, tokens = b.flat[b.n_train :], b.tokens[b.n_train :]
        xh = rows(xs, task.source_boundaries, held, net.device)
        yh = rows(ys, task.block, held, net.device)
        del xs, ys  # before the sums
        if sample is not None:
            kept = sampled.found(xh if task.sample_sources else {}, yh, tokens, sample)
            rows_ = sampled.joined(rows_, kept)
        s = heldout_of(
            xh,
            yh,
            {"fitted": fitted},
            net.backend,
            None if hdoc is None else hdoc[tokens],
            task.measures,
        )
        sums = s if sums is None else add_heldout_all(sums, s)
    sums["sample"] = rows_
    return sums


def add_shard_heldout(a: dict, b: dict) -> dict:
    """Two shards' held-out results as one: the sums added (`graph.add_heldout_all`), the
    sampled rows joined (`sampled.joined`)."""
    out = add_heldout_all(a, b)
    out["sample"] = sampled.joined(a.get("sample"), b.get("sample"))
    return out


def shards_of(batches: list, n: int, unit=None) -> list:
    """`batches` (corpus order) cut into at most `n` runs of consecutive batches, as even in
    positions as the batches allow: shard k is fixed by the batches alone. `unit(batch)`:
    cut only where it changes (the anchored stream's grouping windows, whose target batches
    a cut would forward twice)."""
    total = sum(b.positions for b in batches)
    out, cur, at = [], [], 0
    for k, b in enumerate(batches):
        cur.append(b)
        at += b.positions
        whole = unit is None or k + 1 == len(batches) or unit(batches[k + 1]) != unit(b)
        if whole and at * n >= total * (len(out) + 1) and len(out) < n - 1:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out
