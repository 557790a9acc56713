"""The permutation null and its calibration (align.measures.calibration, and the null of
align.measures.rows): a hand-worked case of τ, the calibrated score and both p-values (the
formulas of arXiv 2602.14486's Algorithms 1 and 2), the permutations' scheme, the null
against a plain loop over re-paired rows, and over seeds of independent X and Y: calibrated
scores near 0, p-values uniform, and the family correction holding its level where the
uncorrected best cell does not."""

from __future__ import annotations

import numpy as np
import pytest


def test_hand_worked_similarity_and_distance():
    """K = 9 null scores 0.1..0.9 (the first of two cells): τ is the ⌈0.95·10⌉ = 10th smallest
    of the 10 pooled scores. Observed 0.95: τ = 0.95, calibrated 0 (it does not beat τ),
    p = 1/10. The second cell (its null 0.2..1.0) observes 0.5: p = (1 + 6)/10; so the
    family's null maxima are 0.2..1.0 and p_family(0.95) = (1 + 1)/10."""
    from align.measures.calibration import summarise

    null = np.stack([np.arange(1, 10) / 10, np.arange(2, 11) / 10], axis=1)[:, None, :]
    observed = np.array([[0.95, 0.5]])
    got = summarise(observed, null, "similarity", 1.0)
    np.testing.assert_allclose(got.critical, [[0.95, 1.0]])
    np.testing.assert_allclose(got.calibrated, [[0.0, 0.0]])
    np.testing.assert_allclose(got.p, [[0.1, 0.7]])
    np.testing.assert_allclose(got.p_family, [[0.2, 0.7]])
    np.testing.assert_allclose(got.null_mean, [[0.5, 0.6]])
    np.testing.assert_allclose(got.null_std, [[np.std(np.arange(1, 10) / 10)] * 2])
    # K = 39: τ is the 38th smallest of 40; observed 0.9 beats a null of 0.01..0.39:
    # τ = 0.38, calibrated (0.9 − 0.38)/(1 − 0.38)
    null = (np.arange(1, 40) / 100)[:, None, None]
    got = summarise(np.array([[0.9]]), null, "similarity", 1.0)
    np.testing.assert_allclose(got.calibrated, [[(0.9 - 0.38) / (1 - 0.38)]], rtol=1e-12)
    # a distance: read as −d against the ideal 0; d = 0.1 against a null 1.01..1.39
    got = summarise(np.array([[0.1]]), 1 + null, "distance", 0.0)
    np.testing.assert_allclose(got.critical, [[1.02]])
    np.testing.assert_allclose(got.calibrated, [[(1.02 - 0.1) / 1.02]], rtol=1e-12)
    np.testing.assert_allclose(got.p, [[1 / 40]])
    np.testing.assert_allclose(got.null_mean, [[1.2]])


def test_permutations_move_whole_documents():
    """With ≥ 8 documents each draw lays the target's documents out whole, in their own
    row order, in an order of documents drawn by default_rng(seed).permutation; with fewer,
    every row moves alone (default_rng(seed).permutation(M))."""
    from align.measures.calibration import draw_permutations

    rng = np.random.default_rng(0)
    docs = rng.permutation(np.repeat(np.arange(10), rng.integers(1, 6, 10)))
    perms, scheme = draw_permutations(docs, 30, 4)
    assert scheme == "documents" and perms.shape == (30, len(docs))
    order = np.argsort(docs, kind="stable")
    sigma_rng = np.random.default_rng(4)
    for perm in perms:
        assert sorted(perm) == list(range(len(docs)))
        sigma = sigma_rng.permutation(10)
        want = np.concatenate([np.flatnonzero(docs == d) for d in sigma])
        np.testing.assert_array_equal(perm[order], want)
    few = np.repeat(np.arange(3), 4)
    perms, scheme = draw_permutations(few, 5, 9)
    assert scheme == "rows"
    g = np.random.default_rng(9)
    np.testing.assert_array_equal(perms, [g.permutation(12) for _ in range(5)])


def test_null_equals_a_plain_loop_over_re_paired_rows():
    """Null draw q of cell (i, j): the measure of (x_i, y_j[perm_q]), one perm for every
    target boundary. Against numpy written from the formulas, 1e-10."""
    from align.measures.calibration import draw_permutations
    from align.measures.rows import null_values

    rng = np.random.default_rng(1)
    xs = {0: rng.normal(size=(36, 5))}
    ys = {
        2: xs[0] @ rng.normal(size=(5, 4)) + rng.normal(size=(36, 4)),
        5: rng.normal(size=(36, 3)),
    }
    docs = np.repeat(np.arange(9), 4)
    perms, _ = draw_permutations(docs, 7, 3)
    got = null_values(xs, ys, perms, ("cka", "mknn"), k=3)

    def cka(x, y):
        x, y = x - x.mean(0), y - y.mean(0)
        return np.linalg.norm(x.T @ y) ** 2 / np.linalg.norm(x.T @ x) / np.linalg.norm(y.T @ y)

    def mknn(x, y, k=3):
        def nb(a):
            a = a / np.linalg.norm(a, axis=1, keepdims=True)
            s = a @ a.T
            np.fill_diagonal(s, -np.inf)
            return [set(np.argsort(-r, kind="stable")[:k]) for r in s]

        return np.mean([len(p & q) / k for p, q in zip(nb(x), nb(y), strict=True)])

    for q, perm in enumerate(perms):
        for b, y in enumerate(ys.values()):
            assert abs(got["cka"][q, 0, b] - cka(xs[0], y[perm])) <= 1e-10
            assert abs(got["mknn"][q, 0, b] - mknn(xs[0], y[perm])) <= 1e-10


def independent_summaries(seeds, grid, measures, permutations=19, m=32):
    """The calibration of each seed's independent X (grid[0] boundaries) and Y (grid[1]),
    rows i.i.d. normal, 8 documents of 4 rows, K = permutations."""
    from align.measures.calibration import draw_permutations, summarise
    from align.measures.rows import ROW_MEASURES, null_values, observed_values

    docs = np.repeat(np.arange(8), m // 8)
    out = {n: [] for n in measures}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        xs = {i: rng.normal(size=(m, 6)) for i in range(grid[0])}
        ys = {j: rng.normal(size=(m, 5)) for j in range(grid[1])}
        value = observed_values(xs, ys, measures, k=4)
        perms, _ = draw_permutations(docs, permutations, seed + 1000)
        null = null_values(xs, ys, perms, measures, k=4)
        for n in measures:
            out[n].append(summarise(value[n], null[n], *ROW_MEASURES[n]))
    return out


def test_independent_rows_calibrate_near_zero_with_uniform_p_values():
    """200 seeds of independent X and Y, K = 19: p is uniform on {1/20, ..., 1} under this
    null, so P(p ≤ 0.25) = P(p ≤ 0.5) − 0.25 = 0.25; each observed fraction is within 0.1 of
    its share (binomial sd 0.031-0.035: 3 sd). calibrated is 0 unless the score beats the
    null's 95% critical value: nonzero in at most 12% of seeds (5% expected, 3 sd = 4.6
    points), and its mean below 0.05."""
    from align.measures.rows import ROW_MEASURES

    out = independent_summaries(range(200), (1, 1), tuple(ROW_MEASURES))
    for n, summaries in out.items():
        p = np.array([s.p[0, 0] for s in summaries])
        cal = np.array([s.calibrated[0, 0] for s in summaries])
        assert abs(np.mean(p <= 0.25) - 0.25) <= 0.1, (n, np.mean(p <= 0.25))
        assert abs(np.mean(p <= 0.5) - 0.5) <= 0.1, (n, np.mean(p <= 0.5))
        assert np.mean(cal > 0) <= 0.12 and cal.mean() < 0.05, (n, np.mean(cal > 0), cal.mean())


def test_family_correction_holds_its_level_over_a_grid():
    """A 3 × 3 grid of independent boundaries, 150 seeds, K = 19: the best cell's
    p_family ≤ 0.25 in about 25% of seeds (within 0.12), while the best cell's uncorrected p
    ≤ 0.25 in far more (≥ 45%): the depth confound the correction removes."""
    out = independent_summaries(range(150), (3, 3), ("cka", "mknn"))
    for n, summaries in out.items():
        family = np.array([s.p_family.min() for s in summaries])
        plain = np.array([s.p.min() for s in summaries])
        assert abs(np.mean(family <= 0.25) - 0.25) <= 0.12, (n, np.mean(family <= 0.25))
        assert np.mean(plain <= 0.25) >= 0.45, (n, np.mean(plain <= 0.25))


def test_refuses_a_permutation_count_below_one():
    from align.errors import AlignError
    from align.measures.calibration import draw_permutations

    with pytest.raises(AlignError) as e:
        draw_permutations(np.arange(10), 0, 1)
    assert "\n" not in str(e.value) and "`permutations` 0" in str(e.value)
