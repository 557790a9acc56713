"""`align fit --measures procrustes-heldout`: the rotation fitted on the training documents'
rows, the error measured on the held-out documents' rows, on real stores of two tiny models,
against scipy's `orthogonal_procrustes` on the rows read with zarr
(tests/helpers/measures_reference.py, never importing align), within 1e-8 relative; and its
delete-a-group jackknife interval against the same reference on the held-out rows without
each group and the textbook's formula; the same on a char-anchor pair of two tokenizers, on
the anchored rows; its calibration on the sampled rows (value, null mean and spread,
calibrated, p, p_family) against the same rotation on the documented draw of M rows and the
documented re-pairings, within 1e-8 relative, on the store route and `--live`."""

from __future__ import annotations

import numpy as np
import pytest

from align.fitting import FitSpec
from tests.helpers.measures_reference import (
    RANGES,
    calibration,
    jackknife_interval,
    permutations,
    procrustes_heldout,
    procrustes_heldout_null,
)
from tests.integration.test_fit_measures import (
    RTOL,
    _fit,
    _heldout,
    _read,
    anchored_pair,
    heldout_groups,
)


def _training(ds, doc, pos):
    """The rows the maps (and the rotation) are fitted on: fit and validation documents,
    position 0 left out."""
    docs = ds.attrs["split"]["fit_docs"] + ds.attrs["split"]["validation_docs"]
    return np.isin(doc, docs) & (pos != 0)


def test_heldout_procrustes_equals_scipy_on_the_stores_rows(fit_pair):
    S, T = fit_pair
    ds = _fit(
        S,
        T,
        None,
        FitSpec(
            measures="procrustes,procrustes-heldout",
            bootstrap=100,
            test_fraction=0.4,  # 5 of the 12 documents held out: 5 groups of the jackknife
            alphas=[1e-2],
            source_boundaries="0,2",
            target_boundaries="1,4",
        ),
    )
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    train, test = _training(ds, doc, pos), _heldout(ds, doc, pos)
    group, present = heldout_groups(ds, doc, test)
    assert ds["procrustes_heldout"].attrs["direction"] == "distance"
    for i in (0, 2):
        for j in (1, 4):
            cell = ds.sel(source_boundary=i, target_boundary=j)
            x, y = X[i], Y[j]
            want = procrustes_heldout(x[train], y[train], x[test], y[test])
            np.testing.assert_allclose(float(cell.procrustes_heldout), want, rtol=RTOL)
            left_out = [
                procrustes_heldout(x[train], y[train], x[rows], y[rows])
                for rows in (test & (group != g) for g in present)
            ]
            lo, hi = jackknife_interval(want, left_out, RANGES["procrustes-heldout"])
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
    from tests.integration.test_fit_live import live_fit, live_stores

    S, T = live_stores(extracted)
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


def test_char_anchor_pair_equals_scipy_on_the_anchored_rows(synthetic):
    """Two tokenizers of one text (`--pairing char-anchors`): the rotation fitted on the
    anchored pairs of the training documents, the error and its jackknife interval on those
    of the held-out documents, against scipy's `orthogonal_procrustes` on the paired rows as
    stored (the anchors found by the plain loop of tests/integration/test_fit_anchors.py),
    within 1e-8 relative."""
    S, T, X, Y, tabs, si, ti = anchored_pair(synthetic)
    ds = _fit(
        S,
        T,
        None,
        FitSpec(
            pairing="char-anchors",
            measures="procrustes-heldout",
            bootstrap=100,
            alphas=[1.0],
        ),
    )
    doc, split = tabs[0]["doc"][si], ds.attrs["split"]
    train = np.isin(doc, split["fit_docs"] + split["validation_docs"])
    test = np.isin(doc, split["heldout_docs"])
    heldout = list(ds.heldout_doc.values)
    group = np.array([heldout.index(d) % 10 if k else -1 for d, k in zip(doc, test)])
    present = [g for g in range(10) if np.any(group == g)]
    assert len(present) >= 3, present
    assert ds.attrs["pairing"]["mode"] == "char-anchors"
    for i in range(2):
        for j in range(2):
            x, y = (np.asarray(a, np.float32).astype(np.float64) for a in (X[i][si], Y[j][ti]))
            want = procrustes_heldout(x[train], y[train], x[test], y[test])
            left_out = [
                procrustes_heldout(x[train], y[train], x[rows], y[rows])
                for rows in (test & (group != g) for g in present)
            ]
            lo, hi = jackknife_interval(want, left_out, RANGES["procrustes-heldout"])
            cell = ds.sel(source_boundary=i, target_boundary=j)
            got = [float(cell[v]) for v in ("procrustes_heldout", "procrustes_heldout_low")]
            got.append(float(cell.procrustes_heldout_high))
            assert np.all(np.isfinite(got)) and got[1] < got[0] < got[2], got
            np.testing.assert_allclose(got, [want, lo, hi], rtol=RTOL, err_msg=f"{i}->{j}")


M = 120  # sampled held-out rows of the calibration
K = 9  # its permutations
CALIBRATION = ("null_mean", "null_std", "calibrated", "p", "p_family")


def check_calibration(ds, X, Y, doc, pos, m=M, k=K, seed=0):
    """procrustes-heldout's `_sampled` and calibration arrays of `ds` against the reference:
    the rotation of the training rows (scipy's orthogonal_procrustes), the M rows drawn as
    docs/methods.md says (default_rng(seed).choice over the held-out rows in token order,
    sorted), the K re-pairings re-drawn from their held-out document indices, the
    calibration's formulas (tests/helpers/measures_reference.py), within 1e-8 relative; and
    the summary counts the cells whose p_family is below 0.05."""
    train, test = _training(ds, doc, pos), _heldout(ds, doc, pos)
    held = np.flatnonzero(test)
    rows = held[np.sort(np.random.default_rng(seed).choice(len(held), m, replace=False))]
    heldout = list(ds.heldout_doc.values)
    perms = permutations([heldout.index(d) for d in doc[rows]], k, seed)
    I, J = [int(i) for i in ds.source_boundary.values], [int(j) for j in ds.target_boundary.values]
    value, null = np.empty((len(I), len(J))), np.empty((k, len(I), len(J)))
    for a, i in enumerate(I):
        for b, j in enumerate(J):
            x, y = X[i], Y[j]
            value[a, b], null[:, a, b] = procrustes_heldout_null(
                x[train], y[train], x[rows], y[rows], perms
            )
    want = calibration(value, null, "distance", 0.0)
    assert ds.attrs["options"]["sampled_rows"]["permutations"] == k
    np.testing.assert_allclose(ds.procrustes_heldout_sampled.values, value, rtol=RTOL)
    for f in CALIBRATION:
        got = ds[f"procrustes_heldout_{f}"].values
        np.testing.assert_allclose(got, want[f], rtol=RTOL, atol=1e-300, err_msg=f)
    summary = ds.attrs["summary"]["measures"]["procrustes-heldout"]
    assert summary["cells_surviving"] == int(np.sum(want["p_family"] < 0.05))


@pytest.mark.parametrize("workers", [None, 2])
def test_calibration_on_the_store_route_equals_the_reference(fit_pair, workers):
    """procrustes-heldout alone (no other measure draws the sample), in this process and on
    a local Dask cluster of two worker processes, where its null runs as the workers' tasks
    (one a target boundary, timed by the cluster's task stream)."""
    import align
    from align.fitting import Execution

    S, T = fit_pair
    run = (
        Execution(scheduler="synchronous")
        if workers is None
        else Execution(n_workers=workers, memory_limit="3GB")
    )
    report = align.fit(
        S,
        T,
        None,
        run=run,
        log=lambda m: None,
        spec=FitSpec(
            measures="procrustes-heldout",
            bootstrap=0,
            test_fraction=0.4,
            alphas=[1e-2],
            sample_rows=M,
            permutations=K,
            source_boundaries="0,2",
            target_boundaries="1,4",
        ),
    )
    ds = report.dataset
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    check_calibration(ds, X, Y, doc, pos)
    if workers:
        assert report.task_seconds.get("null", 0) > 0, report.task_seconds


def test_calibration_on_the_live_route_equals_the_reference(zoo, corpus_file, extracted):
    """--live, beside a row measure (its sample and permutations shared), the rotation from
    the passes and the sampled rows from the held-out pass."""
    from tests.integration.test_fit_live import live_fit, live_stores

    S, T = live_stores(extracted)
    ds = live_fit(
        zoo,
        corpus_file,
        "qwen2",
        "float32",
        measures="procrustes-heldout,cka",
        bootstrap=0,
        alphas=[1e-2],
        sample_rows=M,
        permutations=K,
        target_boundaries="0,3",
    ).dataset
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    check_calibration(ds, X, Y, doc, pos)
