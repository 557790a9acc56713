"""`align extract --dry-run`: what a run would write and cost, from one batch timed end to
end (forward, device-to-host copy, encoding, the store writer's chunk writes) and scaled to
the whole corpus; the phase that bounds the run, and by how much. Writes nothing but a
temporary store beside -o, removed before it returns."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time

import numpy as np

from align import capture, corpus, models
from align import store as st
from align.extraction import batches, pipeline
from align.extraction.inputs import Inputs
from align.extraction.plan import DISK_MARGIN, Plan
from align.extraction.report import ExtractReport, human, span
from align.store.codecs import encode


def sync(device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously), so a phase's time is its own."""
    import torch

    if getattr(device, "type", str(device)) == "cuda" and torch.cuda.is_available():
        torch.cuda.synchronize(device)


def timed_batch(model, sequences, boundaries, kept_layers, layout, workdir: str) -> dict[str, float]:
    """One batch through every phase of a real run, each timed on its own: the forward with
    hooks (and the finite check), the gather of real tokens and their device-to-host copy, the
    encoding to the storage dtype, and the write of the batch's chunks (checksum included) by
    the store's own writer into a temporary store under `workdir` (same layout and codec as
    the real store)."""
    seqs = [sq.token_id for sq in sequences]
    dev = models.input_device(model)
    ids, mask = batches.pad(seqs, dev)
    t0 = time.perf_counter()
    out = capture.run(model, ids, mask, boundaries, kept_layers)
    keep = mask.bool()
    capture.check_finite(out, keep)
    sync(dev)
    t1 = time.perf_counter()
    host = {}
    for kind, index in (("resid", boundaries), ("attn", kept_layers), ("mlp", kept_layers)):
        host[kind] = []
        for i in index:
            t = out[kind].pop(i)
            host[kind].append(t[keep.to(t.device)].to("cpu"))
    sync(dev)
    t2 = time.perf_counter()
    arrays = {}
    for kind, ts in host.items():
        if ts:
            arrays[kind] = np.stack([encode(t, layout.store_dtype) for t in ts])
    t3 = time.perf_counter()
    n = int(keep.sum())
    tmp_layout = dataclasses.replace(layout, n_tokens=n, n_sequences=len(seqs), chunk_tokens=min(layout.chunk_tokens, n))
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
    w.append(arrays, len(seqs))
    w.finish()
    t5 = time.perf_counter()
    return {"forward": t1 - t0, "copy": t2 - t1, "encode": t3 - t2, "write": t5 - t4, "tokens": n,
            "positions": int(keep.numel())}


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


def dry_run(inputs: Inputs, plan: Plan, layout, free: int | None, output: str, log, t0: float) -> ExtractReport:
    """Print what the run will produce and cost, from one batch timed end to end.

    The batch is the corpus's first `batch_size` sequences. Its phases scale to the whole run:
    the forward by computed positions (real tokens plus the padding the run's length-grouped
    batches will have, from the plan), the copy, encoding and write by real tokens. The real
    run does forward, copy and encoding in one thread and writes in another, so the predicted
    time is the larger of the two; the phase that makes it so bounds the run."""
    spec, cspec, tokenizer = inputs.spec, inputs.cspec, inputs.tokenizer
    batch_size, boundaries, kept_layers = inputs.options.batch_size, inputs.boundaries, inputs.kept_layers
    sizes = layout.bytes_per_array()
    need = sum(sizes.values())
    model, _ = models.load_model(spec)
    seqs = []
    for sq in corpus.sequences(cspec, tokenizer):
        seqs.append(sq)
        if len(seqs) >= batch_size:
            break
    work, beside = scratch_dir(output)
    try:
        timed_batch(model, seqs[:1], boundaries, kept_layers, layout, work)  # warm-up
        shutil.rmtree(os.path.join(work, "batch.zarr"), ignore_errors=True)
        ph = timed_batch(model, seqs, boundaries, kept_layers, layout, work)
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
        margin = (f"{bound} is {run_s[bound] / max(rest, 1e-12):.2f}x the next phase; the writer thread needs "
                  f"{run_s['write'] / max(main, 1e-12):.0%} of the compute thread's time")
    rate = plan.n_tokens / max(total, 1e-12)
    lines = [
        f"align extract --dry-run: {output}",
        f"  model {spec.name} ({layout.n_layers} layers, d_model {layout.d_model}), compute {spec.resolved_dtype()}, store {layout.store_dtype}, codec {layout.codec}",
        f"  corpus {cspec.describe()}: {plan.n_docs:,} documents, {plan.n_sequences:,} sequences, {plan.n_tokens:,} tokens (longest {plan.longest})",
        f"  boundaries {span(boundaries)}" + (f"; sublayers of blocks {span(kept_layers)}" if kept_layers else "") + f"; chunks of {layout.chunk_tokens} tokens",
    ]
    for name, b in sizes.items():
        if b >= 1 << 20 or name in ("resid", "attn", "mlp"):
            lines.append(f"  {name:<10} {human(b)}")
    lines.append(f"  total      {human(need)}" + (f" of {human(free)} free" if free is not None else ""))
    lines.append(f"  one batch of {len(seqs)} sequences ({ph['tokens']:,} tokens), timed end to end"
                 + ("" if beside else f" (written to {tempfile.gettempdir()}: -o's file system could not be used)") + ":")
    for k in ("forward", "copy", "encode", "write"):
        lines.append(f"    {k:<8} {ph[k] * 1e3:10.2f} ms   whole run ~{run_s[k]:,.3g} s")
    lines.append(f"  padding    {pad:.1%} of computed positions (length-grouped batches, windows of {window} sequences)")
    lines.append(f"  bound by   {bound}: {margin}")
    lines.append(f"  time       ~{total:,.3g} s at {rate:,.0f} tok/s (forward, copy and encoding in one thread, writes in another)")
    if free is not None and need * DISK_MARGIN > free:
        lines.append("  DISK: not enough free space; the real run would refuse")
    for line in lines:
        log(line)
    info = {"n_tokens": plan.n_tokens, "n_sequences": plan.n_sequences, "bytes": sizes, "total_bytes": need,
            "free_bytes": free, "tokens_per_second": rate, "seconds_estimate": total,
            "batch": {k: ph[k] for k in ("forward", "copy", "encode", "write", "tokens", "positions")},
            "phases_seconds": run_s, "bound_by": bound, "write_timed_beside_output": beside, "padding_fraction": pad, "group_window": window}
    return ExtractReport(output, "dry run", plan.n_tokens, time.time() - t0, rate, info)
