"""The store route's tasks and the Dask graph of one block of the pair grid:

    stats(range) ─┬─ fixed pairwise tree ─► solve (α per pair, refit) ─► heldout(range) ─► tree ─► result
    stats(range) ─┘

Every statistics task reads its token range of the stores itself, store chunk by store chunk,
into reused buffers, accumulating in place, so only statistics and maps travel; with
`keep_heldout` it also hands on the held-out rows it read, so that the held-out pass reads
nothing again. The tree is fixed by range index and BLAS runs with a fixed thread count
inside each task, so the statistics are the same bits under any scheduler."""

from __future__ import annotations

import functools
import json
import operator
import os
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from align import store as st
from align.errors import InputError
from align.faults import fault_point
from align.fitting.measuring import measured
from align.fitting.measuring.measured import rotations_of, with_rotations
from align.fitting.planning.split import CONVERGENCE_PARTS, TEST
from align.fitting.results.solver import Solving, solve_all
from align.fitting.runtime.tasks import blas_limit, stop_if_cancelled
from align.measures import streamed
from align.measures.streamed import MEASURE_GROUPS, HeldSums
from align.ridge.backend import Backend
from align.ridge.closed_form import SolvedMap
from align.ridge.heldout import add_heldout, heldout_sums
from align.ridge.statistics import FIT, N_PARTS, VAL, Statistics, chunk_statistics


@dataclass(frozen=True)
class Job:
    """What every task of one store-route fit needs (small: it travels with each task).
    storage_options: JSON text (hashable, for the cache of open stores); chunk: tokens read
    at a time inside a task; threads: BLAS threads of each task (None: as found); use_torch:
    the products through torch on the CPU too (a large fit: MKL's float64 products are ~10%
    faster than numpy's OpenBLAS and release the GIL, for ~1.5 s of importing torch)."""

    source: str
    target: str
    storage_options: str | None
    device: str
    threads: int | None
    chunk: int
    use_torch: bool = False
    run: str = ""  # this fit's id: its tasks stop once it is cancelled (tasks.cancel)
    measures: tuple = ()  # the streamed measures whose sums the held-out tasks add

    def backend(self) -> Backend:
        return Backend(self.device, use_torch=self.use_torch or None)


class Tokens(NamedTuple):
    """Per-token arrays of the token stream ((n_tokens,) each), or of one task's range of it."""

    part: np.ndarray  # each token's part: ridge.FIT, ridge.VAL, TEST or -1
    hdoc: np.ndarray | None = (
        None  # each held-out token's index among the held-out documents (bootstrap)
    )
    stat_part: np.ndarray | None = (
        None  # the statistics part (`Split.statistics_part`, --convergence)
    )
    partner: np.ndarray | None = None  # the target token paired with each (--control shuffle)

    def range(self, start: int, stop: int) -> "Tokens":
        """Copies of tokens [start, stop) (a task's own arrays, sent with it)."""
        return Tokens(*(None if a is None else a[start:stop].copy() for a in self))


class Rows(NamedTuple):
    """The held-out rows of a task's range: offsets in it, their documents and partners."""

    index: np.ndarray  # offsets of the rows in [start, stop)
    docs: np.ndarray | None = None  # each row's held-out document index (bootstrap)
    partner: np.ndarray | None = None  # each row's target token (--control shuffle)


class HeldRows(NamedTuple):
    """The held-out rows a statistics task read and keeps for the held-out pass."""

    xs: dict  # {source boundary: (n_rows, d_S) float32}
    ys: dict  # {target boundary: (n_rows, d_T) float32}
    docs: np.ndarray | None  # (n_rows,) each row's held-out document index (bootstrap)


class BlockSettings(NamedTuple):
    """How a block is solved and what its result keeps."""

    alphas: tuple  # α_rel grid
    extend: bool = False  # the grid gains decades where an end wins
    solve_threads: int | None = None  # threads of the solve (None: the job's)
    save_maps: bool = False  # W and c in the result
    keep_stats: bool = False  # the reduced statistics in the result
    keep_heldout: bool = False  # held-out rows kept from the statistics tasks


def _open(path: str, storage_options_key: str | None = None):
    """The store at `path`, opened once per process while it stays the same store: a store
    replaced at the same path (a study's extraction rerun after its inputs changed) has
    another zarr.json, and is opened anew instead of read through the reader of the old one."""
    return _opened(path, storage_options_key, _stamp(path))


def _stamp(path: str):
    """(inode, mtime in ns) of a local store's zarr.json; None for a URL or a missing file."""
    lp = st.local_path(path)
    if lp is None:
        return None
    try:
        info = os.stat(os.path.join(os.path.expanduser(lp), "zarr.json"))
    except OSError:
        return None
    return info.st_ino, info.st_mtime_ns


@functools.lru_cache(maxsize=8)
def _opened(path: str, storage_options_key: str | None, stamp):
    return st.open_activations(
        path, json.loads(storage_options_key) if storage_options_key else None
    )


def _read(path: str, so, boundaries, start: int, stop: int) -> dict:
    s = _open(path, so)
    return {b: s.resid(b, start, stop) for b in boundaries}


def _read_rows(path: str, so, boundaries, index: np.ndarray) -> dict:
    """Rows `index` (int, any order, repeats allowed; -1: a row of zeros) of every boundary,
    read store chunk by store chunk: per chunk holding any of them one read, of the span from
    the first to the last of them, then gathered. A read decompresses its chunks whole, so a
    read per row, or per run of consecutive rows, decompressed a chunk once a row or run
    (1,024 sampled rows of 20 boundaries were 16,507 reads); a chunk's span is one read."""
    s = _open(path, so)
    index = np.asarray(index, dtype=np.int64)
    ok = np.flatnonzero(index >= 0)
    ok = ok[np.argsort(index[ok], kind="stable")]
    chunk = index[ok] // s.chunk_tokens
    spans = np.split(ok, np.flatnonzero(np.diff(chunk)) + 1) if len(ok) else []
    out = {}
    for b in boundaries:
        rows = np.zeros((len(index), s.d_model), dtype=np.float32)
        for r in spans:
            lo = int(index[r[0]])
            rows[r] = s.resid(b, lo, int(index[r[-1]]) + 1)[index[r] - lo]
        out[b] = rows
    return out


def _read_target(job: "Job", J, start: int, stop: int, partner: np.ndarray | None) -> dict:
    """The target rows paired with tokens [start, stop): the same tokens, or with
    `--control shuffle` the partners (`partner`, that range's slice of `Split.partner`)."""
    if partner is None:
        return _read(job.target, job.storage_options, J, start, stop)
    return _read_rows(job.target, job.storage_options, J, partner)


def sampled_rows(job: "Job", I, J, tokens: np.ndarray, partner: np.ndarray | None) -> tuple:
    """({i: (M, d_S)}, {j: (M, d_T)}) float32: the rows of the source tokens `tokens` and
    of the target tokens paired with them (`partner[tokens]`: char anchors or --control
    shuffle; None: the same tokens), read from the stores."""
    xs = _read_rows(job.source, job.storage_options, I, tokens)
    ys = _read_rows(
        job.target, job.storage_options, J, tokens if partner is None else partner[tokens]
    )
    return xs, ys


def stats_task(job: Job, I, J, start: int, stop: int, tokens: Tokens, shifts, keep_heldout: bool):
    """Statistics of tokens [start, stop) (`tokens`: their arrays), read `job.chunk` tokens
    at a time and accumulated in place; returns (numpy `ridge.Statistics`, the held-out rows
    read (`HeldRows`) or None).
    `tokens.stat_part`: the statistics part of each token (None: `part`); `tokens.partner`:
    the target token paired with each (`--control shuffle`; None: itself)."""
    part, hdoc, stat_part, partner = tokens.part, tokens.hdoc, tokens.stat_part, tokens.partner
    x_shift, y_shift = shifts
    be = job.backend()
    d_s, d_t = (
        _open(job.source, job.storage_options).d_model,
        _open(job.target, job.storage_options).d_model,
    )
    acc = Statistics.zeros(I, J, d_s, d_t, be, N_PARTS if stat_part is None else CONVERGENCE_PARTS)
    work: dict = {}
    held = ({i: [] for i in I}, {j: [] for j in J}) if keep_heldout else None
    with blas_limit(job.threads):
        for a in range(start, stop, job.chunk):
            b = min(stop, a + job.chunk)
            p = part[a - start : b - start]
            train = (p == FIT) | (p == VAL)
            test = np.flatnonzero(p == TEST) if keep_heldout else ()
            if not train.any() and not len(test):
                continue
            xs = _read(job.source, job.storage_options, I, a, b)
            ys = _read_target(
                job, J, a, b, None if partner is None else partner[a - start : b - start]
            )
            fault_point(
                "fit_statistics_chunk"
            )  # crash tests: killed mid-way through the statistics
            stop_if_cancelled(job.run)
            if train.any():
                sp = p if stat_part is None else stat_part[a - start : b - start]
                chunk_statistics(xs, ys, sp, (x_shift, y_shift), be, into=acc, work=work)
            if len(test):
                for side, rows in zip(held, (xs, ys)):
                    for k, v in rows.items():
                        side[k].append(v[test])
        rows = None
        if held is not None and held[0][I[0]]:
            xs, ys = ({k: np.concatenate(v) for k, v in side.items()} for side in held)
            rows = HeldRows(xs, ys, hdoc[part == TEST] if hdoc is not None else None)
        return acc.numpy(be), rows


def add_task(a, b):
    """a + b of two tasks' statistics, into a: each input of the fixed tree is read by its one
    add only (a lost input is recomputed, never re-read), so no copy of the sums is made."""
    return a.add_(b)


def solve_task(stats, alphas, shifts, threads, device, factors, extend=False, measures=()):
    """The block's maps (with their training rotations for procrustes-heldout among
    `measures`), the source factors they used and the fractions' maps of --convergence
    ({"fitted", "factors", "fractions"})."""
    factors = dict(factors)
    side_by_side = (
        threads if device == "cpu" and threads and threads > 1 else 1
    )  # source boundaries at once
    with blas_limit(1 if side_by_side > 1 else threads):
        solving = Solving(alphas, *shifts, device, factors, extend, side_by_side)
        fitted, fractions = solve_all(stats, solving)
        fitted = with_rotations(fitted, stats, measures, side_by_side)
    return {"fitted": fitted, "factors": factors, "fractions": fractions}


def heldout_of(xs, ys, solved, backend, docs=None, measures: tuple = (), grouped=True) -> dict:
    """`ridge.heldout_sums` of the block's maps (per held-out document with `docs`) and,
    with --convergence, of each fraction's maps (pooled) under "fractions"; with streamed
    `measures`, their sums (`measure_sums`) under "measures": in the groups of
    `measure_groups` when `grouped` (the jackknife's G groups held side by side, as the live
    route's Dask shards keep them), else in one group (the jackknife then recomputes from
    group passes, `group_task`)."""
    out = heldout_sums(xs, ys, solved["fitted"], backend, docs=docs)
    if measures:
        n = len(next(iter(ys.values())))
        groups, G = measure_groups(docs if grouped else None, n)
        rows = measure_sums(xs, ys, solved["fitted"], backend, groups, G)
        out["measures"] = HeldSums(tuple(measures), rows)
    if solved.get("fractions"):
        out["fractions"] = {
            f: heldout_sums(xs, ys, m, backend) for f, m in solved["fractions"].items()
        }
    return out


def measure_sums(xs, ys, fitted: dict, backend, groups=None, G: int = 1) -> dict:
    """The streamed measures' sums (`measures.streamed.row_sums`) of rows xs, ys, shifted by
    the maps' training means, with procrustes-heldout's rotations where the maps carry them;
    `groups` (n,) each row's group of G (None: one group)."""
    shifts = ({}, {})
    for (i, j), m in fitted.items():
        shifts[0].setdefault(i, m.x_mean)
        shifts[1].setdefault(j, m.y_mean)
    if groups is None:
        groups = np.zeros(len(next(iter(ys.values()))), dtype=np.int64)
    return streamed.row_sums(xs, ys, shifts, groups, G, backend, rotations_of(fitted))


def heldout_task(job: Job, I, J, start: int, stop: int, held: Rows, solved):
    """Held-out error sums (pooled, and per held-out document `held.docs` of each row) of the
    rows `held.index` of tokens [start, stop), read from the stores (the target's rows
    `held.partner` with --control shuffle), the measures' sums in one group."""
    backend = job.backend()  # before the limit: it may import torch, whose threads the limit sets
    with blas_limit(job.threads):
        xs, ys = _held_rows(job, I, J, start, stop, held)
        return heldout_of(xs, ys, solved, backend, held.docs, job.measures, grouped=False)


def _held_rows(job: Job, I, J, start: int, stop: int, held: Rows) -> tuple:
    """The rows `held.index` of tokens [start, stop) of both stores (the target's rows
    `held.partner` with --control shuffle)."""
    rows, partner = held.index, held.partner
    xs = {i: v[rows] for i, v in _read(job.source, job.storage_options, I, start, stop).items()}
    if partner is None:
        ys = {j: v[rows] for j, v in _read(job.target, job.storage_options, J, start, stop).items()}
    else:
        ys = _read_rows(job.target, job.storage_options, J, partner)
    return xs, ys


def heldout_kept_task(job: Job, kept: HeldRows, solved):
    """Held-out error sums of the rows a statistics task kept."""
    backend = job.backend()
    with blas_limit(job.threads):
        return heldout_of(kept.xs, kept.ys, solved, backend, kept.docs, job.measures, grouped=False)


def group_task(job: Job, I, J, start: int, held: Rows, solved, after=None):
    """The measures' sums (one group, `measure_sums`) of the held-out rows `held` of tokens
    from `start`: one group's rows of a task's range, read from the stores again, only the
    runs of tokens they lie in (`_read_rows`: a group's documents, not the whole range).
    `after`: the task this one waits for (the previous group's recomputation), unused."""
    backend = job.backend()
    with blas_limit(job.threads):
        tokens = start + held.index
        xs = _read_rows(job.source, job.storage_options, I, tokens)
        partner = tokens if held.partner is None else held.partner
        ys = _read_rows(job.target, job.storage_options, J, partner)
        return measure_sums(xs, ys, solved["fitted"], backend)


def group_kept_task(job: Job, kept: HeldRows, g: int, solved, after=None):
    """The measures' sums (one group) of the rows of group g among those a statistics task
    kept (`HeldRows`)."""
    pick = np.flatnonzero(np.asarray(kept.docs) % MEASURE_GROUPS == g)
    backend = job.backend()
    with blas_limit(job.threads):
        xs = {i: v[pick] for i, v in kept.xs.items()}
        ys = {j: v[pick] for j, v in kept.ys.items()}
        return measure_sums(xs, ys, solved["fitted"], backend)


def left_out_task(heldout: dict, group: dict, threads: int | None = None) -> dict:
    """Every measure of every pair without one group's rows (`measured.left_out_values` of
    the block's one-group sums and the group's)."""
    return measured.left_out_values(heldout["measures"], group, threads)


def with_left_out(heldout: dict, groups: list, *left_out) -> dict:
    """The held-out sums with the jackknife's recomputations, one per group holding rows, in
    group order, as heldout["measures"].left_out, and those groups' numbers as .groups (a new
    dict: the input is a task's)."""
    measures = heldout["measures"]._replace(left_out=list(left_out), groups=list(groups))
    return {**heldout, "measures": measures}


def _waited(*_):
    """Nothing: a graph key that a group's tasks wait on, so that groups run one at a time."""
    return None


def group_graph(
    dsk: dict, b: int, job: Job, block: tuple, ranges, tokens: Tokens, kept: dict, keys
):
    """Adds the jackknife's group passes of block `b` to `dsk`: for each group g of held-out
    documents holding rows (index mod MEASURE_GROUPS), tasks of the measures' sums of g's
    rows (read again, or from the statistics tasks' kept rows), their tree, and g's
    recomputation (`left_out_task`) from the block's one-group sums (`keys` = (held-out
    root, solve)). Group g + 1's tasks wait on g's recomputation, so one group's sums are
    held at a time beside the block's. Returns the key of the held-out sums with the
    recomputations (`with_left_out`)."""
    (I, J), (hroot, fk) = block, keys
    part, hdoc, partner = tokens.part, tokens.hdoc, tokens.partner
    held = np.flatnonzero(part == TEST)
    after, runs = hroot, []
    for g in np.unique(hdoc[held] % MEASURE_GROUPS):
        wait = ("group-wait", b, int(g))
        dsk[wait] = (_waited, after)
        gkeys = []
        for c, (start, stop) in enumerate(ranges):
            p, d = part[start:stop], hdoc[start:stop]
            rows = np.flatnonzero((p == TEST) & (d % MEASURE_GROUPS == g))
            if not len(rows):
                continue
            key = ("group", b, int(g), c)
            if c in kept:
                dsk[key] = (group_kept_task, job, kept[c], int(g), fk, wait)
            else:
                where = Rows(rows, d[rows], None if partner is None else partner[start:stop][rows])
                dsk[key] = (group_task, job, I, J, start, where, fk, wait)
            gkeys.append(key)
        groot = tree(dsk, f"group-sum-{b}-{int(g)}", gkeys, streamed.add_sums)
        after = ("left-out", b, int(g))
        dsk[after] = (left_out_task, hroot, groot, job.threads)
        runs.append(after)
    out = ("heldout-jackknife", b)
    groups = [int(r[2]) for r in runs]  # ("left-out", b, g)
    dsk[out] = (with_left_out, hroot, groups, *runs)
    return out


def measure_groups(docs, n: int) -> tuple:
    """(groups (n,), G): each held-out row's group of the measures' jackknife, its held-out
    document index modulo MEASURE_GROUPS (G = MEASURE_GROUPS); without `docs` (no bootstrap)
    every row in one group (G = 1)."""
    if docs is None:
        return np.zeros(n, dtype=np.int64), 1
    return np.asarray(docs, dtype=np.int64) % MEASURE_GROUPS, MEASURE_GROUPS


def add_heldout_all(a: dict, b: dict) -> dict:
    """`ridge.add_heldout`, and the streamed measures' sums added alike."""
    out = add_heldout(a, b)
    if "measures" in a:
        sums = streamed.add_sums(a["measures"].sums, b["measures"].sums)
        out["measures"] = HeldSums(a["measures"].names, sums)
    return out


def add_heldout_task(a, b):
    return add_heldout_all(a, b)


def collect_task(solved, heldout, stats, save_maps):
    """What the client needs of a block: α, maps if asked, held-out sums, the source factors
    (statistics if asked)."""
    return {
        "fitted": {k: _slim(v, save_maps) for k, v in solved["fitted"].items()},
        "heldout": heldout,
        "stats": stats,
        "factors": solved["factors"],
        "fractions": {
            f: {k: _slim(v, False) for k, v in m.items()} for f, m in solved["fractions"].items()
        },
    }


def _slim(m: SolvedMap, keep_map: bool) -> SolvedMap:
    """The map's α choice, without its means, and without W and c unless `keep_map`: what
    crosses to the client (W of every pair would be the statistics' size again)."""
    return replace(
        m, x_mean=None, y_mean=None, W=m.W if keep_map else None, c=m.c if keep_map else None
    )


def tree(dsk: dict, name: str, keys: list, add) -> tuple:
    """Add a fixed pairwise reduction of `keys` to the graph; returns the root key."""
    level = 0
    while len(keys) > 1:
        nxt = []
        for k in range(0, len(keys), 2):
            if k + 1 < len(keys):
                key = (name, level, k // 2)
                dsk[key] = (add, keys[k], keys[k + 1])
                nxt.append(key)
            else:
                nxt.append(keys[k])
        keys, level = nxt, level + 1
    return keys[0]


def block_graph(
    b: int,
    block: tuple,
    job: Job,
    ranges,
    tokens: Tokens,
    shifts,
    settings: BlockSettings,
    factors: dict | None = None,
):
    """The Dask graph (a dict) of block `b`, `block` = (source boundaries I, target
    boundaries J): returns (graph, result key). `ranges`: the tasks' token ranges; `tokens`:
    the stream's arrays; `shifts`: per boundary the shift of the statistics; `factors`: source
    factors of earlier blocks. The solve is the only task running then (every other waits on
    it), so it may use `settings.solve_threads` (default `job.threads`): on the CPU that many
    source boundaries solved side by side, one BLAS thread each, else BLAS threads; the
    statistics use `job.threads`, whatever the cluster. `tokens.hdoc` ((n_tokens,) int): each
    held-out token's index among the held-out documents, so that the held-out sums are kept
    per document too (the document bootstrap)."""
    I, J = block
    part, hdoc, partner = tokens.part, tokens.hdoc, tokens.partner
    alphas, extend, solve_threads, save_maps, keep_stats, keep_heldout = settings
    dsk = {}
    sk = ("shifts", b)
    dsk[sk] = ({i: shifts[0][i] for i in I}, {j: shifts[1][j] for j in J})
    stat_keys, held_keys, kept = [], [], {}
    for c, (start, stop) in enumerate(ranges):
        p = part[start:stop]
        if np.any((p == FIT) | (p == VAL)):
            key = ("stats-task", b, c)
            dsk[key] = (
                stats_task,
                job,
                I,
                J,
                start,
                stop,
                tokens.range(start, stop),
                sk,
                keep_heldout,
            )
            dsk[("stats", b, c)] = (operator.getitem, key, 0)
            stat_keys.append(("stats", b, c))
            if keep_heldout:
                kept[c] = ("kept", b, c)
                dsk[kept[c]] = (operator.getitem, key, 1)
    if not stat_keys:
        raise InputError(
            "no training token is left after the split (and position 0 excluded): extract a larger corpus"
        )
    root = tree(dsk, f"stats-sum-{b}", stat_keys, add_task)
    fk = ("solve", b)
    dsk[("factors", b)] = (dict, factors or {})
    dsk[fk] = (
        solve_task,
        root,
        list(alphas),
        sk,
        solve_threads or job.threads,
        job.device,
        ("factors", b),
        extend,
        job.measures,
    )
    for c, (start, stop) in enumerate(ranges):
        rows = np.flatnonzero(part[start:stop] == TEST)
        if len(rows):
            key = ("heldout", b, c)
            if c in kept:
                dsk[key] = (heldout_kept_task, job, kept[c], fk)
            else:
                held = Rows(
                    rows,
                    None if hdoc is None else hdoc[start:stop][rows],
                    None if partner is None else partner[start:stop][rows],
                )
                dsk[key] = (heldout_task, job, I, J, start, stop, held, fk)
            held_keys.append(key)
    if not held_keys:
        raise InputError(
            "no held-out token is left after the split (and position 0 excluded): raise `test_fraction`"
        )
    hroot = tree(dsk, f"heldout-sum-{b}", held_keys, add_heldout_task)
    if job.measures and hdoc is not None:  # the measures' jackknife, one group at a time
        hroot = group_graph(dsk, b, job, block, ranges, tokens, kept, (hroot, fk))
    rk = ("result", b)
    dsk[rk] = (collect_task, fk, hroot, root if keep_stats else None, save_maps)
    return dsk, rk
