"""`align erase` and `align igrad`: parse options and route to align.analyses.interventions_run."""

from __future__ import annotations

import click

from align.cli.extract import corpus_options, corpus_spec, model_options, model_spec


def _specs(model, prompts, kw):
    """The ModelSpec and CorpusSpec of MODEL, PROMPTS and the options (align.cli.extract's builders)."""
    return model_spec(model, kw), corpus_spec(prompts, kw)


def _common(default_batch: int, what: str):
    def deco(f):
        f = click.option("--answer-marker", default=None, metavar="TEXT",
                         help="The answer is the text after the last occurrence of TEXT in each prompt (any corpus; "
                              "--format gsm8k: 'The final answer is') [default: use --answer-field].")(f)
        f = click.option("--answer-field", default="answer", show_default=True, metavar="NAME",
                         help="In a .jsonl file, the field whose text is appended to --text-field's text as the answer.")(f)
        f = click.option("--overwrite", is_flag=True, help="Replace an existing result at -o.")(f)
        f = click.option("--batch-size", type=click.IntRange(min=1), default=default_batch, show_default=True, help=what)(f)
        return click.option("-o", "--output", required=True, metavar="RESULT", help="Result store to write (Zarr; opens in xarray).")(f)
    return deco


@click.command("erase")
@click.argument("model")
@click.argument("prompts", required=False)
@_common(8, "Rows (a prompt and one erased position) per forward pass.")
@click.option("--reference", required=True, metavar="CORPUS", help="Corpus whose mean residual replaces the erased cell.")
@click.option("--reference-docs", type=click.IntRange(min=1), default=10, show_default=True,
              help="Documents of --reference to average over (fewer is an error).")
@model_options
@corpus_options
def erase_cmd(model, prompts, output, batch_size, overwrite, answer_field, answer_marker, reference, reference_docs, **kw):
    """Residual erasure: for every boundary b and position t of each prompt, replace the
    residual entering block b at t by the mean residual at b over the --reference prompts, and
    record the largest change ‖p′ − p‖₂ of the output distribution at the positions that
    predict the answer."""
    from align.analyses.interventions_run import run_erase

    spec, cspec = _specs(model, prompts, kw)
    run_erase(output, spec=spec, cspec=cspec, reference=reference, reference_docs=reference_docs, answer_field=answer_field,
              answer_marker=answer_marker, batch_size=batch_size, overwrite=overwrite)


@click.command("igrad")
@click.argument("model")
@click.argument("prompts", required=False)
@_common(16, "Interpolation points per forward and backward pass.")
@click.option("--parts", default="layer,attn,mlp", show_default=True, help="Comma-separated: layer, attn, mlp.")
@click.option("--steps", type=click.IntRange(min=1), default=64, show_default=True,
              help="Interpolation points of the midpoint Riemann rule.")
@model_options
@corpus_options
def igrad_cmd(model, prompts, output, batch_size, overwrite, answer_field, answer_marker, parts, steps, **kw):
    """Integrated gradients of the answer's log-probability with respect to what each part
    (layer, attention, MLP) adds at each layer and position, from a zero baseline. Computes in
    float32 unless --dtype says otherwise."""
    from align.analyses.igrad import PARTS
    from align.analyses.interventions_run import run_igrad
    from align.cli.analyses import _choices

    spec, cspec = _specs(model, prompts, kw)
    run_igrad(output, spec=spec, cspec=cspec, parts=_choices(parts, PARTS, "--parts"), steps=steps, answer_field=answer_field,
              answer_marker=answer_marker, batch_size=batch_size, overwrite=overwrite)


commands = [erase_cmd, igrad_cmd]
