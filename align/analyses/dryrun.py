"""`--dry-run` of the analyses that run a model (contrib, lens, skip, erase, igrad): what the
run will read, the forwards (igrad: forward and backward passes) it will make, the memory it
holds at once, what it will write, and its time from one batch timed through the run's own
code and scaled to every batch by padded positions (as `align extract --dry-run` and
`align fit --live --dry-run` scale theirs). Writes nothing."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from align.analyses import contrib, erase, igrad, lens, skip
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
    unit: str = "forwards"  # what `forwards_per_batch` counts (igrad: forward and backward passes)
    reads: tuple = ()  # further lines of what the run reads (erase's reference corpus)
    more_forwards: int = 0  # single forwards outside the batches (erase's reference mean)
    more_positions: int = 0  # their padded positions, timed at the batches' rate
    uncounted: str = "model loading and the bootstrap"  # what the time leaves out


def weight_bytes(model) -> int:
    """Bytes of the model's parameters and buffers."""
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def time_batch(model, work: Work) -> tuple[int, float, int | None]:
    """(index, seconds, CUDA peak bytes or None) of the batch with the most padded positions
    (the run's peak of memory), run once on its first row as a warm-up and then whole twice:
    the faster of the two, since a machine shared with other jobs slows single runs."""
    import torch

    k = max(range(len(work.positions)), key=work.positions.__getitem__)
    batch = work.batches[k]
    work.run(batch[:1])
    dev = next(model.parameters()).device
    cuda = dev.type == "cuda" and torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    times = []
    for _ in range(2):
        sync(dev)
        t = time.perf_counter()
        work.run(batch)
        sync(dev)
        times.append(time.perf_counter() - t)
    seconds = min(times)
    return k, seconds, (torch.cuda.max_memory_allocated(dev) if cuda else None)


def dry_run(model, config, reading: dict, work: Work, output: str, log) -> dict:
    """Log what the run of `work` will read, run, hold and write, and its time estimated
    from one timed batch: seconds ≈ t_batch × Σ positions / positions of the timed batch
    (every batch makes the same forwards; model loading and the bootstrap not counted).
    `reading`: "model", "corpus", "prompts", "tokens", "longest". Returns the estimate."""
    k, seconds, peak = time_batch(model, work)
    per = work.forwards_per_batch
    run_positions = sum(work.positions) * per + work.more_positions
    estimate = seconds * run_positions / max(work.positions[k] * per, 1)
    weights = weight_bytes(model)
    held = work.activations(max(work.positions))
    n_batches = len(work.positions)
    n_forwards = n_batches * per + work.more_forwards
    rate = run_positions / max(estimate, 1e-12)
    head = work.command
    lines = [
        f"{head}: {output} ({'an' if work.schema[0] in 'aeiou' else 'a'} {work.schema} result)",
        f"  model      {reading['model']} ({config.num_hidden_layers} layers, d_model "
        f"{config.hidden_size}, vocabulary {config.vocab_size:,}) on {next(model.parameters()).device}",
        f"  corpus     {reading['corpus']}: {reading['prompts']:,} prompts, "
        f"{reading['tokens']:,} tokens (longest {reading['longest']:,})",
        *work.reads,
        f"  forwards   {work.forwards}: {n_forwards:,} {work.unit} over "
        f"{run_positions:,} padded positions",
        f"  memory     weights {human(weights)} + ~{human(held)} of activations at once "
        f"(the largest batch, {max(work.positions):,} positions)"
        + (f"; measured peak on the device {human(peak)}" if peak is not None else ""),
        f"  writes     ~{human(work.result_bytes)} (the result's per-prompt arrays)",
        f"  one batch  {len(work.batches[k])} rows ({work.positions[k]:,} positions, the largest) "
        f"in {seconds * 1e3:,.1f} ms",
        f"  time       ~{estimate:,.3g} s at {rate:,.0f} tok/s ({work.uncounted} not counted); "
        "nothing was written",
    ]
    for line in lines:
        log(line)
    return {
        "n_batches": n_batches,
        "n_forwards": n_forwards,
        "positions": run_positions,
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


def erase_work(model, config, prompts, reference, batch_size: int, source: str) -> Work:
    """`align erase` of `prompts` (AnswerPrompts) with the mean residual of `reference`
    (token-id arrays, from `source`): one forward per reference batch, then per batch of rows
    (a prompt and one erased position, sorted by length as `erase.erasure` sorts them) one
    clean forward and one per boundary 0..L−1. The timed batch erases with a zero mean (the
    same forwards as the reference mean's)."""
    L, d, V = config.num_hidden_layers, config.hidden_size, config.vocab_size
    size = next(model.parameters()).element_size()
    rows = sorted(erase.rows_for(prompts), key=lambda r: (len(r.token_id), r.prompt, r.position))
    batches = [rows[k : k + batch_size] for k in range(0, len(rows), batch_size)]
    ref_batches = [reference[k : k + batch_size] for k in range(0, len(reference), batch_size)]
    ref_positions = sum(padded(b) for b in ref_batches)
    zero = np.zeros((L + 1, d))
    T = max(len(p) for p in prompts)
    return Work(
        "align erase --dry-run",
        "erasure",
        f"{len(rows):,} rows (a prompt and one erased position) in {len(batches):,} batches; "
        f"{1 + L} forwards a batch (1 clean + {L} boundaries erased; boundary {L} reuses the "
        f"clean run), and {len(ref_batches):,} for the reference mean",
        1 + L,
        [len(b) * max(len(r.token_id) for r in b) for b in batches],
        batches,
        lambda b: erase.erase_effects(model, b, zero),
        # a forward's residual at L, and the clean and the erased probabilities at every
        # position (at most); the reference forwards keep every boundary's residual
        lambda P: max(3 * P * d * size + 2 * P * V * FLOAT32, (L + 1) * P * d * size),
        len(prompts) * ((L + 1) * T * 8 + T * 24) + (L + 1) * d * 8,
        reads=(
            f"  reference  {source}: {len(reference):,} prompts, "
            f"{sum(len(r) for r in reference):,} tokens",
        ),
        more_forwards=len(ref_batches),
        more_positions=ref_positions,
        uncounted="model loading",
    )


@dataclass(frozen=True)
class Pass:
    """One forward and backward pass of `align igrad`: prompt `prompt` with `part` of `layer`
    interpolated at `points`; sliced, the same pass at fewer points."""

    prompt: int
    part: str
    layer: int
    points: np.ndarray

    def __len__(self) -> int:
        return len(self.points)

    def __getitem__(self, s) -> "Pass":
        return dataclasses.replace(self, points=self.points[s])


def igrad_work(model, config, prompts, parts, v, batch_size: int) -> Work:
    """`align igrad` of `prompts` (AnswerPrompts) in variant `v`: per prompt, part and layer
    the points x, b and r_0..r_{N−1} (N = v.steps) in passes of `batch_size` points, as
    `igrad.integrated_gradients` runs them. The batch timed is the longest prompt's first
    part at layer 0, whose backward runs through every layer: the estimate is an upper bound."""
    L, d, V = config.num_hidden_layers, config.hidden_size, config.vocab_size
    ffn = getattr(config, "intermediate_size", None) or 4 * d
    size = next(model.parameters()).element_size()
    points = np.concatenate([[1.0, 0.0], igrad.alphas(v.steps, v.rule)])
    chunks = [points[k : k + batch_size] for k in range(0, len(points), batch_size)]
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    passes = [
        Pass(i, part, l, c) for i in order for part in parts for l in range(L) for c in chunks
    ]
    T = max(len(p) for p in prompts)

    def run(b: Pass):
        p = prompts[b.prompt]
        return igrad.gradient_pass(
            model, p.token_id, p.predicts_answer, b.part, b.layer, b.points, b.prompt, v
        )

    return Work(
        "align igrad --dry-run",
        "igrad",
        f"{len(prompts):,} prompts × {len(parts)} parts × {L} layers × {len(chunks)} passes "
        f"({v.steps} points + x and the baseline, {batch_size} a pass)",
        1,
        [len(b) * len(prompts[b.prompt]) for b in passes],
        passes,
        run,
        # autograd keeps every layer's activations for the backward: the residual, attention
        # and MLP intermediates (~6 d + 2 ffn a position), and the answer positions' logits
        lambda P: L * P * (6 * d + 2 * ffn) * size + 2 * P * V * FLOAT32,
        len(prompts) * (len(parts) * L * (T + 3) * 8 + T * 24),
        unit="forward and backward passes",
        uncounted="model loading",
    )
