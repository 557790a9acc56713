"""Figures fit for a paper: the clipped colour scale said in the colour bar, short titles with
model names without hashes, the pairing of two tokenizers in the caption, the intervals of
contrib, lens and skip (O's bars) drawn as the result holds them, the depth plot's reasons whole and
horizontal, and PDF and SVG files written whole (read back: magic bytes, page size, XML)."""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from tests.helpers.assertions import one_line_error
from tests.helpers.fixtures_demo import (
    alignment_ds,
    contributions_ds,
    depth_ds,
    lens_ds,
    skipping_ds,
)

TOL = 1e-12  # the artists hold the very float64 values given


def _colorbar(fig):
    (cb,) = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    return cb._colorbar


def test_clipping_is_marked_on_the_colour_bar():
    from align import plotting

    ds = alignment_ds(name_s="shallow-4f2a9c01b3de", name_t="deep-0123456789ab")
    ds["relative_error"][0, :] = 0.01  # boundary 0: below every cell of boundaries >= 1 (0.2..)
    cb = _colorbar(plotting.plot_alignment(ds))
    assert cb.extend == "min"
    assert "boundary-0 cells beyond it clipped" in cb.ax.get_ylabel()
    # nothing beyond the scale: no extension, no word of clipping
    flat = alignment_ds()
    flat["relative_error"][0, :] = 0.5
    flat["relative_error"][:, 0] = 0.5
    cb = _colorbar(plotting.plot_alignment(flat))
    assert cb.extend == "neither" and "clipped" not in cb.ax.get_ylabel()


def test_titles_name_the_pair_without_hashes_and_random_init():
    from align import plotting

    ds = alignment_ds(name_s="shallow-4f2a9c01b3de", name_t="deep-0123456789ab")
    ds.attrs["target"] = {"random_init": True, "seed": 3}
    ax = plotting.plot_alignment(ds).axes[0]
    assert ax.get_title() == "shallow → deep (random init)"
    assert "deep, random init (seed 3) (6 layers)" in ax.get_xlabel()


def test_cross_tokenizer_caption_says_pairing_and_coverage():
    from align import plotting

    ds = alignment_ds()
    ds.attrs["pairing"] = {
        "mode": "char-anchors",
        "pairs": 1234,
        "source": {"coverage": 0.41, "tokens": 3000, "anchors": 1234},
        "target": {"coverage": 1.0, "tokens": 1234, "anchors": 1234},
    }
    ax = plotting.plot_alignment(ds).axes[0]
    (caption,) = [t for t in ax.texts if t.get_gid() == "caption"]
    assert caption.get_text().endswith(
        "pairing char-anchors: 1,234 anchored pairs; coverage source 41% of 3,000 tokens, "
        "target 100% of 1,234 tokens"
    )
    one = alignment_ds()
    one.attrs["pairing"] = {"mode": "tokens"}
    (caption,) = [t for t in plotting.plot_alignment(one).axes[0].texts if t.get_gid() == "caption"]
    assert "pairing" not in caption.get_text()


def _bars(ax, gid):
    """(x, low, high) of the error bars with this gid, from their segments."""
    from matplotlib.collections import LineCollection

    (col,) = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_gid() == gid]
    segs = np.array(col.get_segments())  # (n, 2 ends, xy)
    return segs[:, 0, 0], segs[:, 0, 1], segs[:, 1, 1]


def _with_intervals(ds, names, rng):
    for name in names:
        v = ds[name].sel(agg="mean") if "agg" in ds[name].dims else ds[name]
        ds[f"{name}_low"] = v - rng.uniform(0.01, 0.2, v.shape)
        ds[f"{name}_high"] = v + rng.uniform(0.01, 0.2, v.shape)
    ds.attrs["bootstrap"] = {"level": 0.95, "resamples": 1000, "seed": 0}
    return ds


def test_contributions_draw_their_intervals():
    from align import plotting

    rng = np.random.default_rng(0)
    ds = _with_intervals(contributions_ds(), ("rel_norm", "cos", "resid_cos"), rng)
    fig = plotting.plot_contributions(ds)
    for ax, name in ((fig.axes[0], "rel_norm"), (fig.axes[1], "cos")):
        for part in ("attn", "mlp", "layer"):
            x, lo, hi = _bars(ax, f"{name}-interval/{part}")
            np.testing.assert_allclose(x, np.arange(5))
            np.testing.assert_allclose(lo, ds[f"{name}_low"].sel(part=part).values, atol=TOL)
            np.testing.assert_allclose(hi, ds[f"{name}_high"].sel(part=part).values, atol=TOL)
    _, lo, hi = _bars(fig.axes[1], "resid_cos-interval")
    np.testing.assert_allclose(lo, ds["resid_cos_low"].values, atol=TOL)
    np.testing.assert_allclose(hi, ds["resid_cos_high"].values, atol=TOL)
    assert "95% intervals over 1,000 prompt resamples" in fig.get_supxlabel()
    # the intervals are of the means: the max curves draw none, and the figure says so
    fig = plotting.plot_contributions(ds, agg="max")
    assert not [c for c in fig.axes[0].collections if "interval" in str(c.get_gid())]
    assert "no intervals drawn" in fig.get_supxlabel()


def test_lens_draws_its_intervals():
    from align import plotting

    rng = np.random.default_rng(1)
    ds = _with_intervals(lens_ds(), ("kl", "overlap"), rng)
    fig = plotting.plot_lens(ds)
    for ax, name in ((fig.axes[0], "kl"), (fig.axes[1], "overlap")):
        for w in ("token", "prompt"):
            x, lo, hi = _bars(ax, f"{name}-interval/{w}")
            np.testing.assert_allclose(x, np.arange(6))
            np.testing.assert_allclose(lo, ds[f"{name}_low"].sel(weighting=w).values, atol=TOL)
            np.testing.assert_allclose(hi, ds[f"{name}_high"].sel(weighting=w).values, atol=TOL)


@pytest.mark.parametrize("agg", ["max", "mean_over_prompts"])
def test_skipping_draws_the_intervals_of_o(agg):
    from align import plotting

    rng = np.random.default_rng(4)
    ds = skipping_ds()  # L = 5, parts layer, attn, mlp
    for name in ("R", "O"):
        ds[f"{name}_low"] = ds[name] - rng.uniform(0.01, 0.2, ds[name].shape)
        ds[f"{name}_high"] = ds[name] + rng.uniform(0.01, 0.2, ds[name].shape)
    ds.attrs["bootstrap"] = {"level": 0.95, "resamples": 1000, "seed": 7}
    fig = plotting.plot_skipping(ds, agg=agg)
    parts = ["layer", "attn", "mlp"]
    for k, setting in enumerate(["current", "future"]):
        ax = fig.axes[2 + k]  # the bottom row: O[s] bars
        for q, part in enumerate(parts):
            x, lo, hi = _bars(ax, f"O-interval/{setting}/{part}")
            # each part's bar sits at s + (q - 1) * 0.8 / 3: three bars in 0.8 of a slot
            np.testing.assert_allclose(x, np.arange(5) + (q - 1) * 0.8 / 3, atol=TOL)
            want = {
                v: ds[f"O_{v}"].sel(setting=setting, part=part, agg=agg).values
                for v in ("low", "high")
            }
            np.testing.assert_allclose(lo, want["low"], atol=TOL)
            np.testing.assert_allclose(hi, want["high"], atol=TOL)
    assert fig.get_supxlabel() == (
        "bars: 95% intervals over 1,000 prompt resamples (seed 7) of O[s]; R[s, l] drawn "
        "without its interval (R_low, R_high)"
    )
    # a result without intervals draws none and says so
    fig = plotting.plot_skipping(skipping_ds(), agg=agg)
    assert not [c for ax in fig.axes for c in ax.collections if "interval" in str(c.get_gid())]
    assert fig.get_supxlabel() == "no intervals drawn"


def test_depth_reasons_are_whole_horizontal_and_legible():
    from align import plotting

    reason = "the mean cosine never crosses from negative to non-negative between layers 0 and 4"
    ds = depth_ds(eds=(float("nan"), 1.0, float("nan")))
    ds.attrs["reasons"] = {"cosine": reason, "overlap": "overlap never exceeds 0.3"}
    ax = plotting.plot_depth(ds).axes[0]
    (text,) = [t for t in ax.texts if t.get_gid() == "reason/cosine"]
    assert " ".join(text.get_text().split()) == reason  # whole, wrapped at spaces
    assert text.get_rotation() == 0 and text.get_fontsize() >= 8
    assert text.get_text() == textwrap.fill(reason, 24)


@pytest.mark.parametrize("suffix", [".pdf", ".svg"])
def test_pdf_and_svg_are_written_whole(suffix, tmp_path):
    from align import plotting

    path = plotting.save(plotting.plot_alignment(alignment_ds()), str(tmp_path / f"a{suffix}"))
    data = open(path, "rb").read()
    # 900x750 px at 100 dpi: 9 x 7.5 in, 648 x 540 pt
    if suffix == ".pdf":
        assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
        assert b"/MediaBox [ 0 0 648 540 ]" in data
    else:
        root = ET.fromstring(data)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert (root.get("width"), root.get("height")) == ("648pt", "540pt")
    assert [p.name for p in tmp_path.iterdir()] == [f"a{suffix}"]  # no temporary left


def test_cli_plot_writes_pdf_and_refuses_other_suffixes(result_stores, cli, tmp_path):
    code, out, err = cli("plot", result_stores["lens"], "-o", tmp_path / "l.pdf")
    assert code == 0, err
    assert open(tmp_path / "l.pdf", "rb").read(5) == b"%PDF-"
    code, out, err = cli("plot", result_stores["lens"], "-o", tmp_path / "l.jpg")
    one_line_error(code, err, "l.jpg", ".png or .pdf or .svg")
    assert not (tmp_path / "l.jpg").exists()
