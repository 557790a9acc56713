"""Anchors across tokenizers that cut long documents into windows at other characters, against a
reference that pairs them itself (tests/helpers/anchors_reference.py, which never imports align).

Three tokenizers of three conventions are trained here on one corpus: a byte-level BPE (GPT-2's
"Ġthe"), a SentencePiece-style BPE with byte fallback ("▁the", leading spaces) and a BPE whose
words keep the whitespace after them ("the▁", trailing spaces). The corpus has six long
documents (five to seven of the reference's lines joined, 300–800 characters) and six short
ones; at `max_length` 48 each tokenizer cuts the long ones into windows at its own characters.
Every pair of the three is extracted and fitted by default (pairing auto, the default
`min_coverage`): the rows are the reference's (anchors at one character whose two contexts
start at one character), the anchors left out per document are the reference's, the scores
equal scikit-learn on those rows (1e-9), and `--live` gives the store route's result
(tests/integration/test_fit_live.py's tolerances)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import zarr

from align.corpus import CorpusSpec
from align.extraction import ExtractOptions
from align.fitting import Execution, FitSpec
from align.models import ModelSpec
from tests.helpers import anchors_reference as ref
from tests.integration.test_fit_live import assert_same_result

ALPHAS = [1e-3, 1e-1, 10.0]
MAX_LENGTH, BATCH = 48, 4
KINDS = (  # tokenizer, family, layers, width
    (ref.byte_level_bpe, "qwen2", 2, 32),
    (ref.metaspace_byte_fallback, "llama", 2, 32),
    (ref.trailing_space_bpe, "qwen2", 3, 48),
)


def _documents() -> list:
    lines = ref.documents(48, seed=3)
    long = [" ".join(lines[k : k + n]) for k, n in zip((0, 5, 11, 18, 24, 31), (5, 6, 7, 6, 5, 7))]
    return [doc for pair in zip(long, lines[38:44]) for doc in pair]  # long and short in turn


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    import align

    root = tmp_path_factory.mktemp("windows")
    docs = _documents()
    corpus = root / "corpus.txt"
    corpus.write_text(ref.corpus_text(docs), encoding="utf-8")
    folders, stores = [], []
    for k, (make, family, layers, width) in enumerate(KINDS):
        folder = ref.save_checkpoint(
            root / f"model-{k}", make(docs), family, layers=layers, width=width, seed=k
        )
        store = str(root / f"store-{k}.zarr")
        align.extract(
            ModelSpec(folder, dtype="float32"),
            CorpusSpec(str(corpus), max_length=MAX_LENGTH),
            store,
            ExtractOptions(batch_size=BATCH),
            log=lambda m: None,
        )
        folders.append(folder)
        stores.append(store)
    return docs, str(corpus), folders, stores


def _columns(path) -> dict:
    g = zarr.open_group(path, mode="r")
    return {k: g[k][:] for k in ("doc", "seq", "pos", "char_start", "char_end")}


def _fit(S, T, lines):
    import align

    return align.fit(
        S,
        T,
        None,
        FitSpec(alphas=ALPHAS, bootstrap=0),
        Execution(scheduler="synchronous"),
        log=lines.append,
    ).dataset


@pytest.mark.parametrize("a,b", list(itertools.combinations(range(3), 2)))
def test_windowed_documents_keep_the_references_anchors_and_fit_by_default(three, a, b):
    docs, _, _, stores = three
    cs, ct = _columns(stores[a]), _columns(stores[b])
    # the corpus exercises the rule: long documents cut into windows at other characters
    n_windows = [np.bincount(np.unique(np.c_[c["doc"], c["seq"]], axis=0)[:, 0]) for c in (cs, ct)]
    assert all((w[::2] > 1).all() for w in n_windows) and not np.array_equal(*n_windows)
    pairs, left = ref.windowed_pairs(cs, ct)
    assert len(left) >= 4 and sum(left.values()) > 20  # anchors in later windows at other cuts
    lines = []
    ds = _fit(stores[a], stores[b], lines)  # by default: no refusal
    rec = ds.attrs["pairing"]
    assert rec["mode"] == "char-anchors" and rec["pairs"] == len(pairs)
    assert rec["windows"] == {
        "anchors_left_out": sum(left.values()),
        "documents": sorted(left),
        "left_out": [left[d] for d in sorted(left)],
    }
    assert (
        f"{sum(left.values()):,} anchors left out in {len(left)} document(s) whose windows start "
        "at other characters" in "\n".join(lines)
    )
    assert min(rec["source"]["text_coverage"], rec["target"]["text_coverage"]) >= 0.9
    # the trailing-space convention is named for the third tokenizer only
    cover = next(x for x in lines if "anchored pairs cover" in x)
    assert ("the target ends" in cover) is (b == 2) and "the source ends" not in cover
    # the rows: the reference's pairs but those with a token at position 0, each document's
    # rows in the part the result's split gives it
    si = np.array(sorted(pairs))
    ti = np.array([pairs[k] for k in si])
    keep = (cs["pos"][si] != 0) & (ct["pos"][ti] != 0)
    si, ti = si[keep], ti[keep]
    split = ds.attrs["split"]
    parts = [
        np.isin(cs["doc"][si], split[k]) for k in ("fit_docs", "validation_docs", "heldout_docs")
    ]
    assert ds.attrs["options"]["n_tokens"] == {
        "fit": int(parts[0].sum()),
        "validation": int(parts[1].sum()),
        "heldout": int(parts[2].sum()),
    }
    X = np.asarray(zarr.open_group(stores[a], mode="r")["resid"][:], np.float64)[:, si]
    Y = np.asarray(zarr.open_group(stores[b], mode="r")["resid"][:], np.float64)[:, ti]
    want = ref.reference_cells(X, Y, cs["doc"][si], split, ALPHAS)
    for (i, j), cell in want.items():
        got = ds.sel(source_boundary=i, target_boundary=j)
        assert float(got.alpha_rel) == cell["alpha_rel"], (i, j)
        for name in ("relative_error", "norm_error", "r2"):
            np.testing.assert_allclose(
                float(got[name]), cell[name], rtol=1e-9, atol=1e-12, err_msg=f"{name} ({i}, {j})"
            )


def test_the_trailing_space_convention_is_named_and_fits(three):
    *_, stores = three
    lines = []
    ds = _fit(stores[1], stores[2], lines)
    rec = ds.attrs["pairing"]
    assert rec["target"]["coverage"] < 0.5  # few tokens pair ...
    assert rec["target"]["text_coverage"] >= 0.9  # ... but they cover the text
    line = next(x for x in lines if "anchored pairs cover" in x)
    assert (
        "the target ends" in line and "a trailing-space convention, 'the▁' against '▁the'" in line
    )
    assert "(at most " in line and " with these token counts)" in line


def test_live_gives_the_store_routes_rows_and_result(three):
    from align import corpus, models
    from align.fitting.live_route import pipeline as live

    _, corpus_file, folders, stores = three
    want = _fit(stores[0], stores[2], [])
    job = live.LiveJob(
        models.ModelSpec(folders[0], dtype="float32"),
        models.ModelSpec(folders[2], dtype="float32"),
        corpus.CorpusSpec(corpus_file, max_length=MAX_LENGTH),
        BATCH,
    )
    lines = []
    got = live.fit_live(job, None, FitSpec(alphas=ALPHAS, bootstrap=0), log=lines.append).dataset
    assert got.attrs["pairing"] == want.attrs["pairing"]
    assert got.attrs["options"]["n_tokens"] == want.attrs["options"]["n_tokens"]
    assert_same_result(want, got)
    assert any("anchors left out in" in x for x in lines)


def test_extract_dry_run_says_the_corpus_will_be_windowed(three, tmp_path):
    """The dry run counts the documents longer than `max_length` and the longest, as the
    reference tokenizes them (tokenizer.json read by `tokenizers`; these checkpoints add no
    special token), and says what keeps two tokenizers' windows together."""
    import align

    docs, corpus_file, folders, _ = three
    lengths = [len(ids) for ids, _ in ref.tokenize(folders[1], docs)]
    lines = []
    rep = align.extract(
        ModelSpec(folders[1], dtype="float32"),
        CorpusSpec(corpus_file, max_length=MAX_LENGTH),
        str(tmp_path / "dry.zarr"),
        ExtractOptions(batch_size=BATCH, dry_run=True),
        log=lines.append,
    )
    n_long = sum(n > MAX_LENGTH for n in lengths)
    assert n_long >= 6  # the six long documents at least
    assert (
        f"  windows    {n_long} document(s) longer than `max_length` {MAX_LENGTH} are cut into windows "
        f"(the longest: {max(lengths):,} tokens with this tokenizer); another tokenizer cuts them at "
        "other characters, and a fit across the two leaves out the anchors after the first cut: to "
        "keep two tokenizers' windows together, extract both with a `max_length` above the longest "
        "document of either, or with `overflow` truncate (first windows only)"
    ) in lines
    assert rep.dry_run["windowed_documents"] == n_long
    assert rep.dry_run["longest_document"] == max(lengths)
