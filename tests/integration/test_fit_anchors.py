"""`align fit --pairing char-anchors` on stores written from chosen arrays: the anchor rule on
hand-built spans, the fit's scores against a plain loop over the spans plus scikit-learn, the
reduction to token pairing for one tokenizer, windows cut at other characters (anchors left
out and counted, nothing refused), and every refusal (text coverage under the floor, another
text, another corpus, packed windows, token pairing of two tokenizers)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr

from align.fitting import Execution, FitSpec
from tests.helpers.assertions import one_line_error
from tests.helpers.fixtures_fit import TOKENIZER, token_table
from tests.helpers.references import chosen_alpha, heldout_scores, ridge_val_sse, sklearn_ridge

OTHER = {**TOKENIZER, "vocab": "v1", "merges": "m1", "all": "all1"}
ALPHAS = [1e-4, 1e-2, 1.0]


SYNC = Execution(scheduler="synchronous")


def _fit(source, target, output, spec=None, run=SYNC, hooks=None, log=None):
    """align.fit in this process (`SYNC`, unless `run` says otherwise), its log discarded
    unless `log` takes it."""
    import align

    log = log or (lambda m: None)
    return align.fit(source, target, output, spec, run, hooks=hooks, log=log)


# -- the two tokenizations: segmentations of the same documents' characters ---------------------


def _segment(words: list, rng, p_cut: float, split_chars=()) -> list:
    """Spans [(s, e)] of a document made of `words` (their (start, end)): each word is one
    token, or with probability `p_cut` two cut at a random inside character; a character of
    `split_chars` is emitted as two byte pieces sharing its span."""
    spans = []
    for s, e in words:
        cuts = [s, e]
        if e - s > 1 and rng.random() < p_cut:
            cuts = [s, int(rng.integers(s + 1, e)), e]
        for a, b in zip(cuts[:-1], cuts[1:]):
            inside = [c for c in split_chars if a <= c < b]
            if inside:
                c = inside[0]
                spans += (
                    ([(a, c)] if c > a else [])
                    + [(c, c + 1), (c, c + 1)]
                    + ([(c + 1, b)] if b > c + 1 else [])
                )
            else:
                spans.append((a, b))
    return spans


def _words(n_chars: int, rng) -> list:
    """Word spans covering 0..n_chars, 2 to 7 characters each."""
    out, s = [], 0
    while s < n_chars:
        e = min(n_chars, s + int(rng.integers(2, 8)))
        out.append((s, e))
        s = e
    return out


def _tables(n_docs=24, seed=0, max_length=None, gap=False):
    """Two token tables of one text (documents of 60–140 characters in words of 2–7) cut by
    two "tokenizers" (the first cuts 60% of the words in two and splits two multi-byte
    characters per document into byte pieces, the second cuts 30%), each with a spanless
    first token (BOS) per sequence."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(60, 140, n_docs)
    words = [_words(int(n), rng) for n in lengths]
    tabs = []
    for p_cut, split in ((0.6, True), (0.3, False)):
        r = np.random.default_rng(seed + int(p_cut * 10))
        cols = {k: [] for k in ("doc", "seq", "pos", "char_start", "char_end")}
        seq = 0
        for d, n in enumerate(lengths):
            spans = _segment(words[d], r, p_cut, split_chars=(10, 31) if split else ())
            if gap and not split:  # trimmed offsets: a token's span ends before the next one starts
                spans = [
                    (s, e - 1) if e - s > 1 and k % 3 == 0 else (s, e)
                    for k, (s, e) in enumerate(spans)
                ]
            windows = (
                [spans]
                if max_length is None
                else [spans[i : i + max_length] for i in range(0, len(spans), max_length)]
            )
            for w in windows:
                for p, (s, e) in enumerate([(-1, -1)] + w):
                    cols["doc"].append(d)
                    cols["seq"].append(seq)
                    cols["pos"].append(p)
                    cols["char_start"].append(s)
                    cols["char_end"].append(e)
                seq += 1
        t = {k: np.asarray(v, np.int64) for k, v in cols.items()}
        t["pos"] = t["pos"].astype(np.int32)
        t["token_id"] = r.integers(0, 300, len(t["doc"])).astype(np.int32)
        tabs.append(t)
    return tabs


def _reference_anchors(t) -> dict:
    """{(doc, c): token} of one tokenization, by a plain loop: a token with a non-empty span
    whose document's next spanned token starts at or after its end."""
    out = {}
    n = len(t["doc"])
    for i in range(n):
        s, e, d = t["char_start"][i], t["char_end"][i], t["doc"][i]
        if s < 0 or e <= s:
            continue
        nxt = next(
            (k for k in range(i + 1, n) if t["char_start"][k] >= 0 or t["doc"][k] != d), None
        )
        if nxt is not None and t["doc"][nxt] == d and t["char_start"][nxt] < e:
            continue
        out[(int(d), int(e))] = i
    return out


def _residuals(tabs, n_boundaries=2, d_s=6, d_t=5, seed=1):
    """Source and target residuals: at a token ending at character c of document d, a
    function of (d, c) (the target's an affine map of the source's plus noise, so a right
    pairing fits well and a wrong one does not); spanless tokens random."""
    rng = np.random.default_rng(seed)
    feats = {}

    def feature(d, c):
        if (d, c) not in feats:
            feats[(d, c)] = rng.normal(size=d_s)
        return feats[(d, c)]

    W = rng.normal(size=(n_boundaries, n_boundaries, d_s, d_t))
    out = []
    for side, t in enumerate(tabs):
        d_model = d_s if side == 0 else d_t
        R = rng.normal(size=(n_boundaries, len(t["doc"]), d_model))
        for i in range(len(t["doc"])):
            if t["char_start"][i] >= 0:
                f = feature(int(t["doc"][i]), int(t["char_end"][i]))
                for b in range(n_boundaries):
                    R[b, i] = (
                        f * (b + 1) if side == 0 else f @ W[0, b] + 0.05 * rng.normal(size=d_t)
                    )
        out.append(R)
    return out


@pytest.fixture(scope="module")
def anchored_pair(synthetic):
    tabs = _tables()
    X, Y = _residuals(tabs)
    S = synthetic(X, tabs[0], n_layers=1, model="src")
    T = synthetic(Y, tabs[1], tokenizer=OTHER, n_layers=1, model="tgt")
    return tabs, X, Y, S, T


# -- the rule ---------------------------------------------------------------------------------


def test_anchor_rule_on_hand_built_spans():
    from align.fitting.pairing.anchors import TokenPlaces, anchor_pairs, anchor_tokens

    # document 0: BOS, "ab" (0,2), byte pieces of one character (2,3) (2,3), "c" (3,4), zero-width (4,4), "d " (4,6)
    # document 1: BOS, (0,3), trimmed span (3,4) whose next starts at 5, (5,7)
    s = [-1, 0, 2, 2, 3, 4, 4, -1, 0, 3, 5]
    e = [-1, 2, 3, 3, 4, 4, 6, -1, 3, 4, 7]
    doc = [0] * 7 + [1] * 4
    t = TokenPlaces(
        np.array(doc),
        np.array([0] * 7 + [1] * 4),
        np.array(list(range(7)) + list(range(4))),
        np.array(s),
        np.array(e),
    )
    np.testing.assert_array_equal(
        anchor_tokens(t), [1, 3, 4, 6, 8, 9, 10]
    )  # not the first byte piece, not zero-width
    # another tokenization of the same text: "a" (0,1), "bc" (1,4)... ends at 1, 4, 6 and 3, 7
    u = TokenPlaces(
        np.array([0, 0, 0, 0, 1, 1]),
        np.array([0, 0, 0, 0, 1, 1]),
        np.array([0, 1, 2, 3, 0, 1]),
        np.array([-1, 0, 1, 4, 0, 3]),
        np.array([-1, 1, 4, 6, 3, 7]),
    )
    a = anchor_pairs(t, u)
    np.testing.assert_array_equal(a.source, [4, 6, 8, 10])  # (0, 4), (0, 6), (1, 3), (1, 7)
    np.testing.assert_array_equal(a.target, [2, 3, 4, 5])
    assert a.coverage == {"source": 4 / 9, "target": 4 / 5}
    np.testing.assert_allclose(a.doc_coverage["source"], [2 / 6, 2 / 3])


def test_one_tokenization_anchors_every_token_with_a_span():
    from align.fitting.pairing.anchors import TokenPlaces, anchor_pairs

    t = token_table(5, 50, seq_len=64)
    n = len(t["doc"])
    starts = np.concatenate([np.arange(k) * 2 for k in np.bincount(t["doc"])])
    cs, ce = starts.astype(np.int64), starts + 2
    cs[t["pos"] == 0] = -1  # a BOS per document
    ce[t["pos"] == 0] = -1
    places = TokenPlaces(t["doc"], t["seq"], t["pos"], cs, ce)
    a = anchor_pairs(places, places)
    spanned = np.flatnonzero(cs >= 0)
    np.testing.assert_array_equal(a.source, spanned)
    np.testing.assert_array_equal(a.target, spanned)
    assert a.coverage == {"source": 1.0, "target": 1.0} and n - len(spanned) == 5


# -- the fit against the reference --------------------------------------------------------------


def test_scores_equal_a_plain_loop_and_sklearn(anchored_pair):
    tabs, X, Y, S, T = anchored_pair
    ds = _fit(S, T, None, FitSpec(alphas=ALPHAS, pairing="char-anchors", bootstrap=0)).dataset
    src, tgt = _reference_anchors(tabs[0]), _reference_anchors(tabs[1])
    common = sorted(set(src) & set(tgt))
    si = np.array([src[k] for k in common])
    ti = np.array([tgt[k] for k in common])
    keep = (tabs[0]["pos"][si] != 0) & (tabs[1]["pos"][ti] != 0)
    si, ti = si[keep], ti[keep]
    assert (
        0.3 < len(common) / (tabs[0]["char_start"] >= 0).sum() < 0.95
    )  # a partial overlap of the two cuts
    assert any(
        tabs[0]["char_start"][k] == tabs[0]["char_start"][k + 1] for k in range(len(si) - 1)
    )  # byte pieces
    doc = tabs[0]["doc"][si]
    split = ds.attrs["split"]
    fit_d, val_d, test_d = (
        np.isin(doc, split[k]) for k in ("fit_docs", "validation_docs", "heldout_docs")
    )
    assert ds.attrs["options"]["pairing"] == "char-anchors"
    assert ds.attrs["options"]["n_tokens"] == {
        "fit": int(fit_d.sum()),
        "validation": int(val_d.sum()),
        "heldout": int(test_d.sum()),
    }
    for i in range(2):
        for j in range(2):
            x, y = (
                np.asarray(a, np.float32).astype(np.float64) for a in (X[i][si], Y[j][ti])
            )  # as stored
            k = chosen_alpha(
                ridge_val_sse(x[fit_d], y[fit_d], x[val_d], y[val_d], ALPHAS), y[fit_d], y[val_d]
            )
            train = fit_d | val_d
            xc = x[train] - x[train].mean(0)
            alpha = ALPHAS[k] * np.trace(xc.T @ xc) / xc.shape[1]
            ref = heldout_scores(
                sklearn_ridge(x[train], y[train], alpha).predict(x[test_d]), y[test_d]
            )
            cell = ds.sel(source_boundary=i, target_boundary=j)
            assert float(cell.alpha_rel) == ALPHAS[k]
            for name, v in ref.items():
                np.testing.assert_allclose(
                    float(cell[name]), v, rtol=1e-9, atol=1e-12, err_msg=f"{name} {i}->{j}"
                )
    rec = ds.attrs["pairing"]
    n_src = (tabs[0]["char_start"] >= 0).sum()
    assert rec["mode"] == "char-anchors" and rec["pairs"] == len(common)
    assert rec["source"]["coverage"] == len(common) / n_src
    assert rec["target"]["coverage"] == len(common) / (tabs[1]["char_start"] >= 0).sum()
    assert len(rec["source"]["document_coverage"]) == len(rec["documents"]) == 24


def test_right_pairing_fits_and_token_order_does_not(anchored_pair):
    """Known answer: the target is an affine map of the source at the anchors (error ≈ noise);
    pairing the same stores' tokens by index instead (what a fit that ignored the text would
    do) maps nothing."""
    tabs, X, Y, S, T = anchored_pair
    ds = _fit(S, T, None, FitSpec(alphas=ALPHAS, pairing="char-anchors", bootstrap=0)).dataset
    assert float(ds.relative_error.sel(source_boundary=1, target_boundary=0)) < 0.1
    n = min(len(tabs[0]["doc"]), len(tabs[1]["doc"]))
    x, y = X[1][:n], Y[0][:n]
    pred = sklearn_ridge(x[: n // 2], y[: n // 2], 1.0).predict(x[n // 2 :])
    assert heldout_scores(pred, y[n // 2 :])["relative_error"] > 0.5


def test_auto_pairs_anchors_for_two_tokenizers_and_says_so(anchored_pair, cli, tmp_path):
    *_, S, T = anchored_pair
    code, out, err = cli(
        "fit", S, T, "-o", tmp_path / "r.zarr", "--scheduler", "synchronous", "--bootstrap", "0"
    )
    assert code == 0, err
    assert "pairing char-anchors (the tokenizers differ in vocabulary, merges)" in err
    assert "anchored pairs cover source" in err and "lowest: document" in err
    assert xr.open_zarr(tmp_path / "r.zarr").attrs["pairing"]["mode"] == "char-anchors"


def test_one_tokenizer_char_anchors_equal_tokens_bit_for_bit(fit_pair):
    S, T = fit_pair
    a = _fit(S, T, None, FitSpec(alphas=ALPHAS, bootstrap=0, pairing="tokens")).dataset
    b = _fit(S, T, None, FitSpec(alphas=ALPHAS, bootstrap=0, pairing="char-anchors")).dataset
    for name in ("relative_error", "norm_error", "r2", "alpha"):
        np.testing.assert_array_equal(a[name].values, b[name].values)
    assert b.attrs["pairing"] == {"mode": "tokens"}


def test_control_shuffle_pairs_anchors_of_other_documents(anchored_pair):
    from align.fitting.pairing.anchors import TokenPlaces, anchor_pairs, shuffled
    from align.fitting.planning.split import shuffle_partners

    tabs, X, Y, S, T = anchored_pair
    places = [
        TokenPlaces(*(np.asarray(t[k]) for k in ("doc", "seq", "pos", "char_start", "char_end")))
        for t in tabs
    ]
    a = anchor_pairs(*places)
    sh = shuffled(a, places[0], 0, shuffle_partners)
    assert len(sh.source) > 0.8 * len(a.source)
    assert np.all(tabs[0]["doc"][sh.source] != tabs[1]["doc"][sh.target])
    ds = _fit(
        S, T, None, FitSpec(alphas=ALPHAS, pairing="char-anchors", bootstrap=0, control="shuffle")
    ).dataset
    assert (
        float(ds.relative_error.sel(source_boundary=1, target_boundary=0)) > 0.5
    )  # nothing to map


# -- refusals -----------------------------------------------------------------------------------


def _refusal(cli, tmp_path, *args):
    code, out, err = cli("fit", *args, "-o", str(tmp_path / "r.zarr"), "--scheduler", "synchronous")
    line = one_line_error(code, err, progress=("align fit: ",))
    assert not os.path.exists(tmp_path / "r.zarr")
    return line


def test_coverage_below_the_floor_is_refused_unless_lowered(synthetic, cli, tmp_path):
    tabs = _tables(n_docs=12)
    shifted = dict(
        tabs[1],
        char_start=np.where(tabs[1]["char_start"] >= 0, tabs[1]["char_start"] + 1000, -1),
        char_end=np.where(tabs[1]["char_end"] >= 0, tabs[1]["char_end"] + 1000, -1),
    )
    X, Y = _residuals(tabs)
    S = synthetic(X, tabs[0], n_layers=1)
    T = synthetic(Y, shifted, tokenizer=OTHER, n_layers=1)
    line = _refusal(cli, tmp_path, S, T)
    assert (
        "only 0.0% of the text of source" in line
        and "--min-coverage 0.9" in line
        and "--min-coverage 0 " in line
        and "do not cover the same text" in line
    )
    half = dict(tabs[1])  # half of the documents shifted: about half of the text covered
    moved = np.isin(half["doc"], np.arange(6)) & (half["char_start"] >= 0)
    half["char_start"] = np.where(moved, half["char_start"] + 1000, half["char_start"])
    half["char_end"] = np.where(moved, half["char_end"] + 1000, half["char_end"])
    T2 = synthetic(Y, half, tokenizer=OTHER, n_layers=1)
    assert "of the text of source" in _refusal(cli, tmp_path, S, T2)
    code, _, err = cli(
        "fit",
        S,
        T2,
        "-o",
        tmp_path / "ok.zarr",
        "--scheduler",
        "synchronous",
        "--min-coverage",
        "0",
        "--bootstrap",
        "0",
    )
    assert code == 0, err


def test_another_text_of_the_same_documents_is_refused(synthetic, cli, tmp_path):
    """Two texts of 24 documents of 60–140 characters each, cut alike (no corpus hash: the
    anchors alone decide): most documents end at other characters, so little of either text
    lies before a shared anchor; the refusal names the floor and the token counts, which are
    not what it refuses on."""
    tabs, other = _tables(seed=0), _tables(seed=7)
    X, _ = _residuals(tabs)
    _, Y = _residuals(other)
    S = synthetic(X, tabs[0], n_layers=1)
    T = synthetic(Y, other[1], tokenizer=OTHER, n_layers=1)
    line = _refusal(cli, tmp_path, S, T)
    assert line.startswith("align: error: only ") and "% of the text of source" in line
    assert "floor --min-coverage 0.9; lowest: document " in line
    n_s, n_t = ((t["char_start"] >= 0).sum() for t in (tabs[0], other[1]))
    assert f"not their token counts, {n_s:,} against {n_t:,}, which bound only how many" in line


def test_windows_cut_at_other_characters_keep_the_shared_contexts(synthetic, cli, tmp_path):
    """One side holds every document whole, the other cuts it into windows of 20 tokens: the
    anchors of the first windows and of later windows that start at one character on both
    sides pair (none here: the whole side has no later window), the rest are left out and
    counted per document, as tests/helpers/anchors_reference.py's loop counts them; the fit
    is not refused."""
    from align.fitting.pairing.anchors import TokenPlaces, anchor_pairs
    from tests.helpers.anchors_reference import windowed_pairs

    tabs = _tables(n_docs=10)
    cut = _tables(n_docs=10, max_length=20)
    want, left = windowed_pairs(tabs[0], cut[1])
    assert len(left) >= 6 and sum(left.values()) > 30
    got = anchor_pairs(
        *(
            TokenPlaces(
                *(np.asarray(t[k]) for k in ("doc", "seq", "pos", "char_start", "char_end"))
            )
            for t in (tabs[0], cut[1])
        )
    )
    assert dict(zip(got.source.tolist(), got.target.tolist())) == want
    assert got.left_out == left
    X, _ = _residuals(tabs)
    _, Y = _residuals(cut)
    S = synthetic(X, tabs[0], n_layers=1)
    T = synthetic(Y, cut[1], tokenizer=OTHER, n_layers=1)
    out = tmp_path / "r.zarr"
    code, _, err = cli("fit", S, T, "-o", out, "--scheduler", "synchronous", "--bootstrap", "0")
    assert code == 0, err
    top = sorted(left.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    assert (
        f"align fit: {sum(left.values()):,} anchors left out in {len(left)} document(s) whose windows "
        "start at other characters in the two tokenizations ("
        + ", ".join(f"document {d}: {k}" for d, k in top)
        + f", {len(left) - 5} more): they read the text in other contexts; a --max-length that "
        "holds every document keeps them"
    ) in err
    rec = xr.open_zarr(out).attrs["pairing"]
    assert rec["pairs"] == len(want) and rec["windows"]["left_out"] == [
        left[d] for d in sorted(left)
    ]


def test_another_corpus_and_packed_windows_are_refused(anchored_pair, synthetic, cli, tmp_path):
    tabs, X, Y, _, _ = anchored_pair
    one = {"hash": "a" * 64, "source": "corpus.txt", "pack": None}
    S = synthetic(X, tabs[0], n_layers=1, provenance={"corpus": one})
    T = synthetic(
        Y,
        tabs[1],
        tokenizer=OTHER,
        n_layers=1,
        provenance={"corpus": {**one, "hash": "b" * 64, "source": "other.txt"}},
    )
    line = _refusal(cli, tmp_path, S, T)
    assert "different corpora (corpus hash aaaaaaaaaaaa against bbbbbbbbbbbb" in line
    assert "source 'corpus.txt' in source, 'other.txt' in target" in line
    packed = {**one, "pack": "<|endoftext|>"}
    S = synthetic(X, tabs[0], n_layers=1, provenance={"corpus": packed})
    T = synthetic(Y, tabs[1], tokenizer=OTHER, n_layers=1, provenance={"corpus": packed})
    assert (
        "packs documents into windows (extracted with `align extract --pack '<|endoftext|>'`)"
        in _refusal(cli, tmp_path, S, T)
    )


def test_token_pairing_of_two_tokenizers_is_refused(anchored_pair, cli, tmp_path):
    *_, S, T = anchored_pair
    line = _refusal(cli, tmp_path, S, T, "--pairing", "tokens")
    assert "differ in vocabulary, merges: --pairing tokens needs one token stream" in line
    assert "--pairing char-anchors" in line


def test_bootstrap_and_convergence_run_on_anchored_rows_unchanged(anchored_pair):
    *_, S, T = anchored_pair
    plain = _fit(S, T, None, FitSpec(alphas=ALPHAS, pairing="char-anchors", bootstrap=0)).dataset
    more = _fit(
        S, T, None, FitSpec(alphas=ALPHAS, pairing="char-anchors", bootstrap=200, convergence=True)
    ).dataset
    # the same rows, the same fit (--convergence sums them in six parts: rounding only)
    np.testing.assert_allclose(more.relative_error.values, plain.relative_error.values, rtol=1e-12)
    assert more.attrs["summary"]["bootstrap"]["resamples"] == 200
    assert (
        "relative_error_by_fraction" in more
        and np.isfinite(more.relative_error_by_fraction.values).all()
    )
