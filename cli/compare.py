"""`align compare`: parse options and route to align.compare."""

from __future__ import annotations

import click

from align.analyses.lens import WEIGHTINGS
from align.cli.declared import Parsed, options_of
from align.compare import View, run_compare
from align.declarations import flag
from align.stats.bootstrap import RESAMPLES, Resampling

OUTPUT = flag(
    "-o",
    "--output",
    help="also write the table, as CSV or Markdown by the suffix, and the figure beside it",
    metavar="TABLE.csv \\| TABLE.md",
    shown_default="none (terminal only)",
)
FIGURE = flag(
    "--figure",
    help="the figure's path: PNG, PDF or SVG by its suffix (`.png`, `.pdf`, `.svg`), written whole "
    "(drawn beside it and renamed into place)",
    metavar="FILE",
    shown_default="beside `-o`, with `.png`",
)
MEASURE = flag(
    "--measure",
    help="alignment: compare on this measure of `align fit --measures` (`cka`, `procrustes`, ...): "
    "each result's path by the measure's direction and the measure along it "
    "([below](#on-a-similarity-measure)); `ridge` is the held-out error",
    metavar="NAME",
    shown_default="ridge",
)
WEIGHTING = flag(
    "--weighting",
    help="lens results: the average to compare (token-weighted, as P2's effective depths; "
    "prompt-weighted, as P1's figures)",
    choices=WEIGHTINGS,
    default="token",
)
BOOTSTRAP = flag(
    "--bootstrap",
    help="resamples for the paired differences' 95% intervals, 100 to 1,000,000",
    metavar="N",
    type="int",
    default=RESAMPLES,
    parse="resamples",
)
SEED = flag(
    "--seed",
    help="seed of that bootstrap",
    metavar="N",
    type="seed",
    default=0,
)
OVERWRITE = flag(
    "--overwrite",
    help="replace an existing table or figure (never one of the inputs)",
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
