"""The store route: `align fit SOURCE TARGET` on two activation stores. `fit` is its pipeline,
every stage a named function below it: open and cross-check both stores (`_open`, with
`pair.open_pair`) → split the documents and draw the row measures' sample (`_split`) → check
room for the result, the α grid and the bootstrap's memory (`_check_before_pass`) → choose where
to run (`_choose_where`: threads of this process, one per core; a local cluster with --workers,
or the cluster at --scheduler) → plan the blocks of the pair grid that fit the memory budget
(`_prepare_work`) → per block, one Dask graph of statistics, solve and held-out sums
(`_run_blocks`, `graph.block_graph`) → the Dataset (`_dataset`) → its write (`_write`).
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass, field

from align import messages
from align import store as st
from align.errors import InputError
from align.faults import fault_point
from align.fitting.fit_options import Execution, FitHooks, FitRequest, FitSpec, entry_request
from align.fitting.measuring import rows_tasks, sampled
from align.fitting.measuring.measured import HELDOUT_PROCRUSTES, measure_groups_of
from align.fitting.pairing.partners import (
    anchored_partner,
    target_part,
)
from align.fitting.planning import budget
from align.fitting.planning.budget import human_bytes
from align.fitting.planning.split import make_split
from align.fitting.results.dataset import (
    Side,
    alignment_dataset,
    check_result_room,
    grid_note,
    import_ahead,
    import_dataset_modules,
    pair_results,
    write_alignment,
)
from align.fitting.results.headline import headline
from align.fitting.results.solver import check_alphas
from align.fitting.runtime.cluster import (
    PLAN_FRACTION,
    SYNC,
    THREADS,
    default_memory_limit,
    device_budget,
    executor,
    local_workers,
    refuse_memory,
    worker_budget_of,
)
from align.fitting.runtime.tasks import cancel
from align.fitting.store_route import estimate as store_estimate
from align.fitting.store_route.graph import BlockSettings, Job, Tokens, block_graph, sampled_rows
from align.fitting.store_route.pair import open_pair, scale_of, select_boundaries, shifts_of

# A fit whose statistics take more than this many flops (2·N·ΣD_S·ΣD_T) on the CPU runs its
# products through torch (MKL: ~10% faster than numpy's OpenBLAS, and the GIL released, so
# the threads of this process run side by side); a smaller one stays on numpy, for which
# importing torch (~1.5 s) would cost more than it saves (bench/fit.py).
SMALL_FIT_FLOPS = 2e12


@dataclass
class FitReport:
    """What `fit` returns: the result's path, its Dataset, the seconds and the plan.

    Parameters
    ----------
    path : str or None
        Where the result was written (None: not written).
    dataset : xarray.Dataset
        The alignment result: `relative_error`, `norm_error`, `r2` and `alpha` of shape
        (n_source_boundaries, n_target_boundaries), its summary in the attributes.
    seconds : float
        Wall time of the fit.
    blocks : list
        The plan's blocks of boundaries.
    statistics : dict, optional
        {(I, J): reduced ridge.Statistics}, when asked for.
    workers : set, optional
        Addresses of the workers that ran tasks.
    task_seconds : dict, optional
        Compute seconds summed by task kind (stats, solve, ...).
    plan : dict, optional
        The memory plan: budget, idle footprint, per-worker bytes, tokens per task.
    dry_run : dict, optional
        With `dry_run`: the estimate (seconds and bytes of each part, from timed pieces of the
        work); the fit itself did not run and nothing was written.
    """

    path: str | None
    dataset: object  # the xarray.Dataset written
    seconds: float
    blocks: list
    statistics: dict = field(
        default_factory=dict
    )  # {(I, J): reduced ridge.Statistics}, when asked for
    workers: set = field(default_factory=set)  # addresses of the workers that ran tasks
    task_seconds: dict = field(
        default_factory=dict
    )  # compute seconds summed by task kind (stats, solve, ...)
    plan: dict = field(
        default_factory=dict
    )  # memory plan: budget, idle footprint, per-worker bytes, tokens per task
    dry_run: dict | None = None  # --dry-run: the estimate (`store_estimate.estimate`)


# -- the entry point ----------------------------------------------------------------------


def fit(
    source: str,
    target: str,
    output: str | None,
    spec: FitSpec | None = None,
    run: Execution | None = None,
    *,
    hooks: FitHooks | None = None,
    log=None,
    dry_run: bool = False,
    **keywords,
) -> FitReport:
    """Fit ridge maps from every boundary of one activation store to every boundary of another.

    Parameters
    ----------
    source, target : str
        The two activation stores (path or URL), of one token stream.
    output : str or None
        Where the alignment result is written; None: computed, not written.
    spec : FitSpec, optional
        What is computed and recorded (fractions, seed, α grid, boundaries, measures, ...).
    run : Execution, optional
        Where and how it runs (scheduler, workers, memory, device, overwrite); no number changes.
    hooks : FitHooks, optional
        What tests reach into (a per-worker budget, the reduced statistics kept).
    log : callable, optional
        Receives each message (default: `align.messages.say`, to stderr).
    dry_run : bool, optional
        Plan, time pieces of the work, log the estimate (`store_estimate`); nothing is written.
    **keywords
        None: a record's field as a keyword (`seed=1`) is a TypeError naming its record.

    Returns
    -------
    FitReport

    Raises
    ------
    AlignError
        Every bad input, before anything is computed.
    NonFiniteError
        Rather than a result holding, or summarised over, a non-finite score.
    """
    t0 = time.time()
    opts = entry_request("align.fit", keywords, spec, run, hooks)
    log = _logger(log, dry_run)
    pair = _open(source, target, None if dry_run else output, opts, log)
    rows = _split(pair, opts, log, guess=not dry_run)
    where = _choose_where(pair, opts, _check_before_pass(pair, rows, opts, log), log)
    with executor(where.scheduler, where.n_workers, where.limit, log) as ex:
        work = _prepare_work(ex, pair, rows, opts, where, log)
        if dry_run:  # pieces of the work timed and scaled; nothing is written
            return _dry_run(ex, work, pair, rows, opts, log, t0)
        results, statistics = _run_blocks(ex, work, pair, rows, opts)
        extra = _sampled_measures(ex, results, work, pair, rows, opts, log)
    ds = _dataset(results, work, pair, rows, opts, log, extra)
    _write(output, ds, pair, opts, log, t0)
    return _report(output, ds, t0, work, statistics, ex, log)


# -- the stages ---------------------------------------------------------------------------


@dataclass
class Pair:
    """The two stores of a fit as opened and cross-checked: their paths (a file:// URL as a
    local path), the stores, the pairing (mode, why; char-anchors' pairs and each source row's
    partner, or None), the boundaries mapped, each side as the result records it, and the
    output its checks look at."""

    paths: tuple  # (source, target)
    S: object  # the source's activation store
    T: object  # the target's
    mode: str  # "tokens" or "char-anchors"
    paired_by: str  # why that pairing
    boundaries: tuple  # (source boundaries, target boundaries)
    anchored: object  # char-anchors' pairs (fitting.pairing.anchors.Anchored), or None
    partner: object  # (n_tokens,) each source row's target row, or None
    sides: tuple  # (Side, Side)
    output: str | None  # the result's path, checked (None: not written, or a dry run)


@dataclass
class Rows:
    """The rows a fit reads: the split, each target row's part, the row measures' sample."""

    split: object  # fitting.planning.split.Split
    t_part: object  # (n_target_tokens,) each target row's part
    sample: object  # fitting.measuring.sampled.Sample, or None


@dataclass
class Where:
    """Where the store route runs: the executor's arguments, the products' library, the
    bytes this process holds beside the sums, and whether the result's modules are loaded."""

    scheduler: object  # THREADS, SYNC, an address, or None (a local cluster)
    n_workers: int | None
    limit: object  # the memory limit
    use_torch: bool
    client_extra: int
    modules_counted: bool


@dataclass
class Work:
    """The store route's work once the executor is up: the tasks' settings, the blocks of the
    pair grid, the token ranges of the tasks, the rows' parts, the sums' shifts, the plan."""

    job: Job
    blocks: list  # [(source boundaries, target boundaries)] of the plan
    ranges: list  # [(start, stop)] token range of every task
    tokens: Tokens
    shifts: tuple  # ({source boundary: (d_S,)}, {target boundary: (d_T,)})
    plan: dict
    step: int  # tokens per task
    keep_heldout: bool
    modules_counted: bool  # the result's modules loaded before the idle footprint was measured


def _open(source: str, target: str, output: str | None, opts: FitRequest, log) -> Pair:
    """Check `output` (when one is written), open and cross-check both stores, choose the
    boundaries and pair the rows."""
    # a file:// URL is a local path: the checked reads name chunk files by path
    source, target = (st.local_path(p) or p for p in (source, target))
    if output is not None:
        st.check_output(
            output,
            "alignment",
            inputs={"source": source, "target": target},
            overwrite=opts.run.overwrite,
            storage_options=opts.run.storage_options,
        )
    S, T, mode, paired_by = open_pair(source, target, opts.run.storage_options, opts.spec.pairing)
    if mode == "char-anchors":
        log(f"align fit: pairing char-anchors ({paired_by})")
    boundaries = (
        select_boundaries(opts.spec.source_boundaries, S, "`source_boundaries`"),
        select_boundaries(opts.spec.target_boundaries, T, "`target_boundaries`"),
    )
    anchored, partner = (
        anchored_partner(S, T, opts.spec, log) if mode == "char-anchors" else (None, None)
    )
    sides = Side.of_store(S), Side.of_store(T)
    paths = (source, target)
    return Pair(paths, S, T, mode, paired_by, boundaries, anchored, partner, sides, output)


def _split(pair: Pair, opts: FitRequest, log, guess: bool) -> Rows:
    """The documents split (seeded), each target row's part, and the row measures' sample
    drawn before the pass; with `guess`, the row measures' seconds in the first plan line
    (`store_estimate.guess_row_seconds`: a dry run times them on the stores' rows)."""
    S, T = pair.S, pair.T
    split = make_split(
        S.tokens("doc"), S.tokens("pos"), opts.spec, S.tokens("seq"), partner=pair.partner
    )
    t_part = (
        split.part if pair.anchored is None else target_part(split.part, split.partner, T.n_tokens)
    )
    sample = sampled.draw(split, opts.spec)  # before the pass: the rows every boundary keeps
    shape = sample and _sample_shape(sample, pair, opts)
    seconds = store_estimate.guess_row_seconds(shape, opts.spec, opts.run.device) if guess else None
    sampled.log_measures(log, "align fit", opts.spec, sample, split, shape, seconds)
    return Rows(split, t_part, sample)


def _check_before_pass(pair: Pair, rows: Rows, opts: FitRequest, log) -> int:
    """Room for the result (at `pair.output`), the α grid, the bootstrap's and the sample's
    memory, before any pass; the bytes this process holds beside the sums."""
    S, T, split, sample = pair.S, pair.T, rows.split, rows.sample
    src_boundaries, tgt_boundaries = pair.boundaries
    if pair.output is not None:
        check_result_room(
            pair.output, src_boundaries, tgt_boundaries, *pair.sides, split, opts.spec.save_maps
        )
    n_pairs = len(src_boundaries) * len(tgt_boundaries)
    if opts.spec.save_maps:
        size = n_pairs * (S.d_model + 1) * T.d_model * 8
        log(
            f"align fit: `save_maps` stores W and c for {n_pairs} pairs: {human_bytes(size)} (float64)"
        )
    check_alphas(
        opts.spec.alphas, scale_of(S, src_boundaries, split.part), split.n_select, split.n_train
    )
    boot = budget.bootstrap_bytes(
        opts.spec.bootstrap,
        len(split.test_docs),
        len(src_boundaries),
        len(tgt_boundaries),
        T.d_model,
    )
    # the bootstrap's arrays live in this process, whose budget is --memory-limit unless that is per worker
    own = opts.run.memory_limit is not None and (
        opts.run.scheduler is None or opts.run.scheduler in SYNC
    )
    why = budget.bootstrap_refusal(
        opts.spec.bootstrap,
        boot,
        opts.run.memory_limit if own else default_memory_limit(),
        len(split.test_docs),
        n_pairs,
    )
    if why:
        raise InputError(why)
    if sample is not None:  # kept float32 as read, after the pass, in this process
        rows_shape = sampled.shape_of(
            sample,
            opts.spec,
            ((len(src_boundaries), S.d_model), (len(tgt_boundaries), T.d_model)),
            itemsize=4,
        )
        room = opts.run.memory_limit if own else default_memory_limit()
        sampled.check_room(rows_shape, room, "of this process's budget", "`memory_limit`")
        log(f"align fit: {sampled.plan_line(rows_shape, 'read after the pass')}")
    return (
        budget.client_bytes(S.n_tokens, n_pairs, S.d_model, T.d_model, opts.spec.save_maps)
        + boot["passes"]
    )


def _choose_where(pair: Pair, opts: FitRequest, client_extra: int, log) -> Where:
    """Where the fit runs (`_where`) and what this process loads before its idle footprint is
    measured (torch for a large fit on the CPU; the result's modules under a --memory-limit)."""
    S, T = pair.S, pair.T
    use_torch = opts.run.device == "cpu" and fit_flops(S, T, *pair.boundaries) > SMALL_FIT_FLOPS
    if use_torch:
        import torch  # noqa: F401  (before the idle footprint is measured, and the threads' BLAS limit set)
    scheduler, n_workers, limit = _where(opts, S, T, *pair.boundaries, client_extra, log)
    # under an explicit --memory-limit the result's modules (~70 MB) are loaded now, so that the
    # idle footprint measured below counts them; otherwise they load during the sums
    modules_counted = opts.run.memory_limit is not None
    if modules_counted:
        import_dataset_modules()
    return Where(scheduler, n_workers, limit, use_torch, client_extra, modules_counted)


def _prepare_work(ex, pair: Pair, rows: Rows, opts: FitRequest, where: Where, log) -> Work:
    """The plan on the executor that is up, the tasks' token ranges, the sums' shifts and the
    tasks' settings (one log line)."""
    S, T, split = pair.S, pair.T, rows.split
    src_boundaries, tgt_boundaries = pair.boundaries
    plan, step, keep_heldout = _plan(
        opts, ex, S, T, src_boundaries, tgt_boundaries, where.client_extra, split
    )
    blocks = plan["block_list"]
    ranges = [(a, min(S.n_tokens, a + step)) for a in range(0, S.n_tokens, step)]
    # the shift of the sums: one store chunk's training mean is near enough (a task's range of
    # every boundary was ~1 GB to read at 128k tokens, for a vector any value of which gives the same fit)
    near = min(step, S.chunk_tokens)
    shifts = (
        shifts_of(S, src_boundaries, split.part, near),
        shifts_of(T, tgt_boundaries, rows.t_part, near),
    )
    c = split.counts
    log(
        f"align fit: {len(src_boundaries)}x{len(tgt_boundaries)} pairs in {len(blocks)} block(s) of at most "
        f"{len(blocks[0][0])}x{len(blocks[0][1])} ({human_bytes(plan['block_bytes'])} "
        f"per worker of {human_bytes(plan['worker_budget'])} planned), {len(ranges)} tasks of {step:,} tokens, "
        f"{c['fit']:,} fit / {c['validation']:,} validation / {c['heldout']:,} held-out "
        f"{'tokens (pairing tokens: ' + pair.paired_by + ')' if pair.mode == 'tokens' else 'anchored pairs'}"
    )
    so = json.dumps(opts.run.storage_options, sort_keys=True) if opts.run.storage_options else None
    job = Job(
        S.path,
        T.path,
        so,
        opts.run.device,
        opts.run.blas_threads,
        min(step, S.chunk_tokens),
        where.use_torch,
        uuid.uuid4().hex,
        opts.spec.streamed,
    )
    plan["products"] = "numpy" if job.backend().torch is None else "torch"
    tokens = Tokens(
        split.part,
        split.heldout_index if opts.spec.bootstrap else None,
        split.stat_part,
        split.partner,
    )
    return Work(
        job, blocks, ranges, tokens, shifts, plan, step, keep_heldout, where.modules_counted
    )


class _Held(list):
    """A dry run's log: the plan's lines, held until the estimate's first line is said by
    `say`."""

    def __init__(self, say):
        super().__init__()
        self.say = say

    __call__ = list.append


def _logger(log, dry_run: bool):
    """Where the stages' lines go: `log` (default `messages.say`), or with `dry_run` held until
    the estimate's first line (`_Held`)."""
    say = log or messages.say
    return _Held(say) if dry_run else say


def _dry_run(
    ex, work: Work, pair: Pair, rows: Rows, opts: FitRequest, log: _Held, t0: float
) -> FitReport:
    """`dry_run`: pieces of the work timed and scaled (`store_estimate.estimate`), said with
    the plan's held lines (and, where the row measures would not go to the workers, why);
    nothing is computed further."""
    parts = (work.job, work.blocks, work.ranges, work.tokens, work.shifts, rows.split)
    shape = rows.sample and _sample_shape(rows.sample, pair, opts)
    on_workers = shape is not None and rows_tasks.runner(ex, work.job.device, shape) is not None
    if shape is not None and rows_tasks.held_back(ex, shape):
        log(f"align fit: {rows_tasks.held_back(ex, shape)}")
    estimated = store_estimate.estimate(
        store_estimate.Work(
            *parts,
            opts.spec,
            rows.sample,
            ex.n_workers,
            work.keep_heldout,
            work.plan["block_bytes"],
            ex.n_workers if on_workers else 1,
        ),
        log.say,
        log,
    )
    return FitReport(None, None, time.time() - t0, work.blocks, plan=work.plan, dry_run=estimated)


def _run_blocks(ex, work: Work, pair: Pair, rows: Rows, opts: FitRequest) -> tuple:
    """Per block of the pair grid, its graph run where `ex` says (statistics, solve, held-out
    sums) and its scores: ({(i, j): fitted + scores}, {(I, J): statistics} when kept)."""
    split, sample, job = rows.split, rows.sample, work.job
    if sample is not None and sample.perms is not None:  # procrustes-heldout's, per block
        sample.xs, sample.ys = sampled_rows(job, *pair.boundaries, sample.tokens, split.partner)
    solve_threads = opts.run.blas_threads and opts.run.blas_threads * (
        ex.n_workers if ex.mode != "remote" else 1
    )
    settings = BlockSettings(
        opts.spec.alphas,
        opts.spec.extend_alphas,
        solve_threads,
        opts.spec.save_maps,
        opts.hooks.keep_statistics,
        work.keep_heldout,
    )
    results, statistics = {}, {}
    factors, factors_of = {}, None
    for b, (I, J) in enumerate(work.blocks):
        if I != factors_of:  # blocks come source block by source block: keep one block's factors
            factors, factors_of = {}, I
        dsk, key = block_graph(
            b, (I, J), job, work.ranges, work.tokens, work.shifts, settings, factors
        )
        if b == 0 and not work.modules_counted:
            import_ahead()  # the result's modules load while the sums are computed (GIL released)
        try:
            out = ex.run(dsk, key)
        except BaseException:
            cancel(job.run)  # in threads, the tasks still running stop at their next chunk
            raise
        fault_point("fit_after_block")
        factors = out["factors"]
        fitted = sampled.heldout_null_tasks(  # on the workers; the rotations end here
            ex.run, sample, out["fitted"], job.backend, str(b)
        )
        results.update(
            pair_results(fitted, out["heldout"], split, opts.spec.resampling, out["fractions"])
        )
        if opts.hooks.keep_statistics:
            statistics[(I, J)] = out["stats"]
    return results, statistics


def _sampled_measures(ex, results: dict, work: Work, pair: Pair, rows: Rows, opts: FitRequest, log):
    """The row measures and every measure's calibration on the sample (`sampled.attach`), as
    the tasks of a cluster's workers where the fit runs on one and a worker's share of the
    budget holds them (`rows_tasks.runner`), else in this process, said in one line
    (`rows_tasks.held_back`); the result's extra options ({} without a sample)."""
    split, sample = rows.split, rows.sample
    if sample is None:
        return {}
    if not sample.xs:  # read after the pass unless procrustes-heldout needed them before
        sample.xs, sample.ys = sampled_rows(
            work.job, *pair.boundaries, sample.tokens, split.partner
        )
    shape = _sample_shape(sample, pair, opts)
    why = rows_tasks.held_back(ex, shape)
    if why:
        log(f"align fit: {why}")
    tasks = rows_tasks.runner(ex, work.job.device, shape)  # None: in this process
    where = (*pair.boundaries, work.job.device, tasks)
    return {"sampled_rows": sampled.attach(results, sample, opts.spec, *where)}


def _sample_shape(sample, pair: Pair, opts: FitRequest):
    """The memory plan's view of the sample (`sampled.shape_of`), its rows read as float32."""
    widths = ((len(pair.boundaries[0]), pair.S.d_model), (len(pair.boundaries[1]), pair.T.d_model))
    return sampled.shape_of(sample, opts.spec, widths, itemsize=4)


def _dataset(results: dict, work: Work, pair: Pair, rows: Rows, opts: FitRequest, log, extra):
    """The alignment Dataset (route "store"), with `extra` options (the sample's record)."""
    work.plan.pop("block_list")
    split = rows.split
    ds = alignment_dataset(
        results,
        pair.boundaries,
        pair.sides,
        split,
        opts.recorded(task_tokens=work.step, n_tokens=split.counts, pairing=pair.mode, **extra),
        "store",
        opts.spec.save_maps,
        opts.spec.resampling,
    )
    ds.attrs["pairing"] = (
        pair.anchored.record() if pair.anchored is not None else {"mode": "tokens"}
    )
    note = grid_note(ds, opts.spec.extend_alphas)
    if note:
        log(f"align fit: {note}")
    return ds


def _write(output: str | None, ds, pair: Pair, opts: FitRequest, log, t0: float) -> None:
    """The result written to `output` (one log line); None: nothing is written."""
    if output is None:
        return
    source, target = pair.paths
    write_alignment(
        output,
        ds,
        {"source": source, "target": target},
        opts.run.overwrite,
        opts.run.storage_options,
    )
    n_source, n_target = (len(b) for b in pair.boundaries)
    log(f"align fit: wrote {output} ({n_source}x{n_target} pairs) in {time.time() - t0:.1f} s")


def _report(output: str | None, ds, t0: float, work: Work, statistics: dict, ex, log) -> FitReport:
    """The result's headline said, and what `fit` returns."""
    log(f"align fit: {headline(ds.attrs)}")
    seconds = time.time() - t0
    return FitReport(
        output, ds, seconds, work.blocks, statistics, ex.seen, ex.task_seconds, work.plan
    )


def fit_flops(S, T, src_boundaries, tgt_boundaries) -> float:
    """2·N·ΣD_S·ΣD_T: the flops of the statistics' cross products."""
    return 2.0 * S.n_tokens * len(src_boundaries) * S.d_model * len(tgt_boundaries) * T.d_model


def _where(opts: FitRequest, S, T, src_boundaries, tgt_boundaries, client_extra: int, log):
    """(scheduler, local workers, memory limit) of the executor: without --scheduler or
    --workers, threads of this process (no worker to start, no statistics to ship between
    processes: at 128k tokens 30 s against 41 s on a local cluster of 2, bench/fit.py); with
    --workers a local cluster, sized against the budget before any worker starts
    (`local_workers`)."""
    if opts.run.scheduler is not None:
        return opts.run.scheduler, opts.run.n_workers, opts.run.memory_limit
    limit = opts.run.memory_limit if opts.run.memory_limit is not None else default_memory_limit()
    if opts.run.n_workers is None:
        return THREADS, None, limit
    step = opts.run.task_tokens or budget.default_task_tokens(
        S.chunk_tokens, S.n_tokens, opts.run.n_workers, opts.run.device
    )
    least, _ = budget.least_pair_bytes(
        S.d_model, T.d_model, step, S.chunk_tokens, S.n_tokens, opts.run.task_tokens is not None
    )
    n_workers = local_workers(
        opts.run.n_workers, limit, math.ceil(least / PLAN_FRACTION), client_extra, log
    )
    return None, n_workers, limit


def _plan(opts: FitRequest, ex, S, T, src_boundaries, tgt_boundaries, client_extra: int, split):
    """(plan, tokens per task, keep held-out rows) once the executor is up; refuses a budget
    that cannot hold one pair, naming the minimum."""
    step = opts.run.task_tokens or budget.default_task_tokens(
        S.chunk_tokens, S.n_tokens, ex.n_workers, opts.run.device
    )
    fixed = opts.run.task_tokens is not None
    per_worker = (
        opts.hooks.worker_budget
        if opts.hooks.worker_budget is not None
        else worker_budget_of(ex, client_extra)
    )
    if opts.run.device != "cpu":
        per_worker = min(per_worker, device_budget(opts.run.device))
    groups = measure_groups_of(opts.spec)
    rotations = HELDOUT_PROCRUSTES in opts.spec.measures  # its rotations, held with the maps
    grid = budget.PairGrid(src_boundaries, tgt_boundaries, S.d_model, T.d_model, groups, rotations)
    planned = budget.plan_blocks(
        grid,
        step,
        per_worker,
        S.chunk_tokens,
        fixed_tokens=fixed,
        n_tokens=S.n_tokens,
        parts=split.n_parts,
    )
    if planned is None:
        need, least = budget.least_pair_bytes(
            S.d_model, T.d_model, step, S.chunk_tokens, S.n_tokens, fixed
        )
        need += budget.measure_bytes(1, 1, S.d_model, T.d_model, groups, rotations=rotations)
        refuse_memory(ex, client_extra, need, S.d_model, T.d_model, least)
    blocks, step = planned
    nI, nJ = len(blocks[0][0]), len(blocks[0][1])
    used = budget.block_bytes(
        nI,
        nJ,
        S.d_model,
        T.d_model,
        step,
        S.chunk_tokens,
        math.ceil(S.n_tokens / step),
        split.n_parts,
    ) + budget.measure_bytes(nI, nJ, S.d_model, T.d_model, groups)
    kept = budget.heldout_rows_bytes(split.counts["heldout"], nI, nJ, S.d_model, T.d_model)
    keep_heldout = used + kept <= per_worker
    plan = {
        "mode": ex.mode,
        "limit": ex.limit,
        "idle": ex.idle,
        "client_extra": client_extra,
        "worker_budget": per_worker,
        "n_workers": ex.n_workers,
        "task_tokens": step,
        "blocks": len(blocks),
        "block_bytes": used,
        "heldout_rows_kept": keep_heldout,
        "block_list": blocks,
    }
    return plan, step, keep_heldout
