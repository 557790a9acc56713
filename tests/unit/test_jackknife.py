"""The delete-a-group jackknife (align.stats.jackknife) on hand-worked cases: the jackknife of
a mean over groups of equal size is the t interval of the group means (scipy.stats.t.interval
on them), its standard error the group means' standard error; the clipping to a range; NaN
with too few groups or an undefined recomputation; the weights of the recomputations."""

from __future__ import annotations

import numpy as np
from scipy import stats

RTOL = 1e-12


def _groups(G=7, size=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(loc=2.0, scale=3.0, size=(G, size))


def test_jackknife_of_a_mean_is_the_t_interval_of_the_group_means():
    """θ = the mean of every unit; θ_(g) = the mean without group g = the mean of the other
    groups' means (equal sizes), so se² = (G − 1)/G Σ (θ_(g) − θ̄)² = s²/G, s² the group
    means' sample variance, and θ̂ ± t se is scipy's t interval of the group means."""
    from align.stats import jackknife

    units = _groups()
    G = len(units)
    value = units.mean()
    left_out = np.array([np.delete(units, g, axis=0).mean() for g in range(G)])
    means = units.mean(1)
    want = stats.t.interval(0.95, G - 1, loc=means.mean(), scale=stats.sem(means))
    np.testing.assert_allclose(jackknife.interval(value, left_out), want, rtol=RTOL)
    np.testing.assert_allclose(jackknife.standard_error(left_out), stats.sem(means), rtol=RTOL)


def test_a_hand_worked_interval_and_its_clipping():
    """G = 4, θ_(g) = 1, 2, 3, 4: θ̄ = 2.5, Σ (θ_(g) − θ̄)² = 5, se² = 3/4 · 5 = 3.75;
    t_{0.975, 3} = 3.182446305284263; θ̂ = 0.5 gives 0.5 ± 6.162699..., cut to [0, 1]."""
    from align.stats import jackknife

    se = np.sqrt(3.75)
    half = 3.182446305284263 * se
    got = jackknife.interval(0.5, np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_allclose(got, (0.5 - half, 0.5 + half), rtol=RTOL)
    assert jackknife.interval(0.5, np.array([1.0, 2.0, 3.0, 4.0]), (0.0, 1.0)) == (0.0, 1.0)
    low, high = jackknife.interval(0.9, np.array([0.9, 0.91, 0.89, 0.9]), (0.0, 1.0))
    assert high < 1.0  # 0.9 + half is below 1: nothing cut, the interval symmetric
    np.testing.assert_allclose(0.9 - low, high - 0.9, rtol=RTOL)


def test_too_few_groups_or_an_undefined_recomputation_gives_nan():
    from align.stats import jackknife

    assert all(np.isnan(jackknife.interval(1.0, np.array([1.0, 2.0]))))  # G = 2 < 3
    assert all(np.isnan(jackknife.interval(1.0, np.array([1.0, np.nan, 2.0]))))
    assert all(np.isnan(jackknife.interval(np.nan, np.array([1.0, 3.0, 2.0]))))


def test_leave_one_out_weighs_every_group_but_one():
    from align.stats import jackknife

    w = jackknife.leave_one_out(4)
    np.testing.assert_array_equal(w, [[0, 1, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]])
