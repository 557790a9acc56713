"""The readers of `align fit --measures`: `align compare --measure NAME` on hand-built
alignment results whose measure matrices are known (the path by the measure's direction, the
mean along it, its Spearman and depth gap, the cells that beat the null: each recomputed here
with numpy and scipy), `align info` listing the measures with their direction, path and
calibration, the refusals (one line each), `compare --figure` as PNG, PDF or SVG by the suffix,
written whole; and both readers on a result the fit wrote (tiny stores, cka and procrustes
calibrated on sampled rows)."""

from __future__ import annotations

import csv
import io
import os

import numpy as np
import pytest
import xarray as xr
from scipy.stats import spearmanr

from align.fitting import Execution, FitSpec
from tests.helpers.assertions import one_line_error
from tests.helpers.fixtures_demo import alignment_ds, depth_ds

DIMS = ("source_boundary", "target_boundary")
DIRECTIONS = {"cka": "similarity", "procrustes": "distance"}
SAMPLE = {
    "rows": 150,
    "seed": 0,
    "permutations": 19,
    "neighbours": 10,
    "null_scheme": "documents",
    "bootstrap_resamples": 100,
}


def _pick(values, direction, tgt):
    """Each row's argmax (similarity) or argmin (distance) target boundary, first on ties."""
    k = values.argmax(1) if direction == "similarity" else values.argmin(1)
    return [int(tgt[c]) for c in k]


def measured_ds(seed, calibrated=False):
    """alignment_ds (boundaries 0..3 → 0..6) with cka and procrustes matrices drawn from
    `seed`, their summary records (direction, path) as the fit writes them, and with
    `calibrated`, cka's p_family and the calibration's record."""
    ds = alignment_ds(seed=seed)
    rng = np.random.default_rng(100 + seed)
    tgt = ds.target_boundary.values
    shape = (ds.sizes["source_boundary"], ds.sizes["target_boundary"])
    records = {}
    for name, direction in DIRECTIONS.items():
        v = rng.uniform(0.1, 0.9, shape)
        ds[name] = (DIMS, v)
        ds[name + "_low"], ds[name + "_high"] = (DIMS, v - 0.05), (DIMS, v + 0.05)
        records[name] = {"direction": direction, "array": name, "path": _pick(v, direction, tgt)}
    if calibrated:
        p = rng.uniform(0.0, 0.12, shape)
        ds["cka_p_family"] = (DIMS, p)
        cols = [list(tgt).index(j) for j in records["cka"]["path"]]
        records["cka"]["cells_surviving"] = int((p < 0.05).sum())
        records["cka"]["path_surviving"] = bool(all(p[a, c] < 0.05 for a, c in enumerate(cols)))
        ds.attrs["options"] = {"measures": ["ridge", "cka", "procrustes"], "sampled_rows": SAMPLE}
    records["rows"] = "held-out documents (the rows ridge's held-out error is measured on)"
    ds.attrs["summary"]["measures"] = records
    return ds


def _write(ds, path, schema="alignment"):
    from align.store import write_result

    return write_result(str(path), ds, schema)


def expected_row(ds, name):
    """The numbers compare should show for measure `name` of `ds`, from its matrix alone:
    the path, the mean along it, Spearman of j*/L_T with i/L_S over i >= 1 (scipy) and the
    mean depth gap over those rows."""
    m = ds[name].transpose(*DIMS)
    v, src, tgt = m.values, m.source_boundary.values, m.target_boundary.values
    Ls, Lt = ds.attrs["n_layers_source"], ds.attrs["n_layers_target"]
    path = _pick(v, DIRECTIONS[name], tgt)
    rows = [a for a, i in enumerate(src) if i >= 1]
    si = np.array([src[a] / Ls for a in rows])
    sj = np.array([path[a] / Lt for a in rows])
    cells = [(a, list(tgt).index(j)) for a, j in enumerate(path)]
    bound = {e: ds[f"{name}_{e}"].transpose(*DIMS).values for e in ("low", "high")}
    return {
        "path": " ".join(map(str, path)),
        "on path": float(np.mean([v[a, c] for a, c in cells])),
        "low": float(np.mean([bound["low"][a, c] for a, c in cells])),
        "high": float(np.mean([bound["high"][a, c] for a, c in cells])),
        "Spearman": float(spearmanr(si, sj).statistic) if len(set(sj)) > 1 else None,
        "mean depth gap": float(np.mean(np.abs(sj - si))),
    }


def _csv(path):
    return {r["result"]: r for r in csv.DictReader(io.StringIO(path.read_text()))}


@pytest.mark.parametrize("name", ["cka", "procrustes"])
def test_compare_on_a_measure_reads_its_path_by_its_direction(cli, tmp_path, name):
    a, b = measured_ds(1), measured_ds(4)
    pa, pb = _write(a, tmp_path / "a.zarr"), _write(b, tmp_path / "b.zarr")
    code, out, err = cli("compare", pa, pb, "--measure", name, "-o", tmp_path / "t.csv")
    assert code == 0, err
    table = _csv(tmp_path / "t.csv")
    pick = "argmax" if DIRECTIONS[name] == "similarity" else "argmin"
    means = {}
    for label, ds in (("a", a), ("b", b)):
        want, row = expected_row(ds, name), table[label]
        assert row[f"{pick} path"] == want["path"], (row, want)
        np.testing.assert_allclose(float(row[f"{name} on path"]), want["on path"], rtol=1e-12)
        np.testing.assert_allclose(float(row["mean depth gap"]), want["mean depth gap"], rtol=1e-12)
        if want["Spearman"] is None:
            assert row["Spearman"] == ""
        else:
            np.testing.assert_allclose(float(row["Spearman"]), want["Spearman"], rtol=1e-12)
        # the interval of the mean on the path: the path cells' lows and highs averaged
        np.testing.assert_allclose(float(row[f"{name} on path_low"]), want["low"], rtol=1e-12)
        np.testing.assert_allclose(float(row[f"{name} on path_high"]), want["high"], rtol=1e-12)
        assert row["Spearman_low"] == row["mean depth gap_low"] == ""  # none for the path's shape
        means[label] = want
    # b − a: the difference of the means, its interval the bounds' difference
    diff, wa, wb = table["b − a"], means["a"], means["b"]
    np.testing.assert_allclose(
        float(diff[f"{name} on path"]), wb["on path"] - wa["on path"], rtol=1e-12
    )
    np.testing.assert_allclose(
        float(diff[f"{name} on path_low"]), wb["low"] - wa["high"], rtol=1e-12
    )
    np.testing.assert_allclose(
        float(diff[f"{name} on path_high"]), wb["high"] - wa["low"], rtol=1e-12
    )
    np.testing.assert_allclose(
        float(diff["mean depth gap"]), wb["mean depth gap"] - wa["mean depth gap"], rtol=1e-12
    )
    means = {k: w["on path"] for k, w in means.items()}
    # "better" follows the direction: the larger mean for a similarity, the smaller for a distance
    closest = (max if DIRECTIONS[name] == "similarity" else min)(means, key=means.get)
    flat = " ".join(out.split())
    assert f"closest on {name}: {closest}" in flat
    assert f"{name} is a {DIRECTIONS[name]}: each row's path is its {pick}" in flat
    assert "argmin path" not in out.splitlines()[0] or pick == "argmin"


def test_compare_says_which_cells_and_path_beat_the_null(cli, tmp_path):
    a, b = measured_ds(2, calibrated=True), measured_ds(3)
    pa, pb = _write(a, tmp_path / "a.zarr"), _write(b, tmp_path / "b.zarr")
    code, out, err = cli("compare", pa, pb, "--measure", "cka")
    assert code == 0, err
    p = a["cka_p_family"].values
    tgt = list(a.target_boundary.values)
    path = _pick(a["cka"].values, "similarity", tgt)
    on_path = all(p[k, tgt.index(j)] < 0.05 for k, j in enumerate(path))
    rows = {line.split()[0]: line for line in out.splitlines()[1:3]}
    assert (
        f"{int((p < 0.05).sum())} of {p.size} cells, path {'yes' if on_path else 'no'}" in rows["a"]
    )
    assert "not calibrated" in rows["b"]


def test_compare_ridge_is_the_error_matrix_and_refusals_are_one_line(cli, tmp_path):
    pa = _write(measured_ds(1), tmp_path / "a.zarr")
    plain = _write(alignment_ds(seed=5), tmp_path / "plain.zarr")
    code, out, err = cli("compare", pa, plain)
    assert code == 0, err
    assert cli("compare", pa, plain, "--measure", "ridge")[1] == out
    one_line_error(
        *cli("compare", pa, plain, "--measure", "cka")[::2],
        str(tmp_path / "plain.zarr"),
        "holds no cka",
        "--measures cka",
    )
    one_line_error(
        *cli("compare", pa, "--measure", "rsa")[::2], "holds no rsa", "it holds cka, procrustes"
    )
    one_line_error(
        *cli("compare", pa, "--measure", "ckaa")[::2], "--measure ckaa", "cka, cka-debiased"
    )
    d = _write(depth_ds(), tmp_path / "d.zarr", "depth")
    one_line_error(
        *cli("compare", d, "--measure", "cka")[::2], "--measure cka", "only alignment results"
    )
    bad = measured_ds(6)
    bad["cka"][1, 2] = np.nan
    pbad = _write(bad, tmp_path / "bad.zarr")
    one_line_error(
        *cli("compare", pbad, "--measure", "cka")[::2],
        "cka is NaN at source boundary 1, target boundary 2",
    )


def with_left_out(ds, seed, groups=(0, 1, 2, 3)):
    """`ds` with cka's jackknife recomputations as the fit keeps them: `cka_left_out` over
    (source_boundary, target_boundary, measure_group), the matrix plus seeded noise per group,
    and the coordinate `measure_group`."""
    rng = np.random.default_rng(200 + seed)
    v = ds["cka"].transpose(*DIMS).values
    left = v[:, :, None] + rng.normal(0, 0.02, v.shape + (len(groups),))
    return ds.assign(cka_left_out=(DIMS + ("measure_group",), left)).assign_coords(
        measure_group=list(groups)
    )


def _path_left_out(ds, name="cka"):
    """(mean on the path, its recomputation without each group): numpy over the path cells
    of the matrix and of `<name>_left_out`, the path each row's argmax."""
    v = ds[name].transpose(*DIMS).values
    left = ds[f"{name}_left_out"].transpose(*DIMS, "measure_group").values
    cols = v.argmax(1)
    rows = np.arange(len(cols))
    return v[rows, cols].mean(), left[rows, cols].mean(0)


def test_compare_gives_the_paired_jackknife_difference_of_two_results(cli, tmp_path):
    """Two results that keep cka's recomputations on the same held-out documents: each mean on
    the path gets the jackknife t interval of its recomputations (scipy's t, clipped to cka's
    [0, 1]), and b − a the paired one, d_(g) = θ_b,(g) − θ_a,(g) (tests/helpers/
    measures_reference.py, written from the textbook), within 1e-12."""
    from tests.helpers.measures_reference import jackknife_interval

    a, b = with_left_out(measured_ds(1), 1), with_left_out(measured_ds(4), 4)
    pa, pb = _write(a, tmp_path / "a.zarr"), _write(b, tmp_path / "b.zarr")
    code, out, err = cli("compare", pa, pb, "--measure", "cka", "-o", tmp_path / "t.csv")
    assert code == 0, err
    table = _csv(tmp_path / "t.csv")
    (va, la), (vb, lb) = _path_left_out(a), _path_left_out(b)
    for label, value, left in (("a", va, la), ("b", vb, lb)):
        want = jackknife_interval(value, left, (0.0, 1.0))
        got = [float(table[label][f"cka on path{e}"]) for e in ("", "_low", "_high")]
        np.testing.assert_allclose(got, (value, *want), rtol=1e-12, err_msg=label)
    want = jackknife_interval(vb - va, lb - la)
    got = [float(table["b − a (paired)"][f"cka on path{e}"]) for e in ("", "_low", "_high")]
    np.testing.assert_allclose(got, (vb - va, *want), rtol=1e-12)
    assert "paired delete-a-group jackknife" in " ".join(out.split())


def test_results_on_other_documents_are_refused_and_old_ones_keep_the_bound(cli, tmp_path):
    """A paired difference of results whose held-out documents or groups differ is refused
    in one line naming what differs; a result without the recomputations (fitted before
    results kept them) keeps the bounds' difference, and the note says which and why."""
    from tests.helpers.measures_reference import jackknife_interval

    a = with_left_out(measured_ds(1), 1)
    pa = _write(a, tmp_path / "a.zarr")
    other = with_left_out(measured_ds(4), 4).assign_coords(heldout_doc=[3, 8, 11])
    po = _write(other, tmp_path / "o.zarr")
    one_line_error(
        *cli("compare", pa, po, "--measure", "cka")[::2],
        str(tmp_path / "o.zarr"),
        "held-out document 2 of 3 (document 8 against 7)",
        "--seed",
    )
    fewer = with_left_out(measured_ds(4).isel(heldout_doc=[0, 1]), 4)
    pf = _write(fewer, tmp_path / "f.zarr")
    one_line_error(
        *cli("compare", pa, pf, "--measure", "cka")[::2],
        "holds 2 held-out documents and",
        "3",
    )
    regrouped = with_left_out(measured_ds(4), 4, groups=(0, 1, 2, 5))
    pg = _write(regrouped, tmp_path / "g.zarr")
    one_line_error(
        *cli("compare", pa, pg, "--measure", "cka")[::2],
        "jackknife groups [0, 1, 2, 5]",
        "[0, 1, 2, 3]",
    )
    old = measured_ds(4)
    pold = _write(old, tmp_path / "old.zarr")
    code, out, err = cli("compare", pa, pold, "--measure", "cka", "-o", tmp_path / "t.csv")
    assert code == 0, err
    table = _csv(tmp_path / "t.csv")
    # old's interval: its path cells' bounds averaged; a's: its jackknife interval; the
    # difference: the bounds' difference [low_old - high_a, high_old - low_a]
    wo = expected_row(old, "cka")
    va, la = _path_left_out(a)
    low_a, high_a = jackknife_interval(va, la, (0.0, 1.0))
    assert [float(table["old"][f"cka on path_{e}"]) for e in ("low", "high")] == pytest.approx(
        [wo["low"], wo["high"]], rel=1e-12
    )
    np.testing.assert_allclose(
        [float(table["old − a"][f"cka on path_{e}"]) for e in ("low", "high")],
        [wo["low"] - high_a, wo["high"] - low_a],
        rtol=1e-12,
    )
    flat = " ".join(out.split())
    assert "for old − a the bounds' difference" in flat
    assert "as old holds no jackknife recomputations of cka" in flat


MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-", ".svg": b"<?xml"}


@pytest.mark.parametrize("suffix", [".pdf", ".svg", ".png"])
def test_compare_figure_is_png_pdf_or_svg_by_its_suffix_and_written_whole(cli, tmp_path, suffix):
    pa = _write(measured_ds(1), tmp_path / "a.zarr")
    pb = _write(measured_ds(4), tmp_path / "b.zarr")
    out = tmp_path / "figs"
    out.mkdir()
    fig = out / f"cmp{suffix}"
    code, _, err = cli("compare", pa, pb, "--measure", "cka", "--figure", fig)
    assert code == 0, err
    data = fig.read_bytes()
    assert data.startswith(MAGIC[suffix]), data[:20]
    if suffix == ".svg":
        assert b'id="path/a"' in data and b'id="path/b"' in data  # both paths drawn
    assert os.listdir(out) == [fig.name]  # nothing left beside it
    # an existing figure is replaced only with --overwrite, and stays as it was otherwise
    one_line_error(*cli("compare", pa, "--figure", fig)[::2], str(fig), "--overwrite")
    assert fig.read_bytes() == data
    code, _, err = cli("compare", pa, "--figure", fig, "--overwrite")
    assert code == 0 and fig.read_bytes() != data, err
    one_line_error(*cli("compare", pa, "--figure", out / "cmp.jpg")[::2], "cmp.jpg", ".pdf")


def test_info_lists_the_measures_their_paths_and_the_calibration(cli, tmp_path):
    ds = measured_ds(2, calibrated=True)
    path = _write(ds, tmp_path / "a.zarr")
    code, out, err = cli("info", path)
    assert code == 0, err
    flat = " ".join(out.split())
    rec = ds.attrs["summary"]["measures"]
    cka_path = _pick(ds["cka"].values, "similarity", ds.target_boundary.values)
    pro_path = _pick(ds["procrustes"].values, "distance", ds.target_boundary.values)
    assert rec["cka"]["path"] == cka_path
    cells = int((ds["cka_p_family"].values < 0.05).sum())
    verdict = "does" if rec["cka"]["path_surviving"] else "does not"
    assert (
        f"measures cka (similarity): argmax path {cka_path} for i = [0, 1, 2, 3]; {cells} of 28 "
        f"cells beat the grid's null (p_family < 0.05), the path {verdict} "
        f"procrustes (distance): argmin path {pro_path} for i = [0, 1, 2, 3] computed on held-out"
    ) in flat
    assert (
        "calibration 19 permutations of 150 sampled held-out rows, re-paired by documents "
        "(seed 0); the row measures' intervals over 100 document resamples, k = 10 neighbours"
    ) in flat
    lines = out.splitlines()
    assert max(len(line) for line in lines if str(path) not in line) <= 100
    plain = _write(alignment_ds(), tmp_path / "plain.zarr")
    plain_out = cli("info", plain)[1]
    assert "  measures " not in plain_out and "  calibration " not in plain_out


@pytest.fixture(scope="module")
def fitted(fit_pair, tmp_path_factory):
    """A result the fit wrote: tiny stores, cka and procrustes, calibrated on 60 sampled rows."""
    import align

    out = str(tmp_path_factory.mktemp("measured") / "m.zarr")
    align.fit(
        *fit_pair,
        out,
        FitSpec(
            measures="cka,procrustes",
            permutations=19,
            sample_rows=60,
            bootstrap=100,
            alphas=[1e-2],
            target_boundaries="0,2,4",
        ),
        Execution(scheduler="synchronous"),
        log=lambda m: None,
    )
    return out


def test_readers_on_a_result_the_fit_wrote(cli, fitted, tmp_path):
    ds = xr.open_zarr(fitted)
    code, out, err = cli("info", fitted)
    assert code == 0, err
    flat = " ".join(out.split())
    tgt = ds.target_boundary.values
    for name, direction in DIRECTIONS.items():
        pick = "argmax" if direction == "similarity" else "argmin"
        path = _pick(ds[name].transpose(*DIMS).values, direction, tgt)
        assert f"{name} ({direction}): {pick} path {path} for i = [0, 1, 2]" in flat
    assert "calibration 19 permutations of 60 sampled held-out rows, re-paired by" in flat
    code, out, err = cli("compare", fitted, "--measure", "cka", "-o", tmp_path / "t.csv")
    assert code == 0, err
    row = _csv(tmp_path / "t.csv")["m"]
    want = expected_row(ds, "cka")
    assert row["argmax path"] == want["path"]
    np.testing.assert_allclose(float(row["cka on path"]), want["on path"], rtol=1e-12)
    p = ds["cka_p_family"].transpose(*DIMS).values
    assert row["beat the null"].startswith(f"{int((p < 0.05).sum())} of {p.size} cells, path ")


def test_compare_alignment_legend_sits_beside_the_paths_not_over_them(tmp_path):
    """The alignment figure's legend lies outside the axes the paths are drawn in (a legend
    inside hid the paths near the top left)."""
    from matplotlib.transforms import Bbox

    from align.compare import View, run_compare
    from align.compare.plot import plot_comparison

    pa = _write(measured_ds(1), tmp_path / "a.zarr")
    pb = _write(measured_ds(4), tmp_path / "b.zarr")
    cmp = run_compare([pa, pb], view=View(measure="cka"), echo=lambda m: None, log=lambda m: None)
    fig = plot_comparison(cmp)
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    frame = ax.get_window_extent()
    assert not Bbox.intersection(legend, frame), (legend, frame)
    width, height = fig.get_size_inches() * fig.dpi
    assert legend.x1 <= width and legend.y0 >= 0, (legend, width, height)  # inside the figure
