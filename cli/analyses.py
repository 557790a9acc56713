"""`align contrib`, `align skip`, `align lens`, `align depth`: parse options and route to
align.analyses.run."""

from __future__ import annotations

import click

from align.analyses.analysis_options import LensOptions, SkipOptions
from align.analyses.run import dry_run as plan_run
from align.analyses.run import run_contrib, run_depth, run_lens, run_skip
from align.analyses.skip import PARTS, SETTINGS, SPLITS
from align.cli.extract import corpus_options, corpus_spec, model_options, model_spec
from align.cli.numbers import SEED, whole
from align.errors import InputError
from align.models import ModelSpec
from align.records import build
from align.stats.bootstrap import (
    MAX_RESAMPLES,
    MIN_RESAMPLES,
    RESAMPLES,
    Resampling,
    check_resamples,
)


def _specs(model, corpus, values):
    """The ModelSpec and CorpusSpec of MODEL, CORPUS and the options (align.cli.extract's builders)."""

    if model is None:
        raise InputError(
            "give a MODEL (a folder made by save_pretrained or a hub id), or --store STORE"
        )
    return model_spec(model, values), corpus_spec(corpus, values)


def _resampling(f):
    """--bootstrap and --bootstrap-seed: the prompt bootstrap of the result's intervals."""
    f = click.option(
        "--bootstrap-seed",
        type=SEED,
        default=0,
        show_default=True,
        help="Seed of the prompt bootstrap.",
    )(f)
    return click.option(
        "--bootstrap",
        type=int,
        default=RESAMPLES,
        show_default=True,
        metavar="N",
        callback=lambda ctx, param, value: check_resamples(value),
        help=f"Resamples of prompts for the 95% percentile intervals ({MIN_RESAMPLES:,} to "
        f"{MAX_RESAMPLES:,}).",
    )(f)


def _resampling_of(bootstrap, bootstrap_seed, equal_n=None):
    """The Resampling the run_* functions take, from --bootstrap, --bootstrap-seed, --equal-n."""

    return Resampling(bootstrap, bootstrap_seed, equal_n)


def _dry_run(f):
    return click.option(
        "--dry-run",
        is_flag=True,
        help="Print what the run will read, the forwards it will make, its memory, what it will "
        "write and its time from one timed batch; write nothing.",
    )(f)


def _no_store_plan(store, dry_run):
    if store is not None and dry_run:
        raise InputError(
            "--dry-run plans a run of MODEL over CORPUS; with --store no model runs: "
            "drop --dry-run (`align info STORE` says what the store holds)"
        )


def run_outputs(f, default_batch: int = 8, what: str = "Prompts (rows) per forward pass."):
    """The options every analysis that runs a model shares, in this order in its help:
    -o, --batch-size (`default_batch`, helped by `what`), --overwrite."""
    f = click.option("--overwrite", is_flag=True, help="Replace an existing result at -o.")(f)
    f = click.option(
        "--batch-size",
        type=whole(1),
        default=default_batch,
        show_default=True,
        help=what,
    )(f)
    return click.option(
        "-o",
        "--output",
        required=True,
        metavar="RESULT",
        help="Result store to write (Zarr; opens in xarray).",
    )(f)


def _common(f):
    return run_outputs(_dry_run(f))


@click.command("contrib")
@click.argument("model", required=False)
@click.argument("corpus", required=False)
@click.option(
    "--store",
    default=None,
    metavar="STORE",
    help="Read residuals and sublayer outputs from an activation store (made with --sublayers) instead of running MODEL.",
)
@_common
@_resampling
@model_options
@corpus_options
def contrib_cmd(
    model, corpus, store, output, batch_size, overwrite, dry_run, bootstrap, bootstrap_seed, **kw
):
    """Relative norms and cosines of what attention, MLP and each whole layer add to the
    residual stream (mean and max over tokens), and cos(h_{l+1}, h_l); prompt-bootstrap 95%
    intervals of the means."""

    _no_store_plan(store, dry_run)
    if store is not None:
        if model is not None or corpus is not None:
            raise InputError(
                "--store reads everything from the store: give no MODEL or CORPUS with it"
            )
        run_contrib(
            output,
            store=store,
            resampling=_resampling_of(bootstrap, bootstrap_seed),
            overwrite=overwrite,
        )
        return
    spec, cspec = _specs(model, corpus, kw)
    if dry_run:
        _plan("contrib", output, spec, cspec, batch_size, overwrite)
        return
    run_contrib(
        output,
        spec=spec,
        cspec=cspec,
        batch_size=batch_size,
        resampling=_resampling_of(bootstrap, bootstrap_seed),
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
@_common
@click.option(
    "--settings",
    default="current,future",
    show_default=True,
    help=f"Comma-separated: {', '.join(SETTINGS)}.",
)
@click.option(
    "--parts",
    default="layer,attn,mlp",
    show_default=True,
    help="Comma-separated: layer, attn, mlp.",
)
@click.option(
    "--split-seed",
    type=SEED,
    default=0,
    show_default=True,
    help="Seed of the future setting's split points.",
)
@click.option(
    "--split",
    default="random",
    show_default=True,
    metavar="|".join(SPLITS),
    help="The future setting's split points: random (up to 4 per prompt from 8, 16, ...; P1 on GSM8K), "
    "answer-start (one per prompt: its first answer token, read as `align erase` reads answers; P1 on "
    "MQuAKE) or answer-points (the first answer token + 0, 4, 8, ... short of the answer's last 4 "
    "tokens, shuffled with --split-seed per prompt, up to 4; P1's rule on MATH) or answer-points-stream "
    "(the same points drawn from one Python random stream seeded --split-seed, prompt after prompt: "
    "P1's draws with --split-seed 12345 and every level's prompts in one file, in P1's order).",
)
@click.option(
    "--answer-field",
    default="answer",
    show_default=True,
    help="With --split answer-start or answer-points: the .jsonl field holding the answer.",
)
@click.option(
    "--answer-marker",
    default=None,
    metavar="TEXT",
    help="With --split answer-start or answer-points: the answer is the text after the last TEXT.",
)
@click.option(
    "--split-stream-after",
    multiple=True,
    metavar="FILE",
    help="With --split answer-points-stream: files whose prompts draw from the stream first, in the "
    "order given (the earlier levels, as P1 runs them); read with this run's corpus options. Repeatable.",
)
@_resampling
@click.option(
    "--equal-n",
    type=whole(1),
    default=None,
    metavar="N",
    help="Also the aggregates over N prompts drawn per resample (R_equal_n, O_equal_n): a maximum over "
    "prompts grows with their number, so give models run on different prompt counts the same N.",
)
@model_options
@corpus_options
def skip_cmd(
    model,
    corpus,
    output,
    batch_size,
    overwrite,
    dry_run,
    settings,
    parts,
    split_seed,
    split,
    answer_field,
    answer_marker,
    split_stream_after,
    bootstrap,
    bootstrap_seed,
    equal_n,
    **kw,
):
    """Effect of skipping each layer (or its attention or MLP) on every later layer's
    contribution (R) and on the output distribution (O), in the current and future settings;
    prompt-bootstrap 95% intervals of both aggregates."""

    values = dict(locals())
    spec, cspec = _specs(model, corpus, kw)
    options = build(
        SkipOptions,
        values,
        settings=_choices(settings, SETTINGS, "--settings"),
        parts=_choices(parts, PARTS, "--parts"),
    )
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
        resampling=_resampling_of(bootstrap, bootstrap_seed, equal_n),
        overwrite=overwrite,
    )


@click.command("lens")
@click.argument("model", required=False)
@click.argument("corpus", required=False)
@click.option(
    "--store",
    default=None,
    metavar="STORE",
    help="Read residuals from an activation store; only the final norm and unembedding of MODEL (default: the store's model) are read.",
)
@_common
@_resampling
@model_options
@corpus_options
def lens_cmd(
    model, corpus, store, output, batch_size, overwrite, dry_run, bootstrap, bootstrap_seed, **kw
):
    """Logit lens: KL(lens || output) and top-5 overlap at every boundary 0..L, token- and
    prompt-weighted, with prompt-bootstrap 95% intervals."""

    _no_store_plan(store, dry_run)
    if store is not None:
        if corpus is not None:
            raise InputError("--store reads the tokens from the store: give no CORPUS with it")
        spec = (
            ModelSpec(model, kw["revision"], trust_remote_code=kw["trust_remote_code"])
            if model
            else None
        )
        # Only the final norm and the unembedding run: on --device, in --dtype (default: the
        # compute dtype there).
        run_lens(
            output,
            spec=spec,
            store=store,
            options=build(LensOptions, kw),
            resampling=_resampling_of(bootstrap, bootstrap_seed),
            overwrite=overwrite,
        )
        return
    spec, cspec = _specs(model, corpus, kw)
    if dry_run:
        _plan("lens", output, spec, cspec, batch_size, overwrite)
        return
    run_lens(
        output,
        spec=spec,
        cspec=cspec,
        options=LensOptions(batch_size=batch_size),
        resampling=_resampling_of(bootstrap, bootstrap_seed),
        overwrite=overwrite,
    )


def _plan(command, output, spec, cspec, batch_size, overwrite):
    """The dry run of contrib or lens (align.analyses.run.dry_run)."""
    plan_run(command, output, spec=spec, cspec=cspec, batch_size=batch_size, overwrite=overwrite)


@click.command("depth")
@click.option(
    "--contrib",
    "contrib_path",
    required=True,
    metavar="RESULT",
    help="A result of `align contrib`.",
)
@click.option(
    "--lens",
    "lens_path",
    required=True,
    metavar="RESULT",
    help="A result of `align lens` on the same model.",
)
@click.option("-o", "--output", required=True, metavar="RESULT", help="Result store to write.")
@click.option("--overwrite", is_flag=True, help="Replace an existing result at -o.")
@_resampling
def depth_cmd(contrib_path, lens_path, output, overwrite, bootstrap, bootstrap_seed):
    """Effective depth by the cosine, KL and overlap rules (NaN with a reason when undefined),
    each rule's depth over a range of thresholds, and prompt-bootstrap 95% intervals where the
    contributions and lens results hold per-prompt sums."""

    run_depth(
        output,
        contrib_path=contrib_path,
        lens_path=lens_path,
        resampling=_resampling_of(bootstrap, bootstrap_seed),
        overwrite=overwrite,
    )


commands = [contrib_cmd, skip_cmd, lens_cmd, depth_cmd]
