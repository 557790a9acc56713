"""`align compare`: parse options and route to align.compare."""

from __future__ import annotations

import click

from align.analyses.lens import WEIGHTINGS
from align.cli.declared import Parsed, options_of
from align.declarations import flag
from align.stats.bootstrap import MAX_RESAMPLES, MIN_RESAMPLES, RESAMPLES, Resampling

OUTPUT = flag(
    "-o",
    "--output",
    doc="also write the table, as CSV or Markdown by the suffix, and the figure beside it",
    doc_default="none (terminal only)",
    doc_metavar="TABLE.csv \\| TABLE.md",
    help="Also write the table, as CSV or Markdown by the suffix, and the figure beside it (.png).",
    metavar="TABLE.csv|TABLE.md",
)
FIGURE = flag(
    "--figure",
    doc="the figure's path: PNG, PDF or SVG by its suffix (`.png`, `.pdf`, `.svg`), written whole "
    "(drawn beside it and renamed into place)",
    doc_default="beside `-o`, with `.png`",
    help="The figure's path, PNG, PDF or SVG by its suffix (.png, .pdf, .svg) [default: beside "
    "-o, with .png].",
    metavar="FILE",
)
MEASURE = flag(
    "--measure",
    doc="alignment: compare on this measure of `align fit --measures` (`cka`, `procrustes`, ...): "
    "each result's path by the measure's direction and the measure along it "
    "([below](#on-a-similarity-measure)); `ridge` is the held-out error",
    doc_default="ridge",
    help="alignment: compare on this measure of `align fit --measures` (cka, procrustes, ...): "
    "each result's path (a similarity's argmax, a distance's argmin) and the measure along it "
    "[default: ridge, the held-out error].",
    metavar="NAME",
)
WEIGHTING = flag(
    "--weighting",
    doc="lens results: the average to compare (token-weighted, as P2's effective depths; "
    "prompt-weighted, as P1's figures)",
    help="lens: the average to compare (token-weighted, as P2's effective depths; "
    "prompt-weighted, as P1's figures).",
    choices=WEIGHTINGS,
    default="token",
)
BOOTSTRAP = flag(
    "--bootstrap",
    doc="resamples for the paired differences' 95% intervals, 100 to 1,000,000",
    help=f"Resamples of prompts for the paired differences' 95% intervals ({MIN_RESAMPLES:,} to "
    f"{MAX_RESAMPLES:,}).",
    type="int",
    default=RESAMPLES,
    metavar="N",
    parse="resamples",
)
SEED = flag(
    "--seed",
    doc="seed of that bootstrap",
    doc_metavar="N",
    help="Seed of that bootstrap.",
    type="seed",
    default=0,
)
OVERWRITE = flag(
    "--overwrite",
    doc="replace an existing table or figure (never one of the inputs)",
    help="Replace an existing table or figure.",
    is_flag=True,
)


OPTIONS = (
    OUTPUT,
    FIGURE,
    MEASURE,
    WEIGHTING,
    BOOTSTRAP,
    SEED,
    OVERWRITE,
)  # in the order of the help and of the page's table


@click.command("compare")
@click.argument("results", nargs=-1, required=True, metavar="RESULT...")
@options_of(*OPTIONS)
def compare_cmd(results, **values):
    """Several depth, lens or alignment results (one kind) in one table: each result's numbers
    with their 95% intervals and, for two results on the same prompts, their paired
    difference (later minus earlier) with its interval. With -o, also a CSV or Markdown file and a figure."""
    from align.compare import View, run_compare

    parsed = Parsed(values)
    output, figure, overwrite = parsed.take(OUTPUT), parsed.take(FIGURE), parsed.take(OVERWRITE)
    view = View(parsed.take(WEIGHTING), parsed.take(MEASURE))
    resampling = Resampling(parsed.take(BOOTSTRAP), parsed.take(SEED))
    parsed.done()
    run_compare(
        results,
        output,
        figure,
        view=view,
        resampling=resampling,
        overwrite=overwrite,
        echo=lambda text: click.echo(text, nl=False),
    )


commands = [compare_cmd]
