"""`align compare`: parse options and route to align.compare."""

from __future__ import annotations

import click

from align.analyses.lens import WEIGHTINGS
from align.cli.numbers import SEED
from align.stats.bootstrap import (
    MAX_RESAMPLES,
    MIN_RESAMPLES,
    RESAMPLES,
    Resampling,
    check_resamples,
)


@click.command("compare")
@click.argument("results", nargs=-1, required=True, metavar="RESULT...")
@click.option(
    "-o",
    "--output",
    default=None,
    metavar="TABLE.csv|TABLE.md",
    help="Also write the table, as CSV or Markdown by the suffix, and the figure beside it (.png).",
)
@click.option(
    "--figure",
    default=None,
    metavar="FILE",
    help="The figure's path, PNG, PDF or SVG by its suffix (.png, .pdf, .svg) [default: beside "
    "-o, with .png].",
)
@click.option(
    "--measure",
    default=None,
    metavar="NAME",
    help="alignment: compare on this measure of `align fit --measures` (cka, procrustes, ...): "
    "each result's path (a similarity's argmax, a distance's argmin) and the measure along it "
    "[default: ridge, the held-out error].",
)
@click.option(
    "--weighting",
    type=click.Choice(WEIGHTINGS),
    default="token",
    show_default=True,
    help="lens: the average to compare (token-weighted, as P2's effective depths; prompt-weighted, as P1's figures).",
)
@click.option(
    "--bootstrap",
    type=int,
    default=RESAMPLES,
    show_default=True,
    metavar="N",
    callback=lambda ctx, param, value: check_resamples(value),
    help=f"Resamples of prompts for the paired differences' 95% intervals ({MIN_RESAMPLES:,} to "
    f"{MAX_RESAMPLES:,}).",
)
@click.option(
    "--seed",
    type=SEED,
    default=0,
    show_default=True,
    help="Seed of that bootstrap.",
)
@click.option("--overwrite", is_flag=True, help="Replace an existing table or figure.")
def compare_cmd(results, output, figure, measure, weighting, bootstrap, seed, overwrite):
    """Several depth, lens or alignment results (one kind) in one table: each result's numbers
    with their 95% intervals and, for two results on the same prompts, their paired
    difference (later minus earlier) with its interval. With -o, also a CSV or Markdown file and a figure."""
    from align.compare import View, run_compare

    run_compare(
        results,
        output,
        figure,
        view=View(weighting, measure),
        resampling=Resampling(bootstrap, seed),
        overwrite=overwrite,
        echo=lambda text: click.echo(text, nl=False),
    )


commands = [compare_cmd]
