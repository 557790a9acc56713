"""`align fit --pairing char-anchors`, run through the CLI as a user runs it on two stores and
with `--live` on the two checkpoints, against a reference that never imports align
(tests/helpers/anchors_reference.py, tests/helpers/references.py).

Two tokenizers of different kinds are trained here with `tokenizers` on the corpus itself: a
byte-level BPE (vocabulary 300, next to a random Qwen2) and a SentencePiece-style BPE over
Metaspace words with byte fallback to the 256 <0xNN> tokens (vocabulary 400, next to a random
Llama). Neither adds a BOS or anything else around the text. The corpus (.txt, documents
separated by blank lines) has multi-byte characters (é, ü, 中文, 😀), runs of spaces and tabs,
and the literal text `<|endoftext|>` inside documents.

The reference tokenizes each document with `tokenizers.Tokenizer.from_file(tokenizer.json)`
(offsets in code points), finds the anchors with a plain loop, takes every boundary's residual
from a plain transformers forward of each document alone (batch of one, no padding), splits by
the documents the result records, and fits scikit-learn Ridge on the anchored rows, α chosen
on validation as tests/integration/test_fit.py does.

Residual bits: align extracts in padded batches. With the default `--batch-size 8`, 2 to 3% of
the stored float32 values differ from a forward of the document alone in the last bits (up to
7.5e-9 absolute, 21% of one document's values), and that alone moves the fit's α off the
reference's by 1.8e-10 relative (measured here). With `--batch-size 1` the stores equal the
plain forward bit for bit (asserted below), so the scores are compared at 1e-9 without
loosening anything.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
import xarray as xr
import zarr

from tests.conftest import run_cli
from tests.helpers import anchors_reference as ref

ALPHAS = [1e-3, 1e-1, 10.0]
RTOL, ATOL = 1e-9, 1e-12


def _cli(*args):
    code, _, _ = run_cli([str(a) for a in args])
    assert code == 0, f"align {' '.join(map(str, args))} exited {code}"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The corpus, three checkpoints (two share the byte-level tokenizer), their stores made by
    `align extract`, and per checkpoint the reference tokenization and residuals."""
    root = tmp_path_factory.mktemp("anchors-ref")
    docs = ref.documents()
    corpus = root / "corpus.txt"
    corpus.write_text(ref.corpus_text(docs), encoding="utf-8")
    bpe, sp = ref.byte_level_bpe(docs), ref.metaspace_byte_fallback(docs)
    assert (bpe.get_vocab_size(), sp.get_vocab_size()) == (300, 400)
    folders = {
        "bpe": ref.save_checkpoint(root / "bpe", bpe, "qwen2", layers=2, width=32, seed=0),
        "sp": ref.save_checkpoint(root / "sp", sp, "llama", layers=2, width=32, seed=1),
        "bpe-other": ref.save_checkpoint(
            root / "bpe-other", bpe, "qwen2", layers=3, width=48, seed=2
        ),
    }
    stores, toks, resid = {}, {}, {}
    for name, folder in folders.items():
        stores[name] = str(root / f"{name}.zarr")
        _cli(
            "extract",
            folder,
            corpus,
            "-o",
            stores[name],
            "--dtype",
            "float32",
            "--max-length",
            "256",
            "--batch-size",
            "1",
        )
        toks[name] = ref.tokenize(folder, docs)
        resid[name] = ref.model_boundaries(folder, [ids for ids, _ in toks[name]])
    return {
        "root": root,
        "docs": docs,
        "corpus": corpus,
        "folders": folders,
        "stores": stores,
        "toks": toks,
        "resid": resid,
    }


@pytest.fixture(scope="module")
def cross_fit(built):
    out = str(built["root"] / "cross.zarr")
    _cli(
        "fit",
        built["stores"]["bpe"],
        built["stores"]["sp"],
        "-o",
        out,
        "--pairing",
        "char-anchors",
        "--alphas",
        ",".join(map(str, ALPHAS)),
        "--seed",
        "0",
        "--bootstrap",
        "0",
    )
    return xr.open_zarr(out)


@pytest.fixture(scope="module")
def same_fit(built):
    out = str(built["root"] / "same.zarr")
    _cli(
        "fit",
        built["stores"]["bpe"],
        built["stores"]["bpe-other"],
        "-o",
        out,
        "--alphas",
        ",".join(map(str, ALPHAS)),
        "--seed",
        "0",
        "--bootstrap",
        "0",
    )
    return xr.open_zarr(out)


def _compare(ds, X, Y, doc):
    """align's cells against the reference on rows X (S, n, d_S), Y (T, n, d_T) of documents doc."""
    split = ds.attrs["split"]
    assert sorted(split["fit_docs"] + split["validation_docs"] + split["heldout_docs"]) == sorted(
        set(doc.tolist())
    )
    assert ds["heldout_doc"].values.tolist() == list(split["heldout_docs"])
    assert ds.source_boundary.values.tolist() == list(range(len(X)))
    assert ds.target_boundary.values.tolist() == list(range(len(Y)))
    want = ref.reference_cells(X, Y, doc, split, ALPHAS)
    grid = ds.alpha_grid.values
    for (i, j), w in want.items():
        cell = ds.sel(source_boundary=i, target_boundary=j)
        at = f"at ({i}, {j})"
        curve = cell.val_sse.values
        np.testing.assert_allclose(grid[np.isfinite(curve)], ALPHAS, rtol=1e-12)
        # the closed form's validation error is a difference of large terms: test_fit's bound
        np.testing.assert_allclose(
            curve[np.isfinite(curve)],
            w["val_sse"],
            rtol=1e-6,
            atol=1e-9 * w["val_sse"].max(),
            err_msg=f"val_sse {at}",
        )
        assert float(cell.alpha_rel) == pytest.approx(w["alpha_rel"], rel=1e-12), at
        np.testing.assert_allclose(float(cell.alpha), w["alpha"], rtol=1e-10, err_msg=f"alpha {at}")
        for name in ("relative_error", "norm_error", "r2"):
            np.testing.assert_allclose(
                float(cell[name]), w[name], rtol=RTOL, atol=ATOL, err_msg=f"{name} {at}"
            )


def _pieces(text, offsets) -> int:
    """Tokens that are byte pieces of one multi-byte character: the span of a single character
    of two or more UTF-8 bytes, shared with the next or the previous token."""
    n = 0
    for k, (s, e) in enumerate(offsets):
        shared = (k + 1 < len(offsets) and offsets[k + 1] == (s, e)) or (
            k > 0 and offsets[k - 1] == (s, e)
        )
        n += e == s + 1 and len(text[s].encode("utf-8")) > 1 and shared
    return n


def test_checkpoints_tokenize_as_their_tokenizer_json(built):
    """Each folder loads back in transformers and tokenizes as `Tokenizer.from_file` does, ids
    and offsets; each store holds those ids, one window per document, position 0 first; and the
    stores equal the plain forward of each document bit for bit (`--batch-size 1`)."""
    from transformers import PreTrainedTokenizerFast

    docs = built["docs"]
    for name, folder in built["folders"].items():
        # PreTrainedTokenizerFast reads tokenizer.json as saved. (AutoTokenizer does not for the
        # Qwen2 folders: transformers 5 builds its Qwen2Tokenizer from the vocabulary and merges,
        # with Qwen2's own split regex, NFC and a template, and cuts some documents otherwise;
        # align reads tokenizer.json itself.)
        hf = PreTrainedTokenizerFast.from_pretrained(folder)
        for d, (ids, offsets) in zip(docs, built["toks"][name]):
            enc = hf(d, add_special_tokens=False, return_offsets_mapping=True)
            assert (
                enc["input_ids"] == ids and [tuple(o) for o in enc["offset_mapping"]] == offsets
            ), (name, d)
            assert hf(d)["input_ids"] == ids, (name, d)  # nothing added around the text
        g = zarr.open_group(built["stores"][name], mode="r")
        doc, pos, token_id = g["doc"][:], g["pos"][:], g["token_id"][:]
        assert g["boundary"][:].tolist() == list(range(len(built["resid"][name][0])))
        for d, (ids, _) in enumerate(built["toks"][name]):
            rows = np.flatnonzero(doc == d)
            np.testing.assert_array_equal(token_id[rows], ids)
            np.testing.assert_array_equal(pos[rows], np.arange(len(ids)))
            np.testing.assert_array_equal(
                np.asarray(g["resid"][:, rows], np.float64),
                built["resid"][name][d],
                err_msg=f"{name} document {d}",
            )


def test_reference_reduces_to_tokens_for_one_tokenizer(built, same_fit):
    """Two models that share one tokenizer: the anchors of two equal tokenizations are the
    tokens themselves, paired with themselves, except the byte pieces before a character's
    last; a fit of one token stream pairs every token (those pieces too: one tokenizer reads
    the same bytes), so the reference's rows are every token but position 0 of each document."""
    toks_s, toks_t = built["toks"]["bpe"], built["toks"]["bpe-other"]
    assert toks_s == toks_t
    pairs = ref.anchored_pairs(toks_s, toks_t)
    np.testing.assert_array_equal(pairs["source"], pairs["target"])
    not_anchor = 0
    for d, (ids, offsets) in enumerate(toks_s):
        anchored = set(pairs["source"][pairs["doc"] == d].tolist())
        for k in (
            set(range(len(ids))) - anchored
        ):  # a piece whose character goes on in the next token
            assert k + 1 < len(offsets) and offsets[k + 1][0] < offsets[k][1], (d, k, offsets[k])
            not_anchor += 1
    assert not_anchor > 0  # the byte-level tokenizer cuts characters into pieces here
    doc = np.concatenate([np.full(len(ids) - 1, d) for d, (ids, _) in enumerate(toks_s)])
    pos = np.concatenate([np.arange(1, len(ids)) for ids, _ in toks_s])
    X = ref.stack_rows(built["resid"]["bpe"], doc, pos)
    Y = ref.stack_rows(built["resid"]["bpe-other"], doc, pos)
    _compare(same_fit, X, Y, doc)


def test_char_anchors_equal_reference_across_tokenizers(built, cross_fit):
    docs, (ts, tt) = built["docs"], (built["toks"]["bpe"], built["toks"]["sp"])
    # the corpus exercises the rule
    for name, toks in (("bpe", ts), ("sp", tt)):
        pieces = sum(_pieces(d, offsets) for d, (_, offsets) in zip(docs, toks))
        assert pieces > 0, f"{name}: no multi-byte character is cut into byte pieces"
        # `<|endoftext|>` in the text is read as the special token, one token over its 13 characters
        eot_spans = [
            (s, e) for d, (_, offsets) in zip(docs, toks) for (s, e) in offsets if d[s:e] == ref.EOT
        ]
        assert len(eot_spans) == sum(d.count(ref.EOT) for d in docs), name
    assert any(any(unicodedata.category(c) == "So" for c in d) for d in docs)  # the emoji
    assert any("\t" in d for d in docs) and any("   " in d for d in docs)
    # a token that ends at a character it has not read whole (the next token starts inside it and
    # ends beyond it, e.g. byte-level `Ã` then `©s` for "és") where the other side anchors: the
    # rule leaves it out; "the last token that ends at c" would pair it
    inside = 0
    for (_, a), (_, b) in ((x, y) for pair in zip(ts, tt) for x, y in (pair, pair[::-1])):
        other = ref.anchors(b)
        inside += sum(
            1
            for k in range(len(a) - 1)
            if a[k][1] > a[k][0] and a[k + 1][0] < a[k][1] < a[k + 1][1] and a[k][1] in other
        )
    assert inside > 0
    differ = sum(
        1 for (_, a), (_, b) in zip(ts, tt) if sorted(ref.anchors(a)) != sorted(ref.anchors(b))
    )
    assert differ >= len(docs) // 2, differ
    pairs = ref.anchored_pairs(ts, tt)
    coverage = {side: len(pairs["doc"]) / pairs["spanned"][side] for side in ("source", "target")}
    assert all(0.3 < c < 0.95 for c in coverage.values()), coverage
    _compare(cross_fit, *_cross_rows(built))


def _cross_rows(built) -> tuple:
    """The reference's rows (X, Y, doc): pairs of anchors at the same character, neither at
    position 0 of its sequence."""
    pairs = ref.anchored_pairs(built["toks"]["bpe"], built["toks"]["sp"])
    keep = (pairs["source"] != 0) & (pairs["target"] != 0)
    assert (
        ~keep
    ).sum() > 0  # some documents start with a token that both end at the same character
    doc = pairs["doc"][keep]
    X = ref.stack_rows(built["resid"]["bpe"], doc, pairs["source"][keep])
    Y = ref.stack_rows(built["resid"]["sp"], doc, pairs["target"][keep])
    return X, Y, doc


def test_live_pairs_the_anchors_on_the_fly_as_the_reference_and_the_stores_do(
    built, cross_fit, capsys
):
    """`align fit --live` of the two checkpoints over the corpus (each model tokenizing it
    itself; `--batch-size 1`, as the stores): the reference's scores at 1e-9, the store route's
    within test_fit_live's 1e-10, and the same recorded pairing."""
    out = str(built["root"] / "live-cross.zarr")
    code, _, err = run_cli(
        [
            "fit",
            "--live",
            built["folders"]["bpe"],
            built["folders"]["sp"],
            str(built["corpus"]),
            "-o",
            out,
            "--max-length",
            "256",
            "--batch-size",
            "1",
            "--dtype",
            "float32",
            "--alphas",
            ",".join(map(str, ALPHAS)),
            "--seed",
            "0",
            "--bootstrap",
            "0",
        ],
        capsys,
    )
    assert code == 0, err
    assert "align fit --live: pairing char-anchors (the tokenizers differ in" in err
    live = xr.open_zarr(out)
    _compare(live, *_cross_rows(built))
    for name in ("relative_error", "norm_error", "r2"):
        np.testing.assert_allclose(
            live[name].values, cross_fit[name].values, rtol=1e-10, atol=1e-11, err_msg=name
        )
    assert live.attrs["pairing"] == cross_fit.attrs["pairing"] and live.attrs["route"] == "live"


def test_result_records_the_pairing(built, cross_fit):
    """attrs["pairing"]: the mode, and per side the fraction of that side's tokens with a
    non-empty span that are paired anchors over the whole corpus (first tokens included)."""
    # (no token of this corpus has an empty span in either tokenization, so "tokens with a
    # non-empty span" are also all the tokens, and all those with any span)
    p = cross_fit.attrs["pairing"]
    assert isinstance(p, dict)
    assert p["mode"] == "char-anchors"
    pairs = ref.anchored_pairs(built["toks"]["bpe"], built["toks"]["sp"])
    for side in ("source", "target"):
        assert isinstance(p[side], dict) and isinstance(p[side]["coverage"], float), side
        want = len(pairs["doc"]) / pairs["spanned"][side]
        assert abs(p[side]["coverage"] - want) <= 1e-12, (side, p[side]["coverage"], want)
