"""`align depthscore`: parse options and route to align.analyses.depthscore."""

from __future__ import annotations

import click


@click.command("depthscore")
@click.argument("skip_results", nargs=-1, required=True, metavar="SKIP_RESULT...")
@click.option("-o", "--output", required=True, metavar="RESULT", help="Result store to write.")
@click.option("--levels", default=None, metavar="2,3,4",
              help="The level of each SKIP_RESULT, in order [default: read from each result's corpus "
                   "(mquake, math, addition:N, multiplication:N)].")
@click.option("--bootstrap", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Resamples of prompts for the 95% intervals (needs skip results with per-prompt values).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the prompt bootstrap.")
@click.option("--overwrite", is_flag=True, help="Replace an existing result at -o.")
def depthscore_cmd(skip_results, output, levels, bootstrap, seed, overwrite):
    """Depth score DS = sum_s s*m_s / sum_s m_s of the layer effect (m_s = mean over l > s of
    R[s, l]) and the output effect (O[s]), per level, from one `align skip` result per level.
    A flat DS across levels: the model uses no more depth for harder items. Prompt-bootstrap
    95% intervals (ds_low, ds_high) where the skip results hold per-prompt values."""
    from align.analyses.depthscore import run_depthscore

    run_depthscore(skip_results, output, levels=levels, bootstrap=bootstrap, seed=seed, overwrite=overwrite)


commands = [depthscore_cmd]
