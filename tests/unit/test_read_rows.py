"""The store route's reads of chosen rows (`store_route.graph._read_rows`: the sampled rows,
a shuffled control's partners, a group's held-out rows), chunk by chunk of the store: rows in
any order, repeated, spread over every chunk or packed in one, and -1 for a row of zeros,
equal to the arrays the store was written from (float32, exact)."""

from __future__ import annotations

import numpy as np
import pytest

from align.fitting.store_route.graph import _read_rows
from store.arrays import StoreFormat, write_activations
from tests.helpers.fixtures_fit import TOKENIZER, token_table


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A float32 store of 3 boundaries × 1,000 tokens × d 8 in chunks of 64 tokens, and its
    arrays."""
    rng = np.random.default_rng(0)
    resid = rng.standard_normal((3, 1000, 8)).astype(np.float32)
    path = str(tmp_path_factory.mktemp("rows") / "s.zarr")
    prov = {"model": "synthetic", "model_type": "synthetic", "tokenizer_hash": dict(TOKENIZER)}
    fmt = StoreFormat("float32", StoreFormat().codec, 64)
    write_activations(path, resid, token_table(10, 100), prov, fmt=fmt)
    return path, resid


@pytest.mark.parametrize(
    "index",
    [
        np.sort(np.random.default_rng(1).choice(1000, 300, replace=False)),  # sampled rows
        np.random.default_rng(2).permutation(1000)[:500],  # any order
        np.r_[5, 5, 999, -1, 0, 63, 64, 64, -1, 700],  # repeats, both ends, chunk edges, zeros
        np.arange(130, 190),  # one stretch across a chunk boundary
        np.full(4, -1),  # nothing to read
    ],
)
def test_rows_in_any_order_equal_the_arrays_written(store, index):
    path, resid = store
    got = _read_rows(path, None, (0, 2), index)
    for b in (0, 2):
        want = np.where(index[:, None] >= 0, resid[b][np.maximum(index, 0)], 0.0)
        np.testing.assert_array_equal(got[b], want)
        assert got[b].dtype == np.float32


def test_one_read_a_chunk_touched(store, monkeypatch):
    """300 rows sampled over 16 chunks of 64 tokens: one read per chunk holding any of them
    and boundary (a read per run of consecutive rows made 206 of them a boundary)."""
    from align.fitting.store_route import graph

    path, _ = store
    opened = graph._open(path, None)
    spans = []

    class Counting:
        chunk_tokens, d_model = opened.chunk_tokens, opened.d_model

        def resid(self, b, start, stop):
            spans.append((b, start, stop))
            return opened.resid(b, start, stop)

    monkeypatch.setattr(graph, "_open", lambda p, so: Counting())
    index = np.sort(np.random.default_rng(1).choice(1000, 300, replace=False))
    _read_rows(path, None, (0, 2), index)
    chunks = np.unique(index // 64)
    assert len(spans) == 2 * len(chunks)
    assert all(start // 64 == (stop - 1) // 64 for _, start, stop in spans)  # within a chunk
