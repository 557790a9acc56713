"""`align fit --live --dry-run`: the run's time estimated from one batch of each model."""

from __future__ import annotations

import time

import numpy as np

from align.fitting.live_route.passes import load_models, paired, training_shift
from align.fitting.measuring.sampled import found
from align.fitting.planning.split import TEST
from align.fitting.store_route.estimate import row_measures_seconds
from align.ridge.statistics import Statistics, chunk_statistics


class Timer:
    """Seconds and positions of each model's forwards (what passes.paired reports to a
    progress line)."""

    def __init__(self):
        self.seconds = {"source": 0.0, "target": 0.0}
        self.positions = {"source": 0, "target": 0}

    def forward(self, side: str, positions: int, seconds: float) -> None:
        self.seconds[side] += seconds
        self.positions[side] += positions


def estimate(p, plan, log, spec=None) -> dict:
    """`dry_run`: time one batch (p: live.Prepared, plan: live.LivePlan) of each model (the
    source batch with most training rows and, with two tokenizers, the target batches that
    hold its partners, after a warm-up) and the statistics of its rows for the first block,
    and scale them to the run: every pass forwards every batch through the source and, up to
    the block's highest boundary, the target; the sums cost in proportion to training rows ×
    target boundaries; held-out rows cost one product each (half a training row's sums), and
    a second forward of their batches when not kept; with the row measures asked (`spec`, the
    FitSpec), their seconds timed on the batch's rows (`_row_measures`). Returns the estimate
    (seconds by phase)."""
    import torch

    net = load_models(p.job)
    b = max(p.batches, key=lambda x: x.n_train)
    block = plan.blocks[0]
    L_T = net.target.config.num_hidden_layers
    for _ in range(2):  # the first is the warm-up
        timer = Timer()
        _, xs, ys = next(
            paired(net, p.stream, [b], p.source_boundaries, p.target_boundaries, timer, "train")
        )
    ts, tt = timer.seconds["source"], timer.seconds["target"]
    backend = net.backend
    stats = Statistics.zeros(
        p.source_boundaries,
        block,
        net.source.config.hidden_size,
        net.target.config.hidden_size,
        backend,
    )
    part = np.where(b.part == TEST, -1, b.part)
    shift_x, shift_y = training_shift(xs, p.source_boundaries, b), training_shift(ys, block, b)
    t = time.perf_counter()
    chunk_statistics(xs, {j: ys[j] for j in block}, part, (shift_x, shift_y), backend, into=stats)
    if net.device.type == "cuda":
        torch.cuda.synchronize(net.device)
    tp = time.perf_counter() - t
    per_s, per_t = (
        ts / timer.positions["source"],
        tt / timer.positions["target"],
    )  # seconds per position
    depth = sum(max(blk) for blk in plan.blocks) / max(
        L_T, 1
    )  # model depths of the target run in all passes
    per_row = tp / max(b.n_train, 1) * len(p.target_boundaries) / len(block)
    c = plan.counts
    sec = {
        "source forward": per_s * plan.positions * plan.passes,
        "target forward": per_t * sum(x.positions for x in p.target_batches) * depth,
        "statistics": per_row * (c["fit"] + c["validation"]),
        "held-out": per_row * c["heldout"] / 2,
    }
    if (
        not plan.keep_heldout
    ):  # a second forward of the batches with held-out rows (and, anchored, their partners')
        held = sum(x.positions for x in p.batches if x.n_test)
        held_t = sum(x.positions for x in p.target_batches if x.n_test)
        sec["held-out"] += (per_s * held + per_t * held_t) * plan.passes
    if p.sample is not None and spec is not None and spec.sampled:
        sec["row measures, interval and calibration"] = _row_measures(
            p, spec, xs, ys, net.device.type
        )
    total = sum(sec.values())
    log(
        f"align fit --live --dry-run: one batch of {len(b.members)} sequences ({b.positions:,} positions): source "
        f"{ts * 1e3:.1f} ms, target {tt * 1e3:.1f} ms, statistics of its {b.n_train:,} training rows {tp * 1e3:.1f} ms"
    )
    log(
        "align fit --live --dry-run: whole run ~"
        + ", ".join(f"{k} {v:,.3g} s" for k, v in sec.items())
        + f" = ~{total:,.3g} s (model loading and the solve not counted); nothing was written"
    )
    return {
        "seconds": sec,
        "seconds_estimate": total,
        "batch": {
            "positions": b.positions,
            "rows": b.n_train,
            "source_s": ts,
            "target_s": tt,
            "statistics_s": tp,
        },
    }


def _row_measures(p, spec, xs: dict, ys: dict, device: str) -> float:
    """Seconds of the row measures, their interval and calibration on the sample's M rows
    of the whole grid in this process (`store_estimate.row_measures_seconds`), timed on the
    timed batch's rows of the first source boundary and the first two target boundaries.
    With a scheduler the dry run reaches no worker: the seconds are this process's."""
    i, js = p.source_boundaries[0], list(p.target_boundaries)[:2]
    n = len(next(iter(xs.values())))
    got = found({i: xs[i]}, {j: ys[j] for j in js}, np.arange(n), np.arange(n))
    n_s, n_t = len(p.source_boundaries), len(p.target_boundaries)
    return row_measures_seconds(
        (got["xs"][i], got["ys"]),
        (spec, len(p.sample.tokens), device),
        (n_s * n_t, n_s + n_t),
        1,
        {},
    )
