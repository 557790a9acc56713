"""`align extract --dry-run`: one batch timed end to end (forward, device-to-host copy,
encoding, chunk write into a scratch store beside -o), the phase that bounds the run, and the
predicted rate and time. The batch is the run's first length-grouped batch (worked out here by
the README's grouping rule from a real run's sequence lengths). The expected numbers are worked out here from the per-batch times the
command reports, by the rule the README states (forward scaled by computed positions, the rest
by tokens; compute thread and writer thread overlap, so the run takes the larger of the two)."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import align
from align.extraction import ExtractOptions
from align.store import open_activations


def _positions(lengths, batch, window):
    """Computed positions of length-grouped batches, by hand (README's rule)."""
    total = 0
    for w0 in range(0, len(lengths), window):
        part = list(lengths[w0 : w0 + window])
        order = sorted(range(len(part)), key=lambda i: (-part[i], i))
        for c in range(0, len(order), batch):
            members = [part[i] for i in order[c : c + batch]]
            total += max(members) * len(members)
    return total


def _first_batch(lengths, batch, window):
    """The run's first batch, by hand: the first window sorted longest first (ties by
    position), cut every `batch`; the cut holding sequence 0."""
    part = list(lengths[:window])
    order = sorted(range(len(part)), key=lambda i: (-part[i], i))
    return next(
        sorted(order[c : c + batch])
        for c in range(0, len(order), batch)
        if 0 in order[c : c + batch]
    )


def test_dry_run_times_every_phase_and_names_the_bound(zoo, corpus_file, tmp_path):
    out = tmp_path / "sub" / "dry.zarr"
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "keep.txt").write_text("x")
    lines = []
    rep = align.extract(
        zoo("qwen2"),
        corpus_file,
        str(out),
        ExtractOptions(dry_run=True, batch_size=4, sublayers=True, chunk_tokens=64),
        log=lines.append,
    )
    text = "\n".join(lines)
    assert rep.status == "dry run" and not out.exists()
    assert sorted(os.listdir(tmp_path / "sub")) == [
        "keep.txt"
    ]  # the scratch store was beside -o and is gone
    info = rep.dry_run
    batch = info["batch"]
    assert set(info["phases_seconds"]) == {"forward", "copy", "encode", "write"}
    for k in ("forward", "copy", "encode", "write"):
        # the copy is the run's transfer less its forward: on a tiny CPU model it can be 0
        assert batch[k] > 0 or (k == "copy" and batch[k] == 0)
        ms = float(re.search(rf"^    {k}\s+([\d.]+) ms", text, re.M).group(1))
        assert ms == pytest.approx(batch[k] * 1e3, abs=0.006)
    docs = [d for d in open(corpus_file, encoding="utf-8").read().split("\n\n") if d.strip()]
    assert info["n_sequences"] == len(docs) >= 4
    # The sequence lengths, from a real run's token table; the predicted time and rate are
    # worked out from them and the reported per-batch times.
    n = info["n_tokens"]
    align.extract(
        zoo("qwen2"),
        corpus_file,
        str(tmp_path / "real.zarr"),
        ExtractOptions(batch_size=4, sublayers=True, chunk_tokens=64),
        log=lambda m: None,
    )
    s = open_activations(str(tmp_path / "real.zarr"))
    seq = s.tokens("seq")
    lengths = np.diff(np.r_[0, np.flatnonzero(np.diff(seq)) + 1, len(seq)]).tolist()
    first = _first_batch(lengths, 4, 16)
    assert batch["sequences"] == first
    assert batch["tokens"] == sum(lengths[i] for i in first) and batch["positions"] == 4 * max(
        lengths[i] for i in first
    )
    positions = _positions(lengths, 4, 16)
    assert info["padding_fraction"] == pytest.approx(1 - n / positions)
    fwd = batch["forward"] * positions / batch["positions"]
    per_token = {k: batch[k] * n / batch["tokens"] for k in ("copy", "encode", "write")}
    compute = fwd + per_token["copy"] + per_token["encode"]
    total = max(compute, per_token["write"])
    assert info["seconds_estimate"] == pytest.approx(total, rel=1e-9)
    assert info["tokens_per_second"] == pytest.approx(n / total, rel=1e-9)
    phases = {"forward": fwd, **per_token}
    bound = "write" if per_token["write"] >= compute else max(phases, key=phases.get)
    assert info["bound_by"] == bound
    assert re.search(rf"^  bound by   {bound}: .*\d\.\d\dx", text, re.M), text
    assert f"at {n / total:,.0f} tok/s" in text
