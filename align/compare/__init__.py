"""Several results of one kind side by side (`align compare`): depth, lens or alignment.

Each result gives one series of numbers with the intervals it holds (a depth or lens result's
prompt bootstrap; an alignment result's, where it holds any). Two results that ran on the same
prompts (the same `prompts_hash`, and for depth results the same `lens_prompts_hash`) also
give their paired difference, later minus earlier in the order given, with a prompt-bootstrap
interval: both results are resampled with the same indices (`align.stats.bootstrap`; for
depth, `depth.resample_indices` from rng = numpy.random.default_rng(seed)), so what the
prompts share cancels. The table has one row per result (per result and boundary for lens),
so a row of published numbers can be put beside them in the same columns.

With a `measure` of `align fit --measures`, alignment results are compared on that measure's
matrix instead (`measures`: its path by its direction, its mean on the path).

Modules: `series` (the records), `checks` (what a result must hold), `comparisons` (results →
Comparison), `measures` (alignment results on one measure), `table` (text, Markdown, CSV),
`plot` (the figure); the command is here.
"""

from __future__ import annotations

import contextlib
import os

from align import messages
from align import store as st
from align.compare.comparisons import KINDS, WEIGHTINGS, build, load
from align.compare.plot import plot_comparison
from align.compare.series import Comparison, Series, View
from align.compare.table import csv_table, text_table
from align.errors import OutputRefused
from align.plotting.common import FORMATS as FIGURE_FORMATS
from align.plotting.common import figure_format, write_figure
from align.stats import bootstrap
from align.store.temporaries import staged

__all__ = [
    "FORMATS",
    "KINDS",
    "WEIGHTINGS",
    "Comparison",
    "Series",
    "View",
    "build",
    "default_figure",
    "load",
    "output_format",
    "run_compare",
]

FORMATS = {".csv": "csv", ".md": "markdown"}


def output_format(path: str) -> str:
    """ "csv" or "markdown" from -o's suffix; anything else is refused."""
    ext = os.path.splitext(str(path))[1].lower()
    if ext not in FORMATS:
        raise OutputRefused(
            f"`output` {path}: give a file ending in .csv or .md (the table's format is read from the suffix)"
        )
    return FORMATS[ext]


def default_figure(output: str) -> str:
    """TABLE.csv -> TABLE.png beside it."""
    return os.path.splitext(str(output))[0] + ".png"


def _check_new_file(path: str, suffix, option: str, inputs: dict, overwrite: bool) -> None:
    st.check_file_output(path, suffix, inputs=inputs)
    if os.path.lexists(os.path.expanduser(path)) and not overwrite:
        raise OutputRefused(
            f"{option} {path} already exists: pass `overwrite` to replace it, or choose another path"
        )


def _write_text(path: str, text: str) -> None:
    """`text` into the file `path`, UTF-8, newlines as given."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def run_compare(
    paths,
    output: str | None = None,
    figure: str | None = None,
    *,
    view: View | None = None,
    resampling: bootstrap.Resampling | None = None,
    overwrite: bool = False,
    echo=None,
    log=None,
) -> Comparison:
    """Run `align compare`: print the table, and write it and its figure when asked.

    With `output` (.csv or .md) the table is written and a figure (`figure`: PNG, PDF or SVG
    by its suffix; default: beside the table as .png); with only `figure`, the figure.

    Parameters
    ----------
    paths : list of str
        Results of one kind (alignments, or results of one analysis).
    output : str, optional
        The table's file, .csv or .md.
    figure : str, optional
        The figure's file: .png, .pdf or .svg.
    view : View, optional
        The lens weighting ("token" or "prompt") and the alignment measure (default:
        `View()`: token weighting, ridge).
    resampling : Resampling, optional
        How the intervals are drawn.
    overwrite : bool, optional
        Replace the files at `output` and `figure`.
    echo : callable, optional
        Receives the text table (default: stdout).
    log : callable, optional
        Receives each message (default: stderr).

    Returns
    -------
    Comparison
        The series compared.

    Raises
    ------
    OutputRefused
        A figure at the table's path, or a file that `overwrite` does not allow to replace.
    """
    view = view or View()
    echo = echo or (lambda text: print(text, end=""))
    log = log or messages.say
    paths = [str(p) for p in paths]
    inputs = {f"RESULT {p}": p for p in paths}
    fmt = output_format(output) if output is not None else None
    fig_path = figure or (default_figure(output) if output is not None else None)
    if output is not None:
        _check_new_file(output, os.path.splitext(output)[1].lower(), "`output`", inputs, overwrite)
    if fig_path is not None:
        if output is not None and os.path.abspath(os.path.expanduser(fig_path)) == os.path.abspath(
            os.path.expanduser(output)
        ):
            raise OutputRefused(
                f"`figure` {fig_path} is the table's path: give the figure another name"
            )
        if figure:
            figure_format(fig_path)
        _check_new_file(
            fig_path,
            tuple(FIGURE_FORMATS),
            "`figure`" if figure else "the figure",
            inputs,
            overwrite,
        )
    kind, items = load(paths)
    cmp = build(kind, items, view.weighting, resampling, view.measure)
    echo(text_table(cmp))
    fig = plot_comparison(cmp) if fig_path is not None else None
    # The table and the figure are each made whole beside their paths, and renamed into place
    # only once both are: a failure (a full disk) leaves neither, and the old files as they were.
    written = []
    with contextlib.ExitStack() as staging:
        if output is not None:
            table = csv_table(cmp) if fmt == "csv" else text_table(cmp, markdown=True)
            _write_text(staging.enter_context(staged(output)), table)
            written.append(output)
        if fig is not None:
            write_figure(fig, staging.enter_context(staged(fig_path)), figure_format(fig_path))
            written.append(fig_path)
    if written:
        log(f"align compare: wrote {' and '.join(written)} ({len(items)} {kind} results)")
    return cmp
