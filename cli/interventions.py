"""`align erase` and `align igrad`: parse options and route to align.analyses.interventions_run."""

from __future__ import annotations

import click

from align.analyses.analysis_options import EraseOptions, IgradOptions
from align.analyses.igrad import PARTS
from align.analyses.igrad_options import Variant, variant
from align.analyses.interventions_run import plan_erase, plan_igrad, run_erase, run_igrad
from align.cli.analyses import MODEL, PROMPTS_CORPUS, _choices
from align.cli.declared import Parsed, fields, options_of, worded
from align.cli.extract import corpus_spec, model_spec
from align.cli.shared_options import (
    ANALYSIS_DRY_RUN,
    ANALYSIS_OUTPUT,
    ERASE_BATCH,
    IGRAD_BATCH,
    IGRAD_PROTOCOL,
    OVERWRITE_RESULT,
)
from align.models import ModelSpec


def _specs(model, prompts, parsed: Parsed):
    """The ModelSpec and CorpusSpec of MODEL, PROMPTS and the options (align.cli.extract's builders)."""
    return model_spec(model, parsed), corpus_spec(prompts, parsed)


# Each command's own options in the order of its help (its page's first table), then the
# model's (igrad's worded for gradients) and the corpus's.
ERASE_RUN = (
    ANALYSIS_OUTPUT,
    fields(EraseOptions, "reference", "reference_docs", "answer_field", "answer_marker"),
    ERASE_BATCH,
    worded("erase", OVERWRITE_RESULT, ANALYSIS_DRY_RUN),
)
IGRAD_RUN = (
    ANALYSIS_OUTPUT,
    fields(IgradOptions, "parts"),
    IGRAD_PROTOCOL,
    fields(Variant),
    fields(IgradOptions, "answer_field", "answer_marker"),
    IGRAD_BATCH,
    worded("igrad", OVERWRITE_RESULT, ANALYSIS_DRY_RUN),
)
IGRAD_MODEL = (fields(ModelSpec, variant=("igrad", "analyses")),)


@click.command("erase")
@click.argument("model")
@click.argument("prompts", required=False)
@options_of(*ERASE_RUN, *MODEL, *PROMPTS_CORPUS)
def erase_cmd(model, prompts, **values):
    """Residual erasure: for every boundary b = 0..L and position t of each prompt, replace the
    residual at b (entering block b; at L, the last block's output) at t by the mean residual at
    b over the --reference prompts, and record the largest change ‖p′ − p‖₂ of the output
    distribution at the positions that predict the answer."""

    parsed = Parsed(values)
    output, batch_size = parsed.take(ANALYSIS_OUTPUT), parsed.take(ERASE_BATCH)
    overwrite, dry_run = parsed.take(OVERWRITE_RESULT), parsed.take(ANALYSIS_DRY_RUN)
    spec, cspec = _specs(model, prompts, parsed)
    options = parsed.record(EraseOptions)
    parsed.done()
    run = plan_erase if dry_run else run_erase
    run(
        output,
        spec=spec,
        cspec=cspec,
        options=options,
        batch_size=batch_size,
        overwrite=overwrite,
    )


@click.command("igrad")
@click.argument("model")
@click.argument("prompts", required=False)
@options_of(*IGRAD_RUN, *IGRAD_MODEL, *PROMPTS_CORPUS)
def igrad_cmd(model, prompts, **values):
    """Integrated gradients of the answer with respect to each part (layer, attention, MLP)
    at each layer and position. By default [P1]'s definition: the residual each block writes,
    interpolated from its mean over positions, the answer tokens' summed probability, a left
    Riemann sum of 256 points. Prints the completeness check (Σ_t A against f(x) − f(baseline))
    of the variant run. Computes in float32 unless --dtype says otherwise."""
    parsed = Parsed(values)
    output, batch_size = parsed.take(ANALYSIS_OUTPUT), parsed.take(IGRAD_BATCH)
    overwrite, dry_run = parsed.take(OVERWRITE_RESULT), parsed.take(ANALYSIS_DRY_RUN)
    v = variant(parsed.take(IGRAD_PROTOCOL), **parsed.fields(Variant))
    spec, cspec = _specs(model, prompts, parsed)
    typed = parsed.fields(IgradOptions)
    options = IgradOptions(
        **{**typed, "parts": _choices(typed["parts"], PARTS, "--parts"), "variant": v}
    )
    parsed.done()
    run = plan_igrad if dry_run else run_igrad
    run(output, spec=spec, cspec=cspec, options=options, batch_size=batch_size, overwrite=overwrite)


commands = [erase_cmd, igrad_cmd]
