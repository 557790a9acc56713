"""`align fit --live` on two models whose tokenizers differ: the anchors paired on the fly give the
store route's result (`align extract` × 2 + `align fit`, pairing char-anchors), and the rows it
sums are the stores' rows at the anchored pairs, bit for bit.

The two zoo models are Qwen2 checkpoints with two BPE vocabularies trained on the same text
(300 and 280 tokens), so they cut most words at other characters. `--overflow truncate` reads
every document from its start in one window on both sides (the default `split` cuts the long
documents into windows at other characters, whose anchors in other contexts both routes leave
out alike: tests/integration/test_anchor_windows.py, tests/cli/test_fit_live_cli.py).
Batches of 2 sequences make grouping windows of 8 sequences: the 12 documents fall in two
windows, and within each the two models group their sequences into other batches (their
lengths differ), which is what the on-the-fly pairing has to meet.

Tolerances are tests/integration/test_fit_live.py's (rtol 1e-10, atol 1e-11): the same float64
rows summed in another order. The grid is fixed at α_rel ≥ 1e-4: with `--alphas auto` the
pair of boundary 0 to boundary 0 (each a function of its own token alone) picks α_rel 1e-9,
where the solve is so ill conditioned that the store route itself moves by 9.3e-9 (absolute,
of an error of 0.041) between two task sizes (measured here); on that grid the live result is
checked to lie within ten times that spread of the store route's. The rows themselves are
compared exactly (the stores are read with zarr, the pairs found by the plain loop of
tests/helpers/anchors_reference.py over the stores' spans)."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from align.fitting import Execution, FitSpec
from align.fitting.fit_options import FitHooks
from tests.helpers import anchors_reference as ref
from tests.integration.test_fit_live import (
    ATOL,
    RTOL,
    assert_same_result,
    budget_of_two_of_five,
    store_fit,
)

OTHER = {"num_hidden_layers": 4, "hidden_size": 96, "vocab_size": 280}
CORPUS = dict(max_length=64, batch_size=2, overflow="truncate")
ALPHAS = [1e-4, 1e-2, 1.0]
CASES = [  # compute dtype, include the first token, blocked (two target boundaries per pass, held-out rows forwarded
    # again), --convergence
    ("float32", False, False, True),
    ("bfloat16", True, True, False),
]


def job_of(zoo, corpus_file, dtype):
    from align import corpus, models
    from align.fitting.live_route import pipeline as live

    return live.LiveJob(
        models.ModelSpec(zoo("qwen2"), dtype=dtype),
        models.ModelSpec(zoo("qwen2", **OTHER), dtype=dtype),
        corpus.CorpusSpec(
            corpus_file, max_length=CORPUS["max_length"], overflow=CORPUS["overflow"]
        ),
        CORPUS["batch_size"],
    )


@pytest.mark.parametrize("dtype,first,blocked,convergence", CASES)
def test_live_equals_the_store_route_across_tokenizers(
    zoo, extracted, corpus_file, dtype, first, blocked, convergence
):
    from align.fitting.live_route import pipeline as live

    S = extracted("qwen2", dtype=dtype, **CORPUS)
    T = extracted("qwen2", model_overrides=OTHER, dtype=dtype, **CORPUS)
    want = store_fit(S, T, include_first_token=first, alphas=ALPHAS, convergence=convergence)
    assert want.attrs["pairing"]["mode"] == "char-anchors"
    job = job_of(zoo, corpus_file, dtype)
    if blocked:  # the budget counts the window's kept target rows
        from align.fitting.fit_options import request

        assert (
            live.shape_of(
                live.prepare(job, request(FitSpec(include_first_token=first)))
            ).window_rows
            > 0
        )
    lines = []
    room = budget_of_two_of_five(job, include_first_token=first) if blocked else None
    rep = live.fit_live(
        job,
        None,
        FitSpec(include_first_token=first, alphas=ALPHAS, convergence=convergence),
        hooks=FitHooks(worker_budget=room),
        log=lines.append,
    )
    assert rep.plan["passes"] == (3 if blocked else 1), rep.plan["blocks"]
    assert rep.plan["keep_heldout"] is not blocked
    assert "window rows" in rep.plan["bytes"]
    got = rep.dataset
    assert_same_result(want, got)
    # every array beside the scores too: the document bootstrap's bounds and per-document sums, and
    # with --convergence the fits of 1/4 and 1/2 of the training documents
    assert ("relative_error_by_fraction" in got) is convergence
    for name, v in want.data_vars.items():
        if v.dtype.kind == "f" and name != "alpha_rel_by_fraction":
            np.testing.assert_allclose(
                got[name].values, v.values, rtol=RTOL, atol=ATOL, err_msg=name
            )
        else:
            np.testing.assert_array_equal(got[name].values, v.values, err_msg=name)
    assert got.attrs["pairing"] == want.attrs["pairing"]  # the same pairs, coverage and documents
    assert got.attrs["options"]["pairing"] == "char-anchors"
    assert any(
        line.startswith(
            "align fit --live: pairing char-anchors (the tokenizers differ in vocabulary"
        )
        for line in lines
    ), lines
    assert any("anchored pairs cover source" in line for line in lines), lines


def test_on_the_auto_grid_live_lies_within_the_store_routes_own_spread(zoo, extracted, corpus_file):
    """`--alphas auto`: every pair within 1e-10 but the ill-conditioned one (module docstring),
    which lies within ten times the store route's own spread over two task sizes."""
    from align.fitting.live_route import pipeline as live

    S = extracted("qwen2", dtype="float32", **CORPUS)
    T = extracted("qwen2", model_overrides=OTHER, dtype="float32", **CORPUS)
    a, b = store_fit(S, T), store_fit(S, T, Execution(scheduler="synchronous", task_tokens=256))
    got = live.fit_live(job_of(zoo, corpus_file, "float32"), None, log=lambda m: None).dataset
    np.testing.assert_array_equal(got["alpha_rel"].values, a["alpha_rel"].values)
    for name in ("relative_error", "norm_error", "r2"):
        x, y, y2 = got[name].values, a[name].values, b[name].values
        spread = np.abs(y - y2)
        assert np.all(np.abs(x - y) <= 1e-10 * np.abs(y) + 10 * spread + 1e-11), (
            name,
            np.abs(x - y).max(),
            spread.max(),
        )
        well = spread <= 1e-12 * np.abs(y)
        assert well.sum() >= well.size - 1, name  # only the boundary-0 pair is that sensitive
        np.testing.assert_allclose(x[well], y[well], rtol=1e-10, atol=1e-11, err_msg=name)


def test_live_shuffle_across_tokenizers_pairs_as_the_store_route(zoo, extracted, corpus_file):
    """`--live --control shuffle` with two tokenizers: the store route's shuffled anchors
    (each source anchor given the target token of the anchor at its ordinal in another
    document's sequence), so the same split and token counts, and scores within 1e-5
    relative of the store route's (the target's rows met other batches than its store's:
    float32's last bits); the shuffle scores worse than the real pairing at every pair past
    boundary 0."""
    from align.fitting.live_route import pipeline as live

    S = extracted("qwen2", dtype="float32", **CORPUS)
    T = extracted("qwen2", model_overrides=OTHER, dtype="float32", **CORPUS)
    want = store_fit(S, T, control="shuffle", alphas=ALPHAS)
    real = store_fit(S, T, alphas=ALPHAS)
    lines = []
    got = live.fit_live(
        job_of(zoo, corpus_file, "float32"),
        None,
        FitSpec(control="shuffle", alphas=ALPHAS),
        log=lines.append,
    ).dataset
    assert got.attrs["options"]["control"] == "shuffle" == want.attrs["options"]["control"]
    assert got.attrs["pairing"] == want.attrs["pairing"]
    assert got.attrs["split"] == want.attrs["split"]
    assert got.attrs["options"]["n_tokens"] == want.attrs["options"]["n_tokens"]
    for name in ("relative_error", "r2"):
        np.testing.assert_allclose(got[name].values, want[name].values, rtol=1e-5, err_msg=name)
    inner = dict(source_boundary=slice(1, None), target_boundary=slice(1, None))
    assert np.all(got.relative_error.sel(**inner) > real.relative_error.sel(**inner))
    assert "control shuffle (each source token paired with other documents' tokens)" in lines[-1]


def _store(path):
    g = zarr.open_group(path, mode="r")
    cols = {k: g[k][:] for k in ("doc", "pos", "char_start", "char_end")}
    return g["resid"][:].astype(np.float64), cols


def _offsets_per_doc(cols):
    """{document: [(start, end), ...]} of the tokens with a span, and their store indices."""
    out = {}
    for k in np.flatnonzero(cols["char_start"] >= 0):
        d = int(cols["doc"][k])
        out.setdefault(d, ([], []))
        out[d][0].append((int(cols["char_start"][k]), int(cols["char_end"][k])))
        out[d][1].append(int(k))
    return out


def test_rows_paired_on_the_fly_are_the_stores_rows_at_the_anchors(zoo, extracted, corpus_file):
    """Every source row the live stream yields, and the target row laid beside it, equal the two
    stores' rows at an anchored pair found by the reference loop; every such pair (neither token
    at position 0, its documents in the split) is yielded once."""
    from align.fitting.fit_options import request
    from align.fitting.live_route import passes
    from align.fitting.live_route import pipeline as live

    X, cs = _store(extracted("qwen2", dtype="float32", **CORPUS))
    Y, ct = _store(extracted("qwen2", model_overrides=OTHER, dtype="float32", **CORPUS))
    # the reference pairs, from the stores' spans by the plain loop (no align code)
    os_, ot = _offsets_per_doc(cs), _offsets_per_doc(ct)
    want = {}
    for d in sorted(set(os_) & set(ot)):
        a, b = ref.anchors(os_[d][0]), ref.anchors(ot[d][0])
        for c in set(a) & set(b):
            s, t = os_[d][1][a[c]], ot[d][1][b[c]]
            if cs["pos"][s] != 0 and ct["pos"][t] != 0:
                want[s] = t
    job = job_of(zoo, corpus_file, "float32")
    p = live.prepare(job, request())
    net = passes.load_models(job)
    bounds_s, bounds_t = list(range(X.shape[0])), list(range(Y.shape[0]))
    assert len({p.stream.window_of(b) for b in p.batches}) == 2  # two grouping windows
    seen = {}
    for b, xs, ys in passes.paired(net, p.stream, p.batches, bounds_s, bounds_t, None):
        for k, g in zip(b.flat, b.tokens):
            x = np.stack([xs[i][k].double().numpy() for i in bounds_s])
            y = np.stack([ys[j][k].double().numpy() for j in bounds_t])
            assert int(g) in want and int(g) not in seen, g
            np.testing.assert_array_equal(x, X[:, g])
            np.testing.assert_array_equal(y, Y[:, want[int(g)]], err_msg=f"source token {g}")
            seen[int(g)] = want[int(g)]
    assert seen == want  # every anchored pair once (all documents are in the split), no other row
    assert sorted(seen) == np.flatnonzero(p.split.part >= 0).tolist()


def test_packed_windows_with_tokenizers_that_differ_are_refused(zoo, corpus_file, tmp_path):
    """(`align fit --live` has no --pack; a notebook's LiveJob can hold one.)"""
    from align import corpus, models
    from align.errors import InputError
    from align.fitting.live_route import pipeline as live

    job = live.LiveJob(
        models.ModelSpec(zoo("qwen2")),
        models.ModelSpec(zoo("qwen2", **OTHER)),
        corpus.CorpusSpec(corpus_file, max_length=64, pack="<|endoftext|>"),
        2,
    )
    with pytest.raises(InputError) as e:
        live.fit_live(job, str(tmp_path / "a.zarr"), log=lambda m: None)
    assert str(e.value) == (
        "`pack` '<|endoftext|>' with tokenizers that differ: a packed window's tokens read the end of "
        "the documents before them, cut at other characters by each tokenizer, so they cannot be "
        "anchored; drop `pack`"
    )
    assert not (tmp_path / "a.zarr").exists()


def test_dry_run_times_both_models_in_their_own_batches_and_writes_nothing(
    zoo, corpus_file, tmp_path
):
    from align.fitting.live_route import pipeline as live

    lines = []
    rep = live.fit_live(
        job_of(zoo, corpus_file, "float32"),
        str(tmp_path / "a.zarr"),
        dry_run=True,
        log=lines.append,
    )
    est = rep.dry_run
    assert est["seconds"]["source forward"] > 0 and est["seconds"]["target forward"] > 0
    assert est["batch"]["target_s"] > 0 and est["seconds_estimate"] == pytest.approx(
        sum(est["seconds"].values())
    )
    assert (
        any("nothing was written" in line for line in lines) and not (tmp_path / "a.zarr").exists()
    )
