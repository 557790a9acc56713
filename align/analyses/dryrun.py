"""`--dry-run` of the analyses that run a model (contrib, lens, skip): what the run will read,
the forwards it will make, the memory it holds at once, what it will write, and its time from
one batch timed through the run's own code and scaled to every batch by padded positions (as
`align extract --dry-run` and `align fit --live --dry-run` scale theirs). Writes nothing."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from align.analyses import contrib, lens, skip
from align.extraction.dryrun import sync
from align.messages import human_bytes as human

FLOAT32 = 4  # bytes: the log-probabilities and the accumulators are float32 or wider


@dataclass(frozen=True)
class Work:
    """The forwards an analysis will make and how to time one batch of them."""

    command: str  # "align skip --dry-run": what begins its lines
    schema: str  # the result's schema
    forwards: str  # the forwards in words ("3 batches", "current 5 rows in 2 batches, ...")
    forwards_per_batch: int  # one for contrib and lens; 1 + parts × layers for skip
    positions: list  # padded positions (rows × the longest row) of every batch, in run order
    batches: list  # the batches, as `run` takes them
    run: Callable  # one batch through the run's own code
    activations: Callable  # padded positions -> bytes of activations held at once (estimate)
    result_bytes: int  # the result's largest arrays (per-prompt sums), estimated


def weight_bytes(model) -> int:
    """Bytes of the model's parameters and buffers."""
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def time_batch(model, work: Work) -> tuple[int, float, int | None]:
    """(index, seconds, CUDA peak bytes or None) of the batch with the most padded positions
    (the run's peak of memory), run once on its first row as a warm-up and then whole."""
    import torch

    k = max(range(len(work.positions)), key=work.positions.__getitem__)
    batch = work.batches[k]
    work.run(batch[:1])
    dev = next(model.parameters()).device
    cuda = dev.type == "cuda" and torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    sync(dev)
    t = time.perf_counter()
    work.run(batch)
    sync(dev)
    seconds = time.perf_counter() - t
    return k, seconds, (torch.cuda.max_memory_allocated(dev) if cuda else None)


def dry_run(model, config, reading: dict, work: Work, output: str, log) -> dict:
    """Log what the run of `work` will read, run, hold and write, and its time estimated
    from one timed batch: seconds ≈ t_batch × Σ positions / positions of the timed batch
    (every batch makes the same forwards; model loading and the bootstrap not counted).
    `reading`: "model", "corpus", "prompts", "tokens", "longest". Returns the estimate."""
    k, seconds, peak = time_batch(model, work)
    total_positions = sum(work.positions)
    estimate = seconds * total_positions / max(work.positions[k], 1)
    weights = weight_bytes(model)
    held = work.activations(max(work.positions))
    n_batches = len(work.positions)
    n_forwards = n_batches * work.forwards_per_batch
    rate = total_positions * work.forwards_per_batch / max(estimate, 1e-12)
    head = work.command
    lines = [
        f"{head}: {output} (a {work.schema} result)",
        f"  model      {reading['model']} ({config.num_hidden_layers} layers, d_model "
        f"{config.hidden_size}, vocabulary {config.vocab_size:,}) on {next(model.parameters()).device}",
        f"  corpus     {reading['corpus']}: {reading['prompts']:,} prompts, "
        f"{reading['tokens']:,} tokens (longest {reading['longest']:,})",
        f"  forwards   {work.forwards}: {n_forwards:,} forwards over "
        f"{total_positions * work.forwards_per_batch:,} padded positions",
        f"  memory     weights {human(weights)} + ~{human(held)} of activations at once "
        f"(the largest batch, {max(work.positions):,} positions)"
        + (f"; measured peak on the device {human(peak)}" if peak is not None else ""),
        f"  writes     ~{human(work.result_bytes)} (the result's per-prompt arrays)",
        f"  one batch  {len(work.batches[k])} rows ({work.positions[k]:,} positions, the largest) "
        f"in {seconds * 1e3:,.1f} ms",
        f"  time       ~{estimate:,.3g} s at {rate:,.0f} tok/s (model loading and the bootstrap "
        "not counted); nothing was written",
    ]
    for line in lines:
        log(line)
    return {
        "n_batches": n_batches,
        "n_forwards": n_forwards,
        "positions": total_positions,
        "weight_bytes": weights,
        "activation_bytes": held,
        "peak_bytes": peak,
        "result_bytes": work.result_bytes,
        "batch": {"index": k, "positions": work.positions[k], "seconds": seconds},
        "seconds_estimate": estimate,
    }


def padded(batch) -> int:
    """Rows × the longest row of a batch of token-id arrays."""
    return len(batch) * max(len(x) for x in batch)


def contrib_work(model, config, batches) -> Work:
    """`align contrib` over `batches` of prompts: one forward each, keeping every boundary's
    residual and every layer's attention and MLP output."""
    L, d, n = config.num_hidden_layers, config.hidden_size, sum(len(b) for b in batches)
    size = next(model.parameters()).element_size()
    return Work(
        "align contrib --dry-run",
        "contributions",
        f"{len(batches):,} batches, one forward each",
        1,
        [padded(b) for b in batches],
        batches,
        lambda b: contrib.contributions_from_model(model, [b]),
        lambda P: P * d * (3 * L + 1) * size,
        n * 7 * L * 8,
    )


def lens_work(model, config, batches) -> Work:
    """`align lens` over `batches` of prompts: one forward each, keeping every boundary's
    residual, the output's logits, and one boundary's lens logits and log-probabilities."""
    L, d, V = config.num_hidden_layers, config.hidden_size, config.vocab_size
    size = next(model.parameters()).element_size()
    n = sum(len(b) for b in batches)
    return Work(
        "align lens --dry-run",
        "lens",
        f"{len(batches):,} batches, one forward each",
        1,
        [padded(b) for b in batches],
        batches,
        lambda b: lens.logit_lens(model, [b]),
        lambda P: P * d * (L + 1) * size + 4 * P * V * FLOAT32,
        n * 2 * (L + 1) * 8,
    )


def skip_work(model, config, plan, parts) -> Work:
    """`align skip` of a row plan (`skip.plan_rows`): per batch one clean forward and one per
    (part, skipped layer), each keeping the contributions and output probabilities."""
    L, d, V = config.num_hidden_layers, config.hidden_size, config.vocab_size
    size = next(model.parameters()).element_size()
    batches = [b for s in plan.rows for b in plan.batches(s)]
    words = ", ".join(
        f"{s} {len(plan.rows[s]):,} rows in {len(plan.batches(s)):,} batches" for s in plan.rows
    )
    per_batch = 1 + len(parts) * L
    return Work(
        "align skip --dry-run",
        "skipping",
        f"{words}; {per_batch} forwards a batch (1 clean + {len(parts)} parts × {L} layers)",
        per_batch,
        [len(b) * max(len(r.token_id) for r in b) for b in batches],
        batches,
        lambda b: skip.skip_effects(model, b, parts),
        # the clean and the intervened run's contributions and probabilities, and a forward's
        # residuals
        lambda P: 2 * (L * P * d * size + P * V * FLOAT32) + (L + 1) * P * d * size,
        len(plan.rows) * len(plan.prompts) * len(parts) * (L * L + L) * 8,
    )
