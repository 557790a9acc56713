"""The row measures as Dask tasks (align.fitting.measuring.rows_tasks, what a fit on a cluster runs):
every field of every measure equals `measures.rows.row_measures` in this process within
1e-12 (ties, spectral measures' resamples and torch included), whatever the chunks; the
graph holds one preparation a boundary and one values task a cell; a bad boundary is refused
in the same one line before any task runs. Run by Dask's synchronous scheduler here; the
fit's local cluster runs the same graph (tests/integration/test_fit_rows_cluster.py)."""

from __future__ import annotations

from collections import Counter
from functools import partial

import numpy as np
import pytest

FIELDS = ("value", "low", "high", "null_mean", "null_std", "critical", "calibrated", "p")
FIELDS += ("p_family", "duplicated")
INTERVALS = ("jackknife", "bootstrap")
TOL = 1e-12


def _grid(seed, m=48):
    """Two source and three target boundaries of m rows sharing a common part, with exact
    copies (ties) at source boundary 0, as boundary 0 of a model has."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(m, 4))
    xs = {b: base @ rng.normal(size=(4, 6)) + rng.normal(size=(m, 6)) for b in (0, 2)}
    xs[0][[3, 7, 30]] = xs[0][1]
    ys = {b: base @ rng.normal(size=(4, 5)) + rng.normal(size=(m, 5)) for b in (1, 3, 4)}
    return xs, ys, np.repeat(np.arange(12), m // 12)


def _runner(chunks, use_torch=False, seen=None):
    """A Runner on Dask's synchronous scheduler; `seen` collects each task's kind."""
    import dask.local

    from align.fitting.measuring.rows_tasks import Runner
    from align.ridge.backend import Backend

    def run(dsk, key):
        if seen is not None:
            seen.update(k[0] for k, v in dsk.items() if isinstance(v, tuple) and callable(v[0]))
        return dask.local.get_sync(dsk, key)

    return Runner(run, partial(Backend, "cpu", use_torch=use_torch or None), chunks, 1)


@pytest.mark.parametrize("interval", INTERVALS)
@pytest.mark.parametrize("chunks", [1, 3, 200])
def test_every_field_equals_row_measures_in_this_process(chunks, interval):
    """All eight measures, the interval on every one (the spectral ones recomputed on each
    recomputation's rows inside the tasks), 13 draws and the jackknife's 10 groups or 100
    resamples cut into `chunks` tasks (more chunks than draws too)."""
    from align.fitting.measuring.rows_tasks import row_measures_tasks
    from align.measures.rows import ROW_MEASURES, Draws, row_measures
    from align.stats.bootstrap import Resampling

    xs, ys, docs = _grid(1)
    names = tuple(ROW_MEASURES)
    draws = Draws(13, 5, Resampling(100, 2), interval)
    kw = dict(k=3, draws=draws)
    want = row_measures(xs, ys, docs, names, **kw)
    got = row_measures_tasks(_runner(chunks), xs, ys, docs, names, **kw)
    assert set(got) == set(want)
    for n in names:
        for f in ("direction", "null_scheme", "interval", "groups"):
            assert getattr(got[n], f) == getattr(want[n], f), (n, f)
        assert got[n].interval == interval
        _same(got[n], want[n], (*FIELDS, "left_out") if interval == "jackknife" else FIELDS, n)
        assert np.isfinite(got[n].low).all()


def _same(got, want, fields, label: str) -> None:
    """Each of `fields` of two `RowMeasure` records equal within TOL (NaN where NaN)."""
    for f in fields:
        np.testing.assert_allclose(
            getattr(got, f),
            getattr(want, f),
            rtol=TOL,
            atol=TOL,
            equal_nan=True,
            err_msg=f"{label} {f}",
        )


def test_torch_backend_and_intervals_on_some_measures_equal_row_measures():
    """On torch (the GPU's code path, run on the CPU), the interval on mknn, cknna and rsa
    only, as the fit asks it: the others' low and high NaN in both."""
    from align.fitting.measuring.rows_tasks import row_measures_tasks
    from align.measures.rows import Draws, row_measures
    from align.ridge.backend import Backend
    from align.stats.bootstrap import Resampling

    xs, ys, docs = _grid(2)
    names, intervals = ("mknn", "cknna", "rsa", "cka"), ("mknn", "cknna", "rsa")
    for interval in INTERVALS:
        draws = Draws(9, 1, Resampling(100, 0), interval)
        kw = dict(k=4, draws=draws, intervals=intervals)
        want = row_measures(xs, ys, docs, names, **kw, backend=Backend("cpu", use_torch=True))
        got = row_measures_tasks(_runner(2, use_torch=True), xs, ys, docs, names, **kw)
        for n in names:
            _same(got[n], want[n], FIELDS, f"{n} {interval}")
        assert np.isnan(got["cka"].low).all() and got["cka"].interval is None


def test_the_graph_prepares_each_boundary_once_and_reads_each_cell_once():
    """5 boundaries: 5 preparations; 2 × 3 cells: 6 values tasks; the draws and the
    jackknife's recomputations in `chunks` tasks each; one task gathers them."""
    from align.fitting.measuring.rows_tasks import row_measures_tasks
    from align.measures.rows import Draws
    from align.stats.bootstrap import Resampling

    xs, ys, docs = _grid(3)
    seen = Counter()
    row_measures_tasks(
        _runner(4, seen=seen), xs, ys, docs, ("rsa",), k=3, draws=Draws(9, 0, Resampling(100, 0))
    )
    assert dict(seen) == {
        "row-prepare": 5,
        "row-values": 6,
        "row-null": 4,
        "row-interval": 4,
        "row-measures": 1,
    }


def test_a_boundary_without_variance_is_refused_in_one_line_before_any_task():
    from align.errors import InputError
    from align.fitting.measuring.rows_tasks import Runner, row_measures_tasks
    from align.measures.rows import Draws, row_measures
    from align.stats.bootstrap import Resampling

    xs, ys, docs = _grid(4)
    ys[3] = np.ones_like(ys[3])
    draws = Draws(9, 0, Resampling(100, 0))

    def never(dsk, key):
        raise AssertionError("a task ran")

    with pytest.raises(InputError) as got:
        row_measures_tasks(Runner(never, None, 2), xs, ys, docs, ("rsa",), k=3, draws=draws)
    with pytest.raises(InputError) as want:
        row_measures(xs, ys, docs, ("rsa",), k=3, draws=draws)
    message = str(got.value)
    assert message == str(want.value)
    assert "\n" not in message and "target boundary 3 has no variance" in message


def test_rsa_ranks_are_scipys_average_ranks_exactly_whatever_the_order_within_a_tie():
    """RSA's prepared ranks (one sort a boundary, not a stable one) and a resample's weighted
    ranks against scipy.stats.rankdata's average ranks, centred, of the pairs' correlation
    distances written out once and ω_ab = w_a·w_b times: equal to the last bit on rows with
    many copies and many tied distances. The distances are computed here as
    docs/measures-rows.md defines them (each distinct centred unit row's products, so copies
    tie exactly), in numpy, for the ties to be the same bits as align's."""
    from scipy.stats import rankdata

    from align.measures import prepared

    rng = np.random.default_rng(7)
    m = 120
    x = np.round(rng.normal(size=(m, 4)), 1)
    x[rng.integers(0, m, 40)] = x[3]
    c = x - x.mean(axis=1, keepdims=True)
    u, copy = np.unique(c / np.linalg.norm(c, axis=1, keepdims=True), axis=0, return_inverse=True)
    copy = np.ravel(copy)
    a, b = np.triu_indices(m, 1)
    lo, hi = np.minimum(copy[a], copy[b]), np.maximum(copy[a], copy[b])
    d = 1.0 - (u @ u.T)[lo, hi]
    d[lo == hi] = 0.0
    p = prepared.prepare(x, ("ranks",), 3)
    assert p.ties is not None and len(np.unique(d)) < len(d) / 2  # many ties
    want = rankdata(d) - (len(d) + 1) / 2
    np.testing.assert_array_equal(p.ranks, want)
    w = rng.integers(0, 3, m)
    omega = (w[a] * w[b]).astype(np.float64)
    got = prepared.ranks_weighted(p, omega.copy())
    keep = omega > 0
    written = np.repeat(d[keep], omega[keep].astype(int))
    ranks = rankdata(written) - (len(written) + 1) / 2
    first = np.concatenate([[0], np.cumsum(omega[keep].astype(int))[:-1]])
    np.testing.assert_array_equal(got[keep], ranks[first])


def test_a_cluster_runs_them_only_where_a_workers_share_holds_them():
    """In this process (threads, synchronous) no Runner; on a cluster two chunks a worker,
    unless a worker's share of the budget (cluster.worker_budget_of) is below the sampled
    rows in float64 plus row_measures' working memory (the bytes counted by hand here)."""
    from align.fitting.measuring.rows_tasks import runner
    from align.fitting.planning.sample_budget import SampleShape, row_measures_bytes
    from align.fitting.runtime.cluster import PLAN_FRACTION, Executor

    shape = SampleShape(512, 3, 64, 4, 96, ("mknn", "cknna", "rsa"), 10, 1099, 530, 4)
    rows32 = 4 * 512 * (3 * 64 + 4 * 96)
    need = 2 * rows32 + row_measures_bytes(shape)

    def ex(mode, limit, n=2):
        return Executor(lambda d, k: None, set(), {}, n, mode, limit, 10**8)

    assert runner(ex("threads", 10**12), "cpu", shape) is None
    assert runner(ex("sync", 10**12), "cpu", shape) is None
    got = runner(ex("local", 10**12, n=3), "cpu", shape)
    assert got.chunks == 6
    just = int(need / PLAN_FRACTION) * 2 + 10**8 + rows32 + 8
    assert runner(ex("local", just), "cpu", shape) is not None
    assert runner(ex("local", just - 64), "cpu", shape) is None
    remote = int(need / PLAN_FRACTION) + 10**8 + 4
    assert runner(ex("remote", remote), "cpu", shape) is not None
    assert runner(ex("remote", remote - 64), "cpu", shape) is None


def test_the_fallback_names_the_bytes_a_worker_needs_and_its_share():
    """Where a worker's share cannot hold them, `held_back` says so in one line naming both
    byte counts (by hand: the share is PLAN_FRACTION of the budget less the idle footprint);
    None where they run on the workers, in this process, or without a row measure."""
    from align.fitting.measuring.rows_tasks import held_back
    from align.fitting.planning.sample_budget import SampleShape, row_measures_bytes
    from align.fitting.runtime.cluster import PLAN_FRACTION, Executor
    from align.messages import human_bytes

    shape = SampleShape(512, 3, 64, 4, 96, ("mknn", "rsa"), 10, 1099, 530, 4)
    need = 2 * 4 * 512 * (3 * 64 + 4 * 96) + row_measures_bytes(shape)
    limit = 10**8 + int(need / PLAN_FRACTION) - 4096  # a share just short of `need`
    ex = Executor(lambda d, k: None, set(), {}, 3, "remote", limit, 10**8)
    line = held_back(ex, shape)
    share = int((limit - 10**8) * PLAN_FRACTION)
    assert line == (
        "the row measures (mknn, rsa) run in this process, not on the 3 workers: a worker "
        f"would hold {human_bytes(need)} (the sampled rows and `row_measures`' working "
        f"memory), more than its share of the budget, {human_bytes(share)}"
    )
    assert "\n" not in line
    assert held_back(_with(ex, limit + 8192), shape) is None
    assert held_back(_with(ex, limit, mode="threads"), shape) is None
    assert held_back(ex, shape._replace(measures=())) is None


def _with(ex, limit, mode=None):
    from dataclasses import replace

    return replace(ex, limit=limit, mode=mode or ex.mode)


@pytest.mark.parametrize(
    "n, tasks, workers, want",
    [
        (10, 1, 1, 10),  # one process: every item in turn
        (10, 4, 2, 6),  # chunks of 3, 3, 2, 2: two rounds of 3
        (9, 4, 2, 6),  # chunks of 3, 2, 2, 2: two rounds, the first of 3
        (1000, 4, 2, 500),
        (3, 4, 2, 2),  # three tasks of one: two rounds
        (0, 4, 2, 0),
    ],
)
def test_wall_items_counts_the_rounds_of_the_largest_task(n, tasks, workers, want):
    from align.fitting.measuring.rows_tasks import wall_items

    assert wall_items(n, tasks, workers) == want


def test_row_seconds_divide_by_what_runs_side_by_side():
    """A grid of 5 boundaries and 6 cells, 9 permutations and 100 resamples, at stated rates
    (a preparation 2 s, a cell's values 0.5 s, a draw of the grid 0.1 s, a resample of the
    grid 0.04 s). In this process: 5·2 + 6·0.5 + 9·0.1 + 100·0.04 = 17.9 s. On 2 workers
    (chunks of 4 tasks each): preparations ceil(5/2) = 3 rounds, cells 3 rounds, the 9 draws
    in chunks of 3, 2, 2, 2 (2 rounds, the largest 3 draws: 6), the 100 resamples in chunks of
    25 (2 rounds: 50): 3·2 + 3·0.5 + 6·0.1 + 50·0.04 = 10.1 s."""
    from align.fitting.measuring.rows_tasks import row_seconds

    costs, counts = (2.0, 0.5, 0.1, 0.04), (5, 6, 9, 100)
    assert row_seconds(costs, counts, 1) == pytest.approx(17.9, rel=1e-12)
    assert row_seconds(costs, counts, 2) == pytest.approx(10.1, rel=1e-12)
