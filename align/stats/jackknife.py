"""The delete-a-group jackknife behind the streamed similarity measures' intervals
(docs/methods.md, Similarity measures, Intervals): a statistic recomputed with each group of
units left out in turn, its standard error from the spread of those recomputations, and a
t interval around the value from every unit (Quenouille 1956, Tukey 1958; for groups of
units Kott 2001, "The delete-a-group jackknife", Journal of Official Statistics 17; Efron &
Tibshirani 1993, An Introduction to the Bootstrap, ch. 11).

With G groups, θ̂ the statistic of every unit and θ_(g) the statistic without group g,

    θ̄ = (1/G) Σ_g θ_(g),   se² = (G − 1)/G · Σ_g (θ_(g) − θ̄)²
    interval = θ̂ ± t_{(1 + level)/2, G − 1} · se

(the t quantile from `scipy.stats.t`), clipped to the statistic's range where it has one. Its
cost is G recomputations, whatever the bootstrap's resample count.
"""

from __future__ import annotations

import functools

import numpy as np

LEVEL = 0.95
MIN_GROUPS = 3  # below it the interval is NaN (at G = 2, t has 1 degree of freedom: ±12.7 se)


def leave_one_out(groups: int) -> np.ndarray:
    """The weights of the G delete-a-group recomputations: ones with a 0 at group g.

    Parameters
    ----------
    groups : int
        G, the groups holding units.

    Returns
    -------
    numpy.ndarray
        (G, G) float64: row g weighs every group 1 but group g, 0.
    """
    return 1.0 - np.eye(groups)


def standard_error(left_out: np.ndarray) -> float:
    """The jackknife standard error of G recomputations θ_(g).

    se = sqrt((G − 1)/G · Σ_g (θ_(g) − θ̄)²), θ̄ their mean.

    Parameters
    ----------
    left_out : numpy.ndarray
        (G,) the statistic without each group in turn.

    Returns
    -------
    float
        The standard error; NaN where any θ_(g) is not finite.
    """
    v = np.asarray(left_out, dtype=np.float64)
    G = len(v)
    return float(np.sqrt((G - 1) / G * np.sum((v - v.mean()) ** 2)))


def interval(
    value: float, left_out: np.ndarray, bounds: tuple | None = None, level: float = LEVEL
) -> tuple:
    """The jackknife t interval θ̂ ± t_{(1 + level)/2, G − 1} · se, clipped to `bounds`.

    Parameters
    ----------
    value : float
        θ̂, the statistic of every unit.
    left_out : numpy.ndarray
        (G,) θ_(g), the statistic without group g, for each of the G groups.
    bounds : tuple, optional
        (lowest, highest) the statistic can take; None: no clipping.
    level : float
        The coverage the interval is built for (0.95).

    Returns
    -------
    tuple of float
        (low, high); (NaN, NaN) with fewer than MIN_GROUPS groups or any θ_(g) or θ̂ not
        finite.
    """
    v = np.asarray(left_out, dtype=np.float64)
    G = len(v)
    if G < MIN_GROUPS or not np.all(np.isfinite(v)) or not np.isfinite(value):
        return (np.nan, np.nan)
    half = _t_quantile((1.0 + level) / 2.0, G - 1) * standard_error(v)
    low, high = value - half, value + half
    if bounds is not None:
        low, high = np.clip([low, high], bounds[0], bounds[1])
    return (float(low), float(high))


def grid(value: np.ndarray, left_out: np.ndarray, bounds: tuple) -> tuple:
    """`interval` of every cell of a grid, clipped to `bounds`.

    Parameters
    ----------
    value : numpy.ndarray
        (n_source, n_target) θ̂ of each cell.
    left_out : numpy.ndarray
        (G, n_source, n_target) θ_(g) of each cell, for each of the G groups.
    bounds : tuple
        (lowest, highest) the statistic can take.

    Returns
    -------
    tuple of numpy.ndarray
        (low, high), each (n_source, n_target).
    """
    low, high = np.empty(value.shape), np.empty(value.shape)
    for a, b in np.ndindex(value.shape):
        low[a, b], high[a, b] = interval(value[a, b], left_out[:, a, b], bounds)
    return low, high


@functools.cache
def _t_quantile(q: float, dof: int) -> float:
    """Student's t quantile (`scipy.stats.t.ppf`), once per (q, dof): every cell of a grid
    asks for the same one."""
    from scipy import stats

    return float(stats.t.ppf(q, dof))
