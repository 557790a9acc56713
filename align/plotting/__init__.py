"""Figures from result Datasets (the xarray Datasets that `align.store.open_result` returns).

Every function here draws what a result already holds and computes no new statistic: the
argmin path and the summary numbers of an alignment come from its `summary` attribute (written
by `align fit`, docs/methods.md#held-out-scores), effective depths from a "depth" result (§5). Each function
returns a matplotlib Figure of exactly `size` pixels (width, height) at `dpi`; `save(fig, path)`
writes it as a PNG of that size, or as a PDF or SVG by the path's suffix. Matplotlib is imported at the first figure and runs headless (the Agg
backend) unless the caller chose another backend before it.

A Dataset of another schema is refused with a one-line AlignError naming both schemas.

Modules: `common` (backend, sizes, the schema check, the PNG writer), `alignment` (the error
matrix), `analyses` (contributions, skipping, lens, depth, depth score, erasure, integrated
gradients); `plot_result` here picks the function of a result's schema.
"""

from __future__ import annotations

import inspect

from align.errors import InputError
from align.plotting.alignment import (
    METRICS,
    argmax_path,
    caption,
    nonfinite_cells,
    plot_alignment,
    plot_alignments,
    plot_measure,
    summary_text,
)
from align.plotting.analyses import (
    plot_contributions,
    plot_depth,
    plot_depthscore,
    plot_erasure,
    plot_igrad,
    plot_lens,
    plot_lenses,
    plot_skipping,
)
from align.plotting.common import (
    DEFAULT_SIZE,
    FORMATS,
    MAX_PANELS,
    check_schema,
    figure,
    save,
    schema_of,
    write_figure,
    write_png,
)

__all__ = [
    "DEFAULT_SIZE",
    "FORMATS",
    "MAX_PANELS",
    "METRICS",
    "PLOTTERS",
    "argmax_path",
    "caption",
    "check_schema",
    "figure",
    "nonfinite_cells",
    "plot_alignment",
    "plot_alignments",
    "plot_measure",
    "plot_contributions",
    "plot_depth",
    "plot_depthscore",
    "plot_erasure",
    "plot_igrad",
    "plot_lens",
    "plot_lenses",
    "plot_result",
    "plot_skipping",
    "save",
    "schema_of",
    "summary_text",
    "write_figure",
    "write_png",
]

PLOTTERS = {
    "alignment": plot_alignment,
    "contributions": plot_contributions,
    "skipping": plot_skipping,
    "lens": plot_lens,
    "depth": plot_depth,
    "erasure": plot_erasure,
    "igrad": plot_igrad,
    "depthscore": plot_depthscore,
}


def plot_result(ds, **options):
    """Draw any result Dataset with the function of its schema.

    Parameters
    ----------
    ds : xarray.Dataset
        A result of any schema.
    **options
        Go to that schema's function (unknown ones for that schema are refused).

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        A Dataset of no result schema, or an option that does not apply to it.
    """
    schema = schema_of(ds)
    if schema not in PLOTTERS:
        raise InputError(
            f"cannot plot a Dataset of schema {schema!r}: align plots {', '.join(PLOTTERS)}"
        )
    fn = PLOTTERS[schema]
    allowed = set(inspect.signature(fn).parameters) - {"ds"}
    bad = [k for k, v in options.items() if v is not None and k not in allowed]
    if bad:
        raise InputError(f"option {bad[0].replace('_', '-')!r} does not apply to a {schema} result")
    return fn(ds, **{k: v for k, v in options.items() if v is not None})
