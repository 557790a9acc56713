"""`align contrib`, `align skip`, `align lens`, `align depth`: parse options and route to
align.analyses.run."""

from __future__ import annotations

import click

from align.analyses.analysis_options import LensOptions, SkipOptions
from align.analyses.run import dry_run as plan_run
from align.analyses.run import plan_from_store, run_contrib, run_depth, run_lens, run_skip
from align.analyses.skip import PARTS, SETTINGS
from align.cli.declared import Parsed, fields, options_of, worded
from align.cli.extract import CORPUS_FIELDS, corpus_spec, model_spec
from align.cli.shared_options import (
    ANALYSIS_DRY_RUN,
    ANALYSIS_OUTPUT,
    BOOTSTRAP,
    BOOTSTRAP_SEED,
    CONTRIB_STORE,
    DEPTH_CONTRIB,
    DEPTH_LENS,
    DEPTH_OUTPUT,
    EQUAL_N,
    LENS_STORE,
    OVERWRITE_RESULT,
    PROMPTS_BATCH,
    STORE_DRY_RUN,
)
from align.corpus import CorpusSpec
from align.errors import InputError
from align.models import ModelSpec
from align.stats.bootstrap import Resampling


def _specs(model, corpus, parsed: Parsed):
    """The ModelSpec and CorpusSpec of MODEL, CORPUS and the options (align.cli.extract's builders)."""

    if model is None:
        raise InputError(
            "give a MODEL (a folder made by save_pretrained or a hub id), or --store STORE"
        )
    return model_spec(model, parsed), corpus_spec(corpus, parsed)


def _resampling_of(parsed: Parsed, equal_n=None):
    """The Resampling the run_* functions take, from --bootstrap, --bootstrap-seed, --equal-n."""

    return Resampling(parsed.take(BOOTSTRAP), parsed.take(BOOTSTRAP_SEED), equal_n)


# What every analysis that runs a model takes, in this order in its help: where the result
# goes, rows per forward (what a row is: per command), --overwrite.
RUN_OUTPUTS = (ANALYSIS_OUTPUT, PROMPTS_BATCH, OVERWRITE_RESULT)
COMMON = (*RUN_OUTPUTS, ANALYSIS_DRY_RUN)
COMMON_STORE = (*RUN_OUTPUTS, STORE_DRY_RUN)  # a command that also reads a --store
RESAMPLING = (BOOTSTRAP, BOOTSTRAP_SEED)
# The model's and the corpus's options as the analyses word them (the lens's --dtype and
# --device say what they do with --store; erase and igrad read PROMPTS).
MODEL = (fields(ModelSpec, variant="analyses"),)
LENS_MODEL = (fields(ModelSpec, variant=("lens", "analyses")),)
CORPUS = (fields(CorpusSpec, *CORPUS_FIELDS, variant="analyses"),)
PROMPTS_CORPUS = (fields(CorpusSpec, *CORPUS_FIELDS, variant=("prompts", "analyses")),)
# Each command's own options, in the order of its help (its page's first table), worded for
# it, then the model's and the corpus's.
CONTRIB_RUN = (CONTRIB_STORE, worded("contrib", *COMMON_STORE), *RESAMPLING)
SKIP_FIELDS = ("settings", "parts", "split", "split_seed", "split_stream_after")
SKIP_RUN = (
    worded("skip", *COMMON),
    fields(SkipOptions, *SKIP_FIELDS, "answer_field", "answer_marker"),
    *RESAMPLING,
    EQUAL_N,
)
# The lens's kinds and the cross-model read (LensOptions' declared fields).
LENS_FIELDS = ("kind", "through", "maps", "save_maps", "steps", "train_tokens", "lens_seed")
LENS_RUN = (
    LENS_STORE,
    worded("lens", *COMMON_STORE),
    fields(LensOptions, *LENS_FIELDS),
    *RESAMPLING,
)
DEPTH_OPTIONS = worded(
    "depth", DEPTH_CONTRIB, DEPTH_LENS, DEPTH_OUTPUT, OVERWRITE_RESULT, *RESAMPLING
)


def _outputs(parsed: Parsed, batch=PROMPTS_BATCH) -> tuple:
    """(-o, --batch-size, --overwrite) as parsed."""
    return parsed.take(ANALYSIS_OUTPUT), parsed.take(batch), parsed.take(OVERWRITE_RESULT)


@click.command("contrib")
@click.argument("model", required=False)
@click.argument("corpus", required=False)
@options_of(*CONTRIB_RUN, *MODEL, *CORPUS)
def contrib_cmd(model, corpus, **values):
    """Relative norms and cosines of what attention, MLP and each whole layer add to the
    residual stream (mean and max over tokens), and cos(h_{l+1}, h_l); prompt-bootstrap 95%
    intervals of the means."""

    parsed = Parsed(values)
    store, dry_run = parsed.take(CONTRIB_STORE), parsed.take(STORE_DRY_RUN)
    output, batch_size, overwrite = _outputs(parsed)
    if store is not None:
        if model is not None or corpus is not None:
            raise InputError(
                "--store reads everything from the store: give no MODEL or CORPUS with it"
            )
        if dry_run:
            plan_from_store("contrib", output, store=store, overwrite=overwrite)
            return
        run_contrib(output, store=store, resampling=_resampling_of(parsed), overwrite=overwrite)
        return
    spec, cspec = _specs(model, corpus, parsed)
    if dry_run:
        _plan("contrib", output, spec, cspec, batch_size, overwrite)
        return
    run_contrib(
        output,
        spec=spec,
        cspec=cspec,
        batch_size=batch_size,
        resampling=_resampling_of(parsed),
        overwrite=overwrite,
    )


def _choices(value, allowed, option):

    items = tuple(v.strip() for v in value.split(",") if v.strip())
    bad = [v for v in items if v not in allowed]
    if bad or not items:
        raise InputError(f"{option} {value!r}: each item must be one of {', '.join(allowed)}")
    return tuple(dict.fromkeys(items))


@click.command("skip")
@click.argument("model", required=False)
@click.argument("corpus", required=False)
@options_of(*SKIP_RUN, *MODEL, *CORPUS)
def skip_cmd(model, corpus, **values):
    """Effect of skipping each layer (or its attention or MLP) on every later layer's
    contribution (R) and on the output distribution (O), in the current and future settings;
    prompt-bootstrap 95% intervals of both aggregates."""

    parsed = Parsed(values)
    output, batch_size, overwrite = _outputs(parsed)
    dry_run, equal_n = parsed.take(ANALYSIS_DRY_RUN), parsed.take(EQUAL_N)
    spec, cspec = _specs(model, corpus, parsed)
    typed = parsed.fields(SkipOptions)
    options = SkipOptions(
        **{
            **typed,
            "settings": _choices(typed["settings"], SETTINGS, "--settings"),
            "parts": _choices(typed["parts"], PARTS, "--parts"),
        }
    )
    bootstrap = (parsed.take(BOOTSTRAP), parsed.take(BOOTSTRAP_SEED))
    parsed.done()
    if dry_run:
        plan_run(
            "skip",
            output,
            spec=spec,
            cspec=cspec,
            batch_size=batch_size,
            skip_options=options,
            overwrite=overwrite,
        )
        return
    run_skip(
        output,
        spec=spec,
        cspec=cspec,
        options=options,
        batch_size=batch_size,
        resampling=Resampling(*bootstrap, equal_n),
        overwrite=overwrite,
    )


@click.command("lens")
@click.argument("model", required=False)
@click.argument("corpus", required=False)
@options_of(*LENS_RUN, *LENS_MODEL, *CORPUS)
def lens_cmd(model, corpus, **values):
    """Logit, linear or tuned lens: KL(lens || output) and top-5 overlap at every boundary 0..L,
    token- and prompt-weighted, with bootstrap 95% intervals (linear and tuned: also top-1
    agreement and cross-entropy, on held-out documents); or one model read through another's
    head (--through, --map)."""

    parsed = Parsed(values)
    store, dry_run = parsed.take(LENS_STORE), parsed.take(STORE_DRY_RUN)
    output, batch_size, overwrite = _outputs(parsed)
    kinds = parsed.fields(LensOptions)
    if kinds["kind"] != "logit" or any(
        kinds[k] is not None for k in ("maps", "through", "save_maps")
    ):
        _lens_kind(model, corpus, store, dry_run, output, overwrite, kinds, parsed)
        return
    if store is not None:
        if corpus is not None:
            raise InputError("--store reads the tokens from the store: give no CORPUS with it")
        typed = parsed.fields(ModelSpec)
        spec = (
            ModelSpec(model, typed["revision"], trust_remote_code=typed["trust_remote_code"])
            if model
            else None
        )
        if dry_run:
            plan_from_store("lens", output, store=store, spec=spec, overwrite=overwrite)
            return
        # Only the final norm and the unembedding run: on --device, in --dtype (default: the
        # compute dtype there).
        run_lens(
            output,
            spec=spec,
            store=store,
            options=LensOptions(device=typed["device"], dtype=typed["dtype"]),
            resampling=_resampling_of(parsed),
            overwrite=overwrite,
        )
        return
    spec, cspec = _specs(model, corpus, parsed)
    if dry_run:
        _plan("lens", output, spec, cspec, batch_size, overwrite)
        return
    run_lens(
        output,
        spec=spec,
        cspec=cspec,
        options=LensOptions(batch_size=batch_size),
        resampling=_resampling_of(parsed),
        overwrite=overwrite,
    )


def _lens_kind(model, corpus, store, dry_run, output, overwrite, kinds, parsed):
    """`align lens` of kind linear or tuned, or --through: from --map's stores, a --store, or
    MODEL and CORPUS (extracted first)."""
    if dry_run:
        raise InputError(
            "--dry-run plans the logit lens only: run --kind linear, tuned or --through without it"
        )
    typed = parsed.fields(ModelSpec)
    if kinds["maps"] is not None or store is not None:
        if corpus is not None:
            raise InputError("--store and --map read the tokens from stores: give no CORPUS")
        spec = ModelSpec(model, typed["revision"]) if model else None
        cspec = None
    else:
        spec, cspec = _specs(model, corpus, parsed)
    run_lens(
        output,
        spec=spec,
        cspec=cspec,
        store=store,
        options=LensOptions(**kinds, device=typed["device"]),
        resampling=_resampling_of(parsed),
        overwrite=overwrite,
    )


def _plan(command, output, spec, cspec, batch_size, overwrite):
    """The dry run of contrib or lens (align.analyses.run.dry_run)."""
    plan_run(command, output, spec=spec, cspec=cspec, batch_size=batch_size, overwrite=overwrite)


@click.command("depth")
@options_of(DEPTH_OPTIONS)
def depth_cmd(**values):
    """Effective depth by the cosine, KL and overlap rules (NaN with a reason when undefined),
    each rule's depth over a range of thresholds, and prompt-bootstrap 95% intervals where the
    contributions and lens results hold per-prompt sums."""

    parsed = Parsed(values)
    run_depth(
        parsed.take(DEPTH_OUTPUT),
        contrib_path=parsed.take(DEPTH_CONTRIB),
        lens_path=parsed.take(DEPTH_LENS),
        resampling=_resampling_of(parsed),
        overwrite=parsed.take(OVERWRITE_RESULT),
    )


commands = [contrib_cmd, skip_cmd, lens_cmd, depth_cmd]
