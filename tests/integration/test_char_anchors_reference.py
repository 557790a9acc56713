"""`align fit --pairing char-anchors` against a reference that never imports align, on two
models whose tokenizers are of different kinds, trained here with `tokenizers`: a byte-level
BPE and a SentencePiece-style BPE (Metaspace, byte fallback), as tests/helpers/anchors_reference.py
trains them. The corpus has multi-byte
characters (split into byte pieces by both), whitespace runs and the text `<|endoftext|>`.

The reference tokenizes each document itself (`tokenizers.Tokenizer.from_file` of each
checkpoint's tokenizer.json, its own offsets), finds the anchors with a plain loop, reads the
residuals straight from the Zarr groups, splits by the result's recorded documents and fits
scikit-learn Ridge on the anchored rows; align's scores equal it to 1e-9."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr
import zarr

from align.extraction import ExtractOptions
from align.fitting import Execution, FitSpec
from align.models import ModelSpec
from tests.helpers.anchors_reference import (
    anchors,
    byte_level_bpe,
    metaspace_byte_fallback,
    tokenize,
)
from tests.helpers.references import chosen_alpha, heldout_scores, ridge_val_sse, sklearn_ridge

ALPHAS = [1e-3, 1e-1, 10.0]
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "café",
    "naïve",
    "über",
    "中文",
    "字符",
    "😀",
    "x",
    "yz",
    "42",
    "3.14",
    "résumé",
    "ok",
    "<|endoftext|>",
    "tab\tbed",
    "two  spaces",
    "end.",
]


def _documents(n: int = 36, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n):
        k = int(rng.integers(8, 20))
        words = [WORDS[int(i)] for i in rng.integers(0, len(WORDS), k)]
        seps = [" " if rng.random() < 0.8 else "   " for _ in range(k - 1)]
        docs.append("".join(w + s for w, s in zip(words, seps + [""])))
    return docs


def _checkpoint(folder, tok, layers: int, width: int, seed: int) -> str:
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    os.makedirs(folder, exist_ok=True)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(folder)
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=tok.get_vocab_size(),
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
    )
    Qwen2ForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def two_tokenizers(tmp_path_factory):
    import align

    root = tmp_path_factory.mktemp("anchors")
    docs = _documents()
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    models, stores = [], []
    for k, (make, layers, width) in enumerate(
        ((byte_level_bpe, 2, 32), (metaspace_byte_fallback, 3, 48))
    ):
        folder = _checkpoint(str(root / f"model-{k}"), make(docs), layers, width, seed=k)
        store = str(root / f"store-{k}.zarr")
        align.extract(
            ModelSpec(folder, dtype="float32"),
            str(corpus),
            store,
            ExtractOptions(batch_size=4),
            log=lambda m: None,
        )
        models.append(folder)
        stores.append(store)
    out = str(root / "result.zarr")
    lines = []
    align.fit(
        *stores,
        out,
        FitSpec(pairing="char-anchors", alphas=ALPHAS, bootstrap=0),
        Execution(scheduler="synchronous"),
        log=lines.append,
    )
    return docs, models, stores, xr.open_zarr(out), "\n".join(lines)


def _read(path):
    g = zarr.open_group(path, mode="r")
    bounds = [int(b) for b in g["boundary"][:]]
    return (
        {b: np.asarray(g["resid"][k], dtype=np.float64) for k, b in enumerate(bounds)},
        g["doc"][:],
        g["pos"][:],
        g["token_id"][:],
    )


def test_char_anchors_equal_reference_across_tokenizers(two_tokenizers):
    docs, models, stores, ds, log = two_tokenizers
    toks = [tokenize(m, docs) for m in models]
    reads = [_read(s) for s in stores]
    # each store holds its tokenizer's ids, document by document, position 0 first
    for (X, doc, pos, ids), tk in zip(reads, toks):
        for d, (ref_ids, _) in enumerate(tk):
            np.testing.assert_array_equal(ids[doc == d], ref_ids)
            np.testing.assert_array_equal(pos[doc == d], np.arange(len(ref_ids)))
    # the corpus exercises the rule: byte pieces, other cuts, a partial overlap
    pieces = [
        sum(1 for i in range(1, len(o)) if o[i][0] < o[i - 1][1])
        for o in (t[1] for tk in toks for t in tk)
    ]
    assert sum(pieces) > 0
    rows = {"s": [], "t": []}
    starts = [np.r_[0, np.cumsum([len(t[0]) for t in tk])] for tk in toks]
    counts = [0, 0]
    for d in range(len(docs)):
        a, b = anchors(toks[0][d][1]), anchors(toks[1][d][1])
        counts[0] += len(toks[0][d][0])
        counts[1] += len(toks[1][d][0])
        common = sorted(set(a) & set(b))
        for c in common:
            if a[c] != 0 and b[c] != 0:  # position 0 of either side left out
                rows["s"].append(starts[0][d] + a[c])
                rows["t"].append(starts[1][d] + b[c])
    si, ti = np.array(rows["s"]), np.array(rows["t"])
    pairs_all = sum(
        len(set(anchors(toks[0][d][1])) & set(anchors(toks[1][d][1]))) for d in range(len(docs))
    )
    cover = (pairs_all / counts[0], pairs_all / counts[1])
    assert all(0.3 < c < 0.99 for c in cover), cover
    p = ds.attrs["pairing"]
    assert p["mode"] == "char-anchors" and p["pairs"] == pairs_all
    np.testing.assert_allclose(
        [p["source"]["coverage"], p["target"]["coverage"]], cover, rtol=1e-12
    )
    assert f"{pairs_all:,} anchored pairs cover source {cover[0]:.1%}" in log
    (X, doc, _, _), (Y, _, _, _) = reads
    split = ds.attrs["split"]
    d_rows = doc[si]
    fit_d, val_d, test_d = (
        np.isin(d_rows, split[k]) for k in ("fit_docs", "validation_docs", "heldout_docs")
    )
    assert fit_d.sum() and val_d.sum() and test_d.sum()
    train = fit_d | val_d
    for i in ds.source_boundary.values:
        for j in ds.target_boundary.values:
            x, y = X[int(i)][si], Y[int(j)][ti]
            k = chosen_alpha(
                ridge_val_sse(x[fit_d], y[fit_d], x[val_d], y[val_d], ALPHAS), y[fit_d], y[val_d]
            )
            xc = x[train] - x[train].mean(0)
            alpha = ALPHAS[k] * np.trace(xc.T @ xc) / xc.shape[1]
            want = heldout_scores(
                sklearn_ridge(x[train], y[train], alpha).predict(x[test_d]), y[test_d]
            )
            cell = ds.sel(source_boundary=i, target_boundary=j)
            assert float(cell.alpha_rel) == ALPHAS[k], (i, j)
            for name, v in want.items():
                np.testing.assert_allclose(
                    float(cell[name]), v, rtol=1e-9, atol=1e-12, err_msg=f"{name} at ({i}, {j})"
                )
