"""`align fit`."""

from __future__ import annotations

import click

from align.cli.extract import corpus_options, corpus_spec, model_spec
from align.cli.numbers import FINITE, SEED, whole
from align.errors import InputError
from align.fitting import FitSpec, fit
from align.fitting.anchors import MIN_COVERAGE, PAIRINGS
from align.fitting.fit_options import CONTROLS, MODEL_DEVICES, Execution, parse_memory
from align.measures import MEASURES, PERMUTATIONS, SAMPLE_ROWS
from align.measures.rows import K_NEIGHBOURS
from align.models import DTYPES, families
from align.records import build
from align.stats.bootstrap import MAX_RESAMPLES, MIN_RESAMPLES, RESAMPLES, check_resamples


def _size(value, param):
    """A size option (--memory-limit, --device-memory) checked as it is parsed, before any
    input is read: the text as given, or its one-line refusal (`parse_memory`)."""
    parse_memory(value, param.opts[0])
    return value


def _alphas(ctx, param, value):
    """`--alphas auto` (the default grid, extended where an end wins) or a fixed list."""
    if value is None or value.strip().lower() == "auto":
        return None
    try:
        out = [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a comma-separated list of numbers (e.g. 1e-6,1e-3,1)"
        ) from None
    if not out:
        raise click.BadParameter(f"{value!r} lists no α")
    return out


def live_options(f):
    """The options of the --live form: the models' (as `align extract`'s, per model where
    they can differ), the corpus's (`align extract`'s), batching and the device budget."""
    dtypes = click.Choice(DTYPES)
    opts = [
        click.option(
            "--batch-size",
            type=whole(1),
            default=8,
            show_default=True,
            help="--live: sequences per forward pass (as `align extract`: the same batches, the same numbers).",
        ),
        click.option(
            "--dtype",
            type=dtypes,
            default=None,
            help="--live: compute dtype of both models [default: float32 on CPU, bfloat16 on CUDA].",
        ),
        click.option(
            "--source-dtype",
            type=dtypes,
            default=None,
            help="--live: the source model's dtype [default: --dtype].",
        ),
        click.option(
            "--target-dtype",
            type=dtypes,
            default=None,
            help="--live: the target model's dtype [default: --dtype].",
        ),
        click.option(
            "--source-revision", default=None, help="--live: hub revision of the source model."
        ),
        click.option(
            "--target-revision", default=None, help="--live: hub revision of the target model."
        ),
        click.option(
            "--trust-remote-code",
            is_flag=True,
            help="--live: allow the checkpoints' own Python code to run.",
        ),
        click.option(
            "--allow-pickle-weights", is_flag=True, help="--live: also load .bin (pickle) weights."
        ),
        click.option(
            "--random-init",
            is_flag=True,
            help="--live: both models with seeded random weights (the untrained control).",
        ),
        click.option(
            "--source-random-init",
            is_flag=True,
            help="--live: the source model only with random weights.",
        ),
        click.option(
            "--target-random-init",
            is_flag=True,
            help="--live: the target model only with random weights.",
        ),
        click.option(
            "--source-init-seed",
            type=SEED,
            default=0,
            show_default=True,
            help="--live: seed of the source's random weights (`align extract --seed`).",
        ),
        click.option(
            "--target-init-seed",
            type=SEED,
            default=0,
            show_default=True,
            help="--live: seed of the target's random weights.",
        ),
        click.option(
            "--source-family",
            type=click.Choice(families.NAMES),
            default=None,
            help="--live: read the source model as this family (`align extract --family`).",
        ),
        click.option(
            "--target-family",
            type=click.Choice(families.NAMES),
            default=None,
            help="--live: read the target model as this family.",
        ),
        click.option(
            "--allow-long",
            is_flag=True,
            help="--live: keep a --max-length above a model's position limit (capped at it otherwise).",
        ),
        click.option(
            "--device-memory",
            default=None,
            metavar="BYTES",
            callback=lambda ctx, param, value: _size(value, param),
            help="--live on a GPU: the device's budget, e.g. 60GB [default: 90% of its free memory].",
        ),
        click.option(
            "--dry-run",
            is_flag=True,
            help="--live: print the plan (tokens, blocks, passes, memory) and a time estimate from one timed "
            "batch of each model; write nothing.",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return corpus_options(f)


@click.command("fit")
@click.argument("source")
@click.argument("target")
@click.argument("corpus", required=False)
@click.option(
    "--live",
    is_flag=True,
    help="SOURCE and TARGET are models (folders or hub ids) run over CORPUS: the statistics accumulate as the "
    "activations appear and nothing but RESULT is written (docs/commands/fit.md, `--live`).",
)
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="RESULT",
    help="Alignment result to write (a folder, or an fsspec URL).",
)
@click.option(
    "--test-fraction",
    type=FINITE,
    default=0.2,
    show_default=True,
    help="Fraction of documents held out for scoring.",
)
@click.option(
    "--val-fraction",
    type=FINITE,
    default=0.2,
    show_default=True,
    help="Fraction of the remaining documents that chooses α.",
)
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the document split.")
@click.option(
    "--alphas",
    callback=_alphas,
    default="auto",
    metavar="auto|A,B,...",
    help="Relative ridge penalties (units of the mean eigenvalue of XcᵀXc). auto: 1e-6..1e1 by decades, "
    "extended by decades (within 1e-12..1e6) where a pair's choice sits at an end; a list is used as "
    "given, and the pairs choosing its ends are counted [default: auto].",
)
@click.option(
    "--bootstrap",
    type=int,
    default=RESAMPLES,
    show_default=True,
    callback=lambda ctx, param, value: value if value == 0 else check_resamples(value),
    help=f"Resamples of the held-out documents for p_best and the 95% intervals ({MIN_RESAMPLES:,} to "
    f"{MAX_RESAMPLES:,}; 0: none).",
)
@click.option(
    "--bootstrap-seed",
    type=SEED,
    default=0,
    show_default=True,
    help="Seed of the document bootstrap.",
)
@click.option(
    "--convergence",
    is_flag=True,
    help="Also fit 1/4 and 1/2 of the training documents and score them (relative_error_by_fraction): "
    "would more tokens change the matrix? Three times the statistics' memory.",
)
@click.option(
    "--control",
    type=click.Choice([c for c in CONTROLS if c is not None]),
    default=None,
    help="shuffle: pair each source token with the target's token at the same position of another document "
    "(the matrix a meaningless pairing gives; two stores only).",
)
@click.option(
    "--measures",
    default="ridge",
    show_default=True,
    metavar="LIST",
    help="Similarity measures beside ridge's held-out error, comma-separated, or all: "
    f"{', '.join(MEASURES)}; each from the held-out rows, with its 95% interval under --bootstrap.",
)
@click.option(
    "--sample-rows",
    type=whole(1),
    default=None,
    help=f"With --measures: held-out rows drawn (by --seed) for mknn, cknna, rsa and every measure's "
    f"calibration [default: {SAMPLE_ROWS:,}, or every held-out row when fewer].",
)
@click.option(
    "--permutations",
    type=whole(0),
    default=0,
    show_default=True,
    help="With --measures: null draws of every measure's calibration on the sampled rows (the target's "
    f"documents re-paired; {PERMUTATIONS} gives p-values down to 0.01); 0: none. mknn, cknna and rsa "
    "need 1 or more.",
)
@click.option(
    "--neighbours",
    type=whole(1),
    default=K_NEIGHBOURS,
    show_default=True,
    help="With --measures: k of mknn and cknna.",
)
@click.option(
    "--pairing",
    type=click.Choice(PAIRINGS),
    default="auto",
    show_default=True,
    help="Which tokens make a row: tokens (one token stream, token for token), char-anchors (the tokens of "
    "two tokenizations that end at the same character of a document; two stores only), auto (tokens "
    "when the tokenizers behave identically, else char-anchors).",
)
@click.option(
    "--min-coverage",
    type=click.FloatRange(0, 1),
    default=MIN_COVERAGE,
    show_default=True,
    help="char-anchors: the fraction of each model's text, in the contexts both read, that must lie "
    "before an anchor the two share (0: no floor); token coverage is reported, not refused.",
)
@click.option(
    "--include-first-token", is_flag=True, help="Also fit and score position 0 of each sequence."
)
@click.option(
    "--source-boundaries",
    default=None,
    metavar="SPEC",
    help="Source boundaries to map from, e.g. 0,4,8 or ::2 [default: all stored].",
)
@click.option(
    "--target-boundaries",
    default=None,
    metavar="SPEC",
    help="Target boundaries to map to [default: all stored].",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    help="Dask scheduler address (tcp://host:8786), or `synchronous` to run in this process "
    "[default: threads of this process, one per CPU core].",
)
@click.option(
    "--workers",
    "n_workers",
    type=whole(1),
    default=None,
    help="Run on a local Dask cluster of this many worker processes instead of threads of this process: "
    "at most one per CPU core (more are capped, with a log line); fewer when --memory-limit cannot "
    "hold them [default: no cluster].",
)
@click.option(
    "--memory-limit",
    default=None,
    metavar="BYTES",
    callback=lambda ctx, param, value: _size(value, param),
    help="Memory budget, e.g. 8GB: of the whole fit (this process and the workers it starts, their idle "
    "footprint included), or per worker with --scheduler [default: 60% of the available memory].",
)
@click.option(
    "--device",
    default="cpu",
    show_default=True,
    metavar="DEVICE",
    help="Where products and solves (eigendecompositions included) run: cpu, or a CUDA device "
    "(cuda, cuda:N) through torch, in float64. With --live: where both models run and the "
    "statistics accumulate (cpu, cuda, or auto: accelerate's device_map).",
)
@click.option(
    "--save-maps",
    is_flag=True,
    help="Also store every map's W and c (float64; the size is printed first).",
)
@click.option(
    "--task-tokens",
    type=whole(1),
    default=None,
    help="Tokens each task reads [default: the store's chunk; 65,536 or more on a GPU].",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace RESULT if it is an alignment result (never a store, an input or a folder holding other files).",
)
@live_options
def fit_cmd(
    source,
    target,
    output,
    test_fraction,
    val_fraction,
    seed,
    alphas,
    bootstrap,
    bootstrap_seed,
    convergence,
    control,
    measures,
    sample_rows,
    permutations,
    neighbours,
    pairing,
    min_coverage,
    include_first_token,
    source_boundaries,
    target_boundaries,
    scheduler,
    n_workers,
    memory_limit,
    device,
    save_maps,
    task_tokens,
    overwrite,
    corpus=None,
    live=False,
    **live_values,
):
    """Fit ridge maps from every boundary of SOURCE to every boundary of TARGET and score them.

    SOURCE and TARGET are activation stores made by `align extract` from the same corpus: of
    one tokenizer (rows token for token), or of two (rows at the characters where both end a
    token, --pairing char-anchors, which auto picks). The result holds relative_error, norm_error, r2 and α per pair on held-out
    documents; open it with xarray.open_zarr(RESULT) or align.open_alignment(RESULT).

    With --live: `align fit --live SOURCE_MODEL TARGET_MODEL CORPUS -o RESULT` runs both models
    over CORPUS (the model and corpus options of `align extract`; --dtype, the revision and
    random init per model where they differ; --device is where both models run and the
    statistics accumulate) and writes the same result, no stores.
    """

    values = dict(locals())
    spec = build(FitSpec, values, extend_alphas=alphas is None)
    if live or corpus is not None:
        return fit_live_cmd(source, target, corpus, output, live, spec, values, live_values)
    refuse_live_only(live_values)
    fit(source, target, output, spec, build(Execution, values))


def fit_live_cmd(source, target, corpus_path, output, live, spec, run_values, values) -> None:
    """The --live form: model and corpus specs from the options, then align.fitting.live;
    `run_values`: the command's own options (the Execution's fields), `values`: the --live ones."""
    from align.fitting.live import LiveJob, fit_live

    if not live:
        raise InputError(
            f"a third argument ({corpus_path}) is a corpus, read only with --live: "
            "`align fit --live SOURCE_MODEL TARGET_MODEL CORPUS -o RESULT`, or give two stores"
        )
    refuse_store_only(STORE_ONLY)
    device = run_values["device"]
    if device not in MODEL_DEVICES:
        raise InputError(
            f"--device {device!r}: with --live the models run on cpu, cuda or auto (accelerate's device_map)"
        )
    v = values
    sides = {}
    for side, name in (("source", source), ("target", target)):
        # each side's own option where the two can differ, the shared one (--dtype, --random-init) beside it
        own = {
            "revision": v[f"{side}_revision"],
            "dtype": v[f"{side}_dtype"] or v["dtype"],
            "device": device,
            "random_init": v["random_init"] or v[f"{side}_random_init"],
            "seed": v[f"{side}_init_seed"],
            "family": v[f"{side}_family"],
        }
        sides[side] = model_spec(name, {**v, **own})
    cspec = corpus_spec(corpus_path, v)
    gpu = device == "cuda" or (device == "auto" and _cuda())
    job = build(LiveJob, v, source=sides["source"], target=sides["target"], corpus=cspec)
    fit_live(
        job,
        output,
        spec,
        build(Execution, run_values, device="cuda" if gpu else "cpu"),
        device_memory=parse_memory(v["device_memory"], "--device-memory"),
        dry_run=v["dry_run"],
    )


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# Options of the store form that the --live form has no use for: its unit of work is a batch
# of sequences (--batch-size), and its workers are those of --scheduler ADDRESS.
STORE_ONLY = ("n_workers", "task_tokens")


def _given(names) -> list:
    """The options among the parameters `names` that the command line set (by their flag)."""
    ctx = click.get_current_context()
    return [
        p.opts[0]
        for p in ctx.command.params
        if p.name in names
        and ctx.get_parameter_source(p.name) is not click.core.ParameterSource.DEFAULT
    ]


def refuse_store_only(names) -> None:
    """An option of the store form given with --live is one line, not ignored."""

    given = _given(names)
    if given:
        raise InputError(
            f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to `align fit` on two stores "
            "only (with --live SOURCE and TARGET are models, forwarded in batches of --batch-size; "
            f"--scheduler ADDRESS runs them on Dask workers): drop {'it' if len(given) == 1 else 'them'}"
        )


def refuse_live_only(values: dict) -> None:
    """An option of the --live form given to the store form is one line, not ignored."""

    given = _given(values)
    if given:
        raise InputError(
            f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to `align fit --live` only "
            "(SOURCE and TARGET here are stores): add --live to run the models, or drop "
            f"{'it' if len(given) == 1 else 'them'}"
        )


commands = [fit_cmd]
