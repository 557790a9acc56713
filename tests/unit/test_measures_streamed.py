"""The streamed measures (align.measures.streamed) from sums of rows accumulated chunk by
chunk and group by group, against references computed from the rows themselves
(tests/helpers/measures_reference.py: the papers, platonic-rep's and netrep's definitions),
within 1e-8 relative; known answers; the refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.helpers.measures_reference import MEASURES as REFERENCE

RTOL = 1e-8


def _one_line(e, *needles):
    text = str(e.value)
    assert "\n" not in text, text
    for n in needles:
        assert n in text, (n, text)


def _rows(n=300, d_s=7, d_t=5, seed=0, shift=(3.0, -2.0)):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d_s)) @ rng.normal(size=(d_s, d_s)) + shift[0]
    Y = X @ rng.normal(size=(d_s, d_t)) + 0.7 * rng.normal(size=(n, d_t)) + shift[1]
    return X, Y


def _sums(X, Y, groups, G, chunks=3, shifts=None):
    from align.measures import streamed

    shifts = shifts or ({0: np.zeros(X.shape[1])}, {0: np.zeros(Y.shape[1])})
    out = None
    for r in np.array_split(np.arange(len(X)), chunks):
        s = streamed.row_sums({0: X[r]}, {0: Y[r]}, shifts, groups[r], G)
        out = s if out is None else streamed.add_sums(out, s)
    return out


def _values(sums, names, w=None):
    from align.measures import pairs, streamed

    x, y = (streamed.Side(s.weighted(w)) for s in (sums.source[0], sums.target[0]))
    return pairs.pair_measures(x, y, sums.pair[(0, 0)].weighted(w), names, (0, 0))


def _held(names, sums, left_out=None):
    """A block's held-out sums with the measures' part, as the fit's held-out pass gives it."""
    from align.measures.streamed import HeldSums

    return {"measures": HeldSums(names, sums, left_out)}


def test_every_measure_equals_its_reference_from_rows():
    from align.measures import STREAMED

    STREAMED = tuple(n for n in STREAMED if n != "procrustes-heldout")  # its own test, below
    X, Y = _rows()
    groups = np.arange(len(X)) % 4
    shifts = ({0: X[:10].mean(0)}, {0: Y[:10].mean(0) + 1.0})  # any fixed shift
    got = _values(_sums(X, Y, groups, 4, shifts=shifts), STREAMED)
    for name in STREAMED:
        np.testing.assert_allclose(got[name], REFERENCE[name](X, Y), rtol=RTOL, err_msg=name)


def test_weighted_groups_equal_the_measure_of_the_drawn_rows():
    """A resample's weights over groups equal the measure of its groups' rows, a group drawn
    twice counted twice."""
    from align.measures import STREAMED

    STREAMED = tuple(n for n in STREAMED if n != "procrustes-heldout")
    X, Y = _rows(seed=1)
    groups = np.arange(len(X)) % 5
    w = np.array([2.0, 0.0, 1.0, 1.0, 1.0])
    rows = np.concatenate([np.flatnonzero(groups == g) for g in (0, 0, 2, 3, 4)])
    got = _values(_sums(X, Y, groups, 5), STREAMED, w)
    for name in STREAMED:
        want = REFERENCE[name](X[rows], Y[rows])
        np.testing.assert_allclose(got[name], want, rtol=RTOL, err_msg=name)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("G", [10, 4])
def test_jackknife_interval_equals_the_textbook_on_the_rows_without_each_group(G, threads):
    """The fit's interval of every streamed measure (`measured.pair_measures` on sums kept
    per group, one group left empty as with few held-out documents; its recomputations on
    one thread, and on three side by side) against each measure
    recomputed from the rows of every group but g (rows, not sums) and the jackknife written
    from the textbook (tests/helpers/measures_reference.py), within 1e-8 relative."""
    from align.fitting.measuring import measured
    from align.stats.bootstrap import Resampling
    from tests.helpers.measures_reference import RANGES, jackknife_interval

    names = tuple(REFERENCE)
    X, Y = _rows(n=240, seed=4)
    groups = np.arange(len(X)) % (G - 1)  # group G − 1 holds no row: G − 1 groups present
    heldout = _held(names, _sums(X, Y, groups, G))
    got = measured.pair_measures(heldout, Resampling(100, 0), threads)[(0, 0)]
    for name in names:
        left_out = [REFERENCE[name](X[groups != g], Y[groups != g]) for g in range(G - 1)]
        value = REFERENCE[name](X, Y)
        low, high = jackknife_interval(value, left_out, RANGES[name])
        np.testing.assert_allclose(got[name], (value, low, high), rtol=RTOL, err_msg=name)
    assert all(
        np.isnan(v[1]) and np.isnan(v[2])
        for v in measured.pair_measures(heldout, None)[(0, 0)].values()
    )


@pytest.mark.parametrize("widths", [(7, 5), (5, 7)])
def test_group_passes_give_the_textbook_jackknife_without_the_groups_sums(widths):
    """The jackknife's recomputations from the sums of every held-out row and one group's
    sums at a time (`pairs.leave_group_out`, as the fit's group passes make them: each
    group's rows summed in chunks of their own) against every measure, procrustes-heldout
    with a training rotation among them, recomputed by numpy from the rows of every group
    but g (rows, not sums; tests/helpers/measures_reference.py), and the interval
    `measured.pair_measures` builds from them against the textbook's, all within 1e-8
    relative; the same recomputations as the G groups' sums side by side give
    (`pairs.resampled`, the form that held them all), within 1e-10."""
    from align.fitting.measuring import measured
    from align.measures import pairs, streamed
    from align.stats import jackknife
    from align.stats.bootstrap import Resampling
    from tests.helpers.measures_reference import RANGES, jackknife_interval, procrustes_heldout

    X, Y = _rows(n=460, d_s=widths[0], d_t=widths[1], seed=8)
    train, test = np.arange(160), np.arange(160, 460)
    R = streamed.rotation((X[train] - X[train].mean(0)).T @ (Y[train] - Y[train].mean(0)))
    shifts = ({0: X[train].mean(0)}, {0: Y[train].mean(0)})
    G = 10
    groups = np.random.default_rng(2).choice([0, 1, 2, 4, 5, 7], size=len(test))  # 6 present
    present = np.unique(groups)

    def sums(rows, G=1, grouping=None):
        grouping = np.zeros(len(rows), dtype=np.int64) if grouping is None else grouping
        out = None
        for part in np.array_split(np.arange(len(rows)), 2):
            r = test[rows[part]]
            s = streamed.row_sums(
                {0: X[r]}, {0: Y[r]}, shifts, grouping[part], G, rotations={(0, 0): R}
            )
            out = s if out is None else streamed.add_sums(out, s)
        return out

    names = (*REFERENCE, "procrustes-heldout")
    everything = np.arange(len(test))
    total = sums(everything)
    runs = [pairs.leave_group_out(total, sums(np.flatnonzero(groups == g)), names) for g in present]

    def reference(name, rows):
        if name == "procrustes-heldout":
            return procrustes_heldout(X[train], Y[train], X[rows], Y[rows])
        return REFERENCE[name](X[rows], Y[rows])

    for name in names:
        left_out = [reference(name, test[groups != g]) for g in present]
        got = [r[(0, 0)][name] for r in runs]
        np.testing.assert_allclose(got, left_out, rtol=RTOL, err_msg=name)
        value = reference(name, test)
        heldout = _held(names, total, runs)
        want = (value, *jackknife_interval(value, left_out, RANGES[name]))
        got_interval = measured.pair_measures(heldout, Resampling(100, 0))[(0, 0)][name]
        np.testing.assert_allclose(got_interval, want, rtol=RTOL, err_msg=name)
    side_by_side = sums(everything, G, groups)
    kept = side_by_side.groups(present)
    before = pairs.resampled(kept, names, jackknife.leave_one_out(len(present)))[(0, 0)]
    for name in names:
        got = [r[(0, 0)][name] for r in runs]
        np.testing.assert_allclose(got, before[name], rtol=1e-10, err_msg=name)


def test_fewer_than_three_groups_holding_rows_give_no_interval():
    """Two groups holding rows: the value from all rows (its reference), the interval NaN
    (t with one degree of freedom would be ±12.7 standard errors)."""
    from align.fitting.measuring import measured
    from align.stats.bootstrap import Resampling

    X, Y = _rows(seed=5)
    groups = np.arange(len(X)) % 2
    heldout = _held(("cka",), _sums(X, Y, groups, 10))
    value, low, high = measured.pair_measures(heldout, Resampling(100, 0))[(0, 0)]["cka"]
    np.testing.assert_allclose(value, REFERENCE["cka"](X, Y), rtol=RTOL)
    assert np.isnan(low) and np.isnan(high)


def test_rotated_copy_gives_cka_one_and_procrustes_zero():
    """Known answer: Y = X Q with Q a random orthogonal matrix."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 6))
    Q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    got = _values(_sums(X, X @ Q, np.zeros(200, int), 1), ("cka", "cka-debiased", "procrustes"))
    np.testing.assert_allclose(got["cka"], 1.0, rtol=1e-12)
    np.testing.assert_allclose(got["cka-debiased"], 1.0, rtol=1e-12)
    assert got["procrustes"] < 1e-6  # arccos near 1 loses half the digits: sqrt(2·1e-13)


def test_a_side_without_variance_is_refused_naming_the_pair():
    from align.errors import NonFiniteError

    X, _ = _rows()
    Y = np.ones((len(X), 3))
    with pytest.raises(NonFiniteError) as e:
        _values(_sums(X, Y, np.zeros(len(X), int), 1), ("cka",))
    _one_line(e, "source 0 -> target 0", "target boundary 0 have no variance")


def test_unknown_measure_is_refused_listing_the_valid_ones():
    from align.errors import InputError
    from align.measures import MEASURES, parse_measures

    with pytest.raises(InputError) as e:
        parse_measures("cka,nope")
    _one_line(e, "`measures` nope", ", ".join(MEASURES))
    assert parse_measures("all") == tuple(MEASURES)
    assert parse_measures("procrustes,cka") == ("ridge", "cka", "procrustes")


@pytest.mark.parametrize("widths", [(7, 5), (5, 7), (6, 6)])
def test_heldout_procrustes_equals_scipy_on_training_and_heldout_rows(widths):
    """procrustes-heldout from the held-out rows' sums with the rotation fitted on other
    rows, against scipy's orthogonal_procrustes on zero-padded rows (1e-8), on all the
    held-out rows and on a resample of groups (a group drawn twice, twice); with the rotation
    fitted on the held-out rows themselves it is the chordal form of the in-sample distance,
    sqrt(2 − 2 cos(procrustes))."""
    from align.measures import streamed
    from tests.helpers.measures_reference import procrustes_heldout

    X, Y = _rows(n=500, d_s=widths[0], d_t=widths[1], seed=3)
    train, test = np.arange(200), np.arange(200, 500)
    Xt, Yt = X[train] - X[train].mean(0), Y[train] - Y[train].mean(0)
    R = streamed.rotation(Xt.T @ Yt)
    groups = np.arange(len(test)) % 5
    shifts = ({0: X[train].mean(0)}, {0: Y[train].mean(0)})
    sums = streamed.row_sums({0: X[test]}, {0: Y[test]}, shifts, groups, 5, rotations={(0, 0): R})
    got = _values(sums, ("procrustes-heldout", "procrustes"))
    want = procrustes_heldout(X[train], Y[train], X[test], Y[test])
    np.testing.assert_allclose(got["procrustes-heldout"], want, rtol=RTOL)
    w = np.array([2.0, 0.0, 1.0, 1.0, 1.0])
    rows = test[np.concatenate([np.flatnonzero(groups == g) for g in (0, 0, 2, 3, 4)])]
    got_w = _values(sums, ("procrustes-heldout",), w)["procrustes-heldout"]
    np.testing.assert_allclose(
        got_w, procrustes_heldout(X[train], Y[train], X[rows], Y[rows]), rtol=RTOL
    )
    Xh, Yh = X[test] - X[test].mean(0), Y[test] - Y[test].mean(0)
    own = streamed.row_sums(
        {0: X[test]},
        {0: Y[test]},
        shifts,
        groups,
        5,
        rotations={(0, 0): streamed.rotation(Xh.T @ Yh)},
    )
    chord = np.sqrt(2 - 2 * np.cos(got["procrustes"]))
    np.testing.assert_allclose(
        _values(own, ("procrustes-heldout",))["procrustes-heldout"], chord, rtol=1e-8
    )


def test_planner_counts_the_heldout_procrustes_rotations():
    """With procrustes-heldout every pair's training rotation (d_S × d_T float64) is held
    with the maps: the store route's block and the live route's pass count 8·nI·nJ·d_S·d_T
    bytes more, and nothing without measures."""
    from align.fitting.planning import budget

    nI, nJ, d_s, d_t = 3, 4, 64, 96
    extra = 8 * nI * nJ * d_s * d_t
    for copies in (3, 2):
        plain = budget.measure_bytes(nI, nJ, d_s, d_t, 10, copies)
        assert budget.measure_bytes(nI, nJ, d_s, d_t, 10, copies, rotations=True) == plain + extra
    assert budget.measure_bytes(nI, nJ, d_s, d_t, 0, rotations=True) == 0
    shape = budget.LiveShape(nI, d_s, nJ, d_t, 512, 128, 256, 4, 4, 1000, 10**6, measure_groups=1)
    with_r = budget.pass_bytes(dataclasses.replace(shape, rotations=True), nJ, False)
    without = budget.pass_bytes(shape, nJ, False)
    assert with_r["measure sums"] - without["measure sums"] == extra


def _device_backend():
    """The torch backend as a fit's GPU runs it (`on_cpu` False: products on the device,
    one source boundary at a time), on the CPU."""
    from align.ridge.backend import Backend

    class Device(Backend):
        on_cpu = False

    return Device("cpu", use_torch=True)


@pytest.mark.parametrize("where", ["numpy", "torch", "device"])
def test_sums_of_many_boundaries_equal_direct_sums_per_group(where):
    """Three source and two target boundaries, four groups of which one holds no row, rows
    in no group order: every field of every boundary and pair against numpy's sums over the
    group's rows, within 1e-12 relative; on numpy, on torch on the host (whose products run
    through numpy) and on torch as on a GPU."""
    from align.measures import streamed
    from align.ridge.backend import Backend

    backend = {
        "numpy": lambda: Backend("cpu"),
        "torch": lambda: Backend("cpu", use_torch=True),
        "device": _device_backend,
    }[where]()
    rng = np.random.default_rng(3)
    n, d_s, d_t, G = 61, 4, 6, 4
    xs = {i: rng.normal(size=(n, d_s)).astype(np.float32) + i for i in (0, 2, 5)}
    ys = {j: rng.normal(size=(n, d_t)).astype(np.float32) - j for j in (1, 3)}
    shifts = ({i: rng.normal(size=d_s) for i in xs}, {j: rng.normal(size=d_t) for j in ys})
    groups = rng.choice([0, 1, 3], size=n)  # group 2 holds no row
    R = {(2, 3): rng.normal(size=(d_s, d_t))}
    got = streamed.row_sums(xs, ys, shifts, groups, G, backend, R)

    def side(a):
        a2 = (a * a).sum(1)
        return {"n": len(a), "s": a.sum(0), "S": a.T @ a, "q": a2 @ a, "f": (a2 * a2).sum()}

    def close(value, want):
        np.testing.assert_allclose(value, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())

    for g in range(G):
        rows = groups == g
        X = {i: v[rows].astype(np.float64) - shifts[0][i] for i, v in xs.items()}
        Y = {j: v[rows].astype(np.float64) - shifts[1][j] for j, v in ys.items()}
        for records, arrays in ((got.source, X), (got.target, Y)):
            for k, a in arrays.items():
                for f, want in side(a).items():
                    close(getattr(records[k], f)[g], want)
        for i, x in X.items():
            for j, y in Y.items():
                x2, y2 = (x * x).sum(1), (y * y).sum(1)
                pair = got.pair[(i, j)]
                close(pair.xy[g], x.T @ y)
                close(pair.p[g], (x2 * y2).sum())
                close(pair.r_xy[g], x2 @ y)
                close(pair.r_yx[g], y2 @ x)
                if (i, j) in R:
                    close(pair.qxy[g], np.sum(R[(i, j)] * (x.T @ y)))
                    close(pair.q_sy[g], R[(i, j)] @ y.sum(0))
    assert set(got.pair) == {(i, j) for i in xs for j in ys}
    assert got.pair[(0, 1)].qxy is None
