"""align.ridge on arrays, against numpy/scikit-learn/scipy and hand-worked cases.

Tolerances: sums of the same float64 numbers in another order agree to ~1e-12 relative;
solves against scikit-learn to rtol 1e-6 + atol 1e-9 (the issue's bound)."""

from __future__ import annotations

import numpy as np
import pytest

from align import ridge
from tests.helpers.references import alpha_scale, heldout_scores, ridge_val_sse, sklearn_ridge


def _data(n=600, d_s=12, d_t=7, seed=0, offset=30.0):
    rng = np.random.default_rng(seed)
    # correlated columns, a large common offset (as residual streams have), a linear target
    X = (rng.normal(size=(n, d_s)) @ rng.normal(size=(d_s, d_s)) + offset).astype(np.float32)
    Y = (X @ rng.normal(size=(d_s, d_t)) * 0.1 + rng.normal(size=(n, d_t)) - offset / 3).astype(
        np.float32
    )
    return X, Y


def _stats(X, Ys, part, chunk=97, shift=True):
    """Statistics of (X, {j: Y}) accumulated over chunks, through the module."""
    xs = X[:50].astype(np.float64).mean(0) if shift else np.zeros(X.shape[1])
    ysh = {
        j: (Y[:50].astype(np.float64).mean(0) if shift else np.zeros(Y.shape[1]))
        for j, Y in Ys.items()
    }
    pieces = [
        ridge.chunk_statistics(
            {0: X[a : a + chunk]},
            {j: Y[a : a + chunk] for j, Y in Ys.items()},
            part[a : a + chunk],
            ({0: xs}, ysh),
        )
        for a in range(0, len(X), chunk)
    ]
    return ridge.tree_sum(pieces), {0: xs}, ysh


def test_chunk_statistics_match_direct_sums():
    X, Y = _data()
    part = np.random.default_rng(1).integers(-1, 2, len(X)).astype(np.int8)
    st, xs, ys = _stats(X, {5: Y}, part)
    for p in (ridge.FIT, ridge.VAL):
        Xp = X[part == p].astype(np.float64) - xs[0]
        Yp = Y[part == p].astype(np.float64) - ys[5]
        assert st.n[p] == len(Xp)
        np.testing.assert_allclose(st.view("sx")[0][p], Xp.sum(0), rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(st.view("xx")[0][p], Xp.T @ Xp, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(st.view("sy")[5][p], Yp.sum(0), rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(st.view("yy")[5][p], (Yp**2).sum(), rtol=1e-12)
        np.testing.assert_allclose(st.view("xy")[(0, 5)][p], Xp.T @ Yp, rtol=1e-12, atol=1e-9)


def test_tree_sum_is_a_fixed_tree():
    # five numbers whose float sum depends on the order: the tree is ((a+b)+(c+d))+e
    v = [1e16, 1.0, -1e16, 1.0, 3.0]
    assert ridge.tree_sum(v, add=lambda a, b: a + b) == ((v[0] + v[1]) + (v[2] + v[3])) + v[4]


def test_validation_sse_equals_explicit_predictions():
    X, Y = _data(seed=2)
    X, Y = X.astype(np.float64), Y.astype(np.float64)
    f, v = X[:400], X[400:]
    fy, vy = Y[:400], Y[400:]
    mu, nu = f.mean(0), fy.mean(0)
    C = (f - mu).T @ (f - mu)
    B = (f - mu).T @ (fy - nu)
    lam, Q = ridge.eigen(C)
    Vxx, Vxy = (v - mu).T @ (v - mu), (v - mu).T @ (vy - nu)
    Vyy = ((vy - nu) ** 2).sum()
    alphas = np.array([1e-3, 1e-1, 1.0, 10.0]) * np.trace(C) / C.shape[0]
    got = ridge.validation_sse(lam, Q, B, Vxx, Vxy, Vyy, alphas)
    for a, g in zip(alphas, got):
        W = np.linalg.solve(C + a * np.eye(len(C)), B)
        want = (((v - mu) @ W + nu - vy) ** 2).sum()
        np.testing.assert_allclose(g, want, rtol=1e-9)


def test_choose_alpha_ties_go_to_the_larger():
    assert (
        ridge.choose_alpha(np.array([2.0, 1.0, 1.0 + 1e-13, 3.0])) == 2
    )  # within 1e-12: tie, larger wins
    assert ridge.choose_alpha(np.array([2.0, 1.0, 1.0 + 1e-9, 3.0])) == 1  # beyond: the least wins
    assert ridge.choose_alpha(np.array([5.0, 5.0, 5.0])) == 2
    # a curve at the rounding floor of its validation variance (total 100): all ties, the largest α wins
    assert ridge.choose_alpha(np.array([3e-12, 1e-12, 2e-12, 5.0]), total=100.0) == 2
    assert ridge.choose_alpha(np.array([3e-12, 1e-12, 2e-12, 5.0])) == 1


def test_solve_block_equals_sklearn_ridge():
    X, Y = _data(seed=3)
    part = np.where(np.arange(len(X)) < 450, ridge.FIT, ridge.VAL).astype(np.int8)
    st, xs, ys = _stats(X, {1: Y}, part)
    grid = [1e-4, 1e-2, 1.0]
    m = ridge.solve_block(st, grid, xs, ys)[(0, 1)]
    # α chosen: brute force over the grid by validation squared error, Ridge fitted on the fit part
    Xd, Yd = X.astype(np.float64), Y.astype(np.float64)
    fit, val = part == ridge.FIT, part == ridge.VAL
    sse = ridge_val_sse(Xd[fit], Yd[fit], Xd[val], Yd[val], grid)
    assert m.alpha_rel == grid[int(np.argmin(sse))]
    np.testing.assert_allclose(m.val_sse, sse, rtol=1e-8)
    # final fit: all training rows with the recorded absolute α
    np.testing.assert_allclose(m.alpha, m.alpha_rel * alpha_scale(Xd), rtol=1e-10)
    r = sklearn_ridge(Xd, Yd, m.alpha)
    np.testing.assert_allclose(m.W, r.coef_.T, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(m.c, r.intercept_, rtol=1e-6, atol=1e-9)


def _map(W, x_mean, y_mean):
    """A given map as the solve hands it on (the α fields are not read by the held-out sums)."""
    return ridge.SolvedMap(
        W=W,
        x_mean=x_mean,
        y_mean=y_mean,
        c=y_mean - x_mean @ W,
        alpha_rel=1.0,
        alpha=1.0,
        val_sse=np.full(1, np.nan),
        val_alphas=np.ones(1),
    )


@pytest.mark.parametrize("rows", [None, 50], ids=["one-block", "blocks-of-50-rows"])
@pytest.mark.parametrize("use_torch", [False, True], ids=["numpy", "torch-cpu"])
def test_heldout_scores_equal_numpy_and_sklearn(use_torch, rows):
    X, Y = _data(seed=4)
    rng = np.random.default_rng(5)
    W = rng.normal(size=(X.shape[1], Y.shape[1]))
    x_mean, y_mean = X[:100].mean(0).astype(np.float64), Y[:100].mean(0).astype(np.float64)
    maps = {(0, 1): _map(W, x_mean, y_mean)}
    backend = ridge.Backend("cpu", use_torch=use_torch)
    parts = [
        ridge.heldout_sums(
            {0: X[a : a + 128]}, {1: Y[a : a + 128]}, maps, backend, rows_per_block=rows
        )
        for a in range(0, len(X), 128)
    ]
    h = ridge.tree_sum(parts, add=ridge.add_heldout)
    got = ridge.scores(h["pair"][(0, 1)], h["target"][1], h["centred"][1])
    Xd, Yd = X.astype(np.float64), Y.astype(np.float64)
    pred = Xd @ W + (y_mean - x_mean @ W)
    want = heldout_scores(pred, Yd)
    np.testing.assert_allclose(got.relative_error, want["relative_error"], rtol=1e-10)
    np.testing.assert_allclose(got.norm_error, want["norm_error"], rtol=1e-10)
    np.testing.assert_allclose(got.r2, want["r2"], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("use_torch", [False, True], ids=["numpy", "torch-cpu"])
def test_per_document_heldout_sums_equal_a_loop_over_documents(use_torch):
    X, Y = _data(seed=7)
    rng = np.random.default_rng(8)
    docs = np.sort(rng.integers(0, 9, len(X)))  # runs of documents, some split between chunks
    maps = {
        (0, 1): _map(
            rng.normal(size=(X.shape[1], Y.shape[1])),
            X.mean(0).astype(np.float64),
            Y.mean(0).astype(np.float64),
        )
    }
    backend = ridge.Backend("cpu", use_torch=use_torch)
    parts = [
        ridge.heldout_sums(
            {0: X[a : a + 100]},
            {1: Y[a : a + 100]},
            maps,
            backend,
            rows_per_block=30,
            docs=docs[a : a + 100],
        )
        for a in range(0, len(X), 100)
    ]
    d = ridge.tree_sum(parts, add=ridge.add_heldout)["doc"]
    m = maps[(0, 1)]
    for k, doc in enumerate(d["ids"]):
        r = docs == doc
        Xd, Yd = X[r].astype(np.float64), Y[r].astype(np.float64)
        e = np.linalg.norm((Xd - m.x_mean) @ m.W - (Yd - m.y_mean), axis=1)
        y = np.linalg.norm(Yd, axis=1)
        np.testing.assert_allclose(
            d["pair"][(0, 1)][k], [np.sum(e / y), e.sum(), (e * e).sum()], rtol=1e-10
        )
        np.testing.assert_allclose(
            d["target"][1][k], [r.sum(), y.sum(), ((Yd - m.y_mean) ** 2).sum()], rtol=1e-10
        )
        np.testing.assert_allclose(d["centred"][1][k], (Yd - m.y_mean).sum(0), rtol=1e-9, atol=1e-9)
    assert d["ids"].tolist() == sorted(set(docs.tolist()))


def test_torch_backend_statistics_equal_numpy():
    X, Y = _data(seed=6)
    part = np.random.default_rng(1).integers(-1, 2, len(X)).astype(np.int8)
    xs, ys = {0: X[:50].mean(0).astype(np.float64)}, {1: Y[:50].mean(0).astype(np.float64)}
    a = ridge.chunk_statistics({0: X}, {1: Y}, part, (xs, ys))
    b = ridge.chunk_statistics({0: X}, {1: Y}, part, (xs, ys), ridge.Backend("cpu", use_torch=True))
    for key in ("sx", "xx", "sy", "yy", "xy"):
        for k in a.view(key):
            np.testing.assert_allclose(b.view(key)[k], a.view(key)[k], rtol=1e-12, atol=1e-9)


def test_summary_hand_worked():
    # boundaries 0..3 both sides (L = 3); row 0 and column 0 are left out of the summary
    err = np.array(
        [[0.0, 0.9, 0.9, 0.9], [0.5, 0.1, 0.3, 0.5], [0.5, 0.4, 0.2, 0.3], [0.5, 0.6, 0.4, 0.1]]
    )
    s = ridge.summary(err, [0, 1, 2, 3], [0, 1, 2, 3], 3, 3)
    assert s.argmin_path == [1, 2, 3]
    assert s.spearman == pytest.approx(1.0)
    assert s.mean_depth_gap == pytest.approx(0.0)
    # row 1 over j = 1..3: errors 0.1, 0.3, 0.5; τ = 0.04; weights exp(0), exp(-5), exp(-10)
    w = np.exp([0.0, -5.0, -10.0])
    assert s.soft_depth[0] == pytest.approx((w @ [1 / 3, 2 / 3, 1.0]) / w.sum(), rel=1e-12)
    assert s.soft_depth_spread == pytest.approx(max(s.soft_depth) - min(s.soft_depth))
    flat = ridge.summary(np.array([[0.1, 0.2], [0.1, 0.3]]), [1, 2], [1, 2], 2, 2)
    assert flat.argmin_path == [1, 1] and flat.spearman is None and "constant" in flat.spearman_note
    # |1/2 - 1/2| and |1/2 - 2/2|: mean 0.25
    assert flat.mean_depth_gap == pytest.approx(0.25)


# -- the solve on another backend, factors shared by blocks, in-place sums ----------------


def _multi(n=900, d_s=10, d_t=6, seed=8):
    """Two source boundaries and three target boundaries of one token stream (float32)."""
    X, Y = _data(n=n, d_s=d_s, d_t=d_t, seed=seed)
    rng = np.random.default_rng(seed + 1)
    xs = {0: X, 3: (X @ rng.normal(size=(d_s, d_s)) + 2.0).astype(np.float32)}
    ys = {
        1: Y,
        2: (xs[3] @ rng.normal(size=(d_s, d_t)) + rng.normal(size=(n, d_t))).astype(np.float32),
        5: rng.normal(size=(n, d_t)).astype(np.float32),
    }
    part = np.where(np.arange(n) % 5 == 0, ridge.VAL, ridge.FIT).astype(np.int8)
    part[::17] = -1
    shifts = (
        {i: x[:40].astype(np.float64).mean(0) for i, x in xs.items()},
        {j: y[:40].astype(np.float64).mean(0) for j, y in ys.items()},
    )
    return xs, ys, part, shifts


def test_in_place_sums_over_chunks_equal_direct_sums_and_torch_tensors():
    torch = pytest.importorskip("torch")
    xs, ys, part, (xsh, ysh) = _multi()
    d_s, d_t = 10, 6
    acc = ridge.Statistics.zeros(tuple(xs), tuple(ys), d_s, d_t)
    work = {}
    for a in range(0, len(part), 128):  # chunks into one accumulator, buffers reused
        ridge.chunk_statistics(
            {i: x[a : a + 128] for i, x in xs.items()},
            {j: y[a : a + 128] for j, y in ys.items()},
            part[a : a + 128],
            (xsh, ysh),
            into=acc,
            work=work,
        )
    tb = ridge.Backend("cpu", use_torch=True)
    tacc = ridge.Statistics.zeros(tuple(xs), tuple(ys), d_s, d_t, tb)
    for a in range(0, len(part), 300):  # torch tensors in, accumulated on the (torch) device
        ridge.chunk_statistics(
            {i: torch.from_numpy(x[a : a + 300]) for i, x in xs.items()},
            {j: torch.from_numpy(y[a : a + 300]) for j, y in ys.items()},
            part[a : a + 300],
            (xsh, ysh),
            tb,
            into=tacc,
        )
    tacc = tacc.numpy(tb)
    for p in (ridge.FIT, ridge.VAL):
        rows = part == p
        for st in (acc, tacc):
            assert st.n[p] == rows.sum()
            for i, x in xs.items():
                Xp = x[rows].astype(np.float64) - xsh[i]
                np.testing.assert_allclose(st.view("sx")[i][p], Xp.sum(0), rtol=1e-12, atol=1e-9)
                np.testing.assert_allclose(st.view("xx")[i][p], Xp.T @ Xp, rtol=1e-12, atol=1e-9)
                for j, y in ys.items():
                    Yp = y[rows].astype(np.float64) - ysh[j]
                    np.testing.assert_allclose(st.pair(i, j)[p], Xp.T @ Yp, rtol=1e-12, atol=1e-9)
            for j, y in ys.items():
                Yp = y[rows].astype(np.float64) - ysh[j]
                np.testing.assert_allclose(st.view("sy")[j][p], Yp.sum(0), rtol=1e-12, atol=1e-9)
                np.testing.assert_allclose(st.view("yy")[j][p], (Yp**2).sum(), rtol=1e-12)


def _solved_stats():
    xs, ys, part, (xsh, ysh) = _multi()
    return ridge.chunk_statistics(xs, ys, part, (xsh, ysh)), xsh, ysh


def test_solve_on_torch_equals_numpy():
    """The GPU's code path (torch eigh and products), run on the CPU, against numpy: the two
    LAPACK eigensolvers agree to ~1e-13 relative on these well-conditioned scatters, so the
    maps and validation errors to rtol 1e-9, the chosen α exactly."""
    pytest.importorskip("torch")
    st, xsh, ysh = _solved_stats()
    grid = [1e-5, 1e-3, 1e-1, 1.0]
    a = ridge.solve_block(st, grid, xsh, ysh)
    b = ridge.solve_block(st, grid, xsh, ysh, ridge.Backend("cpu", use_torch=True))
    assert a.keys() == b.keys() and len(a) == 6
    for k in a:
        assert a[k].alpha_rel == b[k].alpha_rel
        np.testing.assert_allclose(b[k].alpha, a[k].alpha, rtol=1e-12)
        np.testing.assert_allclose(b[k].val_sse, a[k].val_sse, rtol=1e-9)
        np.testing.assert_allclose(b[k].W, a[k].W, rtol=1e-9, atol=1e-12 * np.abs(a[k].W).max())
        np.testing.assert_allclose(b[k].c, a[k].c, rtol=1e-9, atol=1e-9)


class _CountingBackend(ridge.Backend):
    def __init__(self):
        super().__init__("cpu")
        self.eighs = 0

    def eigh(self, C):
        self.eighs += 1
        return super().eigh(C)


def test_blocks_of_one_source_block_decompose_each_source_once():
    """Two target blocks sharing the factors dict: two eigendecompositions per source boundary
    (fit part, fit + validation) in all, and the maps of solving the whole grid at once
    (rtol 1e-10: only the column split of the products differs)."""
    st, xsh, ysh = _solved_stats()
    grid = [1e-4, 1e-2, 1.0]
    whole = ridge.solve_block(st, grid, xsh, ysh)
    be, factors, blocked = _CountingBackend(), {}, {}
    for J in ((1,), (2, 5)):
        cols = np.concatenate(
            [np.arange(st.target.index(j) * 6, st.target.index(j) * 6 + 6) for j in J]
        )
        sub = ridge.Statistics(
            st.source,
            J,
            st.n,
            st.sx,
            st.xx,
            st.sy[:, [st.target.index(j) for j in J]],
            st.yy[:, [st.target.index(j) for j in J]],
            st.xy[:, :, cols],
        )
        blocked.update(ridge.solve_block(sub, grid, xsh, ysh, be, factors))
    assert be.eighs == 2 * len(st.source)
    for k in whole:
        assert blocked[k].alpha_rel == whole[k].alpha_rel
        np.testing.assert_allclose(blocked[k].W, whole[k].W, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(blocked[k].val_sse, whole[k].val_sse, rtol=1e-10)


def test_spearman_equals_scipy_with_ties():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(11)
    for _ in range(100):
        n = int(rng.integers(2, 25))
        a, b = rng.integers(0, 4, n).astype(float), rng.normal(size=n)
        if len(set(a)) < 2:
            continue
        np.testing.assert_allclose(ridge.spearman(a, b), spearmanr(a, b).statistic, rtol=1e-12)
    assert np.isnan(ridge.spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
