"""`align depthscore`: parse options and route to align.analyses.depthscore."""

from __future__ import annotations

import click

from align.analyses.depthscore import plan_depthscore, run_depthscore
from align.cli.declared import Parsed, options_of, worded
from align.cli.shared_options import DEPTH_OUTPUT, OVERWRITE_RESULT
from align.declarations import flag
from align.stats.bootstrap import RESAMPLES

LEVELS = flag(
    "--levels",
    help="the level of each SKIP_RESULT, in order. Read from the corpus: "
    "`addition:N`/`multiplication:N` give N; a `mquake` or `math` file still there with the "
    "recorded hash gives its prompts' level (one level per file)",
    metavar="2,3,4",
    shown_default="read from each result's corpus",
)
BOOTSTRAP = flag(
    "--bootstrap",
    help="resamples of prompts for the 95% intervals, 100 to 1,000,000 (needs skip results with "
    "per-prompt values)",
    metavar="N",
    type="int",
    default=RESAMPLES,
    parse="resamples",
)
SEED = flag(
    "--seed",
    help="seed of the prompt bootstrap",
    metavar="N",
    type="seed",
    default=0,
)
DRY_RUN = flag(
    "--dry-run",
    help="print what the run will read (each level's result and the prompts each setting "
    "resamples), the resamples it will draw (resamples × levels × settings, prompts drawn), its "
    "memory, what it will write and its time from 50 timed resamples scaled by prompts drawn; "
    "write nothing. Every check of a run is made first",
    is_flag=True,
)


# in the order of the help and of the page's table
OPTIONS = worded("depthscore", DEPTH_OUTPUT, LEVELS, BOOTSTRAP, SEED, OVERWRITE_RESULT, DRY_RUN)


@click.command("depthscore")
@click.argument("skip_results", nargs=-1, required=True, metavar="SKIP_RESULT...")
@options_of(OPTIONS)
def depthscore_cmd(skip_results, **values):
    """Depth score DS = sum_s s*m_s / sum_s m_s per level, from one `align skip` result per
    level. The headline is P1's: the future setting's layer effect (m_s = sum_l R[s, l] /
    max(L-1-s, 1), skipping whole layers, max over prompts), measured by P1 with --split
    answer-start (MQuAKE) or answer-points (MATH). The current setting's (m_s = mean over l > s
    of R[s, l]) is align's extension; the output effect (m_s = O[s]) is given for both. A flat
    DS across levels: the model uses no more depth for harder items. Prompt-bootstrap 95%
    intervals (ds_low, ds_high) where the skip results hold per-prompt values."""

    parsed = Parsed(values)
    output, levels = parsed.take(DEPTH_OUTPUT), parsed.take(LEVELS)
    bootstrap, seed = parsed.take(BOOTSTRAP), parsed.take(SEED)
    overwrite, dry_run = parsed.take(OVERWRITE_RESULT), parsed.take(DRY_RUN)
    parsed.done()
    run = plan_depthscore if dry_run else run_depthscore
    run(skip_results, output, levels=levels, bootstrap=bootstrap, seed=seed, overwrite=overwrite)


commands = [depthscore_cmd]
