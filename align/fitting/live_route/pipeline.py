"""`align fit --live`: the study without stores. Both models run over the corpus and the
sufficient statistics of docs/methods.md, The fit accumulate on the device as the activations appear.

The run is: read both configs and tokenizers (the pairing: the store route's resolution,
checks and messages, fitting.pairing.partners) → tokenize the corpus once (the token table a store
would hold; once per model when the tokenizers differ, the rows then anchored on the text as
two stores' are: fitting.live_route.anchors) → split documents and mark every token fit / validation / held-out / unused exactly as
the store route does (fitting.planning.split) → batch the sequences exactly as `align extract` does
(length-grouped windows, extraction.batches), so every token meets the batch a store saw and
gets the same bits → plan the memory: the target boundaries are covered in blocks, one pass
over the corpus per block → per block:

    per batch: source forward (its boundaries, once per pass) + target forward (stopped after
      the block's highest boundary) → ridge.chunk_statistics into the block's sums on the
      device (rows of each part gathered in part order, float64); held-out rows kept in the
      compute dtype where the plan holds them
    fitting.results.solver (the shared solver; each source boundary decomposed once for all blocks)
    held-out rows (kept, or a second forward of their batches) → ridge.heldout_sums

and the result goes through the shared result writer (fitting.results.dataset) with `route: live` and
the models' provenance. Nothing else is written. With a Dask scheduler address the batches
are cut into document shards that workers process (each loads both models), their sums
added in a tree fixed by shard index (the tasks of fitting.live_route.shards run there).

`--control shuffle` pairs each source token with the target's token at the same position of
another document's sequence, exactly the store route's pairing (split.shuffle_partners;
anchors.shuffled across tokenizers). Its partners lie anywhere in the corpus, so the target
is not forwarded in its extraction batches (which would keep rows from across the corpus
until their partners come): per grouping window of the source, the sequences holding its
partners are batched and forwarded (batches.read_order_batches), each once, and paired
through the anchored stream. The target's rows then meet other batches than its store's and
may differ from them in the compute dtype's last bits; the pairing does not.

Module map (all under align.fitting): options (FitSpec, Execution, LiveJob), batches (the
token table, the extraction batches), passes (forwards, rows, the statistics and held-out
passes), live_anchors (two tokenizers, or the shuffle: the target's own batches, paired per
grouping window), budget (the memory plan), progress (the terminal bar), shards (the Dask
tasks), live_estimate (the dry run), tasks (BLAS threads, cancellation); this module checks
the inputs, plans, runs and hands the sums to the shared solver and writer.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from align import corpus, messages, models, provenance
from align import store as st
from align.boundaries import parse_boundaries
from align.corpus import generated_format
from align.errors import InputError
from align.faults import fault_point
from align.fitting.fit_options import (
    Execution,
    FitHooks,
    FitRequest,
    FitSpec,
    LiveJob,
    entry_request,
)
from align.fitting.live_route import anchors as live_anchors
from align.fitting.live_route import cluster as live_cluster
from align.fitting.live_route.batches import TokenTable, plan_batches, token_table
from align.fitting.live_route.estimate import estimate
from align.fitting.live_route.passes import PassInputs, load_models, run_blocks
from align.fitting.live_route.plan import (
    LivePlan,
    Prepared,
    make_plan,
    refuse_bootstrap,
    shape_of,
    sides_shape,
)
from align.fitting.live_route.progress import Progress
from align.fitting.measuring import sampled
from align.fitting.pairing.anchors import coverage_line, windows_line
from align.fitting.pairing.partners import check_tokenizers, resolve
from align.fitting.planning.split import Origin, make_split
from align.fitting.results.dataset import (
    Side,
    alignment_dataset,
    check_result_room,
    grid_note,
    write_alignment,
)
from align.fitting.results.headline import headline
from align.fitting.runtime.cluster import default_memory_limit
from align.fitting.store_route.estimate import guess_row_seconds

__all__ = [
    "LiveJob",
    "LivePlan",
    "LiveReport",
    "Prepared",
    "TokenTable",
    "fit_live",
    "make_plan",
    "plan_batches",
    "prepare",
    "shape_of",
    "token_table",
]

# -- the run --------------------------------------------------------------------------------


def _capped(job: LiveJob, configs, log) -> LiveJob:
    """The job with `max_length` lowered to the fewest positions of the two models (one log
    line), unless `allow_long` or it fits both."""
    limits = [
        (getattr(c, "max_position_embeddings", None), s.name)
        for c, s in zip(configs, (job.source, job.target))
    ]
    limit, name = min(((n, s) for n, s in limits if n), default=(None, None))
    if limit is None or job.corpus.max_length <= limit or job.allow_long:
        return job
    log(
        f"align fit --live: `max_length` {job.corpus.max_length} is above the position limit of {name} "
        f"(max_position_embeddings {limit}): windows of {limit} tokens are used; pass `allow_long` to "
        "run positions the model was not built for"
    )
    return replace(job, corpus=replace(job.corpus, max_length=limit))


def prepare(job: LiveJob, options: FitRequest, log=messages.say) -> Prepared:
    """Read both configs and tokenizers (refusing tokenizers that differ, token ids a model
    has no embedding for; a `max_length` beyond a model's positions is capped at them, said
    to `log`, unless `allow_long`), tokenize once, split by document (fitting.planning.split), batch."""
    if job.batch_size < 1:
        raise InputError(f"`batch_size` {job.batch_size} must be at least 1")
    corpus.validate(job.corpus)
    configs = tuple(models.load_config(s) for s in (job.source, job.target))
    job = _capped(job, configs, log)
    toks = tuple(models.load_tokenizer(s) for s in (job.source, job.target))
    hashes = tuple(corpus.tokenizer_hashes(t) for t in toks)
    mode, why = resolve(options.spec.pairing, *hashes)
    if mode == "tokens":
        check_tokenizers(*hashes, job.source.name, job.target.name)
    elif job.corpus.pack is not None:
        raise InputError(
            f"`pack` {job.corpus.pack!r} with tokenizers that differ: a packed window's tokens read the end of "
            "the documents before them, cut at other characters by each tokenizer, so they cannot be anchored; "
            "drop `pack`"
        )
    boundaries = [
        parse_boundaries(spec, c.num_hidden_layers, f"`{side}_boundaries`")
        for spec, c, side in (
            (options.spec.source_boundaries, configs[0], "source"),
            (options.spec.target_boundaries, configs[1], "target"),
        )
    ]
    tables = (
        (token_table(job.corpus, toks[0]),) * 2
        if mode == "tokens"
        else tuple(token_table(job.corpus, tok) for tok in toks)
    )
    for spec, config, table in zip((job.source, job.target), configs, tables):
        models.check_token_ids(
            spec, config, table.max_id, "document {}, position {}".format(*table.max_id_at)
        )
    table = tables[0]
    found, partner = (
        live_anchors.anchor(
            *tables,
            options.spec,
            (job.source.name, job.target.name),
            job.corpus.max_length,
        )
        if mode == "char-anchors"
        else (None, None)
    )
    split = make_split(
        table.doc,
        table.pos,
        options.spec,
        seq=table.seq,
        origin=split_origin(job.corpus),
        partner=partner,
    )
    batches = plan_batches(table, split.part, job.batch_size)
    if split.partner is None:
        return Prepared(job, configs, toks, table, split, batches, *boundaries, (mode, why))
    stream = live_anchors.AnchoredStream.build(
        *tables,
        split.part,
        split.partner,
        job.batch_size,
        read_order=batches if options.spec.control == "shuffle" else None,
    )
    return Prepared(
        job,
        configs,
        toks,
        table,
        split,
        batches,
        *boundaries,
        (mode, why),
        tables[1],
        found,
        stream,
    )


def split_origin(cspec: corpus.CorpusSpec) -> Origin:
    """--live's words for too few documents: they are the corpus's (no store is involved), cut
    by --doc-split (a .txt file or a folder) and limited by --max-docs / --max-tokens."""
    how = ""
    more = "give a corpus of more documents"
    if cspec.path is not None and cspec.fmt == "plain" and not cspec.path.endswith(".jsonl"):
        how = f" (`doc_split` {cspec.doc_split or ('file' if os.path.isdir(cspec.path) else 'blank')})"
        more += " or another `doc_split`"
    cut = [
        f"`{k}` {v}"
        for k, v in (("max_docs", cspec.max_docs), ("max_tokens", cspec.max_tokens))
        if v is not None
    ]
    if generated_format(cspec.fmt) is not None and cspec.max_docs is not None:
        more = "raise `max_docs`"  # a generated format has --max-docs problems
    elif cut:
        more += ", or raise " + " and ".join(cut)
    return Origin(f"the corpus {cspec.describe()}{how} gives", more)


def sides_of(p: Prepared) -> tuple:
    """Each model as the result records it (fitting.results.dataset.Side): what a live-model analysis
    records (provenance.model_record), the weights' identity (as a store records it)
    and the batch size (the batches decide the float32 rounding)."""
    out = []
    for spec, config, tok, table in zip(
        (p.job.source, p.job.target), p.configs, p.tokenizers, (p.table, p.target_table)
    ):
        prov = {
            **provenance.model_record(spec, config, tok, p.job.corpus, table.corpus_hash),
            "weights": provenance.weights_identity(spec, config),
            "batch_size": p.job.batch_size,
        }
        out.append(Side(prov, spec.name, config.num_hidden_layers, config.hidden_size))
    return tuple(out)


@dataclass
class LiveReport:
    """What `fit_live` returns: the result's path (None: not written), the Dataset, seconds,
    the plan (LivePlan.record()), statistics per block when asked, the progress rates, the
    seconds of the passes, and with a dry run its estimate."""

    path: str | None
    dataset: object
    seconds: float
    plan: dict
    statistics: dict = field(default_factory=dict)
    rates: str = ""
    loop_seconds: float = (
        0.0  # the passes, solves and held-out sums (loading and tokenizing not counted)
    )
    dry_run: dict | None = None


def fit_live(
    job: LiveJob,
    output: str | None,
    spec: FitSpec | None = None,
    run: Execution | None = None,
    *,
    device_memory: int | None = None,
    dry_run: bool = False,
    hooks: FitHooks | None = None,
    log=None,
    **keywords,
) -> LiveReport:
    """Compute the alignment result from the models themselves (`align fit --live`).

    Parameters
    ----------
    job : LiveJob
        The two models and the corpus.
    output : str or None
        Where the alignment result is written; None: computed, not written.
    spec : FitSpec, optional
        What is computed and recorded, as `align.fit` takes it.
    run : Execution, optional
        Where and how it runs (`memory_limit`: the host's budget); no number changes.
    device_memory : int, optional
        The GPU budget in bytes when the models run on one.
    dry_run : bool, optional
        The plan and a time estimate from one timed batch of each model; nothing is written.
    hooks : FitHooks, optional
        What tests reach into (a per-worker budget, the reduced statistics kept).
    log : callable, optional
        Receives each message (default: `align.messages.say`, to stderr).
    **keywords
        None: a record's field as a keyword (`seed=1`) is a TypeError naming its record.

    Returns
    -------
    LiveReport
        The result's path and Dataset, the seconds, the plan; a dry run's estimate.

    Raises
    ------
    AlignError
        Every bad input, in one line, before any model is loaded.
    """
    terminal = log is None and sys.stderr.isatty()
    log = log or messages.say
    t0 = time.time()
    options = entry_request("fit_live", keywords, spec, run, hooks)
    _refuse_convergence_on_cluster(options)
    p, sides = _prepare_checked(job, options, None if dry_run else output, log, not dry_run)
    if options.run.scheduler not in IN_PROCESS and not dry_run:
        outcome, plan = _passes_on_cluster(p, options, log, t0)
        return finish(p, sides, outcome, plan, options, output, log)
    plan = _plan_here(p, options, device_memory, log)
    if dry_run:  # one timed batch of each model, scaled; nothing is written
        return _dry_run(p, plan, options, log, t0)
    outcome = _passes_here(p, plan, options, (log, terminal), t0)
    return finish(p, sides, outcome, plan, options, output, log)


# -- the stages ---------------------------------------------------------------------------

IN_PROCESS = (None, "synchronous", "sync")  # the schedulers that run the passes here


def _refuse_convergence_on_cluster(options: FitRequest) -> None:
    """The one-line refusal of `convergence` with a Dask cluster's address."""
    if options.spec.convergence and options.run.scheduler not in IN_PROCESS:
        raise InputError(
            f"`convergence` with `live` runs in this process only, not on the Dask cluster at "
            f"`scheduler` {options.run.scheduler}: drop one of them (or fit stores on the cluster)"
        )


def _inputs_of(job: LiveJob) -> dict:
    """The inputs the result records and `output` must not be: the model folders and corpus."""
    return {
        k: v
        for k, v in (
            ("source model folder", job.source.name),
            ("target model folder", job.target.name),
            ("corpus", job.corpus.path),
        )
        if v
    }


def _prepare_checked(
    job: LiveJob, options: FitRequest, output: str | None, log, guess: bool
) -> tuple:
    """(Prepared, sides): `output` checked (when one is written), the job prepared, its
    pairing said, the bootstrap's memory checked, the row measures' sample drawn before the
    passes (with `guess`, their seconds in the first plan line: `guess_row_seconds`), and
    room for the result checked."""
    if output is not None:
        st.check_output(
            output, "alignment", inputs=_inputs_of(job), overwrite=options.run.overwrite
        )
    p = prepare(job, options, log)
    if p.anchored is not None:
        log(f"align fit --live: pairing char-anchors ({p.pairing[1]})")
        log(f"align fit --live: {coverage_line(p.anchored)}")
        if windows_line(p.anchored):
            log(f"align fit --live: {windows_line(p.anchored)}")
    refuse_bootstrap(p, options)
    p.sample = sampled.draw(p.split, options.spec)  # before the passes, by the split's seed
    shape = p.sample and sampled.shape_of(p.sample, options.spec, sides_shape(p))
    seconds = guess_row_seconds(shape, options.spec, options.run.device) if guess else None
    sampled.log_measures(log, "align fit --live", options.spec, p.sample, p.split, shape, seconds)
    sides = sides_of(p)
    if output is not None:
        check_result_room(
            output,
            p.source_boundaries,
            p.target_boundaries,
            *sides,
            p.split,
            options.spec.save_maps,
        )
    return p, sides


def _passes_on_cluster(p: Prepared, options: FitRequest, log, t0: float) -> tuple:
    """(Outcome, plan record): the passes as document shards on the Dask cluster at
    `scheduler`, planned per worker; the sample's rows joined in this process."""
    if p.sample is not None:  # joined here; measured on the workers where they hold them
        rows = sampled.shape_of(p.sample, options.spec, sides_shape(p))
        room = default_memory_limit()
        sampled.check_room(rows, room, "of this process's budget", "`memory_limit`")
        log(f"align fit --live: {sampled.plan_line(rows, 'joined in this process')}")
    plan, results, statistics, rates, loop_s, record = live_cluster.run_on_cluster(
        p, options, log, lambda limits: make_plan(p, options, None, limits)
    )
    return Outcome(results, statistics, rates, loop_s, "cluster", t0, record), plan


def _dry_run(p: Prepared, plan: LivePlan, options: FitRequest, log, t0: float) -> LiveReport:
    """`dry_run`: the plan and one timed batch of each model, scaled, the row measures timed
    on its rows (`estimate`)."""
    estimated = estimate(p, plan, log, options.spec)
    return LiveReport(None, None, time.time() - t0, plan.record(), dry_run=estimated)


def _plan_here(p: Prepared, options: FitRequest, device_memory: int | None, log) -> LivePlan:
    """The plan of the passes in this process (its lines said)."""
    plan = make_plan(p, options, device_memory)
    for line in plan.lines(len(p.source_boundaries), len(p.target_boundaries), p.job.batch_size):
        log(line)
    return plan


def _passes_here(p: Prepared, plan: LivePlan, options: FitRequest, logs: tuple, t0: float):
    """The Outcome of the passes in this process: the models loaded, one pass over the corpus
    per block (a second forward of the held-out batches where their rows are not kept), a
    progress bar; `logs` is (log, whether it is a terminal's)."""
    net = load_models(p.job)
    total = plan.passes * len(p.batches) + (
        0 if plan.keep_heldout else plan.passes * sum(1 for b in p.batches if b.n_test)
    )
    progress = Progress(total, *logs)
    t_loop = time.time()
    try:
        inputs_of_passes = PassInputs(net, p.stream, p.batches, p.source_boundaries, progress)
        results, statistics = run_blocks(
            inputs_of_passes, plan.blocks, plan.keep_heldout, options, p.split, p.sample
        )
    finally:
        progress.close()
    loop_s = time.time() - t_loop
    return Outcome(results, statistics, progress.rates(), loop_s, str(net.device.type), t0)


class Outcome(NamedTuple):
    """What the passes of a live fit produced, for `finish`."""

    results: dict  # {(i, j): fitted + scores}
    statistics: dict  # {block: numpy statistics} (keep_statistics), else {}
    rates: str  # the passes' rates, for the log
    loop_s: float  # seconds of the passes, solves and held-out sums
    where: str  # where the sums were computed: "cpu", "cuda" or "cluster"
    started: float  # time.time() at the start of the fit
    sampled: dict | None = None  # the sample's record where the row measures are done


def finish(
    p: Prepared, sides, outcome: Outcome, plan: LivePlan, options: FitRequest, output, log
) -> LiveReport:
    """The alignment Dataset (the shared writer's, route "live") written to `output`."""
    results, statistics, rates, loop_s, where, t0, record = outcome
    log(f"align fit --live: {plan.passes} pass(es) over {p.table.n_tokens:,} tokens, {rates}")
    extra = {}
    if record is not None:  # the row measures done on the cluster (live_cluster)
        extra["sampled_rows"] = record
    elif p.sample is not None:  # the row measures and every measure's calibration
        extra["sampled_rows"] = sampled.attach(
            results, p.sample, options.spec, p.source_boundaries, p.target_boundaries, where
        )
    recorded = options.recorded(
        batch_size=p.job.batch_size,
        n_tokens=p.split.counts,
        device=where,
        pairing=p.pairing[0],
        **extra,
    )
    ds = alignment_dataset(
        results,
        (p.source_boundaries, p.target_boundaries),
        sides,
        p.split,
        recorded,
        route="live",
        save_maps=options.spec.save_maps,
        resampling=options.spec.resampling,
    )
    ds.attrs["pairing"] = {"mode": "tokens"} if p.anchored is None else p.anchored.record()
    note = grid_note(ds, options.spec.extend_alphas)
    if note:
        log(f"align fit --live: {note}")
    if output is not None:
        fault_point("fit_live_before_write")
        write_alignment(output, ds, _inputs_of(p.job), options.run.overwrite)
        log(
            f"align fit --live: wrote {output} ({len(p.source_boundaries)}x{len(p.target_boundaries)} pairs) in "
            f"{time.time() - t0:.1f} s"
        )
    log(f"align fit --live: {headline(ds.attrs)}")
    return LiveReport(output, ds, time.time() - t0, plan.record(), statistics, rates, loop_s)
