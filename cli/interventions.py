"""`align erase` and `align igrad`: parse options and route to align.analyses.interventions_run."""

from __future__ import annotations

import click

from align.analyses.analysis_options import EraseOptions, IgradOptions
from align.analyses.igrad_options import BASELINES, OBJECTS, PROTOCOLS, RULES, TARGETS, variant
from align.analyses.interventions_run import run_erase, run_igrad
from align.cli.analyses import _choices, run_outputs
from align.cli.extract import (
    corpus_options,
    corpus_spec,
    float32_model_options,
    model_options,
    model_spec,
)
from align.cli.numbers import whole
from align.records import build


def _specs(model, prompts, kw):
    """The ModelSpec and CorpusSpec of MODEL, PROMPTS and the options (align.cli.extract's builders)."""
    return model_spec(model, kw), corpus_spec(prompts, kw)


def _common(default_batch: int, what: str):
    def deco(f):
        f = click.option(
            "--answer-marker",
            default=None,
            metavar="TEXT",
            help="The answer is the text after the last occurrence of TEXT in each prompt (any corpus; "
            "--format gsm8k: 'The final answer is') [default: use --answer-field].",
        )(f)
        f = click.option(
            "--answer-field",
            default="answer",
            show_default=True,
            metavar="NAME",
            help="In a .jsonl file, the field whose text is appended to --text-field's text as the answer.",
        )(f)
        return run_outputs(f, default_batch, what)

    return deco


@click.command("erase")
@click.argument("model")
@click.argument("prompts", required=False)
@_common(8, "Rows (a prompt and one erased position) per forward pass.")
@click.option(
    "--reference",
    required=True,
    metavar="CORPUS",
    help="Corpus whose mean residual replaces the erased cell.",
)
@click.option(
    "--reference-docs",
    type=whole(1),
    default=10,
    show_default=True,
    help="Documents of --reference to average over (fewer is an error).",
)
@model_options
@corpus_options
def erase_cmd(
    model,
    prompts,
    output,
    batch_size,
    overwrite,
    answer_field,
    answer_marker,
    reference,
    reference_docs,
    **kw,
):
    """Residual erasure: for every boundary b = 0..L and position t of each prompt, replace the
    residual at b (entering block b; at L, the last block's output) at t by the mean residual at
    b over the --reference prompts, and record the largest change ‖p′ − p‖₂ of the output
    distribution at the positions that predict the answer."""

    values = dict(locals())
    spec, cspec = _specs(model, prompts, kw)
    run_erase(
        output,
        spec=spec,
        cspec=cspec,
        options=build(EraseOptions, values),
        batch_size=batch_size,
        overwrite=overwrite,
    )


@click.command("igrad")
@click.argument("model")
@click.argument("prompts", required=False)
@_common(16, "Interpolation points per forward and backward pass.")
@click.option(
    "--parts",
    default="layer,attn,mlp",
    show_default=True,
    help="Comma-separated: layer, attn, mlp.",
)
@click.option(
    "--protocol",
    type=click.Choice(tuple(PROTOCOLS)),
    default="p1",
    show_default=True,
    help="Preset of the five options below: p1 = residual, position-mean, prob, left, 256 steps ([P1]'s code); "
    "align = delta, zero, logprob, midpoint, 64 steps. An option given explicitly replaces the preset's.",
)
@click.option(
    "--object",
    "object_",
    type=click.Choice(OBJECTS),
    default=None,
    help="Part layer: interpolate the residual h_{l+1} block l writes (residual) or what it adds, "
    "h_{l+1} − h_l (delta); attn and mlp interpolate the sublayer's output either way [default: from --protocol].",
)
@click.option(
    "--baseline",
    type=click.Choice(BASELINES),
    default=None,
    help="The object's mean over the prompt's positions (position-mean), or 0 [default: from --protocol].",
)
@click.option(
    "--target",
    type=click.Choice(TARGETS),
    default=None,
    help="Differentiate the answer tokens' summed probability (prob) or log-probability (logprob) "
    "[default: from --protocol].",
)
@click.option(
    "--rule",
    type=click.Choice(RULES),
    default=None,
    help="Riemann rule: points k/N (left) or (k + ½)/N (midpoint) [default: from --protocol].",
)
@click.option(
    "--steps",
    type=whole(1),
    default=None,
    help="Interpolation points N [default: from --protocol].",
)
@float32_model_options
@corpus_options
def igrad_cmd(
    model,
    prompts,
    output,
    batch_size,
    overwrite,
    answer_field,
    answer_marker,
    parts,
    protocol,
    object_,
    baseline,
    target,
    rule,
    steps,
    **kw,
):
    """Integrated gradients of the answer with respect to each part (layer, attention, MLP)
    at each layer and position. By default [P1]'s definition: the residual each block writes,
    interpolated from its mean over positions, the answer tokens' summed probability, a left
    Riemann sum of 256 points. Prints the completeness check (Σ_t A against f(x) − f(baseline))
    of the variant run. Computes in float32 unless --dtype says otherwise."""
    from align.analyses.igrad import PARTS

    values = dict(locals())
    v = variant(protocol, object=object_, baseline=baseline, target=target, rule=rule, steps=steps)
    spec, cspec = _specs(model, prompts, kw)
    options = build(IgradOptions, values, parts=_choices(parts, PARTS, "--parts"), variant=v)
    run_igrad(
        output, spec=spec, cspec=cspec, options=options, batch_size=batch_size, overwrite=overwrite
    )


commands = [erase_cmd, igrad_cmd]
