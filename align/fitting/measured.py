"""The similarity measures of a fit, after the held-out pass (both routes): each pair's value
and group-bootstrap interval from the streamed sums (`measures.streamed`), and the result's
arrays `<measure>`, `<measure>_low`, `<measure>_high` over (source_boundary,
target_boundary) with each measure's direction and path (docs/methods.md, Similarity
measures)."""

from __future__ import annotations

import numpy as np

from align.measures import MEASURES, SIMILARITY, streamed, variable
from align.stats import bootstrap
from align.stats.bootstrap import Resampling

SCHEME = (
    "groups g = heldout_doc index mod {G} ({present} of them holding rows); resample b draws "
    "numpy.random.default_rng(seed).integers(0, {present}, size=(resamples, {present})) groups "
    "and recomputes every measure from the drawn groups' sums"
)


def measure_groups_of(spec) -> int:
    """Groups of held-out documents the streamed measures' sums keep for a `FitSpec`: 0
    without a streamed measure, 1 without the bootstrap, else MEASURE_GROUPS (the memory
    planner's count, `budget.measure_bytes`)."""
    if not spec.streamed:
        return 0
    return streamed.MEASURE_GROUPS if spec.bootstrap else 1


def group_weights(present: int, resampling: Resampling) -> np.ndarray:
    """(resamples, present) multiplicities of the groups holding rows, drawn as the document
    bootstrap draws documents (`bootstrap.indices`, the fit's seed)."""
    return bootstrap.multiplicity(bootstrap.indices(present, resampling), present)


def pair_measures(heldout: dict, resampling: Resampling | None) -> dict:
    """{(i, j): {name: (value, low, high)}} of every pair of a block's held-out sums
    (`graph.heldout_of` with measures): the value from all rows; low, high the 95%
    percentile interval over resampled groups of held-out documents (NaN without
    `resampling`, or with fewer than two groups holding rows). {} without measures."""
    if "measures" not in heldout:
        return {}
    names, sums = heldout["measures"]["names"], heldout["measures"]["sums"]
    first = next(iter(sums["target"].values()))
    keep = np.flatnonzero(first["n"] > 0)  # groups holding rows: the units resampled
    w = group_weights(len(keep), resampling) if resampling is not None and len(keep) > 1 else None
    out = {}
    for (i, j), pair in sums["pair"].items():
        x, y = sums["source"][i], sums["target"][j]
        value = streamed.pair_measures(
            streamed.weighted(x), streamed.weighted(y), streamed.weighted(pair), names, (i, j)
        )
        if w is None:
            out[(i, j)] = {n: (value[n], np.nan, np.nan) for n in names}
            continue
        sub = [{f: v[keep] for f, v in s.items()} for s in (x, y, pair)]
        boot = streamed.resampled(*sub, names, w)
        out[(i, j)] = {}
        for n in names:
            lo, hi = bootstrap.percentile_interval(boot[n][:, None])
            out[(i, j)][n] = (value[n], float(lo[0]), float(hi[0]))
    return out


def groups_present(heldout: dict) -> int:
    """How many groups of held-out documents hold rows (the measures' bootstrap units)."""
    first = next(iter(heldout["measures"]["sums"]["target"].values()))
    return int(np.sum(first["n"] > 0))


def measure_arrays(results: dict, src_boundaries, tgt_boundaries, names) -> dict:
    """{array name: (S, T)} `<measure>`, `<measure>_low`, `<measure>_high` of the streamed
    `names` from each pair's `PairResult.measures`."""
    shape = (len(src_boundaries), len(tgt_boundaries))
    out = {}
    for n in names:
        for k, suffix in enumerate(("", "_low", "_high")):
            v = np.full(shape, np.nan)
            for a, i in enumerate(src_boundaries):
                for b, j in enumerate(tgt_boundaries):
                    v[a, b] = results[(i, j)].measures[n][k]
            out[variable(n) + suffix] = v
    return out


def path(values: np.ndarray, direction: str, tgt_boundaries) -> list:
    """The target boundary of each source row a measure picks: the row's argmax for a
    similarity, its argmin for a distance (first on ties)."""
    pick = np.argmax if direction == SIMILARITY else np.argmin
    return [int(tgt_boundaries[k]) for k in pick(values, axis=1)]


def measures_summary(arrays: dict, names, tgt_boundaries, groups: int | None) -> dict:
    """The result's attrs["summary"]["measures"]: per measure its direction, array and path
    (`path`), and the interval's scheme."""
    out = {
        n: {
            "direction": MEASURES[n],
            "array": variable(n),
            "path": path(arrays[variable(n)], MEASURES[n], tgt_boundaries),
        }
        for n in names
    }
    out["rows"] = "held-out documents (the rows ridge's held-out error is measured on)"
    if groups is not None:
        out["interval"] = SCHEME.format(G=streamed.MEASURE_GROUPS, present=groups)
    return out
