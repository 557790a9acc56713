"""What the tiny study's report pages hold, checked against the results' numbers with numpy:
the controls each on their own colour scale, the index's thumbnails on one scale per measure
with axes and one colour bar, a model page's curves with their values and intervals side by
side, the note beside a degenerate interval (worked by hand), provenance collapsed. The
browser test (test_study_report_browser.py) checks how the pages show on a screen."""

from __future__ import annotations

import re

import numpy as np
import pytest

DIMS = ("source_boundary", "target_boundary")


def _inner(ds, var="relative_error"):
    """The block of source and target boundary >= 1 of `var`, as numpy."""
    m = ds[var].transpose(*DIMS)
    return m.values[np.ix_(m.source_boundary.values >= 1, m.target_boundary.values >= 1)]


@pytest.fixture(scope="module")
def report(tiny_study):
    """(DIR, {relative path: HTML}) of the tiny study's report, built again here."""
    from align.study.report import build_pages
    from align.study.state import read_state

    _, root, _ = tiny_study
    return root, build_pages(root, read_state(root))


def _fit(root, stem):
    from align.store import open_result

    return open_result(f"{root}/results/fits/{stem}.zarr")


def test_the_controls_are_each_on_their_own_colour_scale(report):
    """The trained pair and its shuffle control are drawn one panel each, each colour scale
    spanning its own matrix's i, j >= 1 block (numpy's min and max), so the control's larger
    errors do not wash the trained matrix out."""
    from matplotlib.collections import QuadMesh

    from align.study import figures, views

    root, pages = report
    page = pages["pairs/a--b.html"]
    assert 'aria-label="a → b, trained: relative error' in page
    assert 'aria-label="a → b, shuffle: relative error' in page
    for stem in ("a--b", "a--b.shuffle"):
        ds = _fit(root, stem)
        v = views.view_of(ds, views.RIDGE)
        fig = figures.panel(v.matrix, v.direction, "t", v.rows, v.path, 2, 4)
        (mesh,) = [c for c in fig.axes[0].collections if isinstance(c, QuadMesh)]
        block = _inner(ds)
        assert (mesh.norm.vmin, mesh.norm.vmax) == (block.min(), block.max()), stem
        # the path drawn is the summary's argmin over the block, recomputed here
        tgt = ds.target_boundary.values[ds.target_boundary.values >= 1]
        assert v.path == [int(tgt[k]) for k in block.argmin(axis=1)], stem


def test_the_index_thumbnails_share_one_scale_with_axes_and_a_colour_bar(report):
    """Every thumbnail of ridge's grid is drawn on the scale of every pair's i, j >= 1 block
    (numpy over both pairs), with boundary ticks and axis names; the grid has one colour bar."""
    from matplotlib.collections import QuadMesh

    from align.study import figures, views

    root, pages = report
    fits = [_fit(root, s) for s in ("a--b", "a--c")]
    blocks = np.concatenate([_inner(ds).ravel() for ds in fits])
    mats = [views.view_of(ds, views.RIDGE).matrix for ds in fits]
    vmin, vmax = figures.inner_range(mats)
    assert (vmin, vmax) == (blocks.min(), blocks.max())
    v = views.view_of(fits[0], views.RIDGE)
    fig = figures.thumbnail(v.matrix, v.direction, (vmin, vmax), v.rows, v.path, 2, 4)
    ax = fig.axes[0]
    (mesh,) = fig.findobj(QuadMesh)
    assert (mesh.norm.vmin, mesh.norm.vmax) == (vmin, vmax)
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] and ax.get_xlabel() == "target →"
    assert [t.get_text() for t in ax.get_yticklabels()] and ax.get_ylabel() == "source →"
    assert pages["index.html"].count('aria-label="colour bar of ridge"') == 1


def test_a_model_page_shows_values_with_their_intervals(report, tiny_study):
    """The contributions table has one column per part and aggregation holding the value and,
    for the means the bootstrap covers, its interval, each as the result holds it (4
    decimals); no column of bounds alone."""
    from align.store import open_result

    root, pages = report
    ds = open_result(f"{root}/results/contrib/a.zarr")
    page = pages["models/a.html"]
    assert "rel_norm_low" not in page and "rel_norm attn mean [95%]" in page
    for part in ("attn", "mlp", "layer"):
        for layer in ds.layer.values:
            at = dict(part=part, layer=layer)
            v = float(ds["rel_norm"].sel(at | {"agg": "mean"}))
            lo, hi = float(ds["rel_norm_low"].sel(at)), float(ds["rel_norm_high"].sel(at))
            assert f"{v:.4f} [{lo:.4f}, {hi:.4f}]" in page, (part, layer)
            top = float(ds["rel_norm"].sel(at | {"agg": "max"}))
            assert f"{top:.4f}</td>" in page, (part, layer)


@pytest.mark.parametrize(
    "point, low, high, words",
    [
        (0.469, 0.469, 0.469, "zero width"),
        (0.717, 0.677, 0.717, "at its upper end"),
        (0.2, 0.2, 0.35, "at its lower end"),
        (0.5, 0.4, 0.6, ""),
        (0.4691, 0.46899, 0.4694, "zero width"),  # the same at the 3 decimals shown
        (0.5, float("nan"), float("nan"), ""),
    ],
)
def test_a_degenerate_interval_is_explained(point, low, high, words):
    from align.study import html as h

    note = h.degenerate(point, low, high)
    assert note.startswith(words) if words else note == ""
    assert ("path does not move" in h.degenerate(point, low, high, path=True)) == (
        words == "zero width"
    )


def test_the_index_notes_each_degenerate_interval_it_shows(report, tiny_study):
    """Each statistic of the index's table whose interval, at the digits shown, has zero width
    or ends at the estimate carries its note; the others carry none."""
    root, pages = report
    cells = re.findall(
        r'<td>(\S+ \[[^<\]]*\])(<span class="note">([^<]*)</span>)?</td>', pages["index.html"]
    )
    assert cells
    for shown, _, note in cells:
        p, lo, hi = re.fullmatch(r"(\S+) \[(\S+), (\S+)\]", shown).groups()
        want = "zero width" if lo == hi else "at its upper end" if p == hi else ""
        want = want or ("at its lower end" if p == lo else "")
        assert note.startswith(want) if want else note == "", (shown, note)


def test_provenance_is_collapsed_under_one_line(report, tiny_study):
    """A pair page's provenance (every held-out document id among it) is in a closed
    <details> whose summary names the pair and counts the held-out documents."""
    root, pages = report
    ds = _fit(root, "a--b")
    page = pages["pairs/a--b.html"]
    (block,) = re.findall(r"<details>(.*?)</details>", page, re.S)
    summary = re.match(r"<summary>([^<]*)</summary><pre>", block).group(1)
    assert f"{ds.sizes['heldout_doc']:,} held-out documents" in summary
    assert page.count("<pre>") == 1 and "<details open" not in page
