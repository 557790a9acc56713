"""Plots: every figure from a small hand-built result has the stated pixel size, draws the
result's own numbers (read back from the artists: QuadMesh arrays, Line2D data, bar heights),
and refuses a result of another schema with a one-line message."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from tests.helpers.fixtures_demo import (
    alignment_ds,
    contributions_ds,
    lens_ds,
    skipping_ds,
)

TOL = 1e-12  # the artists hold the very float64 values given; nothing is recomputed


def png_size(path):
    with Image.open(path) as im:
        return im.size


def meshes(ax):
    from matplotlib.collections import QuadMesh

    return [c for c in ax.collections if isinstance(c, QuadMesh)]


def line(ax, gid):
    found = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
    assert len(found) == 1, [ln.get_gid() for ln in ax.get_lines()]
    return found[0]


def one_line_error(excinfo, *words):
    msg = str(excinfo.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, (w, msg)


@pytest.fixture
def opened(result_stores):
    from align.store import open_result

    return lambda schema: open_result(result_stores[schema])


@pytest.mark.parametrize("metric", ["relative_error", "r2"])
def test_alignment_heatmap_matches_result(opened, tmp_path, metric):
    from align import plotting

    ds = opened("alignment")
    fig = plotting.plot_alignment(ds, metric=metric)
    ax = fig.axes[0]
    (mesh,) = meshes(ax)
    expected = alignment_ds()[metric].values  # rows: source boundaries, columns: target
    np.testing.assert_allclose(
        np.asarray(mesh.get_array()).reshape(expected.shape), expected, rtol=0, atol=TOL
    )
    # Cell centres sit on the boundary indices.
    coords = mesh.get_coordinates()  # (rows+1, cols+1, 2) corners
    np.testing.assert_allclose((coords[0, 1:, 0] + coords[0, :-1, 0]) / 2, np.arange(7))
    np.testing.assert_allclose((coords[1:, 0, 1] + coords[:-1, 0, 1]) / 2, np.arange(4))
    summary = ds.attrs["summary"]
    if metric == "relative_error":
        path = line(ax, "argmin_path")
        assert list(path.get_xdata()) == summary["argmin_path"]
    else:  # r2 is a similarity: its own path, the argmax over targets >= 1 of each row >= 1
        path = line(ax, "argmax_path")
        r2 = alignment_ds()["r2"].values[1:, 1:]
        assert list(path.get_xdata()) == [int(j) + 1 for j in np.argmax(r2, axis=1)]
    assert list(path.get_ydata()) == [1, 2, 3]
    diag = line(ax, "equal_depth")
    assert list(diag.get_xdata()) == [0, 6] and list(diag.get_ydata()) == [0, 3]
    # a short title naming the pair; the statistics in the caption under the panel
    assert ax.get_title() == "shallow → deep"
    (caption,) = [t for t in ax.texts if t.get_gid() == "caption"]
    text = caption.get_text()
    assert "Spearman 0.80" in text and "mean depth gap 0.12" in text and "spread 0.41" in text
    assert "shallow (3 layers)" in ax.get_ylabel() and "deep (6 layers)" in ax.get_xlabel()
    out = plotting.save(fig, str(tmp_path / "a.png"))
    assert png_size(out) == (900, 750)


def test_alignment_colour_scale_leaves_out_boundary_zero(opened):
    from align import plotting

    raw = alignment_ds()
    fig = plotting.plot_alignment(opened("alignment"))
    (mesh,) = meshes(fig.axes[0])
    inner = raw["relative_error"].values[1:, 1:]
    assert mesh.norm.vmin == pytest.approx(inner.min(), abs=TOL)
    assert mesh.norm.vmax == pytest.approx(inner.max(), abs=TOL)


def test_alignment_pair_on_one_scale_and_size(opened, tmp_path):
    from align import plotting

    fig = plotting.plot_alignments(
        [opened("alignment"), opened("control")], size=(1400, 600), titles=["trained", "control"]
    )
    m1, m2 = meshes(fig.axes[0])[0], meshes(fig.axes[1])[0]
    assert (m1.norm.vmin, m1.norm.vmax) == (m2.norm.vmin, m2.norm.vmax)
    np.testing.assert_allclose(
        np.asarray(m2.get_array()).reshape(4, 7),
        alignment_ds(seed=9)["relative_error"].values,
        atol=TOL,
    )
    assert fig.axes[1].get_title().startswith("control")
    assert png_size(plotting.save(fig, str(tmp_path / "pair.png"))) == (1400, 600)


def test_alignment_with_sparse_boundaries(tmp_path):
    from align import plotting
    from align.store import open_result, write_result

    raw = alignment_ds(source_boundaries=(0, 2, 4), target_boundaries=(0, 4, 8, 12))
    ds = open_result(write_result(str(tmp_path / "s.zarr"), raw, "alignment"))
    fig = plotting.plot_alignment(ds, size=(500, 400))
    (mesh,) = meshes(fig.axes[0])
    coords = mesh.get_coordinates()
    np.testing.assert_allclose((coords[0, 1:, 0] + coords[0, :-1, 0]) / 2, [0, 4, 8, 12])
    np.testing.assert_allclose(
        np.asarray(mesh.get_array()).reshape(3, 4), raw["relative_error"].values, atol=TOL
    )
    assert list(line(fig.axes[0], "argmin_path").get_ydata()) == [2, 4]
    assert png_size(plotting.save(fig, str(tmp_path / "s.png"))) == (500, 400)


def test_contributions_curves_match(opened, tmp_path):
    from align import plotting

    raw = contributions_ds()
    fig = plotting.plot_contributions(opened("contributions"), agg="max", depth=opened("depth"))
    left, right = fig.axes[:2]
    # the relative norms on a log axis: an early layer's large ratio flattens the rest on a linear one
    assert left.get_yscale() == "log" and right.get_yscale() == "linear"
    for part in ("attn", "mlp", "layer"):
        ln = line(left, f"rel_norm/{part}")
        np.testing.assert_allclose(ln.get_xdata(), np.arange(5))
        np.testing.assert_allclose(
            ln.get_ydata(), raw["rel_norm"].sel(part=part, agg="max").values, atol=TOL
        )
        np.testing.assert_allclose(
            line(right, f"cos/{part}").get_ydata(),
            raw["cos"].sel(part=part, agg="max").values,
            atol=TOL,
        )
    np.testing.assert_allclose(
        line(right, "resid_cos").get_ydata(), raw["resid_cos"].sel(agg="max").values, atol=TOL
    )
    assert list(line(right, "depth/cosine").get_xdata()) == [
        2.0,
        2.0,
    ]  # the cosine ED of the depth fixture
    assert png_size(plotting.save(fig, str(tmp_path / "c.png"))) == (1200, 500)


def test_skipping_heatmaps_and_bars_match(opened, tmp_path):
    from align import plotting

    raw = skipping_ds()
    fig = plotting.plot_skipping(
        opened("skipping"), part="attn", agg="mean_over_prompts", size=(1000, 800)
    )
    for k, setting in enumerate(("current", "future")):
        (mesh,) = meshes(fig.axes[k])
        np.testing.assert_allclose(
            np.asarray(mesh.get_array()).reshape(5, 5),
            raw["R"].sel(setting=setting, part="attn", agg="mean_over_prompts").values,
            atol=TOL,
        )
        bars = fig.axes[2 + k]
        for part in ("layer", "attn", "mlp"):
            heights = [r.get_height() for r in bars.patches if r.get_gid() == f"O/{setting}/{part}"]
            np.testing.assert_allclose(
                heights,
                raw["O"].sel(setting=setting, part=part, agg="mean_over_prompts").values,
                atol=TOL,
            )
    assert png_size(plotting.save(fig, str(tmp_path / "k.png"))) == (1000, 800)


def test_lens_curves_and_depth_markers(opened, tmp_path):
    from align import plotting

    raw = lens_ds()
    fig = plotting.plot_lens(opened("lens"), depth=opened("depth"))
    kl_ax, ov_ax = fig.axes[:2]
    for w in ("token", "prompt"):
        np.testing.assert_allclose(
            line(kl_ax, f"kl/{w}").get_ydata(), raw["kl"].sel(weighting=w).values, atol=TOL
        )
        np.testing.assert_allclose(
            line(ov_ax, f"overlap/{w}").get_ydata(),
            raw["overlap"].sel(weighting=w).values,
            atol=TOL,
        )
        np.testing.assert_allclose(line(kl_ax, f"kl/{w}").get_xdata(), np.arange(6))
    assert list(line(kl_ax, "depth/kl").get_xdata()) == [1.0, 1.0]
    # The overlap ED of the fixture is undefined: no marker, and the legend says so.
    assert not [ln for ln in ov_ax.get_lines() if ln.get_gid() == "depth/overlap"]
    assert any(
        "overlap effective depth: undefined" in t.get_text() for t in ov_ax.get_legend().get_texts()
    )
    assert png_size(plotting.save(fig, str(tmp_path / "l.png"))) == (1200, 500)


def test_depth_bars(opened, tmp_path):
    from align import plotting

    fig = plotting.plot_depth(opened("depth"))
    heights = [r.get_height() for r in fig.axes[0].patches]
    np.testing.assert_allclose(heights, [3 / 5, 2 / 5, 0.0], atol=TOL)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "undefined" in texts
    assert png_size(plotting.save(fig, str(tmp_path / "d.png"))) == (700, 450)


@pytest.mark.parametrize(
    "fn,schema,given",
    [
        ("plot_alignment", "alignment", "lens"),
        ("plot_contributions", "contributions", "alignment"),
        ("plot_skipping", "skipping", "contributions"),
        ("plot_lens", "lens", "skipping"),
        ("plot_depth", "depth", "lens"),
    ],
)
def test_wrong_schema_is_refused(opened, fn, schema, given):
    from align import plotting
    from align.errors import AlignError

    with pytest.raises(AlignError) as e:
        getattr(plotting, fn)(opened(given))
    one_line_error(e, f"'{schema}'", f"'{given}'")


def test_unmarked_dataset_lacking_variables_is_refused():
    from align import plotting
    from align.errors import AlignError

    with pytest.raises(AlignError) as e:
        plotting.plot_lens(contributions_ds())  # no attrs["align"]: judged by its variables
    one_line_error(e, "'lens'", "kl")


def test_cli_plot_each_schema(result_stores, cli, tmp_path):
    for schema in ("alignment", "contributions", "skipping", "lens", "depth"):
        out = tmp_path / f"{schema}.png"
        code, stdout, stderr = cli("plot", result_stores[schema], "-o", out, "--size", "640x480")
        assert code == 0, stderr
        assert png_size(out) == (640, 480)
        assert schema in stdout


def test_cli_plot_default_output_and_depth(result_stores, cli, tmp_path):
    import shutil

    src = tmp_path / "lens.zarr"
    shutil.copytree(result_stores["lens"], src)
    code, _, stderr = cli("plot", src, "--depth", result_stores["depth"])
    assert code == 0, stderr
    assert png_size(tmp_path / "lens.png") == (1200, 500)


@pytest.mark.parametrize(
    "args,words",
    [
        (("--metric", "r2"), ["metric", "lens"]),
        (("--size", "big"), ["'big'", "WIDTHxHEIGHT"]),
        (("--size", "10x10"), ["10x10"]),
    ],
)
def test_cli_plot_bad_options(result_stores, cli, tmp_path, args, words):
    code, _, stderr = cli("plot", result_stores["lens"], "-o", tmp_path / "x.png", *args)
    assert code == 2
    assert stderr.count("\n") == 1 and stderr.startswith("align: error:")
    for w in words:
        assert w in stderr, stderr


def test_cli_plot_refuses_an_activation_store(extracted, cli, capsys, tmp_path):
    store = extracted("qwen2")
    capsys.readouterr()  # the fixture's own output
    code, _, stderr = cli("plot", store, "-o", tmp_path / "x.png")
    assert code == 2 and stderr.count("\n") == 1
    assert "activations" in stderr
