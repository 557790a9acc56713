"""The row measures (`measures.rows.row_measures`) as Dask tasks of the fit's cluster, where
the store route runs on one (a local cluster of worker processes, or a scheduler's): each
boundary's record prepared once by a task (`prepared.prepare`: its sort of the correlation
distances, its neighbour search), each cell's values a task reading the two records it
needs, and the null's K draws and the interval's recomputations (the jackknife's G' groups
left out, or the bootstrap's resamples) cut into chunks, each chunk a task over the whole
grid reading every record (a draw permutes one target record at a time and a recomputation
reweights each record once for all the cells it enters, so cutting by draws and
recomputations repeats no work; cutting by cells would repeat a boundary's reweighted ranks
once a cell). The client draws the permutations and the recomputations' multiplicities
exactly as `row_measures` does, gathers the grids and summarises them with
`rows.summarised`: every number equals `row_measures`' in this process.

A worker holds, while a chunk runs, every boundary's record and one chunk's working memory:
`row_measures_bytes`, what this process holds when it computes them; where a worker's share
of the budget cannot hold that, they are computed in this process (`runner`).
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import NamedTuple

import numpy as np

from align.fitting.planning.sample_budget import SampleShape, row_measures_bytes, sample_bytes
from align.fitting.runtime.cluster import worker_budget_of
from align.fitting.runtime.tasks import blas_limit
from align.measures import calibration, cells, prepared, rows
from align.measures.registry import parts_of, reweighted, rows_forms
from align.messages import human_bytes
from align.ridge.backend import CPU, Backend

CLUSTER_MODES = ("local", "remote")  # `cluster.Executor.mode`s whose tasks run on workers
CHUNKS_PER_WORKER = 2  # draws and recomputations cut into this many tasks a worker, for balance


class Runner(NamedTuple):
    """Where the row measures' tasks run: `run(graph, key) -> value` (a cluster's
    `Executor.run`); `backend_of()`, picklable, run on a worker, the `Backend` there; the
    tasks the draws and the recomputations are each cut into; the BLAS threads inside a task
    (None: the library's own)."""

    run: object
    backend_of: object
    chunks: int
    threads: int | None = None


def device_backend(device: str) -> Backend:
    """Where the row measures run for a fit on `device`: torch on a GPU where this process
    has it ("cuda..."), else numpy."""
    if not str(device).startswith("cuda"):
        return CPU
    import torch

    return Backend(device) if torch.cuda.is_available() else CPU


def runner(ex, device: str, shape: SampleShape) -> Runner | None:
    """The `Runner` of a fit's executor `ex` (`cluster.Executor`) when its tasks run on a
    cluster's workers and each worker's share of the budget (`cluster.worker_budget_of`, the
    client holding the sampled rows) holds what a chunk holds there: the sampled rows
    (float64) and `row_measures_bytes` of `shape` (the fit's `sampled.shape_of`). None in this
    process (threads or synchronous), and where a worker could not hold them: `row_measures`
    then runs in this process, as the fit's plan counted it before any work."""
    if ex.mode not in CLUSTER_MODES or held_back(ex, shape):
        return None
    return Runner(ex.run, partial(device_backend, device), CHUNKS_PER_WORKER * ex.n_workers)


def held_back(ex, shape: SampleShape) -> str | None:
    """Why the row measures of `shape` run in this process although the fit's executor `ex`
    runs its tasks on a cluster's workers: a worker's share of the budget
    (`cluster.worker_budget_of`, the client holding the sampled rows) is less than what a
    chunk holds there, the sampled rows in float64 and `row_measures_bytes`; one line for
    the fit's log. None where they run on the workers, or where the executor has none."""
    if ex.mode not in CLUSTER_MODES or not shape.measures:
        return None
    share = worker_budget_of(ex, sample_bytes(shape))
    need = sample_bytes(shape._replace(itemsize=8)) + row_measures_bytes(shape)
    if need <= share:
        return None
    return (
        f"the row measures ({', '.join(shape.measures)}) run in this process, not on the "
        f"{ex.n_workers} workers: a worker would hold {human_bytes(need)} (the sampled rows "
        f"and `row_measures`' working memory), more than its share of the budget, "
        f"{human_bytes(max(share, 0))}"
    )


def wall_items(n: int, tasks: int, workers: int) -> int:
    """The wall time, in items, of n equal items cut as `_cut` cuts them into at most `tasks`
    tasks (array_split: the largest ceil(n / t) items, t = min(tasks, n)) and run on
    `workers` that each run one task at a time: ceil(t / workers) rounds of the largest
    task. In this process (tasks = workers = 1) n."""
    if n <= 0:
        return 0
    t = max(1, min(tasks, n))
    return -(-t // max(workers, 1)) * -(-n // t)


def row_seconds(costs: tuple, counts: tuple, workers: int) -> float:
    """Seconds of the row measures as they run: `costs` (seconds of a boundary's
    preparation, of a cell's values, of one null draw of the whole grid, of one
    recomputation of the interval (a jackknife group or a bootstrap resample) of the whole
    grid), `counts` (boundaries, cells, permutations, recomputations). In this process
    (`workers` 1) the sum: boundaries·prepare + cells·value + K·draw + R·recomputation. On
    `workers` (the tasks of `row_measures_tasks`): each boundary's preparation and each cell
    a task, the K draws and the R recomputations each cut into CHUNKS_PER_WORKER·workers
    tasks, every phase `wall_items` of its tasks (the phases in sequence: a cell needs its
    two records, and the chunks need all of them)."""
    prepare, value, draw, again = costs
    boundaries, cells_, permutations, resamples = counts
    if workers <= 1:
        return boundaries * prepare + cells_ * value + permutations * draw + resamples * again
    chunks = CHUNKS_PER_WORKER * workers
    return (
        wall_items(boundaries, boundaries, workers) * prepare
        + wall_items(cells_, cells_, workers) * value
        + wall_items(permutations, chunks, workers) * draw
        + wall_items(resamples, chunks, workers) * again
    )


def row_measures_tasks(
    where: Runner,
    xs: dict,
    ys: dict,
    docs: np.ndarray,
    measures: tuple,
    *,
    k: int,
    draws: rows.Draws,
    intervals: tuple | None = None,
) -> dict:
    """`rows.row_measures(xs, ys, docs, measures, k=k, draws=draws, intervals=intervals)`
    computed by the tasks of `where` (the module's docstring); the same
    records, the same numbers, the same one-line refusals (the rows checked and the undefined
    cells refused here, in the order `row_measures` checks them)."""
    measures, interval = tuple(measures), draws.interval
    intervals = measures if intervals is None else tuple(n for n in measures if n in intervals)
    xs, ys, docs = rows.checked_rows(xs, ys, docs, measures, k)
    perms, scheme = calibration.draw_permutations(docs, draws.permutations, draws.seed)
    weights, groups = None, None
    if intervals and interval == rows.JACKKNIFE:
        weights, groups = rows.jackknife_weights(docs)
    elif intervals:
        weights = rows.multiplicities(docs, draws.resampling)
    dsk, key = _graph(where, xs, ys, (measures, intervals, k), perms, weights)
    value, null, recomputed = where.run(dsk, key)
    rows.refuse_undefined(value, list(xs), list(ys))
    done = rows.Recomputed(interval if intervals else None, recomputed, groups)
    return rows.summarised(measures, value, null, done, rows.duplicated_rows(xs, ys), scheme)


def _graph(where: Runner, xs: dict, ys: dict, asked: tuple, perms, weights) -> tuple:
    """(graph, key) of the tasks; the key's value is (value, null, recomputed) as
    `row_measures` computes them (recomputed: `rows.weighted_values` of `weights`, the
    interval's multiplicities, or {} without). Keys are (kind, this call's id, index...): the kind names
    the task in the cluster's task stream, the id keeps two fits on one scheduler apart."""
    measures, intervals, k = asked
    uid = uuid.uuid4().hex
    threads = where.threads
    dsk = {}
    keys = {}
    for side, grid in (("x", xs), ("y", ys)):
        for b, x in grid.items():
            dsk[("row-data", uid, side, b)] = x  # a key of its own: sent once to a worker
            keys[side, b] = ("row-prepare", uid, side, b)
            data = ("row-data", uid, side, b)
            dsk[keys[side, b]] = (_prepare, data, measures, k, where.backend_of, threads)
    px = [keys["x", i] for i in xs]
    py = [keys["y", j] for j in ys]
    cell_keys = []
    for a, i in enumerate(xs):
        for b, j in enumerate(ys):
            cell_keys.append(("row-values", uid, a, b))
            dsk[cell_keys[-1]] = (_values, keys["x", i], keys["y", j], measures, k, threads)
    null_keys = []
    for c, part in enumerate(_cut(perms, where.chunks)):
        null_keys.append(("row-null", uid, c))
        dsk[null_keys[-1]] = (_null, px, py, part, measures, k, threads)
    boot_keys = []
    if weights is not None:
        spectral = any(n not in reweighted(intervals) for n in intervals)
        # the sampled rows, where a spectral measure is recomputed on each recomputation's rows
        dx = [("row-data", uid, "x", i) for i in xs] if spectral else []
        dy = [("row-data", uid, "y", j) for j in ys] if spectral else []
        for c, part in enumerate(_cut(weights, where.chunks)):
            boot_keys.append(("row-interval", uid, c))
            dsk[boot_keys[-1]] = (_resampled, px, py, dx, dy, part, [intervals, k], threads)
    key = ("row-measures", uid)
    shape = (len(xs), len(ys))
    dsk[key] = (_gathered, cell_keys, null_keys, boot_keys, shape, [measures, intervals])
    return dsk, key


def _cut(draws: np.ndarray, chunks: int) -> list:
    """draws (n, M) as at most `chunks` consecutive parts, none empty."""
    return [p for p in np.array_split(draws, max(1, min(chunks, len(draws)))) if len(p)]


def _prepare(x: np.ndarray, measures, k: int, backend_of, threads) -> prepared.Prepared:
    """On a worker: one boundary's record (`prepared.prepare`), on the backend
    `backend_of()` gives there."""
    with blas_limit(threads):
        return prepared.prepare(x, parts_of(measures), k, backend_of())


def _values(px: prepared.Prepared, py: prepared.Prepared, measures, k: int, threads) -> dict:
    """On a worker: {measure: value} of one cell (NaN where undefined: refused by the client,
    which sees the whole grid)."""
    with blas_limit(threads), np.errstate(invalid="ignore", divide="ignore"):
        got = cells.grid({0: px}, {0: py}, rows_forms(measures), k)
    return {n: float(v[0, 0]) for n, v in got.items()}


def _null(px: list, py: list, perms: np.ndarray, measures, k: int, threads) -> dict:
    """On a worker: {measure: (len(perms), n_source, n_target)}, `rows.null_values` of these
    draws from every boundary's record."""
    records = dict(enumerate(px)), dict(enumerate(py))
    with blas_limit(threads), np.errstate(invalid="ignore", divide="ignore"):
        return rows.null_values(records[0], records[1], perms, measures, k, records)


def _resampled(px: list, py: list, dx: list, dy: list, weights, asked: list, threads) -> dict:
    """On a worker: {measure: (len(weights), n_source, n_target)}, `rows.weighted_values` of
    these recomputations' multiplicities from every boundary's record (dx, dy: the sampled
    rows, where a spectral measure is recomputed on each recomputation's rows; else
    empty)."""
    intervals, k = asked
    records = dict(enumerate(px)), dict(enumerate(py))
    xs, ys = dict(enumerate(dx)), dict(enumerate(dy))
    with blas_limit(threads):
        return rows.weighted_values(xs, ys, weights, intervals, k, records)


def _gathered(cell: list, null: list, boot: list, shape: tuple, names: list) -> tuple:
    """(value, null, recomputed) grids from the tasks' parts: cells in row-major order, the
    draws' and the recomputations' chunks in order."""
    measures, intervals = names
    value = {n: np.array([c[n] for c in cell], np.float64).reshape(shape) for n in measures}
    nulls = {n: np.concatenate([p[n] for p in null] or [np.empty((0, *shape))]) for n in measures}
    resampled = {n: np.concatenate([p[n] for p in boot]) for n in intervals} if boot else {}
    return value, nulls, resampled
