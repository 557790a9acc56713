"""Every streamed measure of every boundary pair from the held-out sums (`streamed`): the
values (`pair_measures`), the jackknife's recomputation without one group from two sums
(`leave_group_out`) and from the groups' sums side by side (`resampled`). Each measure's
sums form is its `registry.Measure.sums`; each side is reduced and decomposed once for
every pair it is in (`prepare`). Symbols: i, j a source and a target boundary; g a group of
held-out documents, θ_(g) a measure without it; w the groups' weights (`streamed`'s G)."""

from __future__ import annotations

import numpy as np

from align.measures.registry import REGISTRY
from align.measures.streamed import Pair, Side, Sums, check_variance


def prepare(side: Side, names) -> Side:
    """The side with what the measures `names` read of it made (`registry.Measure.reads`),
    so that the pairs it is in, computed side by side, only read it."""
    if not side.has_variance:  # refused by its pairs (`check_variance`), never decomposed
        return side
    for name in names:
        for quantity in REGISTRY[name].reads:
            getattr(side, quantity)
    return side


def measures_of(pair: Pair, names) -> dict:
    """{name: value} of the measures `names` of one pair (no check)."""
    return {name: REGISTRY[name].sums(pair) for name in names}


def pair_measures(x: Side, y: Side, pair, names, where: tuple) -> dict:
    """{name: value} of the streamed measures `names` of one pair from its reduced sums
    (`streamed.PairSums` summed over groups), refused first without variance
    (`streamed.check_variance`)."""
    check_variance(x, y, where)
    return measures_of(Pair(x, y, pair), names)


def leave_group_out(total: Sums, group: Sums, names, each=None) -> dict:
    """{(i, j): {name: θ_(g)}}: every measure of every pair of `total` recomputed without
    the rows of one group g, the jackknife's recomputation from two one-group `row_sums`
    results: `total` of every held-out row and `group` of group g's rows alone,

        θ_(g) = f(sums(all rows) − sums(group g's rows)) = f(Σ_{h ≠ g} sums(group h)),

    the same sums as the weights 1 − e_g give over the G groups' sums (`resampled`), to
    round-off (a difference of two float64 sums, of order ε·‖sums‖), for every measure: the
    Frobenius-type (CKA, debiased CKA, procrustes-heldout) and the spectral (Procrustes'
    nuclear norm, CCA, SVCCA) alike, since the measures are recomputed from the sums
    themselves. Each side is reduced and decomposed once (`prepare`); a pair's difference
    is made when the pair is computed, so beyond the two inputs the sides and one pair's
    sums per worker are held. `each(f, items)` runs f over items ([f(x) for x in items] by
    default; the fit passes its threads). NaN where the rows left of a side have no
    variance."""
    each = each or (lambda f, items: [f(x) for x in items])
    xr = {i: Side(s.minus(group.source[i])) for i, s in total.source.items()}
    yr = {j: Side(s.minus(group.target[j])) for j, s in total.target.items()}
    each(lambda side: prepare(side, names), [*xr.values(), *yr.values()])

    def one(key):
        i, j = key
        with np.errstate(all="ignore"):
            if not (xr[i].has_variance and yr[j].has_variance):
                return {name: np.nan for name in names}
            pb = total.pair[key].minus(group.pair[key])
            return measures_of(Pair(xr[i], yr[j], pb), names)

    return dict(zip(total.pair, each(one, list(total.pair))))


def resampled(sums: Sums, names, w: np.ndarray) -> dict:
    """{(i, j): {name: (B,)}} every measure of every pair of `sums` (a `row_sums` result, or
    its groups' subset) on every weighting of groups: w (B, G) the weight of each group in
    each recomputation (the jackknife's: ones with a 0 at the group left out); each side
    reduced (and decomposed) once per row of w; NaN where a recomputation's rows of a side
    have no variance."""
    out = {key: {name: np.full(len(w), np.nan) for name in names} for key in sums.pair}
    for draw, weights in enumerate(w):
        xr = {i: Side(side.weighted(weights)) for i, side in sums.source.items()}
        yr = {j: Side(side.weighted(weights)) for j, side in sums.target.items()}
        with np.errstate(all="ignore"):
            for (i, j), pair in sums.pair.items():
                if xr[i].has_variance and yr[j].has_variance:
                    values = measures_of(Pair(xr[i], yr[j], pair.weighted(weights)), names)
                    for name in names:
                        out[(i, j)][name][draw] = values[name]
    return out
