"""`align extract --dry-run`: what a run would write and cost, from one batch timed end to
end (forward, device-to-host copy, encoding, the store writer's chunk writes) and scaled to
the whole corpus; the phase that bounds the run, and by how much. The batch is the run's own
first batch (length-grouped, align.extraction.batches) and it goes through the run's own
transfer (align.extraction.transfer.forward_batch: the gather, the cast to the storage dtype
and the copy into pinned host memory on a side stream on CUDA) and writer. Writes nothing but
a temporary store beside -o, removed before it returns."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time

import numpy as np

from align import corpus, models
from align import store as st
from align.extraction import batches, pipeline
from align.extraction.inputs import Inputs
from align.extraction.plan import DISK_MARGIN, Plan, store_bytes, store_provenance
from align.extraction.report import ExtractReport, span
from align.extraction.transfer import forward_batch
from align.hooks import capture
from align.messages import human_bytes as human
from align.models import families

REPEATS = 2  # each timed phase runs this many times and its fastest time counts (after a warm-up)


def sync(device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously), so a phase's time is its own."""
    import torch

    if getattr(device, "type", str(device)) == "cuda" and torch.cuda.is_available():
        torch.cuda.synchronize(device)


def first_batch(cspec, tokenizer, batch_size: int) -> tuple[list, list[int]]:
    """The run's first batch: the corpus's first window (GROUP_FACTOR x batch_size sequences)
    cut by `batches.group_batches`, and of its batches the first the run computes (the one
    holding sequence 0). Returns (its sequences, their indices in the corpus)."""
    window = batch_size * batches.GROUP_FACTOR
    win = []
    for sq in corpus.sequences(cspec, tokenizer):
        win.append(sq)
        if len(win) >= window:
            break
    members = batches.group_batches([len(sq) for sq in win], batch_size)[0]
    return [win[i] for i in members], members


def _forward_only(model, seqs, boundaries, sublayer_blocks) -> float:
    """Seconds of what forward_batch does before its copies: padding, the hooked forward and
    the finite check, finished on the device."""
    dev = models.input_device(model)
    t = time.perf_counter()
    ids, mask = batches.pad(seqs, dev)
    out = capture.run(model, ids, mask, boundaries, sublayer_blocks)
    capture.check_finite(out, mask.bool())
    sync(dev)
    return time.perf_counter() - t


def _transfer(model, seqs, boundaries, sublayer_blocks, store_dtype: str) -> tuple[float, dict]:
    """Seconds of the run's own step for a batch (forward_batch: forward, gather, cast and
    copy to host), until its copies are done (the events the writer thread waits for), and
    the host arrays it made."""
    dev = models.input_device(model)
    events: list = []
    t = time.perf_counter()
    arrays = forward_batch(model, seqs, boundaries, sublayer_blocks, store_dtype, None, events)
    for ev in events:
        ev.synchronize()
    sync(dev)
    return time.perf_counter() - t, arrays


def timed_batch(
    model, sequences, boundaries, sublayer_blocks, layout, workdir: str
) -> dict[str, float]:
    """One batch through every phase of a real run, by the run's own code, each phase's
    fastest of REPEATS: the forward with hooks and the finite check; the copy, what the run's
    transfer (forward_batch) takes beyond that forward (the gather of real tokens, the cast to
    the storage dtype, the device-to-host copy into pinned buffers; on the CPU straight into
    the output); the encoding, the cut of the batch's host arrays into the per-sequence views
    handed to the writer (the bits are already the stored ones: the cast ran in the copy);
    and the write of those sequences by the store's own writer (chunk checksums and codec in
    its threads) into a temporary store under `workdir` (same layout and codec as the real
    store). The copy is a difference of two times: on a fast copy it can come out 0."""
    seqs = [sq.token_id for sq in sequences]
    fwd = step = float("inf")
    for _ in range(REPEATS):
        fwd = min(fwd, _forward_only(model, seqs, boundaries, sublayer_blocks))
        s, arrays = _transfer(model, seqs, boundaries, sublayer_blocks, layout.store_dtype)
        step = min(step, s)
    t = time.perf_counter()
    handed, off = [], 0
    for x in seqs:
        handed.append({k: v[:, off : off + len(x)] for k, v in arrays.items()})
        off += len(x)
    encode_s = time.perf_counter() - t
    n = off
    tmp_layout = dataclasses.replace(
        layout, n_tokens=n, n_sequences=len(seqs), chunk_tokens=min(layout.chunk_tokens, n)
    )
    path = os.path.join(workdir, "batch.zarr")
    st.create_activations(path, tmp_layout, {"runs": []})
    store = st.open_activations(path, mode="r+")
    pw = st.PlanWriter(store)
    for k, sq in enumerate(sequences):
        fields = sq.fields()
        fields["seq"] = np.full(len(sq), k, np.int64)
        pw.append(fields)
    pw.finish()
    t4 = time.perf_counter()
    w = st.ActivationWriter(store, threads=pipeline.WRITER_THREADS)
    for k, a in enumerate(handed):
        w.append(a, k + 1)
    w.finish()
    t5 = time.perf_counter()
    return {
        "forward": fwd,
        "copy": max(step - fwd, 0.0),
        "encode": encode_s,
        "write": t5 - t4,
        "tokens": n,
        "positions": len(seqs) * max(len(x) for x in seqs),
    }


def scratch_dir(output: str) -> tuple[str, bool]:
    """A temporary folder on the file system of -o (its nearest existing ancestor), so the
    timed write meets the disk the real run writes to, and whether it is there: the system's
    temporary folder stands in when -o is not a local path or its folder is not writable."""
    local = st.local_path(output)
    if local is None:
        return tempfile.mkdtemp(prefix="align-dry-run-"), False
    parent = os.path.dirname(os.path.abspath(os.path.expanduser(local)))
    while not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    try:
        return tempfile.mkdtemp(prefix=".align-dry-run-", dir=parent), True
    except OSError:
        return tempfile.mkdtemp(prefix="align-dry-run-"), False


def windows_note(plan: Plan, cspec) -> str:
    """The dry run's line for a corpus some of whose documents are cut into windows: another
    tokenizer cuts them at other characters, and a fit across the two then pairs anchors
    only where both windows start at one character (fitting.pairing.anchors)."""
    return (
        f"  windows    {plan.windowed:,} document(s) longer than `max_length` {cspec.max_length} are cut into "
        f"windows (the longest: {plan.longest_document:,} tokens with this tokenizer); another tokenizer cuts "
        "them at other characters, and a fit across the two leaves out the anchors after the first cut: to keep "
        "two tokenizers' windows together, extract both with a `max_length` above the longest document of "
        "either, or with `overflow` truncate (first windows only)"
    )


def dry_run(
    inputs: Inputs,
    plan: Plan,
    layout,
    free: int | None,
    output: str,
    log,
    t0: float,
    sizes: dict | None = None,
) -> ExtractReport:
    """Print what the run will produce and cost, from one batch timed end to end.

    The batch is the run's first (`first_batch`: length-grouped, as every batch of the run).
    Its phases scale to the whole run:
    the forward by computed positions (real tokens plus the padding the run's length-grouped
    batches will have, from the plan), the copy, encoding and write by real tokens. The real
    run does forward, copy and encoding in one thread and writes in another, so the predicted
    time is the larger of the two; the phase that makes it so bounds the run."""
    spec, cspec, tokenizer = inputs.spec, inputs.cspec, inputs.tokenizer
    batch_size, boundaries, sublayer_blocks = (
        inputs.options.batch_size,
        inputs.boundaries,
        inputs.sublayer_blocks,
    )
    sizes = sizes or store_bytes(
        layout, store_provenance(inputs, plan)
    )  # as written: every chunk whole, metadata
    need = sum(sizes.values())
    model, _ = models.load_model(spec)
    seqs, members = first_batch(cspec, tokenizer, batch_size)
    work, beside = scratch_dir(output)
    try:
        timed_batch(model, seqs[:1], boundaries, sublayer_blocks, layout, work)  # warm-up
        shutil.rmtree(os.path.join(work, "batch.zarr"), ignore_errors=True)
        ph = timed_batch(model, seqs, boundaries, sublayer_blocks, layout, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    window = batch_size * batches.GROUP_FACTOR
    pad = batches.padding_fraction(plan.lengths, batch_size, window) if plan.lengths else 0.0
    positions = plan.n_tokens / max(1.0 - pad, 1e-9)
    run_s = {
        "forward": ph["forward"] * positions / ph["positions"],
        "copy": ph["copy"] * plan.n_tokens / ph["tokens"],
        "encode": ph["encode"] * plan.n_tokens / ph["tokens"],
        "write": ph["write"] * plan.n_tokens / ph["tokens"],
    }
    main = run_s["forward"] + run_s["copy"] + run_s["encode"]
    total = max(main, run_s["write"])
    bound = max(run_s, key=run_s.get) if run_s["write"] < main else "write"
    if bound == "write":
        margin = f"the write takes {run_s['write'] / max(main, 1e-12):.2f}x the forward, copy and encoding together"
    else:
        rest = sorted(v for k, v in run_s.items() if k != bound)[-1]
        margin = (
            f"{bound} is {run_s[bound] / max(rest, 1e-12):.2f}x the next phase; the writer thread needs "
            f"{run_s['write'] / max(main, 1e-12):.0%} of the compute thread's time"
        )
    rate = plan.n_tokens / max(total, 1e-12)
    lines = [
        f"align extract --dry-run: {output}",
        f"  model {spec.label or spec.name} ({layout.n_layers} layers, d_model {layout.d_model}), compute {spec.resolved_dtype()}, store {layout.store_dtype}, codec {layout.codec}",
        f"  family {families.of(model).name} ({families.of(model).found}: {families.of(model).blocks} blocks, "
        f"final norm {families.of(model).final_norm})",
        f"  corpus {cspec.describe()}: {plan.n_docs:,} documents, {plan.n_sequences:,} sequences, {plan.n_tokens:,} tokens (longest {plan.longest})",
        f"  boundaries {span(boundaries)}"
        + (f"; sublayers of blocks {span(sublayer_blocks)}" if sublayer_blocks else "")
        + f"; chunks of {layout.chunk_tokens} tokens",
    ]
    for name, b in sizes.items():
        if b >= 1 << 20 or name in ("resid", "attn", "mlp"):
            lines.append(f"  {name:<10} {human(b)}")
    lines.append(
        f"  total      {human(need)}" + (f" of {human(free)} free" if free is not None else "")
    )
    lines.append(
        f"  one batch of {len(seqs)} sequences ({ph['tokens']:,} tokens in {ph['positions']:,} positions; the run's "
        f"first, grouped by length), timed end to end through the run's own copy and writer"
        + (
            ""
            if beside
            else f" (written to {tempfile.gettempdir()}: `output`'s file system could not be used)"
        )
        + ":"
    )
    for k in ("forward", "copy", "encode", "write"):
        lines.append(f"    {k:<8} {ph[k] * 1e3:10.2f} ms   whole run ~{run_s[k]:,.3g} s")
    lines.append(
        f"  padding    {pad:.1%} of computed positions (length-grouped batches, windows of {window} sequences)"
    )
    lines.append(f"  bound by   {bound}: {margin}")
    lines.append(
        f"  time       ~{total:,.3g} s at {rate:,.0f} tok/s (forward, copy and encoding in one thread, writes in another)"
    )
    if plan.windowed:
        lines.append(windows_note(plan, cspec))
    if free is not None and need * DISK_MARGIN > free:
        lines.append("  DISK: not enough free space; the real run would refuse")
    for line in lines:
        log(line)
    info = {
        "n_tokens": plan.n_tokens,
        "n_sequences": plan.n_sequences,
        "n_docs": plan.n_docs,
        "bytes": sizes,
        "total_bytes": need,
        "free_bytes": free,
        "tokens_per_second": rate,
        "seconds_estimate": total,
        "batch": {
            **{k: ph[k] for k in ("forward", "copy", "encode", "write", "tokens", "positions")},
            "sequences": [int(i) for i in members],
        },
        "phases_seconds": run_s,
        "bound_by": bound,
        "write_timed_beside_output": beside,
        "padding_fraction": pad,
        "group_window": window,
        "windowed_documents": plan.windowed,
        "longest_document": plan.longest_document,
    }
    return ExtractReport(output, "dry run", plan.n_tokens, time.time() - t0, rate, info)
