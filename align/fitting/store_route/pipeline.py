"""The store route: `align fit SOURCE TARGET` on two activation stores. Checks the pair,
splits the documents, plans memory, runs one Dask graph per block of the pair grid
(`graph.block_graph`) where `cluster.executor` says, and writes the result (`result`).

The run is: check -o, open and cross-check both stores (tokens, windows) → split documents
(seeded) → check room for the result and the α grid → choose where to run (threads of this
process, one per core; a local cluster with --workers, or the cluster at --scheduler) → choose
a block shape of the pair grid that fits the memory budget → per block, statistics, solve,
held-out sums → the Dataset.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass, field

import numpy as np

from align import messages
from align import store as st
from align.boundaries import parse_boundaries
from align.declarations import refuse_fields
from align.errors import InputError, StoreError
from align.faults import fault_point
from align.fitting.fit_options import Execution, FitHooks, FitRequest, FitSpec, request
from align.fitting.measuring import sampled
from align.fitting.measuring.measured import HELDOUT_PROCRUSTES, measure_groups_of
from align.fitting.pairing.partners import (
    anchored_partner,
    check_same_text,
    check_tokenizers,
    resolve,
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
from align.ridge.statistics import FIT, VAL

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
        The alignment result.
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


# -- checks -------------------------------------------------------------------------------

WINDOWING = (
    "max_length",
    "overflow",
    "doc_split",
)  # corpus options that cut documents into sequences


def open_pair(
    source: str, target: str, storage_options: dict | None = None, pairing: str = "tokens"
):
    """Open both activation stores and refuse a pair that cannot be fitted.

    Token for token: the tokenizers, the token count, and per token (block by block) its id
    and its place (doc, seq, pos). Two stores of the same token ids cut into different windows
    (another --max-length or --doc-split) saw each token in another context: a map between
    them is wrong, so the first token whose place differs is named, with the windowing options
    of the two stores' provenance that differ. Windowing options that differ while every token
    sits in the same place (documents shorter than both windows) change nothing and pass.
    Anchored on the text: the same corpus, unpacked (`pairing.check_same_text`; the windows and
    the coverage are checked with the anchors).

    Parameters
    ----------
    source : str
        The source store.
    target : str
        The target store.
    storage_options : dict, optional
        fsspec options of remote stores.
    pairing : str, optional
        "tokens", "char-anchors" or "auto" (`pairing.resolve`).

    Returns
    -------
    S, T : ActivationStore
        The two stores.
    mode : str
        The pairing it resolves to ("tokens" or "char-anchors").
    why : str
        The words the log gives for it.

    Raises
    ------
    StoreError
        A pair that cannot be fitted, in one line naming what differs.
    """
    stores = []
    for role, path in (("source", source), ("target", target)):
        _check_reachable(path, role.upper(), storage_options)
        s = st.open_activations(path, storage_options)
        s.require_complete()
        stores.append(s)
    S, T = stores
    hs, ht = S.provenance.get("tokenizer_hash", {}), T.provenance.get("tokenizer_hash", {})
    mode, why = resolve(pairing, hs, ht)
    if mode == "char-anchors":
        check_same_text(S, T)
        return S, T, mode, why
    check_tokenizers(
        hs, ht, f"{S.path} ({S.provenance.get('model')})", f"{T.path} ({T.provenance.get('model')})"
    )
    _check_one_stream(S, T)
    return S, T, mode, why


def _check_one_stream(S, T) -> None:
    """Refuse two stores whose token streams differ: count, ids, places (`open_pair`)."""
    windowing = _windowing_difference(S, T)
    if S.n_tokens != T.n_tokens:
        raise StoreError(
            f"target store {T.path} has {T.n_tokens:,} tokens, source {S.path} has {S.n_tokens:,}{windowing}: both must be "
            "extracted from the same corpus with the same tokenizer and options (run `align extract` again)"
        )
    block = 1 << 20
    for b0 in range(0, S.n_tokens, block):
        b1 = min(S.n_tokens, b0 + block)
        a, b = S.tokens("token_id", b0, b1), T.tokens("token_id", b0, b1)
        bad = np.flatnonzero(a != b)
        if len(bad):
            t = b0 + int(bad[0])
            raise StoreError(
                f"token {t:,} is id {int(a[bad[0]])} in source {S.path} but {int(b[bad[0]])} in target {T.path} "
                f"({len(bad):,} of tokens {b0:,}..{b1 - 1:,} differ){windowing}: both stores must hold the same token stream "
                "(extract both from the same corpus with the same `max_length`/`max_tokens`)"
            )
        place = {
            name: (S.tokens(name, b0, b1), T.tokens(name, b0, b1)) for name in ("doc", "seq", "pos")
        }
        moved = np.zeros(b1 - b0, dtype=bool)
        for x, y in place.values():
            moved |= x != y
        bad = np.flatnonzero(moved)
        if len(bad):
            k, t = int(bad[0]), b0 + int(bad[0])
            where = lambda side: ", ".join(f"{n} {int(place[n][side][k])}" for n in place)  # noqa: E731
            raise StoreError(
                f"token {t:,} is at ({where(0)}) in source {S.path} but at ({where(1)}) in target {T.path} "
                f"({int(moved.sum()):,} of tokens {b0:,}..{b1 - 1:,} differ){windowing}: the stores hold the same tokens "
                "cut into different sequences, so each model saw another context; extract both with the same "
                "`max_length`, `overflow` and `doc_split`"
            )


def _windowing_difference(S, T) -> str:
    """' (corpus max_length 512 in source, 64 in target; ...)' for the windowing options the
    two stores' provenance records differently, or ''."""
    cs, ct = S.provenance.get("corpus") or {}, T.provenance.get("corpus") or {}
    differ = [
        f"{k} {cs.get(k)} in source, {ct.get(k)} in target"
        for k in WINDOWING
        if cs.get(k) != ct.get(k)
    ]
    return f" (corpus {'; '.join(differ)})" if differ else ""


def _check_reachable(path: str, role: str, storage_options: dict | None) -> None:
    """A store URL whose protocol is unknown, or whose endpoint cannot be reached, is one
    line naming it (fsspec raises many exception types for the second: any of them is)."""
    st.check_protocol(path, role)
    if st.local_path(path) is not None:
        return
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
        fs.exists(root.rstrip("/") + "/zarr.json")
    except Exception as e:  # noqa: BLE001  (an unreachable endpoint, refused credentials, ...)
        raise InputError(
            f"{role} {path} cannot be reached: {type(e).__name__}: {' '.join(str(e).split())[:200]} "
            "(check the endpoint, e.g. AWS_ENDPOINT_URL, and the credentials)"
        ) from None


def select_boundaries(spec, store, option: str) -> list:
    """The boundaries `spec` ("0,4,8", "::2") names, each held by `store`; None, "" or "all"
    is every boundary the store holds (a store extracted with `--boundaries ::2` fits as it
    is), not every boundary of its model."""
    if spec is None or spec.strip() in ("", "all"):
        return sorted(int(b) for b in store.boundaries)
    chosen = parse_boundaries(spec, store.n_layers, option)
    missing = [b for b in chosen if b not in store.boundaries]
    if missing:
        raise InputError(
            f"{option} {spec or 'all'} asks for boundaries {missing} that store {store.path} does not hold "
            f"(it holds {list(store.boundaries)}): choose among those"
        )
    return chosen


def first_training_rows(store, part: np.ndarray, step: int, least: int = 1):
    """(start, stop, rows) of the first `step`-token range whose training rows (fit or
    validation) number at least `least`, or None."""
    for start in range(0, store.n_tokens, step):
        p = part[start : start + step]
        rows = np.flatnonzero((p == FIT) | (p == VAL))
        if len(rows) >= least:
            return start, min(store.n_tokens, start + step), rows
    return None


def shifts_of(store, boundaries, part, step: int) -> dict:
    """Per boundary, the float64 mean of the training rows of the first task range that has
    any: the shift that keeps the float64 sums well conditioned (any value gives the same fit)."""
    first = first_training_rows(store, part, step)
    if first is None:
        return {b: np.zeros(store.d_model) for b in boundaries}
    start, stop, rows = first
    return {b: store.resid(b, start, stop)[rows].astype(np.float64).mean(0) for b in boundaries}


def scale_of(store, boundaries, part) -> dict:
    """Per boundary, the mean variance per dimension of the training rows of the first store
    chunk that has two (float64): the scale of trace(XcᵀXc)/(n·d) that `check_alphas` uses."""
    first = first_training_rows(store, part, store.chunk_tokens, least=2)
    if first is None:
        return {}
    start, stop, rows = first
    return {
        b: float(store.resid(b, start, stop)[rows].astype(np.float64).var(0).mean())
        for b in boundaries
    }


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

    A ridge map is fitted from every chosen boundary of `source` to every chosen boundary of
    `target` (activation stores of the same token stream) and scored on held-out documents.
    scheduler None runs the fit in threads of this process, one per CPU core (a fit above
    SMALL_FIT_FLOPS through torch, whose products release the GIL); with `n_workers` it starts a
    LocalCluster of that many processes (at most one per CPU core, `local_workers`).
    "synchronous" runs in this process, any other value is a Dask scheduler address.
    `memory_limit` (bytes or "8GB") is the budget of the whole fit (per worker with an
    address): the idle footprint of this process and the workers is estimated before any worker
    starts, measured once they are up and subtracted, the rest is planned
    (`budget.plan_blocks`). `FitHooks.worker_budget` (bytes) replaces that per-worker figure
    (tests).

    Before anything is computed: `output` is checked (`store.check_output`: never one of the
    inputs, never a folder holding anything but an alignment result, which only `overwrite`
    replaces), the two stores are cross-checked (`open_pair`), the folder of `output` must be
    writable with room for the result (`result.check_room`), and every α_rel must give a usable
    absolute α for these data (`solver.check_alphas`).

    Parameters
    ----------
    source : str
        The source model's activation store (path or URL).
    target : str
        The target model's activation store, of the same token stream.
    output : str or None
        Where the alignment result is written; None computes it without writing.
    spec : FitSpec, optional
        What is computed (fractions, seed, α grid, boundaries, measures, ...).
    run : Execution, optional
        Where and how it runs (scheduler, workers, memory, device, overwrite, ...); changes no
        number.
    hooks : FitHooks, optional
        What tests reach into (a per-worker budget, the reduced statistics kept).
    log : callable, optional
        Receives each message (default: `align.messages.say`, to stderr).
    dry_run : bool, optional
        Plan, time pieces of the work on these stores and log the estimate
        (`store_estimate`); nothing is computed further and nothing is written.
    **keywords
        None are taken: a field of FitSpec, Execution or FitHooks given as a keyword (the
        earlier flat form, `seed=1`) is a TypeError that names the record it goes in.

    Returns
    -------
    FitReport
        Its `dataset` is the alignment result: `relative_error`, `norm_error`, `r2` and `alpha`
        of shape (n_source_boundaries, n_target_boundaries), its summary in the attributes.

    Raises
    ------
    AlignError
        For every bad input, before anything is computed.
    NonFiniteError
        Rather than a result holding, or summarised over, a non-finite score.
    """
    said = log = log or messages.say
    held = []  # a dry run's plan lines, said after its estimate's first line
    log = held.append if dry_run else log
    t0 = time.time()
    refuse_fields("align.fit", keywords, (FitSpec, Execution, FitHooks))
    opts = request(spec, run, hooks)
    # a file:// URL is a local path: the checked reads name chunk files by path
    source, target = (st.local_path(p) or p for p in (source, target))
    if output is not None and not dry_run:
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
    src_boundaries = select_boundaries(opts.spec.source_boundaries, S, "`source_boundaries`")
    tgt_boundaries = select_boundaries(opts.spec.target_boundaries, T, "`target_boundaries`")
    anchored, partner = (
        anchored_partner(S, T, opts.spec, log) if mode == "char-anchors" else (None, None)
    )
    split = make_split(
        S.tokens("doc"), S.tokens("pos"), opts.spec, S.tokens("seq"), partner=partner
    )
    t_part = split.part if anchored is None else target_part(split.part, split.partner, T.n_tokens)
    sample = sampled.draw(split, opts.spec)  # before the pass: the rows every boundary keeps
    sampled.log_measures(log, "align fit", opts.spec, sample, split)
    sides = Side.of_store(S), Side.of_store(T)
    if output is not None and not dry_run:
        check_result_room(
            output, src_boundaries, tgt_boundaries, *sides, split, opts.spec.save_maps
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
    client_extra = (
        budget.client_bytes(S.n_tokens, n_pairs, S.d_model, T.d_model, opts.spec.save_maps)
        + boot["passes"]
    )
    use_torch = (
        opts.run.device == "cpu"
        and fit_flops(S, T, src_boundaries, tgt_boundaries) > SMALL_FIT_FLOPS
    )
    if use_torch:
        import torch  # noqa: F401  (before the idle footprint is measured, and the threads' BLAS limit set)
    scheduler, n_workers, limit = _where(
        opts, S, T, src_boundaries, tgt_boundaries, client_extra, log
    )
    # under an explicit --memory-limit the result's modules (~70 MB) are loaded now, so that the
    # idle footprint measured below counts them; otherwise they load during the sums
    dataset_modules_counted = opts.run.memory_limit is not None
    if dataset_modules_counted:
        import_dataset_modules()
    results, statistics = {}, {}
    with executor(scheduler, n_workers, limit, log) as ex:
        plan, step, keep_heldout = _plan(
            opts, ex, S, T, src_boundaries, tgt_boundaries, client_extra, split
        )
        blocks = plan["block_list"]
        ranges = [(a, min(S.n_tokens, a + step)) for a in range(0, S.n_tokens, step)]
        # the shift of the sums: one store chunk's training mean is near enough (a task's range of
        # every boundary was ~1 GB to read at 128k tokens, for a vector any value of which gives the same fit)
        near = min(step, S.chunk_tokens)
        shifts = (
            shifts_of(S, src_boundaries, split.part, near),
            shifts_of(T, tgt_boundaries, t_part, near),
        )
        c = split.counts
        log(
            f"align fit: {len(src_boundaries)}x{len(tgt_boundaries)} pairs in {len(blocks)} block(s) of at most "
            f"{len(blocks[0][0])}x{len(blocks[0][1])} ({human_bytes(plan['block_bytes'])} "
            f"per worker of {human_bytes(plan['worker_budget'])} planned), {len(ranges)} tasks of {step:,} tokens, "
            f"{c['fit']:,} fit / {c['validation']:,} validation / {c['heldout']:,} held-out "
            f"{'tokens (pairing tokens: ' + paired_by + ')' if mode == 'tokens' else 'anchored pairs'}"
        )
        so = (
            json.dumps(opts.run.storage_options, sort_keys=True)
            if opts.run.storage_options
            else None
        )
        job = Job(
            S.path,
            T.path,
            so,
            opts.run.device,
            opts.run.blas_threads,
            min(step, S.chunk_tokens),
            use_torch,
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
        if dry_run:  # pieces of the work timed and scaled; nothing is written
            work = (job, blocks, ranges, tokens, shifts, split, opts.spec, sample)
            est = store_estimate.estimate(
                store_estimate.Work(*work, ex.n_workers, keep_heldout, plan["block_bytes"]),
                said,
                held,
            )
            return FitReport(None, None, time.time() - t0, blocks, plan=plan, dry_run=est)
        if sample is not None and sample.perms is not None:  # procrustes-heldout's, per block
            sample.xs, sample.ys = sampled_rows(
                job, src_boundaries, tgt_boundaries, sample.tokens, split.partner
            )
        solve_threads = opts.run.blas_threads and opts.run.blas_threads * (
            ex.n_workers if ex.mode != "remote" else 1
        )
        settings = BlockSettings(
            opts.spec.alphas,
            opts.spec.extend_alphas,
            solve_threads,
            opts.spec.save_maps,
            opts.hooks.keep_statistics,
            keep_heldout,
        )
        factors, factors_of = {}, None
        for b, (I, J) in enumerate(blocks):
            if (
                I != factors_of
            ):  # blocks come source block by source block: keep one block's factors
                factors, factors_of = {}, I
            dsk, key = block_graph(b, (I, J), job, ranges, tokens, shifts, settings, factors)
            if b == 0 and not dataset_modules_counted:
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
    plan.pop("block_list")
    extra = {}
    if sample is not None:  # the row measures and every measure's calibration, on the sample
        if not sample.xs:  # read after the pass unless procrustes-heldout needed them before
            sample.xs, sample.ys = sampled_rows(
                job, src_boundaries, tgt_boundaries, sample.tokens, split.partner
            )
        extra["sampled_rows"] = sampled.attach(
            results, sample, opts.spec, src_boundaries, tgt_boundaries, job.device
        )
    ds = alignment_dataset(
        results,
        (src_boundaries, tgt_boundaries),
        sides,
        split,
        opts.recorded(task_tokens=step, n_tokens=split.counts, pairing=mode, **extra),
        "store",
        opts.spec.save_maps,
        opts.spec.resampling,
    )
    ds.attrs["pairing"] = anchored.record() if anchored is not None else {"mode": "tokens"}
    note = grid_note(ds, opts.spec.extend_alphas)
    if note:
        log(f"align fit: {note}")
    if output is not None:
        write_alignment(
            output,
            ds,
            {"source": source, "target": target},
            opts.run.overwrite,
            opts.run.storage_options,
        )
        log(
            f"align fit: wrote {output} ({len(src_boundaries)}x{len(tgt_boundaries)} pairs) in {time.time() - t0:.1f} s"
        )
    log(f"align fit: {headline(ds.attrs)}")
    return FitReport(
        output, ds, time.time() - t0, blocks, statistics, ex.seen, ex.task_seconds, plan
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
