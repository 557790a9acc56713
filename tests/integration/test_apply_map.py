"""`align.apply_map`: a map saved by `save_maps`, applied to the stored source activations of
the held-out documents, gives scikit-learn's ridge predictions (fitted on the training rows
read with zarr) and the held-out errors the fit recorded."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from align.fitting import Execution, FitSpec
from tests.helpers.fixtures_fit import token_table
from tests.helpers.references import heldout_scores, sklearn_ridge


def _read(path):
    """(resid {boundary: float64 (N, d)}, doc, pos) straight from the Zarr group."""
    g = zarr.open_group(path, mode="r")
    bounds = [int(b) for b in g["boundary"][:]]
    resid = {b: np.asarray(g["resid"][k], dtype=np.float64) for k, b in enumerate(bounds)}
    return resid, g["doc"][:], g["pos"][:]


@pytest.fixture(scope="module")
def mapped(synthetic, tmp_path_factory):
    """(source store, target store, result path, its Dataset): a fit with `save_maps` of a
    target that is an affine map of the source plus noise."""
    import align

    rng = np.random.default_rng(0)
    tokens = token_table(24, 40, seq_len=20)
    n = len(tokens["token_id"])
    X = rng.normal(size=(3, n, 8)).astype(np.float32)
    A = rng.normal(size=(8, 6))
    Y = np.stack([X[b] @ A + 0.3 * rng.normal(size=(n, 6)) + 1.5 for b in range(3)])
    S, T = synthetic(X, tokens, model="src"), synthetic(Y, tokens, model="tgt")
    out = str(tmp_path_factory.mktemp("maps") / "fit.zarr")
    align.fit(
        S,
        T,
        out,
        FitSpec(alphas=[1e-3, 1e-1], save_maps=True),
        Execution(scheduler="synchronous"),
        log=lambda m: None,
    )
    return S, T, out, align.open_alignment(out)


@pytest.mark.parametrize("pair", [(1, 2), (2, 0)])
def test_apply_map_reproduces_sklearn_and_the_heldout_errors(mapped, pair):
    import align

    S, T, out, ds = mapped
    i, j = pair
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    split = ds.attrs["split"]
    train = np.isin(doc, split["fit_docs"] + split["validation_docs"]) & (pos != 0)
    held = np.isin(doc, ds.heldout_doc.values) & (pos != 0)
    alpha = float(ds.alpha.sel(source_boundary=i, target_boundary=j))
    want = sklearn_ridge(X[i][train], Y[j][train], alpha).predict(X[i][held])
    got = align.apply_map(out, X[i][held], i, j)
    # float64 on both sides from the same float32 rows; the two solvers differ by rounding
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    scores = heldout_scores(got, Y[j][held])
    for name in ("relative_error", "norm_error", "r2"):
        recorded = float(ds[name].sel(source_boundary=i, target_boundary=j))
        np.testing.assert_allclose(scores[name], recorded, rtol=1e-6)
    # the Dataset itself serves as well as its path; one row as well as many
    np.testing.assert_allclose(align.apply_map(ds, X[i][held][0], i, j), got[0], rtol=1e-12)


def test_apply_map_refusals(mapped, synthetic, tmp_path):
    import align
    from align.errors import InputError, NonFiniteError

    S, T, out, ds = mapped
    with pytest.raises(InputError, match=r"^`source_boundary` 7 is not in the result: it holds"):
        align.apply_map(ds, np.zeros((2, 8)), 7, 0)
    with pytest.raises(InputError, match=r"^`x` of shape \(2, 5\):.*takes \(\.\.\., 8\)"):
        align.apply_map(ds, np.zeros((2, 5)), 1, 0)
    x = np.zeros((3, 8))
    x[1, 4] = np.nan
    with pytest.raises(
        NonFiniteError, match=r"^`x` holds 1 non-finite values \(the first at index \(1, 4\)\)"
    ):
        align.apply_map(ds, x, 1, 0)
    plain = str(tmp_path / "plain.zarr")
    align.fit(
        S,
        T,
        plain,
        FitSpec(alphas=[1e-1], source_boundaries="1", target_boundaries="1"),
        Execution(scheduler="synchronous"),
        log=lambda m: None,
    )
    with pytest.raises(
        InputError, match=r"^`result` holds no maps \(W and c\): fit it again with `save_maps`"
    ):
        align.apply_map(plain, np.zeros((2, 8)), 1, 1)
