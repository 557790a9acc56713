"""`align plot FIT --measure ridge`: ridge is the fit's own held-out error matrix, which every
alignment result holds, so it draws the figure `align plot FIT` draws (it was refused as "not
in this result"); with `--metric r2`, which contradicts it, one line."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from matplotlib.collections import QuadMesh
from matplotlib.image import imread

from tests.helpers.assertions import one_line_error


@pytest.fixture
def fitted(fit_pair, tmp_path, cli):
    S, T = fit_pair
    out = tmp_path / "r.zarr"
    code, _, err = cli("fit", S, T, "-o", out, "--scheduler", "synchronous", "--bootstrap", "0")
    assert code == 0, err
    return out


def test_measure_ridge_draws_the_error_matrix_pixel_for_pixel(fitted, tmp_path, cli):
    for name, extra in (("ridge.png", ("--measure", "ridge")), ("plain.png", ())):
        code, _, err = cli("plot", fitted, *extra, "-o", tmp_path / name)
        assert code == 0, err
    ridge, plain = imread(tmp_path / "ridge.png"), imread(tmp_path / "plain.png")
    assert ridge.shape == plain.shape and ridge.shape[:2] == (750, 900)
    np.testing.assert_array_equal(ridge, plain)


def test_plot_measure_ridge_colours_the_stored_relative_error(fitted):
    """The library's `plot_measure(ds, "ridge")`: its heatmap's cells are the result's
    relative_error as xarray reads it from the store (source rows, target columns)."""
    from align.plotting import plot_measure

    ds = xr.open_zarr(str(fitted), consolidated=False)
    want = ds["relative_error"].transpose("source_boundary", "target_boundary").values
    fig = plot_measure(ds, "ridge")
    (mesh,) = [c for c in fig.axes[0].collections if isinstance(c, QuadMesh)]
    got = np.asarray(mesh.get_array()).reshape(want.shape)
    np.testing.assert_array_equal(got, want)


def test_measure_ridge_with_metric_r2_is_one_line(fitted, tmp_path, cli):
    out = tmp_path / "x.png"
    code, _, err = cli("plot", fitted, "--measure", "ridge", "--metric", "r2", "-o", out)
    one_line_error(
        code,
        err,
        "--measure ridge draws the held-out relative error; r2 is drawn with --metric r2 alone",
    )
    assert not out.exists()
