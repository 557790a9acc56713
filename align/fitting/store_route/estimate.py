"""`align fit --dry-run` on two stores: what the fit will cost in seconds and bytes, from a
piece of the real work timed on this machine before any of it runs (as `live_estimate` does
for `--live`); nothing is written.

Timed, on the stores' own rows of the first block (source boundaries I, target boundaries J):
one statistics task on a range of training tokens (its reads included), the streamed
measures' sums of those rows, every streamed measure of the block's first pair from them
(each side's decompositions apart from the pair's), procrustes-heldout's training rotation
and its null on M rows, and the row measures' four pieces apart (a boundary's preparation,
a cell's values, a null draw, a recomputation of the interval) on two cells at m and m/2
rows (m = min(M, ROW_TIMING)), with the fewest resamples. Each is scaled to the run: the statistics by
training rows and pairs, shared among the slots that run tasks side by side; ridge's held-out
pass at half a training row's sums a row (one product against two parts); the measures' sums
by held-out rows and pairs, again for the interval's group passes, with the held-out rows read
again where the plan does not keep them; the values once a pair and a side of every block, G'
times more for the interval; the row measures per cell and per boundary, each piece by the growth
the two row counts show (between M and M³) and by the run's resamples and permutations."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from align.fitting.measuring import rows_tasks, sampled
from align.fitting.planning.budget import measure_bytes
from align.fitting.planning.sample_budget import row_measures_bytes, sample_bytes
from align.fitting.runtime.tasks import blas_limit
from align.fitting.store_route.graph import sampled_rows, stats_task
from align.measures import ROW_ONLY, calibration, pairs, rows, streamed
from align.measures.spectral_null import SPECTRAL, spectral_null
from align.messages import human_bytes
from align.ridge.backend import Backend
from align.ridge.statistics import FIT, VAL
from align.stats.bootstrap import MIN_RESAMPLES, Resampling

TIMED_TOKENS = 2048  # tokens of the timed statistics task, at most
SMALL_TOKENS = 256  # tokens of the second timed task (the two give a row's cost and a task's)
REPEATS = 3  # the pieces of milliseconds are timed this many times, the least kept
ROW_TIMING = 512  # sampled rows the row measures are timed on, at most
SPECTRAL_PROBE = 1.0  # seconds of K spectral null draws below which they are timed twice
GUESS_ROWS = 512  # a fit's first plan line times the row measures from this many sampled rows
HOUR = 3600.0


@dataclass
class Work:
    """What the estimate scales to: the job, the blocks, the tasks' ranges, the stream's
    arrays, the shifts, the split, the spec, the sample, the slots running tasks side by side,
    whether the held-out rows are kept, the plan's bytes per worker, and the workers the row
    measures run on (`rows_tasks.runner`: 1 where they run in this process)."""

    job: object
    blocks: list
    ranges: list
    tokens: object
    shifts: tuple
    split: object
    spec: object
    sample: object
    slots: int
    keep_heldout: bool
    block_bytes: int
    row_workers: int = 1  # the workers the row measures' tasks run on (1: this process)


def _rows(w: Work, I, J, a: int, stop: int) -> tuple:
    """The rows of tokens [a, stop) of source boundaries I and of the target boundaries J
    paired with them (`graph.sampled_rows`: the same tokens, or their partners)."""
    return sampled_rows(w.job, I, J, np.arange(a, stop), w.split.partner)


def _timed(f, *args):
    t = time.perf_counter()
    out = f(*args)
    return time.perf_counter() - t, out


def _least(f, *args):
    """(the least of REPEATS timings, the result): pieces of milliseconds, which a busy
    machine's scheduling would otherwise inflate."""
    runs = [_timed(f, *args) for _ in range(REPEATS)]
    return min(t for t, _ in runs), runs[-1][1]


def estimate(w: Work, log, plan_lines=()) -> dict:
    """Time the pieces (module docstring), scale them to the run and log the plan: its first
    line the total (and whether it is over an hour), then `plan_lines` (the fit's plan, held
    back until then), then each part's seconds and the bytes the measures hold. Returns {"seconds": {part: s}, "seconds_estimate", "bytes": {holder:
    bytes}, "timed": {piece: s}}."""
    I, J = w.blocks[0]
    part = w.tokens.part
    a = next(s for s, e in w.ranges if np.any((part[s:e] == FIT) | (part[s:e] == VAL)))
    stop = min(a + TIMED_TOKENS, next(e for s, e in w.ranges if s == a))
    shifts = ({i: w.shifts[0][i] for i in I}, {j: w.shifts[1][j] for j in J})

    def task(end):  # (seconds, training rows) of one statistics task on tokens [a, end)
        t, _ = _timed(stats_task, w.job, I, J, a, end, w.tokens.range(a, end), shifts, False)
        return t, int(np.sum((part[a:end] == FIT) | (part[a:end] == VAL)))

    task(min(stop, a + 64))  # a warm-up: the stores opened, the buffers made
    (t_small, n_small), (t_stats, n_big) = task(min(stop, a + SMALL_TOKENS)), task(stop)
    slope = max((t_stats - t_small) / max(n_big - n_small, 1), 0.0)  # a row's products
    if slope == 0.0:
        slope = t_stats / max(n_big, 1)
    overhead = max(t_small - slope * n_small, 0.0)  # a task's accumulators, whatever its rows
    pairs = [len(bi) * len(bj) for bi, bj in w.blocks]
    scale = sum(pairs) / pairs[0]  # the grid over the timed block
    c = w.split.counts
    per_row = slope * scale / w.slots
    tasks = len(w.ranges) * len(w.blocks) / w.slots
    sec = {
        "statistics": per_row * (c["fit"] + c["validation"]) + overhead * tasks,
        "held-out": per_row * c["heldout"] / 2,
    }
    timed = {"statistics task": t_stats}
    out_bytes = {"per worker (the plan)": w.block_bytes}
    if w.spec.streamed:
        _streamed(w, (I, J, a, stop), scale, sec, timed, out_bytes)
    if w.sample is not None:
        _calibration(w, (I, J, a, stop), sec, timed, out_bytes)
    total = sum(sec.values())
    over = f"over an hour (~{total / HOUR:,.1f} h): " if total > HOUR else ""
    log(
        f"align fit --dry-run: {over}whole run ~{total:,.3g} s on this machine (the solve, "
        "opening the stores and writing not counted); nothing was written"
    )
    for line in plan_lines:
        log(line)
    log("align fit --dry-run: " + ", ".join(f"{k} {v:,.3g} s" for k, v in sec.items()))
    if w.sample is not None and w.spec.sampled and w.row_workers > 1:
        log(f"align fit --dry-run: {workers_line(w.row_workers)}")
    log(
        "align fit --dry-run: timed here "
        + ", ".join(f"{k} {v * 1e3:,.1f} ms" for k, v in timed.items())
        + f"; memory {', '.join(f'{k} {human_bytes(v)}' for k, v in out_bytes.items())}"
    )
    return {"seconds": sec, "seconds_estimate": total, "bytes": out_bytes, "timed": timed}


def workers_line(workers: int) -> str:
    """The estimate's line of the row measures on a cluster's workers: how their work is cut
    (`rows_tasks`) and so what their seconds were divided by."""
    chunks = rows_tasks.CHUNKS_PER_WORKER * workers
    return (
        f"the row measures, their interval and calibration run on {workers} workers: a task "
        f"per boundary's preparation and per cell, the draws and the resamples in {chunks} "
        "tasks each; their seconds are those tasks side by side"
    )


def _streamed(w: Work, where: tuple, scale: float, sec: dict, timed: dict, out_bytes: dict):
    """The streamed measures' sums, values, interval and procrustes-heldout's rotation."""
    I, J, a, stop = where
    names = w.spec.streamed
    t_read, (xs, ys) = _timed(_rows, w, I, J, a, stop)
    n = stop - a
    zero = (
        {i: np.zeros(v.shape[1]) for i, v in xs.items()},
        {j: np.zeros(v.shape[1]) for j, v in ys.items()},
    )
    backend = w.job.backend()
    groups = np.zeros(n, dtype=np.int64)
    t_sums, sums = _timed(streamed.row_sums, xs, ys, zero, groups, 1, backend)
    held = w.split.counts["heldout"]
    sec["measure sums"] = t_sums / n * held * scale / w.slots
    i, j = I[0], J[0]
    x, y = sums.source[i].weighted(), sums.target[j].weighted()
    t_sides, _ = _least(lambda: [pairs.prepare(streamed.Side(s), names) for s in (x, y)])
    pair = sums.pair[(i, j)].weighted()
    x, y = (pairs.prepare(streamed.Side(s), names) for s in (x, y))  # decomposed once
    values_of = [m for m in names if m != "procrustes-heldout"]
    t_pair, _ = _least(  # a pair's own decompositions, made every time
        lambda: pairs.measures_of(streamed.Pair(x, y, pair), values_of)
    )
    cores = max(w.slots, 1)
    sides = sum(len(bi) + len(bj) for bi, bj in w.blocks)
    n_pairs = sum(len(bi) * len(bj) for bi, bj in w.blocks)
    values = (t_sides / 2 * sides + t_pair * n_pairs) / cores
    if "procrustes-heldout" in names:
        t_rot, _ = _least(streamed.rotation, streamed.Pair(x, y, pair).cross)
        sec["procrustes-heldout rotations"] = t_rot * n_pairs / cores
    sec["measure values"] = values
    d_s, d_t = next(iter(xs.values())).shape[1], next(iter(ys.values())).shape[1]
    nI, nJ = len(I), len(J)
    rot = "procrustes-heldout" in names
    if w.spec.bootstrap:
        G = streamed.MEASURE_GROUPS
        sec["measure interval"] = G * values
        sec["measure group passes"] = sec["measure sums"]
        if not w.keep_heldout:  # each group's rows read again from the stores
            sec["measure group reads"] = t_read / n * held * len(w.blocks) / w.slots
        out_bytes["the measures' sums, with the interval"] = measure_bytes(
            nI, nJ, d_s, d_t, G, rotations=rot
        )
    else:
        out_bytes["the measures' sums"] = measure_bytes(nI, nJ, d_s, d_t, 1, rotations=rot)
    timed.update({"measure sums": t_sums, "two sides' decompositions": t_sides, "a pair": t_pair})


def _calibration(w: Work, where: tuple, sec: dict, timed: dict, out_bytes: dict):
    """The calibration on the M sampled rows: procrustes-heldout's null (one pair's, at M
    rows, the timed rows repeated) and the row measures (`row_measures_seconds`)."""
    I, J, a, stop = where
    spec, sample = w.spec, w.sample
    M = len(sample.tokens)
    xs, ys = _rows(w, I[:1], J[:2], a, stop)
    n_cells = sum(len(bi) * len(bj) for bi, bj in w.blocks)
    n_source = len({i for bi, _ in w.blocks for i in bi})
    n_target = len({j for _, bj in w.blocks for j in bj})

    def tiled(v, m):
        reps = -(-m // len(v))
        return np.tile(np.asarray(v, np.float64), (reps, 1))[:m]

    if spec.heldout_calibrated and sample.perms is not None:
        i, j = I[0], J[0]
        x, y = tiled(xs[i], M), tiled(ys[j], M)
        R = streamed.rotation((x - x.mean(0)).T @ (y - y.mean(0)))
        one = sampled.Sample(np.arange(M), np.zeros(M), {i: x}, {j: y}, sample.perms)
        t_null, _ = _timed(sampled._heldout_values, one, i, j, R, w.job.backend())
        sec["procrustes-heldout null"] = t_null * n_cells / max(w.slots, 1)
        timed["procrustes-heldout null of a pair"] = t_null
    if spec.sampled:
        sec["row measures, interval and calibration"] = row_measures_seconds(
            (xs[I[0]], {j: ys[j] for j in list(ys)[:2]}),
            (spec, M, w.job.device),
            (n_cells, n_source + n_target),
            w.row_workers,
            timed,
        )
        shape = sampled.shape_of(
            sample,
            spec,
            (
                (n_source, next(iter(xs.values())).shape[1]),
                (n_target, next(iter(ys.values())).shape[1]),
            ),
            itemsize=4,
        )
        out_bytes["sampled rows"] = sample_bytes(shape)
        out_bytes["row measures' working memory"] = row_measures_bytes(shape)


def row_measures_seconds(rows_: tuple, asked: tuple, counts: tuple, workers: int, timed: dict):
    """Seconds of `rows.row_measures` on the grid's M sampled rows (`asked`: the FitSpec, M
    and the fit's device; `counts`: the grid's cells and boundaries), from timings on `rows_`,
    the rows x (n, d_S) of one source boundary and {j: (n, d_T)} of one or two target
    boundaries (the stores' or a batch's rows). Each of the run's pieces is timed on its own,
    as `row_measures` runs it, at m = min(M, ROW_TIMING) rows, the least of two runs after a
    warm-up (`_row_pieces`): a boundary's preparation, a cell's values, a cell's null draw of
    mknn, cknna and rsa (at most 9 draws timed) and a cell's recomputation of the interval
    (the jackknife's groups, or the fewest resamples, MIN_RESAMPLES; the interval of mknn,
    cknna and rsa only); where M > m each again at m/2 rows, the ratio giving that piece's
    growth with the rows (between M and M³); the spectral measures' null draw apart, on as
    many of the rows as M asks (`_spectral_draw`). A
    preparation is counted once a boundary, the values once a cell, the draws by the run's
    permutations and the recomputations by its 10 jackknife groups or N resamples. Timed as
    `sampled.attach` runs them (BLAS on one thread up to `sampled.SMALL_WIDTH`), and divided as
    the `workers` run them where they run there (`rows_tasks.row_seconds`; 1: this process,
    its preparations, draws and recomputations divided among `sampled.row_threads`)."""
    (x, ys), (spec, M, device), (n_cells, n_sides) = rows_, asked, counts
    ys = {j: ys[j] for j in list(ys)[:2]}
    m = max(min(M, ROW_TIMING, len(x)), 16)
    widest = max(v.shape[1] for v in (x, *ys.values()))
    blas = 1 if widest <= sampled.SMALL_WIDTH else None  # as `sampled.attach` runs them
    scheme = sampled.row_interval(spec)  # the row measures' interval as the run computes it
    resampled = scheme is not None and any(n in ROW_ONLY for n in spec.sampled)
    timing = (spec, scheme if resampled else None, blas)
    _row_pieces(x, ys, min(m, 32), timing)  # a warm-up: the first call's imports
    at_m = np.minimum(*(_row_pieces(x, ys, m, timing) for _ in range(2)))
    scale = np.ones(4)  # M ≤ m: the timed rows are the run's
    if M > m:
        half = _row_pieces(x, ys, m // 2, timing)
        grow = np.clip(np.log2(np.maximum(at_m, 1e-9) / np.maximum(half, 1e-9)), 1.0, 3.0)
        scale = (M / m) ** grow
    prepare, value, draw, again = at_m * scale
    draw += _spectral_draw(x, ys, M, (*timing, Backend(device)))
    timed[f"row measures' pieces of {len(ys)} cell(s) ({m:,} rows)"] = float(at_m.sum())
    resamples = (
        resampled
        * {  # the run's recomputations: 10 groups, or N resamples
            rows.JACKKNIFE: streamed.MEASURE_GROUPS,
            rows.BOOTSTRAP: sampled.resampling_of(spec).resamples,
            None: 0,
        }[scheme]
    )
    # in this process the preparations, draws and recomputations are cut among threads
    threads = sampled.row_threads(widest, device) if workers <= 1 else 1
    return rows_tasks.row_seconds(
        (prepare / threads, value, draw * n_cells / threads, again * n_cells / threads),
        (n_sides, n_cells, spec.draws, resamples),
        workers,
    )


def _row_pieces(x, ys: dict, m: int, timing: tuple) -> np.ndarray:
    """(4,) seconds at m rows of a boundary's preparation, a cell's values, a cell's null
    draw of mknn, cknna and rsa, and a cell's recomputation of the interval (0 without one),
    each timed on its own (`rows.prepare_all`, `observed_values`, `null_values`,
    `recomputations`) over the cells of
    x's first m rows with ys' (documents of 8 rows: the null's draws re-pair documents).
    timing: the FitSpec, the interval's scheme (None: no interval), BLAS's threads."""
    spec, scheme, blas = timing
    xs, ys = {0: x[:m]}, {j: y[:m] for j, y in ys.items()}
    docs, perms = _timing_draws(m, spec)
    names, k, cells = spec.sampled, spec.neighbours, len(ys)
    again = [n for n in names if n in ROW_ONLY] if scheme else []
    with blas_limit(blas):
        t_prepare, records = _timed(rows.prepare_all, xs, ys, names, k)
        t_value, _ = _timed(rows.observed_values, xs, ys, names, k, records)
        other = [n for n in names if n not in SPECTRAL]
        t_draws, _ = _timed(rows.null_values, xs, ys, perms, other, k, records)
        t_again = 0.0
        if again:
            weights = (
                rows.jackknife_weights(docs)[0]
                if scheme == rows.JACKKNIFE
                else rows.multiplicities(docs, Resampling(MIN_RESAMPLES, spec.bootstrap_seed))
            )
            t_again, _ = _timed(rows.recomputations, xs, ys, weights, again, k, records, 1)
            t_again /= len(weights)
    return np.array(
        [t_prepare / (1 + cells), t_value / cells, t_draws / len(perms) / cells, t_again / cells]
    )


def _timing_draws(m: int, spec) -> tuple:
    """(docs, perms) of a timing on m rows: documents of 8 rows (the null's draws re-pair
    documents) and at most 9 of the run's null draws (at least one)."""
    docs = np.repeat(np.arange(-(-m // 8)), 8)[:m]
    perms, _ = calibration.draw_permutations(docs, max(min(spec.draws, 9), 1), spec.seed)
    return docs, perms


def _spectral_draw(x, ys: dict, M: int, timing: tuple) -> float:
    """Seconds of a cell's null draw of the spectral measures asked, timed (`spectral_null`
    over x's cells with ys': the least of two runs of one draw, and where 9 of those take
    under SPECTRAL_PROBE s, of two runs of at most 9 draws) at min(M, n) of the n
    timed rows: at the run's own rows where it has them (its products grow as M·r_S·r_T
    with r = min(M, d), its decompositions as r³: no growth read from fewer rows is right for
    both), and scaled by the products' growth beyond them (an upper bound: the
    decompositions stop growing once r = d). timing: the FitSpec, the interval's scheme, BLAS's
    threads and the `Backend` the run's null draws run on (the fit's device)."""
    spec, _, blas, backend = timing
    names = [n for n in spec.sampled if n in SPECTRAL]
    m = min(M, len(x))
    if not names or m < 4:
        return 0.0
    _, perms = _timing_draws(m, spec)
    K = len(perms)
    with blas_limit(blas):
        px, py = rows.prepare_all({0: x[:m]}, {j: y[:m] for j, y in ys.items()}, names, 0)
        sides = (list(px.values()), list(py.values()))
        draws = perms[:1]  # one draw first, twice; where K of them are cheap, K
        seconds = min(_timed(spectral_null, *sides, draws, names, backend)[0] for _ in range(2))
        if seconds * K < SPECTRAL_PROBE:
            runs = [_timed(spectral_null, *sides, perms, names, backend)[0] for _ in range(2)]
            seconds = min(runs) / K
    seconds /= len(ys)
    d_s, d_t = x.shape[1], max(y.shape[1] for y in ys.values())
    return seconds * M * min(M, d_s) * min(M, d_t) / (m * min(m, d_s) * min(m, d_t))


def guess_row_seconds(shape, spec, device: str) -> float | None:
    """Seconds of the row measures, their interval and calibration in this process, for a
    fit's first plan line (`sampled.measures_line`), before any work: `row_measures_seconds`
    on rows drawn at random at the grid's widths (shape: the sample's `SampleShape`; what
    the row measures cost depends on M, the widths, k and the measures, not on the rows'
    values), min(M, TIMED_TOKENS) of them. None below GUESS_ROWS sampled rows, whose row
    measures take seconds: the timing would cost a fair share of them."""
    if shape is None or shape.rows < GUESS_ROWS or not spec.sampled:
        return None
    rng = np.random.default_rng(0)
    n = min(shape.rows, TIMED_TOKENS)
    x = rng.standard_normal((n, shape.d_s))
    ys = {j: rng.standard_normal((n, shape.d_t)) for j in range(min(2, shape.n_target))}
    cells, sides = shape.n_source * shape.n_target, shape.n_source + shape.n_target
    return row_measures_seconds((x, ys), (spec, shape.rows, device), (cells, sides), 1, {})
