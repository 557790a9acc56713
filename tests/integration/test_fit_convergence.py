"""`align fit --convergence`: the held-out error of maps fitted on ¼ and ½ of the training
documents, beside the full fit (`relative_error_by_fraction`).

The reference reads the stores with zarr, draws the documented groups itself (the fit, then
the validation documents, each permuted by numpy's default_rng([seed, 2]); of n, the first
max(1, round(n/4)) are the ¼ group, the next up to max(that, round(n/2)) join it for ½),
chooses α on each fraction's own validation documents with scikit-learn's Ridge over the
grid (ties within 1e-12 of the validation variance to the larger α), refits on the
fraction's training documents and scores the held-out documents: rtol 1e-6 + atol 1e-9."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from align.fitting import Execution, FitSpec
from tests.helpers.references import (
    alpha_scale,
    chosen_alpha,
    heldout_scores,
    ridge_val_sse,
    sklearn_ridge,
)

GRID = (1e-3, 1e-1, 1e1)


def _read(path):
    g = zarr.open_group(path, mode="r")
    bounds = [int(b) for b in g["boundary"][:]]
    return (
        {b: np.asarray(g["resid"][k], dtype=np.float64) for k, b in enumerate(bounds)},
        g["doc"][:],
        g["pos"][:],
    )


def _groups(fit_docs, val_docs, seed):
    rng = np.random.default_rng([seed, 2])
    out = {}
    for docs in (fit_docs, val_docs):
        perm = rng.permutation(np.asarray(docs))
        k1 = max(1, round(len(perm) / 4))
        k2 = max(k1, round(len(perm) / 2))
        out[0.25] = out.get(0.25, []) + perm[:k1].tolist()
        out[0.5] = out.get(0.5, []) + perm[:k2].tolist()
    return out


def test_fractions_equal_sklearn_refits_on_the_documented_documents(fit_pair):
    import align

    S, T = fit_pair
    ds = align.fit(
        S,
        T,
        None,
        FitSpec(convergence=True, alphas=GRID, source_boundaries="1,2", target_boundaries="1,3"),
        Execution(scheduler="synchronous"),
        log=lambda m: None,
    ).dataset
    assert ds.fraction.values.tolist() == [0.25, 0.5, 1.0]
    np.testing.assert_array_equal(
        ds.relative_error_by_fraction.sel(fraction=1.0).values, ds.relative_error.values
    )
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    split = ds.attrs["split"]
    fit_d, val_d, test_d = (
        np.array(split[k]) for k in ("fit_docs", "validation_docs", "heldout_docs")
    )
    groups = _groups(fit_d, val_d, 0)
    use = pos != 0
    test_r = np.isin(doc, test_d) & use
    for frac, members in groups.items():
        fit_r = np.isin(doc, np.intersect1d(fit_d, members)) & use
        val_r = np.isin(doc, np.intersect1d(val_d, members)) & use
        assert fit_r.any() and val_r.any()
        for i in (1, 2):
            for j in (1, 3):
                sse = ridge_val_sse(X[i][fit_r], Y[j][fit_r], X[i][val_r], Y[j][val_r], GRID)
                k = chosen_alpha(sse, Y[j][fit_r], Y[j][val_r])
                cell = dict(fraction=frac, source_boundary=i, target_boundary=j)
                assert float(ds.alpha_rel_by_fraction.sel(**cell)) == GRID[k], (frac, i, j, sse)
                train_r = fit_r | val_r
                r = sklearn_ridge(
                    X[i][train_r], Y[j][train_r], GRID[k] * alpha_scale(X[i][train_r])
                )
                want = heldout_scores(r.predict(X[i][test_r]), Y[j][test_r])["relative_error"]
                np.testing.assert_allclose(
                    float(ds.relative_error_by_fraction.sel(**cell)),
                    want,
                    rtol=1e-6,
                    atol=1e-9,
                    err_msg=str(cell),
                )


def test_live_equals_the_store_route_with_fractions(zoo, extracted, corpus_file):
    from tests.integration.test_fit_live import BIG, CORPUS, live_fit, store_fit

    S = extracted("qwen2", dtype="float32", **CORPUS)
    T = extracted("qwen2", model_overrides=BIG, dtype="float32", **CORPUS)
    a = store_fit(S, T, convergence=True)
    b = live_fit(zoo, corpus_file, "qwen2", "float32", convergence=True).dataset
    np.testing.assert_allclose(
        b.relative_error_by_fraction.values,
        a.relative_error_by_fraction.values,
        rtol=1e-10,
        atol=1e-11,
    )
    np.testing.assert_array_equal(b.alpha_rel_by_fraction.values, a.alpha_rel_by_fraction.values)


def test_convergence_on_a_dask_cluster_with_live_is_refused(zoo, corpus_file, cli, tmp_path):
    from tests.helpers.assertions import one_line_error

    code, _, err = cli(
        "fit",
        "--live",
        zoo("qwen2"),
        zoo("qwen2"),
        corpus_file,
        "-o",
        tmp_path / "a.zarr",
        "--convergence",
        "--scheduler",
        "tcp://127.0.0.1:1",
    )
    one_line_error(code, err, "--convergence", "--scheduler tcp://127.0.0.1:1")
    assert not (tmp_path / "a.zarr").exists()


@pytest.mark.parametrize("extra", [(), ("--convergence",)])
def test_cli_convergence_flag(fit_pair, cli, tmp_path, extra):
    import xarray as xr

    S, T = fit_pair
    out = tmp_path / "c.zarr"
    code, _, err = cli(
        "fit", S, T, "-o", out, "--scheduler", "synchronous", "--bootstrap", "0", *extra
    )
    assert code == 0, err
    ds = xr.open_zarr(str(out))
    assert ("relative_error_by_fraction" in ds) == bool(extra) and ds.attrs["options"][
        "convergence"
    ] == bool(extra)
