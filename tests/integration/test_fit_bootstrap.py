"""The alignment matrix's uncertainty: the document bootstrap, p_best, the summary's intervals
and nulls, the validation curves and `--alphas auto`.

The references read the stores with zarr directly, resample held-out documents with the
documented indices (numpy's default_rng(seed).integers(0, K, (B, K))), and recompute every
metric from the raw rows of the drawn documents (a document drawn twice counts twice), with
the maps the result saved (--save-maps): no per-document sums. Validation curves and α are
checked against scikit-learn's Ridge."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
import zarr
from scipy.stats import spearmanr

from align.fitting import Execution, FitSpec
from tests.helpers.fixtures_fit import token_table
from tests.helpers.references import chosen_alpha, ridge_val_sse

B, SEED = 200, 3


def _read(path):
    g = zarr.open_group(path, mode="r")
    bounds = [int(b) for b in g["boundary"][:]]
    return (
        {b: np.asarray(g["resid"][k], dtype=np.float64) for k, b in enumerate(bounds)},
        g["doc"][:],
        g["pos"][:],
    )


SYNC = Execution(scheduler="synchronous")


def _fit(source, target, output, spec=None, run=SYNC, hooks=None, log=None):
    """align.fit in this process (`SYNC`, unless `run` says otherwise), its log discarded
    unless `log` takes it."""
    import align

    log = log or (lambda m: None)
    return align.fit(source, target, output, spec, run, hooks=hooks, log=log)


@pytest.fixture(scope="module")
def boot(fit_pair, tmp_path_factory):
    S, T = fit_pair
    out = str(tmp_path_factory.mktemp("boot") / "a.zarr")
    _fit(
        S,
        T,
        out,
        FitSpec(save_maps=True, bootstrap=B, bootstrap_seed=SEED),
        Execution(scheduler="synchronous", task_tokens=300),
    )
    return S, T, xr.open_zarr(out).load()


def _resampled_metrics(S, T, ds):
    """{name: (B, S, T)} from raw rows, and the drawn documents."""
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    docs = ds.heldout_doc.values
    K = len(docs)
    idx = np.random.default_rng(SEED).integers(0, K, size=(B, K))
    rows = {d: np.flatnonzero((doc == d) & (pos != 0)) for d in docs}
    src, tgt = ds.source_boundary.values, ds.target_boundary.values
    out = {
        n: np.full((B, len(src), len(tgt)), np.nan) for n in ("relative_error", "norm_error", "r2")
    }
    for a, i in enumerate(src):
        for c, j in enumerate(tgt):
            cell = ds.sel(source_boundary=i, target_boundary=j)
            W, bias = cell.W.values, cell.c.values
            E = np.linalg.norm(X[i] @ W + bias - Y[j], axis=1)  # every token's error, once
            Yn = np.linalg.norm(Y[j], axis=1)
            for b in range(B):
                r = np.concatenate([rows[docs[k]] for k in idx[b]])
                e, y = E[r], Yn[r]
                out["relative_error"][b, a, c] = np.mean(e / np.maximum(y, 1e-12))
                out["norm_error"][b, a, c] = e.sum() / y.sum()
                Yr = Y[j][r]
                out["r2"][b, a, c] = 1 - (e**2).sum() / ((Yr - Yr.mean(0)) ** 2).sum()
    return out


def test_intervals_and_p_best_equal_a_plain_loop_over_raw_rows(boot):
    S, T, ds = boot
    ref = _resampled_metrics(S, T, ds)
    for name, v in ref.items():
        lo, hi = np.percentile(v, [2.5, 97.5], axis=0)
        np.testing.assert_allclose(
            ds[f"{name}_low"].values, lo, rtol=1e-9, atol=1e-12, err_msg=name
        )
        np.testing.assert_allclose(
            ds[f"{name}_high"].values, hi, rtol=1e-9, atol=1e-12, err_msg=name
        )
        assert (
            np.all(ds[f"{name}_low"].values <= ds[name].values + 1e-12) or name != "relative_error"
        )
    tgt = ds.target_boundary.values
    cand = np.flatnonzero(tgt >= 1)
    choice = tgt[cand][np.argmin(ref["relative_error"][:, :, cand], axis=2)]  # (B, S)
    p = ds.p_best.values
    for a in range(p.shape[0]):
        for c in cand:
            assert p[a, c] == pytest.approx(np.mean(choice[:, a] == tgt[c]), abs=1e-12)
    np.testing.assert_allclose(np.nansum(p, axis=1), 1.0, rtol=1e-12)  # rows sum to 1
    assert np.all(np.isnan(p[:, tgt == 0]))  # boundary 0 is never a candidate

    s = ds.attrs["summary"]
    src = ds.source_boundary.values
    rows = np.flatnonzero(src >= 1)
    sd = src[rows] / ds.attrs["n_layers_source"]
    path = choice[:, rows]
    assert s["argmin_path_probability"] == pytest.approx(
        np.mean(np.all(path == np.array(s["argmin_path"]), axis=1))
    )
    td = path / ds.attrs["n_layers_target"]
    gaps = np.abs(td - sd).mean(1)
    slopes = np.array([np.polyfit(sd, t, 1)[0] for t in td])
    sp = np.array([spearmanr(sd, t).statistic if len(set(t)) > 1 else np.nan for t in path])
    for key, v in (("mean_depth_gap", gaps), ("slope", slopes), ("spearman", sp)):
        v = v[np.isfinite(v)]
        lo, hi = np.percentile(v, [2.5, 97.5]) if len(v) else (np.nan, np.nan)
        got = [
            np.nan if s[f"{key}_{e}"] is None else s[f"{key}_{e}"] for e in ("low", "high")
        ]  # NaN is stored as None
        np.testing.assert_allclose(got, [lo, hi], rtol=1e-9, atol=1e-12, err_msg=key)
    np.testing.assert_allclose(
        s["slope"],
        np.polyfit(sd, np.array(s["argmin_path"]) / ds.attrs["n_layers_target"], 1)[0],
        rtol=1e-9,
        atol=1e-12,
    )
    # the p_best soft depth is the expected best depth over resamples
    np.testing.assert_allclose(
        s["soft_depth_pbest"], (path / ds.attrs["n_layers_target"]).mean(0), rtol=1e-12
    )
    # the flat null: the column of least mean error over rows >= 1
    err = ds.relative_error.values[np.ix_(rows, cand)]
    flat = tgt[cand][int(np.argmin(err.mean(0)))]
    assert s["nulls"]["flat"]["target_boundary"] == flat
    assert s["nulls"]["flat"]["mean_depth_gap"] == pytest.approx(
        np.mean(np.abs(flat / ds.attrs["n_layers_target"] - sd))
    )
    assert s["bootstrap"]["resamples"] == B and s["bootstrap"]["seed"] == SEED


def test_per_document_sums_add_up_to_the_point_scores(boot):
    _, _, ds = boot
    n = ds.doc_n_tokens.values
    np.testing.assert_allclose(
        ds.doc_ratio_sum.sum("heldout_doc").values / n.sum(), ds.relative_error.values, rtol=1e-10
    )
    np.testing.assert_allclose(
        ds.doc_error_sum.sum("heldout_doc").values / ds.doc_norm_sum.sum("heldout_doc").values,
        ds.norm_error.values,
        rtol=1e-10,
    )


def test_self_map_gives_the_identity_path_with_probability_one(fit_pair, tmp_path):
    S, _ = fit_pair
    ds = _fit(S, S, str(tmp_path / "self.zarr"), FitSpec(bootstrap=100)).dataset
    s = ds.attrs["summary"]
    assert s["argmin_path"] == [int(i) for i in ds.source_boundary.values if i >= 1]
    assert s["argmin_path_probability"] == 1.0
    for i in ds.source_boundary.values:
        if i >= 1:
            assert float(ds.p_best.sel(source_boundary=i, target_boundary=i)) == 1.0
    assert s["slope"] == pytest.approx(1.0) and s["slope_low"] == pytest.approx(1.0)


def _stores_needing(synthetic, kind):
    """Source and target stores whose best α_rel lies outside the default grid: `small`, a
    nearly noiseless linear map (the least penalty wins); `large`, a weak signal spread over
    many target dimensions in much noise (heavy shrinkage wins, and many dimensions make the
    validation error see it)."""
    rng = np.random.default_rng(7)
    d, dt = 12, (64 if kind == "small" else 256)
    tokens = token_table(n_docs=60, doc_len=400 if kind == "large" else 60, seq_len=400)
    n = len(tokens["doc"])
    X = rng.normal(size=(n, d)) * np.geomspace(
        1e-4 if kind == "small" else 0.05, 3, d
    )  # an uneven spectrum
    W = rng.normal(size=(d, dt))
    noise = rng.normal(size=(n, dt))
    Y = X @ W + 1e-2 * noise if kind == "small" else 1e-3 * (X @ W) + noise
    src = np.stack([rng.normal(size=(n, d)), X]).astype(np.float32)
    tgt = np.stack([rng.normal(size=(n, dt)), Y]).astype(np.float32)
    return synthetic(src, tokens), synthetic(tgt, tokens)


@pytest.mark.parametrize("kind", ["small", "large"])
def test_alphas_auto_extends_the_grid_to_the_validation_minimum(synthetic, tmp_path, kind):
    S, T = _stores_needing(synthetic, kind)
    ds = _fit(
        S, T, str(tmp_path / "a.zarr"), FitSpec(source_boundaries="1", target_boundaries="1")
    ).dataset
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    split = ds.attrs["split"]
    fit_r = np.isin(doc, split["fit_docs"]) & (pos != 0)
    val_r = np.isin(doc, split["validation_docs"]) & (pos != 0)
    grid = ds.alpha_grid.values
    curve = ds.val_sse.sel(source_boundary=1, target_boundary=1).values
    done = np.isfinite(curve)
    sse = ridge_val_sse(X[1][fit_r], Y[1][fit_r], X[1][val_r], Y[1][val_r], grid[done])
    np.testing.assert_allclose(curve[done], sse, rtol=1e-6)
    chosen = float(ds.alpha_rel.sel(source_boundary=1, target_boundary=1))
    k = chosen_alpha(sse, Y[1][fit_r], Y[1][val_r])
    assert chosen == pytest.approx(grid[done][k], rel=1e-12)
    if kind == "small":
        assert chosen < 1e-6 and grid.min() < 1e-6
    else:
        assert chosen > 1e1 and grid.max() > 1e1
    assert 0 < k < done.sum() - 1  # an interior choice of the grid the fit used
    s = ds.attrs["summary"]
    assert s["pairs_at_smallest_alpha"] == 0 and s["pairs_at_largest_alpha"] == 0


def test_explicit_alphas_are_not_extended_and_the_ends_are_counted(synthetic, tmp_path):
    S, T = _stores_needing(synthetic, "small")
    ds = _fit(
        S,
        T,
        str(tmp_path / "a.zarr"),
        FitSpec(
            source_boundaries="1",
            target_boundaries="1",
            alphas=(1e-3, 1e-2, 1e-1),
            extend_alphas=False,
        ),
    ).dataset
    assert ds.alpha_grid.values.tolist() == [1e-3, 1e-2, 1e-1]
    assert float(ds.alpha_rel.sel(source_boundary=1, target_boundary=1)) == 1e-3
    assert ds.attrs["summary"]["pairs_at_smallest_alpha"] == 1


def test_cli_defaults_auto_grid_and_bootstrap_and_bootstrap_zero(fit_pair, cli, tmp_path):
    S, T = fit_pair
    code, _, err = cli(
        "fit",
        S,
        T,
        "-o",
        str(tmp_path / "d.zarr"),
        "--scheduler",
        "synchronous",
        "--bootstrap",
        "150",
    )
    assert code == 0, err
    ds = xr.open_zarr(str(tmp_path / "d.zarr"))
    assert ds.attrs["options"]["extend_alphas"] is True and ds.attrs["options"]["bootstrap"] == 150
    assert "p_best" in ds and "relative_error_low" in ds and "val_sse" in ds
    code, _, err = cli(
        "fit",
        S,
        T,
        "-o",
        str(tmp_path / "n.zarr"),
        "--scheduler",
        "synchronous",
        "--bootstrap",
        "0",
        "--alphas",
        "1e-3,1",
    )
    assert code == 0, err
    ds = xr.open_zarr(str(tmp_path / "n.zarr"))
    assert "p_best" not in ds and "argmin_path_probability" not in ds.attrs["summary"]
    assert ds.attrs["options"]["extend_alphas"] is False and ds.alpha_grid.values.tolist() == [
        1e-3,
        1.0,
    ]


def test_plot_draws_p_best_intervals_and_a_control_beside(boot, cli, tmp_path):
    from align import plotting

    _, _, ds = boot
    fig = plotting.plot_alignment(ds)
    ax = fig.axes[0]
    s = ds.attrs["summary"]
    (title,) = [t.get_text() for t in ax.texts if t.get_gid() == "caption"]  # the statistics
    assert f"[{s['mean_depth_gap_low']:.2f}, {s['mean_depth_gap_high']:.2f}]" in title
    assert f"(p {s['argmin_path_probability']:.2f})" in title
    points = next(c for c in ax.collections if c.get_gid() == "argmin_points")
    rows = [int(i) for i in ds.source_boundary.values if i >= 1]
    want = [
        60 * max(float(ds.p_best.sel(source_boundary=i, target_boundary=j)), 0.05)
        for i, j in zip(rows, s["argmin_path"])
    ]
    np.testing.assert_allclose(points.get_sizes(), want)
    out = str(tmp_path / "a.zarr")
    ds.to_zarr(out)  # a second result to draw beside (a copy stands in for the control)
    code, stdout, err = cli("plot", out, "--beside", out, "-o", str(tmp_path / "two.png"))
    assert code == 0, err
    assert (tmp_path / "two.png").exists() and "1800x750" in stdout


def test_the_log_says_how_many_pairs_chose_an_end_of_a_given_grid(synthetic, tmp_path):
    S, T = _stores_needing(synthetic, "small")
    lines = []
    _fit(
        S,
        T,
        str(tmp_path / "a.zarr"),
        FitSpec(source_boundaries="1", target_boundaries="1", alphas=(1e-3, 1e-2, 1e-1)),
        log=lines.append,
    )
    note = [m for m in lines if "chose the smallest" in m]
    assert note == [
        "align fit: of 1 pairs, 1 chose the smallest α_rel 0.001: widen `alphas`, or use `alphas` auto; "
        "val_sse holds each pair's validation curve"
    ]
