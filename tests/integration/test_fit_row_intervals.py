"""`align fit` with a row measure on real stores of two tiny models (fit_pair): its default
interval is the delete-a-group jackknife of every other measure. rsa's recomputations
(`rsa_left_out`, over the groups of held-out documents) against rsatoolbox's RSA written in
numpy and scipy (tests/helpers/rows_reference.py, never importing align) on the sampled rows
without each group, within 1e-10, and its interval against the hand-written jackknife t;
`align compare --measure rsa` of two fits that sample other rows of the same held-out
documents gives the exact paired difference, d_(g) = θ_B,(g) − θ_A,(g), checked against a
hand computation from the two results' arrays (1e-12); `--measure-interval bootstrap` keeps
the percentile bootstrap, writes no recomputations and compare falls back to the bound;
`align info` and the result's attrs name each scheme."""

from __future__ import annotations

import csv
import io

import numpy as np
import xarray as xr

from tests.helpers.rows_reference import jackknife_t, rsa
from tests.integration.test_fit_measures import _heldout, _read

TOL = 1e-10
ARGS = ("--measures", "rsa", "--permutations", "1", "--bootstrap", "100", "--alphas", "0.01")
ARGS += ("--target-boundaries", "0,2,4", "--test-fraction", "0.4")  # 5 of 12 documents held out


def _fit(cli, S, T, out, *extra):
    code, _, err = cli("fit", S, T, "-o", out, *ARGS, *extra)
    assert code == 0, err
    return xr.open_zarr(out)


def _path_numbers(ds):
    """(the mean of rsa on its argmax path, its recomputations without each group (G,)) from
    the result's arrays, by hand."""
    v = ds["rsa"].transpose("source_boundary", "target_boundary").values
    left = ds["rsa_left_out"].transpose("source_boundary", "target_boundary", ...).values
    cols = v.argmax(axis=1)
    rows = np.arange(len(cols))
    return float(v[rows, cols].mean()), left[rows, cols].mean(axis=0)


def test_rsa_recomputations_intervals_and_the_paired_difference(fit_pair, cli, tmp_path):
    S, T = fit_pair
    a = _fit(cli, S, T, tmp_path / "a.zarr", "--sample-rows", "150")
    b = _fit(cli, S, T, tmp_path / "b.zarr", "--sample-rows", "220")
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    heldout = np.sort(np.asarray(a.attrs["split"]["heldout_docs"]))
    for ds, m in ((a, 150), (b, 220)):
        held = np.flatnonzero(_heldout(ds, doc, pos))
        rows = held[np.sort(np.random.default_rng(0).choice(len(held), m, replace=False))]
        group = np.searchsorted(heldout, doc[rows]) % 10
        groups = ds["measure_group"].values.tolist()
        assert groups == sorted(set(group.tolist())) and len(groups) >= 3
        assert ds["rsa_left_out"].dims[-1] == "measure_group"
        for i in ds.source_boundary.values:
            for j in ds.target_boundary.values:
                x, y = X[int(i)][rows], Y[int(j)][rows]
                cell = ds.sel(source_boundary=i, target_boundary=j)
                value = rsa(x, y)
                assert abs(float(cell["rsa"]) - value) <= TOL
                left = [rsa(x[group != g], y[group != g]) for g in groups]
                np.testing.assert_allclose(cell["rsa_left_out"].values, left, rtol=0, atol=TOL)
                low, high = jackknife_t(value, left, (-1.0, 1.0))
                assert abs(float(cell["rsa_low"]) - low) <= TOL
                assert abs(float(cell["rsa_high"]) - high) <= TOL
        record = ds.attrs["summary"]["measures"]["rsa"]["interval"]
        assert record.startswith("delete-a-group jackknife") and "sampled rows" in record
        assert ds.attrs["options"]["measure_interval"]["row_measures"] == "jackknife"
        assert ds.attrs["options"]["sampled_rows"]["interval"] == "jackknife"
    assert not np.allclose(a["rsa"].values, b["rsa"].values)  # two results that differ
    code, out, err = cli(
        "compare",
        tmp_path / "a.zarr",
        tmp_path / "b.zarr",
        "--measure",
        "rsa",
        "-o",
        tmp_path / "t.csv",
    )
    assert code == 0, err
    table = {r["result"]: r for r in csv.DictReader(io.StringIO((tmp_path / "t.csv").read_text()))}
    (va, la), (vb, lb) = _path_numbers(a), _path_numbers(b)
    for label, value, left in (("a", va, la), ("b", vb, lb)):
        got = [float(table[label][f"rsa on path{e}"]) for e in ("", "_low", "_high")]
        want = (value, *jackknife_t(value, left, (-1.0, 1.0)))
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=label)
    got = [float(table["b − a (paired)"][f"rsa on path{e}"]) for e in ("", "_low", "_high")]
    np.testing.assert_allclose(got, (vb - va, *jackknife_t(vb - va, lb - la)), rtol=1e-12)
    assert "paired delete-a-group jackknife" in " ".join(out.split())
    code, info, err = cli("info", tmp_path / "a.zarr")
    assert code == 0, err
    flat = " ".join(info.split())
    assert "rsa on the sampled rows; intervals: delete-a-group jackknife" in flat, flat
    assert "the row measures' intervals a delete-a-group jackknife" in flat, flat


def test_the_bootstrap_option_keeps_the_percentile_interval_and_compare_bounds_it(
    fit_pair, cli, tmp_path
):
    """`--measure-interval bootstrap`: rsa's interval is the percentile document bootstrap
    (finite, recorded as such), no `rsa_left_out` is written, and compare against a
    jackknife result falls back to the bounds' difference, said in its note."""
    S, T = fit_pair
    a = _fit(cli, S, T, tmp_path / "a.zarr", "--sample-rows", "150")
    c = _fit(
        cli, S, T, tmp_path / "c.zarr", "--sample-rows", "150", "--measure-interval", "bootstrap"
    )
    assert "rsa_left_out" not in c and "measure_group" not in c.coords
    np.testing.assert_array_equal(c["rsa"].values, a["rsa"].values)
    assert np.isfinite(c["rsa_low"].values).all()
    assert c.attrs["summary"]["measures"]["rsa"]["interval"].startswith("percentile document")
    assert c.attrs["options"]["sampled_rows"]["bootstrap_resamples"] == 100
    assert "bootstrap" in c["rsa_low"].attrs["description"]
    code, out, err = cli("compare", tmp_path / "a.zarr", tmp_path / "c.zarr", "--measure", "rsa")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "for c − a the bounds' difference" in flat, flat
    assert "row measure under `--measure-interval bootstrap`" in flat, flat
