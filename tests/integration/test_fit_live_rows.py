"""The rows `align fit --live` accumulates are the rows `align extract` stores.

The store is read with zarr directly; the live producer's rows for the same model, corpus and
batch size must equal them exactly in float32 (the same batches, hence the same bits), and
bf16 rows must equal the bf16 store's values exactly too (bf16 → float64 is exact)."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from align import corpus, models
from align.fitting.live_route import passes
from align.fitting.live_route import pipeline as live


def _store(path):
    g = zarr.open_group(path, mode="r")
    lay = g.attrs["layout"]
    resid = g["resid"][:]
    if lay["store_dtype"] == "bfloat16":  # stored as the uint16 bits of bf16
        resid = (resid.astype(np.uint32) << 16).view(np.float32)
    return resid.astype(np.float64), g["doc"][:], g["pos"][:], g["token_id"][:], g["seq"][:]


def _parts_by_hand(doc, pos):
    """A split worked out here: documents by id mod 3 → fit, validation, held-out; position 0 unused."""
    part = (doc % 3).astype(np.int8)
    part[pos == 0] = -1
    return part


@pytest.mark.parametrize(
    "family,dtype", [("qwen2", "float32"), ("llama", "float32"), ("olmo2", "bfloat16")]
)
def test_rows_equal_the_store(zoo, extracted, corpus_file, family, dtype):
    store = extracted(family, dtype=dtype, batch_size=3, max_length=40)
    X, doc, pos, token_id, seq = _store(store)
    spec = models.ModelSpec(zoo(family), dtype=dtype)
    tok = models.load_tokenizer(spec)
    table = live.token_table(corpus.CorpusSpec(corpus_file, max_length=40), tok)
    # the token table is the store's
    assert table.n_tokens == len(doc)
    np.testing.assert_array_equal(np.concatenate(table.sequences), token_id)
    np.testing.assert_array_equal(table.doc, doc)
    np.testing.assert_array_equal(table.pos, pos)
    part = _parts_by_hand(doc, pos)
    batches = live.plan_batches(table, part, 3)
    model, _ = models.load_model(spec)
    bounds = list(range(X.shape[0]))
    seen = []
    for b, rows in passes.model_rows(model, table, batches, bounds):
        rows = np.concatenate([rows[k].double().numpy() for k in bounds], axis=1)
        p = part[b.tokens]
        assert np.all(np.diff(p) >= 0) and p.min() >= 0  # part order, used tokens only
        assert b.counts == tuple(int((p == k).sum()) for k in range(3))
        # the batch's sequences are whole sequences of the store
        assert set(np.unique(seq[b.tokens]).tolist()) <= set(b.members)
        want = np.concatenate([X[k][b.tokens] for k in bounds], axis=1)
        np.testing.assert_array_equal(rows, want)
        seen.append(b.tokens)
    seen = np.sort(np.concatenate(seen))
    np.testing.assert_array_equal(seen, np.flatnonzero(part >= 0))  # every used token once
