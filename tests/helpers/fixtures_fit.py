"""Fixtures of the fit tests: a pair of stores extracted from two different small models
with one tokenizer, and stores written from chosen arrays (known answers, refusals)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

TOKENIZER = {
    "vocab": "v0",
    "merges": "m0",
    "added_tokens": "a0",
    "normalizer_pretokenizer": "n0",
    "special_wrapping": "s0",
    "all": "all0",
}


@pytest.fixture(scope="session")
def fit_pair(extracted):
    """(source, target): qwen2 2 layers d 64, and qwen2 4 layers d 96, same tokenizer."""
    return extracted("qwen2"), extracted(
        "qwen2", model_overrides={"num_hidden_layers": 4, "hidden_size": 96}
    )


def token_table(n_docs: int, doc_len: int, seq_len: int = 64, seed: int = 0) -> dict:
    """token_id, doc, seq, pos for n_docs documents of doc_len tokens cut into sequences."""
    rng = np.random.default_rng(seed)
    doc = np.repeat(np.arange(n_docs), doc_len)
    within = np.tile(np.arange(doc_len), n_docs)
    seq_in_doc = within // seq_len
    seq = np.cumsum(np.r_[1, (np.diff(doc) != 0) | (np.diff(seq_in_doc) != 0)]) - 1
    return {
        "token_id": rng.integers(0, 300, len(doc)).astype(np.int32),
        "doc": doc,
        "seq": seq,
        "pos": (within % seq_len).astype(np.int32),
    }


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory):
    """synthetic(resid (B, N, d), tokens, tokenizer=..., complete=True, provenance={...},
    n_layers=L) -> path of an activation store written from these arrays through align.store
    (`provenance`: more of its provenance, e.g. a corpus; `n_layers`: StoreShape's)."""
    root = tmp_path_factory.mktemp("synthetic")
    counter = itertools.count()

    def make(
        resid,
        tokens,
        tokenizer=None,
        complete=True,
        model="synthetic",
        provenance=None,
        n_layers=None,
    ):
        from align.store.arrays import StoreShape, write_activations

        path = str(root / f"s{next(counter)}.zarr")
        prov = {
            "model": model,
            "model_type": "synthetic",
            "tokenizer_hash": dict(tokenizer or TOKENIZER),
            **(provenance or {}),
        }
        return write_activations(
            path,
            np.asarray(resid, dtype=np.float32),
            tokens,
            prov,
            StoreShape(n_layers=n_layers),
            complete=complete,
        )

    return make
