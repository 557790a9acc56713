"""The report's small figures, drawn from what the results hold: a matrix panel with its path
(one per measure, side by side on a pair's page, each on its own colour scale), the index's
thumbnails (with axes, on one colour scale per measure) and the colour bar they share.

Every text is at least 7 pt at 100 dpi (9.7 CSS px at the size the report shows it)."""

from __future__ import annotations

import textwrap

import numpy as np

from align.measures import SIMILARITY
from align.plotting import figure
from align.plotting.common import edges, ticks

SMALL = 7  # pt: ticks, labels and legends of the small figures
PANEL = (340, 400)  # px: a matrix panel (a phone's column holds it)
THUMB = (200, 170)  # px: an index thumbnail


def cmap_of(direction: str) -> str:
    """Darker is closer: viridis for a distance (low dark), its reverse for a similarity."""
    return "viridis_r" if direction == SIMILARITY else "viridis"


def inner_range(matrices) -> tuple:
    """(min, max) of the finite cells with source and target boundary ≥ 1 of every matrix
    (DataArrays over source_boundary, target_boundary), where boundary 0, which maps almost
    perfectly, would flatten the rest; the whole matrices where that block is empty; (None,
    None) without a finite cell."""
    values = []
    for m in matrices:
        block = m.sel(
            source_boundary=m.source_boundary >= 1, target_boundary=m.target_boundary >= 1
        )
        v = (block if block.size else m).values.astype(np.float64)
        values.append(v[np.isfinite(v)])
    v = np.concatenate(values) if values else np.array([])
    return (float(v.min()), float(v.max())) if v.size else (None, None)


def extend_of(matrices, vmin, vmax) -> str:
    """The colour bar's `extend`: which ends have cells beyond [vmin, vmax]."""
    v = np.concatenate([m.values.astype(np.float64).ravel() for m in matrices])
    v = v[np.isfinite(v)]
    below, above = bool((v < vmin).any()), bool((v > vmax).any())
    return {(False, False): "neither", (True, False): "min", (False, True): "max"}.get(
        (below, above), "both"
    )


def _mesh(ax, m, direction, vmin, vmax):
    src, tgt = m["source_boundary"].values, m["target_boundary"].values
    return ax.pcolormesh(
        edges(tgt),
        edges(src),
        m.values.astype(np.float64),
        cmap=cmap_of(direction),
        vmin=vmin,
        vmax=vmax,
        shading="flat",
    )


def _axes(ax, m, Ls, Lt, path_rows, path, fontsize):
    src, tgt = m["source_boundary"].values, m["target_boundary"].values
    if path:
        ax.plot(path, path_rows, "o-", color="white", mec="black", ms=3, lw=1.2, gid="path")
    ax.plot([0, Lt], [0, Ls], "--", color="red", lw=1, gid="equal_depth")
    ax.set_xlim(edges(tgt)[0], edges(tgt)[-1])
    ax.set_ylim(edges(src)[0], edges(src)[-1])
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(ticks(nbins=4, integer=True))
    ax.tick_params(labelsize=fontsize, length=2, pad=1)


def panel(m, direction: str, title: str, path_rows, path, Ls: int, Lt: int, size=PANEL):
    """One matrix `m` (source_boundary, target_boundary) on its own colour scale (the i, j ≥ 1
    block's range: `inner_range`, the rest clipped and the bar extended), its path (target
    `path` per source row `path_rows`) in white, the line of equal relative depth dashed red,
    the title wrapped to the panel, a colour bar under it. Returns a Figure of `size` px."""
    fig, axes = figure(size, 100, 1, 1, layout="constrained")
    ax = axes[0, 0]
    vmin, vmax = inner_range([m])
    mesh = _mesh(ax, m, direction, vmin, vmax)
    _axes(ax, m, Ls, Lt, path_rows, path, SMALL + 1)
    ax.set_xlabel("target boundary", fontsize=SMALL + 1)
    ax.set_ylabel("source boundary", fontsize=SMALL + 1)
    chars = max(20, int(size[0] / 7.5))
    ax.set_title(textwrap.fill(title, chars), fontsize=SMALL + 2)
    bar = fig.colorbar(
        mesh, ax=ax, orientation="horizontal", shrink=0.9, extend=extend_of([m], vmin, vmax)
    )
    bar.ax.tick_params(labelsize=SMALL)
    bar.ax.xaxis.set_major_locator(ticks(nbins=4))
    bar.set_label(
        ("larger" if direction == SIMILARITY else "smaller") + " is closer", fontsize=SMALL
    )
    return fig


def thumbnail(m, direction: str, scale: tuple, path_rows, path, Ls: int, Lt: int, size=THUMB):
    """A thumbnail of matrix `m` on the shared scale (vmin, vmax) (the colour bar beside the
    grid, `colour_bar`), with axes (boundary ticks, "source ↑" and "target →") and its path."""
    vmin, vmax = scale
    fig, axes = figure(size, 100, 1, 1, layout="constrained")
    ax = axes[0, 0]
    _mesh(ax, m, direction, vmin, vmax)
    _axes(ax, m, Ls, Lt, path_rows, path, SMALL)
    ax.set_xlabel("target →", fontsize=SMALL, labelpad=1)
    ax.set_ylabel("source →", fontsize=SMALL, labelpad=1)
    return fig


def colour_bar(label: str, direction: str, vmin, vmax, extend: str = "neither", size=(340, 90)):
    """The grid's shared colour bar: [vmin, vmax] of `direction`'s colour map, `label` under it."""
    import matplotlib as mpl

    fig, axes = figure(size, 100, 1, 1, layout="constrained")
    norm = mpl.colors.Normalize(vmin=vmin, vmax=vmax)
    bar = fig.colorbar(
        mpl.cm.ScalarMappable(norm=norm, cmap=cmap_of(direction)),
        cax=axes[0, 0],
        orientation="horizontal",
        extend=extend,
    )
    bar.ax.tick_params(labelsize=SMALL + 1)
    bar.ax.xaxis.set_major_locator(ticks(nbins=5))
    bar.set_label(textwrap.fill(label, 60), fontsize=SMALL + 1)
    return fig
