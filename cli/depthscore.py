"""`align depthscore`: parse options and route to align.analyses.depthscore."""

from __future__ import annotations

import click

from align.analyses.depthscore import plan_depthscore, run_depthscore
from align.cli.numbers import SEED
from align.stats.bootstrap import MAX_RESAMPLES, MIN_RESAMPLES, RESAMPLES, check_resamples


@click.command("depthscore")
@click.argument("skip_results", nargs=-1, required=True, metavar="SKIP_RESULT...")
@click.option("-o", "--output", required=True, metavar="RESULT", help="Result store to write.")
@click.option(
    "--levels",
    default=None,
    metavar="2,3,4",
    help="The level of each SKIP_RESULT, in order [default: read from each result's corpus "
    "(mquake, math, addition:N, multiplication:N)].",
)
@click.option(
    "--bootstrap",
    type=int,
    default=RESAMPLES,
    show_default=True,
    callback=lambda ctx, param, value: check_resamples(value),
    help=f"Resamples of prompts for the 95% intervals ({MIN_RESAMPLES:,} to {MAX_RESAMPLES:,}; needs skip "
    "results with per-prompt values).",
)
@click.option(
    "--seed",
    type=SEED,
    default=0,
    show_default=True,
    help="Seed of the prompt bootstrap.",
)
@click.option("--overwrite", is_flag=True, help="Replace an existing result at -o.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what the run will read (each level's prompts), the resamples it will draw, its "
    "memory, what it will write and its time from a few timed resamples; write nothing.",
)
def depthscore_cmd(skip_results, output, levels, bootstrap, seed, overwrite, dry_run):
    """Depth score DS = sum_s s*m_s / sum_s m_s per level, from one `align skip` result per
    level. The headline is P1's: the future setting's layer effect (m_s = sum_l R[s, l] /
    max(L-1-s, 1), skipping whole layers, max over prompts), measured by P1 with --split
    answer-start (MQuAKE) or answer-points (MATH). The current setting's (m_s = mean over l > s
    of R[s, l]) is align's extension; the output effect (m_s = O[s]) is given for both. A flat
    DS across levels: the model uses no more depth for harder items. Prompt-bootstrap 95%
    intervals (ds_low, ds_high) where the skip results hold per-prompt values."""

    run = plan_depthscore if dry_run else run_depthscore
    run(skip_results, output, levels=levels, bootstrap=bootstrap, seed=seed, overwrite=overwrite)


commands = [depthscore_cmd]
