"""Length-grouped batching in `align extract`.

Sequences are batched by length inside windows of 4 x batch_size sequences counted from the
store's first sequence. What is checked here, against references that never import align:
- the stored activations equal an independent per-sequence forward (tests/helpers/references.py) at
  the tolerance of tests/integration/test_extract.py (float32; batched and single runs differ by kernel
  rounding only), and the token table is in corpus order;
- the padding recorded in the run's provenance segment equals the padding of the stated rule
  worked out here by hand (sort by length, longest first, ties by position; cut every
  batch_size), and is below consecutive batching's;
- a run killed (SIGKILL) in the middle of a window (in a chunk write), then resumed, gives a store bit-identical
  to an uninterrupted grouped run.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
import zarr
from transformers import AutoModelForCausalLM

import align
from align.extraction import ExtractOptions
from align.store import open_activations
from tests.helpers.faults import killed_run
from tests.helpers.references import residuals

RTOL, ATOL = 1e-4, 1e-4  # as tests/integration/test_extract.py
BATCH = 3
WINDOW = 4 * BATCH

WORDS = "alpha beta gamma delta residual stream token layer norm head block value".split()


@pytest.fixture(scope="module")
def mixed_corpus(tmp_path_factory):
    """30 documents whose lengths run from 2 to ~120 words in a shuffled order."""
    rng = np.random.default_rng(7)
    sizes = rng.permutation(
        np.r_[rng.integers(2, 12, 10), rng.integers(30, 60, 10), rng.integers(90, 120, 10)]
    )
    docs = [" ".join(rng.choice(WORDS, size=int(k))) for k in sizes]
    p = tmp_path_factory.mktemp("mixed") / "mixed.txt"
    p.write_text("\n\n".join(docs), encoding="utf-8")
    return str(p)


def _sequences(store):
    seq = store.tokens("seq")
    cuts = np.flatnonzero(np.diff(seq)) + 1
    return np.split(np.arange(store.n_tokens), cuts)


def _padding_by_hand(lengths, batch, window, grouped):
    pad = total = 0
    for w0 in range(0, len(lengths), window):
        part = list(lengths[w0 : w0 + window])
        if grouped:
            order = sorted(range(len(part)), key=lambda i: (-part[i], i))
        else:
            order = list(range(len(part)))
        for c in range(0, len(order), batch):
            members = [part[i] for i in order[c : c + batch]]
            total += max(members) * len(members)
            pad += max(members) * len(members) - sum(members)
    return pad / total


@pytest.fixture(scope="module")
def grouped(zoo, mixed_corpus, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("grouped") / "g.zarr")
    align.extract(
        zoo("qwen2"),
        mixed_corpus,
        out,
        ExtractOptions(batch_size=BATCH, chunk_tokens=32, sublayers=True),
        log=lambda m: None,
    )
    return out


def test_grouped_extraction_equals_per_sequence_reference(zoo, grouped):
    s = open_activations(grouped).require_complete()
    model = AutoModelForCausalLM.from_pretrained(zoo("qwen2"), dtype=torch.float32)
    L = model.config.num_hidden_layers
    seqs = _sequences(s)
    assert len(seqs) == 30
    assert (np.diff(s.tokens("seq")) >= 0).all() and (
        s.tokens("doc")[[x[0] for x in seqs]] == np.arange(30)
    ).all()
    ids = s.tokens("token_id")
    for idx in seqs:
        ref = residuals(model, ids[idx])
        a, b = idx[0], idx[-1] + 1
        np.testing.assert_allclose(
            np.stack([s.resid(bd, a, b) for bd in range(L + 1)]), ref["resid"], rtol=RTOL, atol=ATOL
        )
        np.testing.assert_allclose(
            np.stack([s.attn(l, a, b) for l in range(L)]), ref["attn"], rtol=RTOL, atol=ATOL
        )
        np.testing.assert_allclose(
            np.stack([s.mlp(l, a, b) for l in range(L)]), ref["mlp"], rtol=RTOL, atol=ATOL
        )


def test_padding_is_recorded_and_below_consecutive_batching(grouped):
    s = open_activations(grouped)
    lengths = [len(x) for x in _sequences(s)]
    run = s.provenance["runs"][-1]
    assert run["group_window"] == WINDOW
    expect = _padding_by_hand(lengths, BATCH, WINDOW, grouped=True)
    consecutive = _padding_by_hand(lengths, BATCH, WINDOW, grouped=False)
    assert run["padding_fraction"] == pytest.approx(expect, abs=1e-6)
    assert consecutive > 0.3 and expect < consecutive / 2, (expect, consecutive)


def test_progress_and_final_line_report_padding(zoo, mixed_corpus, tmp_path):
    lines = []
    align.extract(
        zoo("qwen2"),
        mixed_corpus,
        str(tmp_path / "s.zarr"),
        ExtractOptions(batch_size=BATCH),
        log=lines.append,
    )
    progress = [x for x in lines if "tok/s" in x and "ETA" in x]
    assert progress and all(", padding " in x for x in progress)
    final = lines[-1]
    assert (
        final.startswith("align extract: wrote ")
        and "padding " in final
        and "windows of 12 sequences" in final
    )


def test_killed_mid_window_resumes_bit_identical(zoo, mixed_corpus, tmp_path, grouped, cli):
    out = str(tmp_path / "s.zarr")
    log = tmp_path / "fault.log"
    cmd = [
        sys.executable,
        "-m",
        "align.cli.main",
        "extract",
        zoo("qwen2"),
        mixed_corpus,
        "-o",
        out,
        "--batch-size",
        str(BATCH),
        "--chunk-tokens",
        "32",
        "--sublayers",
    ]
    # Killed in the writer's 16th chunk write. Sequences reach the writer in a fixed order
    # (corpus order, each as soon as the ones before it are done), so where the flushes fall,
    # and the committed point before the 16th, do not depend on thread timing: here it lies
    # inside the second window, some of whose batches have run and some not.
    killed_run(cmd, log, "mid_chunk_write:16")
    killed = open_activations(out)
    committed = killed.progress["committed_sequences"]
    assert not killed.complete and 0 < committed < 30
    assert committed % WINDOW != 0, committed  # the resume starts inside a window
    code, _, err = cli(*cmd[3:])  # only the kill needs a process of its own
    assert code == 0 and "resuming" in err, err
    a, b = zarr.open_group(out, mode="r"), zarr.open_group(grouped, mode="r")
    names = sorted(k for k, _ in a.arrays())
    assert names == sorted(k for k, _ in b.arrays())
    for name in names:
        np.testing.assert_array_equal(a[name][...], b[name][...], err_msg=name)
    assert a.attrs["progress"] == b.attrs["progress"]
