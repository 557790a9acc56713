"""`align fit --measures procrustes-heldout`: the rotation fitted on the training documents'
rows, the error measured on the held-out documents' rows, on real stores of two tiny models,
against scipy's `orthogonal_procrustes` on the rows read with zarr
(tests/helpers/measures_reference.py, never importing align), within 1e-8 relative; and its
group-bootstrap interval against a plain loop over the drawn groups."""

from __future__ import annotations

import numpy as np

from align.fitting import FitSpec
from tests.helpers.measures_reference import procrustes_heldout
from tests.integration.test_fit_measures import GROUPS, RTOL, _fit, _heldout, _read


def _training(ds, doc, pos):
    """The rows the maps (and the rotation) are fitted on: fit and validation documents,
    position 0 left out."""
    docs = ds.attrs["split"]["fit_docs"] + ds.attrs["split"]["validation_docs"]
    return np.isin(doc, docs) & (pos != 0)


def test_heldout_procrustes_equals_scipy_on_the_stores_rows(fit_pair):
    S, T = fit_pair
    B, seed = 100, 3
    ds = _fit(
        S,
        T,
        None,
        FitSpec(
            measures="procrustes,procrustes-heldout",
            bootstrap=B,
            bootstrap_seed=seed,
            alphas=[1e-2],
            source_boundaries="0,2",
            target_boundaries="1,4",
        ),
    )
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    train, test = _training(ds, doc, pos), _heldout(ds, doc, pos)
    heldout = list(ds.heldout_doc.values)
    group = np.array([heldout.index(d) % GROUPS if k else -1 for d, k in zip(doc, test)])
    present = [g for g in range(GROUPS) if np.any(group == g)]
    draws = np.random.default_rng(seed).integers(0, len(present), size=(B, len(present)))
    assert ds["procrustes_heldout"].attrs["direction"] == "distance"
    for i in (0, 2):
        for j in (1, 4):
            cell = ds.sel(source_boundary=i, target_boundary=j)
            x, y = X[i], Y[j]
            want = procrustes_heldout(x[train], y[train], x[test], y[test])
            np.testing.assert_allclose(float(cell.procrustes_heldout), want, rtol=RTOL)
            vals = [
                procrustes_heldout(
                    x[train],
                    y[train],
                    x[rows := np.concatenate([np.flatnonzero(group == present[k]) for k in row])],
                    y[rows],
                )
                for row in draws
            ]
            lo, hi = np.percentile(vals, [2.5, 97.5])
            np.testing.assert_allclose(float(cell.procrustes_heldout_low), lo, rtol=RTOL)
            np.testing.assert_allclose(float(cell.procrustes_heldout_high), hi, rtol=RTOL)
            # the training rotation does no better on the held-out rows than their own one
            assert (
                float(cell.procrustes_heldout)
                >= np.sqrt(2 - 2 * np.cos(float(cell.procrustes))) - 1e-12
            )


def test_live_route_equals_scipy_on_the_stores_rows(zoo, corpus_file, extracted):
    """--live: the rotation from the passes' training statistics, the error from the held-out
    pass, against the same reference on the rows the stores of the same models hold."""
    from tests.integration.test_fit_live import CORPUS, live_fit

    S = extracted("qwen2", dtype="float32", **CORPUS)
    T = extracted("qwen2", model_overrides={"num_hidden_layers": 4, "hidden_size": 96}, **CORPUS)
    ds = live_fit(
        zoo,
        corpus_file,
        "qwen2",
        "float32",
        measures="procrustes-heldout",
        bootstrap=0,
        alphas=[1e-2],
        target_boundaries="0,3",
    ).dataset
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    train, test = _training(ds, doc, pos), _heldout(ds, doc, pos)
    for i in ds.source_boundary.values:
        for j in ds.target_boundary.values:
            x, y = X[int(i)], Y[int(j)]
            want = procrustes_heldout(x[train], y[train], x[test], y[test])
            got = float(ds.procrustes_heldout.sel(source_boundary=i, target_boundary=j))
            np.testing.assert_allclose(got, want, rtol=RTOL, err_msg=f"{i}->{j}")
