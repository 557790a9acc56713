"""`align fit`."""

from __future__ import annotations

import click

from align.cli.declared import Parsed, fields, options_of, param_names, sides
from align.cli.extract import CORPUS_FIELDS, corpus_spec
from align.cli.shared_options import DEVICE_MEMORY, FIT_OUTPUT, LIVE, LIVE_DRY_RUN
from align.corpus import CorpusSpec
from align.devices import MODEL_DEVICES
from align.errors import InputError
from align.fitting import FitSpec, fit
from align.fitting.fit_options import Execution, LiveJob, parse_memory
from align.fitting.live_route.pipeline import fit_live
from align.models import ModelSpec

# `align fit`'s options, each group once, in the order of its help and of its page's tables:
# what the fit computes (`FitSpec`, with -o and --overwrite), where it runs (`Execution`), and
# the --live form's: the models (as `align extract`'s, per model where they can differ),
# batching, the device budget and the corpus (`align extract`'s).
FIT_SPEC = (
    FIT_OUTPUT,
    fields(
        FitSpec,
        "test_fraction",
        "val_fraction",
        "seed",
        "alphas",
        "bootstrap",
        "bootstrap_seed",
        "measure_interval",
        "convergence",
        "control",
        "measures",
        "sample_rows",
        "permutations",
        "neighbours",
        "pairing",
        "min_coverage",
        "include_first_token",
        "source_boundaries",
        "target_boundaries",
        "save_maps",
    ),
    fields(Execution, "overwrite"),
)
FIT_EXECUTION = (
    fields(Execution, "scheduler", "n_workers", "memory_limit", "device", "task_tokens"),
    LIVE_DRY_RUN,
)
LIVE_FORM = (
    fields(LiveJob, "batch_size"),
    sides(ModelSpec, "dtype", "revision", "random_init", "seed", "family"),
    sides(ModelSpec, "trust_remote_code", "allow_pickle_weights"),
    fields(LiveJob, "allow_long"),
    DEVICE_MEMORY,
    fields(CorpusSpec, *CORPUS_FIELDS),
)
# Options of the store form that the --live form has no use for: its unit of work is a batch
# of sequences (--batch-size), and its workers are those of --scheduler ADDRESS.
STORE_ONLY = ("n_workers", "task_tokens")


@click.command("fit")
@click.argument("source")
@click.argument("target")
@click.argument("corpus", required=False)
@options_of(*FIT_SPEC, *FIT_EXECUTION, LIVE, *LIVE_FORM)
def fit_cmd(source, target, corpus=None, **values):
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
    parsed = Parsed(values)
    live, output = parsed.take(LIVE), parsed.take(FIT_OUTPUT)
    dry_run = parsed.take(LIVE_DRY_RUN)  # both forms
    typed = parsed.fields(FitSpec)
    spec = FitSpec(**typed, extend_alphas=typed["alphas"] is None)  # --alphas auto: extend
    if live or corpus is not None:
        return fit_live_cmd(source, target, corpus, output, live, spec, parsed, dry_run)
    refuse_live_only(param_names(*LIVE_FORM))
    run = parsed.record(Execution)
    parsed.unused(param_names(*LIVE_FORM))  # refused above when given
    parsed.done()
    fit(source, target, output, spec, run, dry_run=dry_run)


def fit_live_cmd(source, target, corpus_path, output, live, spec, parsed, dry_run) -> None:
    """The --live form: model and corpus specs from the options, then align.fitting.live_route.pipeline."""
    if not live:
        raise InputError(
            f"a third argument ({corpus_path}) is a corpus, read only with --live: "
            "`align fit --live SOURCE_MODEL TARGET_MODEL CORPUS -o RESULT`, or give two stores"
        )
    refuse_store_only(STORE_ONLY)
    run = parsed.fields(Execution)
    device = run["device"]
    if device not in MODEL_DEVICES:
        raise InputError(
            f"--device {device!r}: with --live the models run on cpu, cuda or auto (accelerate's device_map)"
        )
    # each side's own option where the two can differ, the shared one (--dtype, --random-init)
    # beside it
    models = {
        side: ModelSpec(name, device=device, **parsed.side(ModelSpec, side))
        for side, name in (("source", source), ("target", target))
    }
    cspec = corpus_spec(corpus_path, parsed)
    gpu = device == "cuda" or (device == "auto" and _cuda())
    job = parsed.record(LiveJob, source=models["source"], target=models["target"], corpus=cspec)
    device_memory = parse_memory(parsed.take(DEVICE_MEMORY), "--device-memory")
    parsed.done()
    fit_live(
        job,
        output,
        spec,
        Execution(**{**run, "device": "cuda" if gpu else "cpu"}),
        device_memory=device_memory,
        dry_run=dry_run,
    )


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


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


def refuse_live_only(names) -> None:
    """An option of the --live form given to the store form is one line, not ignored."""

    given = _given(names)
    if given:
        raise InputError(
            f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to `align fit --live` only "
            "(SOURCE and TARGET here are stores): add --live to run the models, or drop "
            f"{'it' if len(given) == 1 else 'them'}"
        )


commands = [fit_cmd]
