"""`align demo`: the whole study, offline, on two small models trained here from scratch."""

from __future__ import annotations

import click

from align.demo.pipeline import SIZES


@click.command("demo")
@click.option("-o", "--output", default="demo-output", show_default=True, metavar="FOLDER",
              help="Where models, stores, results and figures go.")
@click.option("--size", type=click.Choice(SIZES), default="full", show_default=True,
              help="full: 6 layers d=128 against 12 layers d=192; tiny: 2 against 4 layers, a check that everything runs.")
@click.option("--tokens", type=click.IntRange(min=1000), default=None,
              help="Training tokens per model [default: 600,000 (full), 4,000 (tiny)].")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the data, the initialisation and the batches.")
def demo_cmd(output, size, tokens, seed):
    """Train a 6-layer and a 12-layer model on generated arithmetic (cached), extract them and an
    untrained 12-layer control, fit shallow -> deep and shallow -> control, run contributions,
    logit lens, layer skipping and effective depth, draw every figure, and print a summary.

    Nothing is downloaded. A second run reuses everything and only redraws the figures.
    """
    from align.demo import pipeline

    make = pipeline.default_config if size == "full" else pipeline.tiny_config
    config = make(seed=seed) if tokens is None else make(tokens=tokens, seed=seed)
    report = pipeline.run(output, config)
    click.echo(report.summary)
    click.echo(f"  time     {report.timings['total']:,.0f} s this run "
               f"(steps: {', '.join(f'{k} {v:,.0f} s' for k, v in report.timings.items() if k != 'total' and v >= 1)})")


commands = [demo_cmd]
