"""What every figure shares: the headless backend, the default sizes, the schema check, the
figure of an exact pixel size, the file (PNG, PDF or SVG) written whole, cell edges and number
formats.

Matplotlib is imported at the first figure (`pyplot`), not with align.plotting, so that the
commands and modules that only read or check results do not pay for it. It runs headless (the
Agg backend) unless the caller chose another backend before that first figure."""

from __future__ import annotations

import math
import os
import sys

import numpy as np

from align.errors import InputError
from align.faults import fault_point
from align.store.temporaries import staged

DEFAULT_SIZE = {
    "alignment": (900, 750),
    "contributions": (1200, 500),
    "skipping": (1200, 900),
    "lens": (1200, 500),
    "depth": (700, 450),
    "erasure": (1200, 420),
    "igrad": (1200, 420),
    "depthscore": (1000, 420),
}
_REQUIRED = {
    "alignment": ("relative_error", "r2"),
    "contributions": ("rel_norm", "cos", "resid_cos"),
    "skipping": ("R", "O"),
    "lens": ("kl", "overlap"),
    "depth": ("effective_depth", "ratio"),
    "erasure": ("effect", "token", "predicts_answer", "n_tokens"),
    "igrad": ("attribution", "token", "predicts_answer", "n_tokens"),
    "depthscore": ("DS", "n_prompts"),
}
MAX_PANELS = 4  # prompts drawn by default, one row of panels each
# A figure's file format by its path's suffix: PNG of exactly the figure's pixel size, or the
# vector formats papers take (PDF, SVG) at the size in inches it has at its dpi.
FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg"}


def schema_of(ds) -> str | None:
    """The schema a result Dataset declares in attrs["align"], or None when it declares none."""
    marker = ds.attrs.get("align")
    return marker.get("schema") if isinstance(marker, dict) else None


def check_schema(ds, schema: str, what: str = "this plot") -> None:
    """Raise InputError (one line) unless `ds` is a result of `schema` holding its variables."""
    found = schema_of(ds)
    if found is not None and found != schema:
        raise InputError(
            f"{what} needs a result of schema {schema!r}, got one of schema {found!r}: "
            f"use the plot function for {found!r} (or `align plot`, which picks it)"
        )
    missing = [v for v in _REQUIRED[schema] if v not in ds.variables]
    if missing:
        raise InputError(
            f"{what} needs a result of schema {schema!r}; this Dataset lacks {', '.join(missing)}"
        )


def pyplot():
    """matplotlib.pyplot, imported here at the first figure, not at align.plotting's import: the
    commands and modules that only read results never pay for matplotlib. Headless (Agg) by
    default; a notebook (MPLBACKEND set by the kernel) or a caller that already imported pyplot
    keeps its own backend."""
    if "MPLBACKEND" not in os.environ and "matplotlib.pyplot" not in sys.modules:
        import matplotlib

        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def ticks(**kw):
    """A tick locator of at most `nbins` ticks (`integer=True`: on whole numbers only), as
    matplotlib's MaxNLocator takes them."""
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(**kw)


def figure(size, dpi, nrows=1, ncols=1, **kw):
    """(Figure of `size` = (width, height) pixels at `dpi`, its (nrows, ncols) array of axes)."""
    w, h = size
    if w < 50 or h < 50:
        raise InputError(f"figure size {w}x{h} px is too small: give at least 50x50")
    fig, axes = pyplot().subplots(
        nrows, ncols, figsize=(w / dpi, h / dpi), dpi=dpi, squeeze=False, **kw
    )
    return fig, axes


def save(fig, path: str) -> str:
    """Write `fig` at `path`, whole or not at all, and close it.

    A PNG of exactly its pixel size (no tight bounding box), or a PDF or SVG of its size in
    inches, by the path's suffix (`FORMATS`): drawn inside a marked temporary folder beside
    `path` and renamed over it (align.store.temporaries: a killed run's folder is cleaned by the
    next write of `path`).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    path : str
        Where it goes: .png, .pdf or .svg.

    Returns
    -------
    str
        `path`.

    Raises
    ------
    InputError
        A suffix that is not one of `FORMATS`.
    StoreError
        A full disk, naming `path`, which is left as it was.
    """
    fmt = figure_format(path)
    with staged(path) as tmp:
        write_figure(fig, tmp, fmt)
        fault_point("figure_before_rename")
    return path


def figure_format(path: str) -> str:
    """ "png", "pdf" or "svg" by the suffix of `path`, or the one-line InputError."""
    suffix = os.path.splitext(str(path))[1].lower()
    if suffix not in FORMATS:
        raise InputError(
            f"figure path {path} ends in {suffix or 'no suffix'}: give a path ending in "
            f"{', '.join(FORMATS)}"
        )
    return FORMATS[suffix]


def write_png(fig, path: str) -> None:
    """Draw `fig` into the file `path` as a PNG of exactly its pixel size, and close it."""
    write_figure(fig, path, "png")


def write_figure(fig, path: str, fmt: str = "png") -> None:
    """Draw `fig` into the file `path` in `fmt` ("png", "pdf", "svg"), and close it."""
    try:
        fig.savefig(path, dpi=fig.dpi, format=fmt)
    finally:
        pyplot().close(fig)


def edges(values) -> np.ndarray:
    """Cell edges around sorted coordinate values (midpoints; the outer cells as wide as
    their neighbour), so non-contiguous boundaries (e.g. 0, 4, 8) draw as cells."""
    v = np.asarray(values, dtype=float)
    if len(v) == 1:
        return np.array([v[0] - 0.5, v[0] + 0.5])
    mid = (v[1:] + v[:-1]) / 2
    return np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])


def fmt(x, digits=2) -> str:
    """`x` with `digits` decimals, or "undefined" for None and non-finite floats."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "undefined"
    return f"{x:.{digits}f}"


def label_curves(axes, xlabel: str) -> None:
    """Integer ticks, the x label and a legend on each axes of a row of per-layer curves."""
    for ax in axes:
        ax.xaxis.set_major_locator(ticks(integer=True))
        ax.set_xlabel(xlabel)
        ax.legend(fontsize=8)
