"""The live route's Dask tasks (`align fit --live --scheduler ADDRESS`): the corpus's batches cut
into document shards (`shards_of`, fixed by the batches alone), and per shard the shifts, the
statistics of its training rows and the held-out sums, each worker loading both models once.
live_cluster.run_on_cluster builds the graphs and adds the shards' sums in a tree fixed by shard index."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from align.faults import fault_point
from align.fitting.fit_options import LiveJob
from align.fitting.graph import add_heldout_all, heldout_of
from align.fitting.passes import Models, load_models, paired, rows, training_scale, training_shift
from align.fitting.split import TEST
from align.ridge.statistics import Statistics, chunk_statistics


@dataclass(frozen=True)
class ShardTask:
    """What one shard task needs (opaque to Dask: its tuples are no graph keys): the job, the
    source boundaries, the block of target boundaries, the shard's batches and the streamed
    measures whose sums the held-out task adds."""

    job: LiveJob
    source_boundaries: tuple
    block: tuple
    batches: tuple
    measures: tuple = ()


@functools.lru_cache(maxsize=1)
def worker_models(job: LiveJob) -> Models:
    """Both models, loaded once per worker process (on its own device, as the job says)."""
    return load_models(job)


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


def shard_heldout_task(task: ShardTask, table, fitted: dict, hdoc=None) -> dict:
    """On a worker: the held-out sums of the shard's batches (a second forward of each), per
    held-out document too with `hdoc` (each token's held-out document index)."""
    net = worker_models(task.job)
    sums = None
    for b, xs, ys in paired(
        net, table, list(task.batches), list(task.source_boundaries), task.block, None, "heldout"
    ):
        held = b.flat[b.n_train :]
        s = heldout_of(
            rows(xs, task.source_boundaries, held, net.device),
            rows(ys, task.block, held, net.device),
            {"fitted": fitted},
            net.backend,
            None if hdoc is None else hdoc[b.tokens[b.n_train :]],
            task.measures,
        )
        sums = s if sums is None else add_heldout_all(sums, s)
        del xs, ys
    return sums


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
