"""The bounds of every bootstrap in align: a --bootstrap below 100 or above 1,000,000 resamples
is refused in one line before any input is read; an interval whose statistic is defined in
fewer than 100 resamples is NaN with its reason; the fit's null comparisons take O(B) memory
and equal the quadratic formula exactly; the fit's memory plan holds the bootstrap's measured
peak, and a --bootstrap beyond the budget is refused naming the value and the memory.

References are plain numpy (np.percentile, explicit loops, the B x B comparison written out)
and tracemalloc's measured peaks; the floor (100) and the cap (10**6) are the documented
values, written here as numbers."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from align.fitting import FitSpec
from tests.helpers.assertions import one_line_error
from tests.helpers.fixtures_fit import token_table

LEAST, MOST = 100, 1_000_000


# -- the floor and the cap -------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, needles",
    [
        (1, ["`bootstrap` 1:", "at least 100"]),
        (99, ["`bootstrap` 99:", "at least 100"]),
        (
            MOST + 1,
            ["`bootstrap` 1000001:", "1,000,000", "15.3 MiB per prompt or document"],
        ),  # 16 bytes a draw
        (10**8, ["`bootstrap` 100000000:", "1,000,000", "1.5 GiB per prompt or document"]),
        (
            10**20,
            ["`bootstrap` 100000000000000000000:", "1,000,000", "1.4 ZiB per prompt or document"],
        ),
    ],
)
def test_resampling_and_fit_options_refuse_counts_outside_the_bounds(value, needles):
    from align.errors import InputError
    from align.fitting import FitSpec
    from align.stats.bootstrap import Resampling

    for make in (lambda: Resampling(value), lambda: FitSpec(bootstrap=value).checked()):
        with pytest.raises(InputError) as e:
            make()
        assert all(n in str(e.value) for n in needles), str(e.value)
    assert Resampling(LEAST).resamples == LEAST and Resampling(MOST).resamples == MOST
    assert FitSpec(bootstrap=0).checked().resampling is None  # 0: no bootstrap, as before


def _commands(tmp_path):
    """Every command with a --bootstrap, its inputs paths that do not exist: a refusal that
    names --bootstrap came before any model, store or result was read."""
    gone = tmp_path / "missing"
    out = str(tmp_path / "out")
    return {
        "fit": ["fit", gone / "s.zarr", gone / "t.zarr", "-o", out],
        "fit --live": ["fit", "--live", gone / "m1", gone / "m2", gone / "c.txt", "-o", out],
        "contrib": ["contrib", "--store", gone / "s.zarr", "-o", out],
        "lens": ["lens", "--store", gone / "s.zarr", "-o", out],
        "skip": ["skip", gone / "m", gone / "c.txt", "-o", out],
        "depth": ["depth", "--contrib", gone / "c", "--lens", gone / "l", "-o", out],
        "compare": ["compare", gone / "a", gone / "b"],
        "depthscore": ["depthscore", gone / "s1", gone / "s2", "--levels", "1,2", "-o", out],
    }


@pytest.mark.parametrize("value", [1, 99, 10**8, 10**20])
def test_cli_refuses_the_count_before_reading_anything(cli, tmp_path, value):
    for name, args in _commands(tmp_path).items():
        code, _, err = cli(*args, "--bootstrap", value)
        line = one_line_error(
            code, err, f"--bootstrap {value}:", "100" if value < LEAST else "1,000,000"
        )
        assert "missing" not in line, (name, line)
        assert not (tmp_path / "out").exists(), name


def test_fit_api_refuses_before_opening_stores(tmp_path):
    import align
    from align.errors import InputError

    for value in (1, 10**8):
        with pytest.raises(InputError, match=f"`bootstrap` {value}:"):
            align.fit(
                str(tmp_path / "no.zarr"),
                str(tmp_path / "none.zarr"),
                None,
                FitSpec(bootstrap=value),
                log=lambda m: None,
            )


# -- intervals need 100 defined resamples ----------------------------------------------------


def test_percentile_interval_is_nan_below_100_defined_resamples():
    from align.stats.bootstrap import percentile_interval, too_few

    rng = np.random.default_rng(0)
    s = rng.normal(size=(300, 4))
    s[LEAST - 1 :, 1] = np.nan  # 99 defined
    s[LEAST:, 2] = np.nan  # exactly 100 defined
    s[:, 3] = np.nan
    low, high = percentile_interval(s)
    for k, n in ((0, 300), (2, LEAST)):
        assert low[k] == pytest.approx(np.percentile(s[:n, k], 2.5), rel=1e-12)
        assert high[k] == pytest.approx(np.percentile(s[:n, k], 97.5), rel=1e-12)
    assert np.isnan(low[[1, 3]]).all() and np.isnan(high[[1, 3]]).all()
    np.testing.assert_array_equal(too_few(s), [False, True, False, True])
    # fewer resamples than the floor in all: no interval even where every one is defined
    low, high = percentile_interval(rng.normal(size=(LEAST - 1, 2)))
    assert np.isnan(low).all() and np.isnan(high).all()


def test_depth_line_names_the_count_of_a_rule_defined_too_rarely():
    """`align depth`'s log line: a rule defined in 1 of 1,000 resamples gets no interval and
    says so in counts (it read "[0, 0] (defined in 0% of resamples)")."""
    from align.analyses.run import depth_summary

    nan = float("nan")
    res = {
        "effective_depth": np.array([40.0, 12.0, 3.0]),
        "ratio": np.array([41 / 64, 13 / 64, 4 / 64]),
        "reasons": {"cosine": "", "kl": "", "overlap": ""},
        "effective_depth_low": np.array([38.0, 11.0, nan]),
        "effective_depth_high": np.array([42.0, 13.5, nan]),
        "defined_fraction": np.array([1.0, 0.93, 0.001]),
        "bootstrap": {"resamples": 1000},
    }
    assert depth_summary(res, 2, "overlap") == (
        "overlap 3 (ratio 0.06; defined in 1 of 1,000 resamples: no interval, "
        "fewer than the 100 one needs)"
    )
    assert (
        depth_summary(res, 1, "kl") == "kl 12 [11, 13.5] (ratio 0.20; defined in 93% of resamples)"
    )


def _reference_paths(err_b, tgt):
    """Per resample (rows of err_b (B, S, T)), the argmin target boundary >= 1 of each source
    row >= 1, by explicit loops (first on ties)."""
    out = []
    for m in err_b:
        out.append(
            [
                tgt[1 + min(range(len(tgt) - 1), key=lambda c: (m[i, 1 + c], c))]
                for i in range(1, m.shape[0])
            ]
        )
    return np.array(out)


def _summarise(err_b, err, B):
    from align import ridge
    from align.fitting.results import uncertainty
    from align.stats.bootstrap import Resampling

    S, T = err.shape
    src, tgt = list(range(S)), list(range(T))
    point = ridge.summary(err, src, tgt, S - 1, T - 1)
    return uncertainty.summarise(err_b, point, src, tgt, S - 1, T - 1, Resampling(B, 0), err)


def test_fit_summary_interval_of_a_rarely_defined_statistic_is_nan_with_its_reason():
    """Two source rows >= 1: Spearman is defined only where their argmins differ, here in
    fewer than 100 of 300 resamples: no Spearman interval, a note with the count; the mean
    depth gap's interval is the plain percentile of the loop's gaps."""
    rng = np.random.default_rng(3)
    B, S, T = 300, 3, 5
    err_b = rng.uniform(0.2, 1.0, (B, S, T))
    err_b[60:, 2] = err_b[60:, 1]  # 240 resamples with one argmin for both rows: a constant path
    err = err_b.mean(0)
    p_best, f = _summarise(err_b, err, B)
    paths = _reference_paths(err_b, list(range(T)))
    defined = int(np.sum(paths[:, 0] != paths[:, 1]))
    assert 1 <= defined < LEAST  # the case tests something
    assert np.isnan(f["spearman_low"]) and np.isnan(f["spearman_high"])
    assert f["spearman_interval_note"] == (
        f"no interval for spearman: defined in {defined} of {B} resamples, fewer "
        f"than the 100 an interval needs"
    )
    gaps = np.abs(paths / (T - 1) - np.array([1, 2]) / (S - 1)).mean(1)
    np.testing.assert_allclose(
        [f["mean_depth_gap_low"], f["mean_depth_gap_high"]],
        np.percentile(gaps, [2.5, 97.5]),
        rtol=1e-12,
    )
    for a, i in enumerate((1, 2)):
        for j in range(1, T):
            assert p_best[i, j] == pytest.approx(np.mean(paths[:, a] == j), abs=1e-15)
    assert (
        f["bootstrap"]["min_defined"] == LEAST and "fewer than 100" in f["bootstrap"]["undefined"]
    )


def test_fit_p_best_is_nan_when_the_matrix_is_defined_in_too_few_resamples():
    """A resample that drew no scored token leaves its matrix undefined: with 250 of 300 such,
    p_best, the path's probability and the summary's intervals are not computed from the 50
    others (they were: p_best = counts / 50), and the summary says why."""
    rng = np.random.default_rng(4)
    B, S, T = 300, 3, 4
    err_b = rng.uniform(0.2, 1.0, (B, S, T))
    err_b[50:, 1, 2] = np.nan
    p_best, f = _summarise(err_b, np.nanmean(err_b, 0), B)
    assert np.isnan(p_best).all()
    assert (
        f["bootstrap"]["resamples_defined"] == 50
        and "50 of 300 resamples" in f["bootstrap"]["note"]
    )
    assert "argmin_path_probability" not in f and "nulls" not in f
    assert all(
        np.isnan(f[f"{k}_{e}"])
        for k in ("spearman", "mean_depth_gap", "slope")
        for e in ("low", "high")
    )
    assert np.isfinite(f["slope"])  # the point estimate stays


# -- the null comparisons in O(B) --------------------------------------------------------------


@pytest.mark.parametrize("nx, ny, seed", [(1, 1, 0), (7, 13, 1), (300, 200, 2), (1000, 1000, 3)])
def test_null_comparison_equals_the_quadratic_formula_exactly(nx, ny, seed):
    from align.fitting.results.uncertainty import fraction_no_smaller

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, nx) / 8.0  # few values: many ties
    y = rng.integers(0, 6, ny) / 8.0
    if nx > 5:
        x[[1, 4]] = [np.nan, np.inf]
        y[[2, 3]] = [np.nan, -np.inf]
    with np.errstate(invalid="ignore"):
        want = float(np.mean(x[:, None] >= y[None, :]))
    assert fraction_no_smaller(x, y) == want


def test_summary_memory_is_linear_in_resamples():
    """20,000 resamples of a 2 x 3 matrix: the B x B comparison alone was 400 MB; the peak
    now stays under B^2 / 20 bytes and within the plan (`budget.bootstrap_bytes`)."""
    from align.fitting.planning.budget import bootstrap_bytes

    B, S, T = 20_000, 2, 3
    err_b = np.random.default_rng(5).uniform(0.2, 1.0, (B, S, T))
    err = err_b.mean(0)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        _summarise(err_b, err, B)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < B * B / 20
    assert peak <= bootstrap_bytes(B, 1, S, T, 1)["summary"]


# -- the memory plan ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "K, S, T, d_t", [(20, 3, 5, 64), (80, 2, 2, 16), (10, 9, 7, 200), (30, 2, 2, 8)]
)
def test_plan_holds_the_measured_peaks(K, S, T, d_t):
    """tracemalloc's peaks of the two stages, run as a fit runs them (`result.pair_results`,
    `result._with_bootstrap`): the plan holds each, and errs high by less than 2x."""
    from align import ridge
    from align.fitting.planning.budget import bootstrap_bytes
    from align.fitting.results import uncertainty
    from align.stats.bootstrap import Resampling

    B = 3000
    rng = np.random.default_rng(K)
    n = rng.integers(5, 50, K).astype(float)
    doc_pair = rng.uniform(0.2, 1.0, (K, S, T, 3)) * n[:, None, None, None]
    doc_target = np.stack(
        [
            np.repeat(n[:, None], T, 1),
            rng.uniform(1, 2, (K, T)) * n[:, None],
            rng.uniform(3, 5, (K, T)) * n[:, None],
        ],
        -1,
    )
    centred = [rng.normal(size=(K, d_t)) for _ in range(T)]
    err = doc_pair[..., 0].sum(0) / n.sum()
    src, tgt = list(range(S)), list(range(T))
    point = ridge.summary(err, src, tgt, max(S - 1, 1), max(T - 1, 1))
    res = Resampling(B, 0)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        w = uncertainty.weights(K, res)
        cc = np.stack([uncertainty.centred_square(c, w) for c in centred], axis=1)
        passes = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.reset_peak()
        boot = uncertainty.resampled_scores(doc_pair, doc_target, cc, w)
        for v in boot.values():
            uncertainty.interval(v)
        uncertainty.summarise(
            boot["relative_error"], point, src, tgt, max(S - 1, 1), max(T - 1, 1), res, err
        )
        summary = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    plan = bootstrap_bytes(B, K, S, T, d_t)
    assert passes <= plan["passes"] < 2 * passes, (passes, plan)
    assert summary <= plan["summary"] < 2 * summary, (summary, plan)


def test_fit_refuses_a_bootstrap_beyond_its_memory_budget(synthetic, cli, tmp_path):
    """10^6 resamples of 2 x 2 pairs over 8 held-out documents hold ~0.75 GB: under
    --memory-limit 200MB the fit is refused at once, naming the value, what it would hold
    and a count that fits; nothing is written."""
    import time

    rng = np.random.default_rng(0)
    tokens = token_table(n_docs=40, doc_len=30, seq_len=30)
    n = len(tokens["doc"])
    S = synthetic(rng.normal(size=(2, n, 8)).astype(np.float32), tokens)
    T = synthetic(rng.normal(size=(2, n, 8)).astype(np.float32), tokens)
    out = tmp_path / "a.zarr"
    t0 = time.time()
    code, _, err = cli("fit", S, T, "-o", out, "--bootstrap", MOST, "--memory-limit", "200MB")
    line = one_line_error(
        code,
        err,
        "--bootstrap 1,000,000 would hold",
        "for 8 held-out documents and 4 pairs",
        "memory budget of 190.7 MiB",
        "or fewer, or raise --memory-limit",
    )
    assert time.time() - t0 < 30 and not out.exists()
    fits = int(line.split("give --bootstrap ")[1].split(" ")[0].replace(",", ""))
    assert LEAST <= fits < MOST
