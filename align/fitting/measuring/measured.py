"""The similarity measures of a fit, after the held-out pass (both routes): each pair's value
and delete-a-group jackknife interval from the streamed sums (`measures.streamed`), and the
result's arrays `<measure>`, `<measure>_low`, `<measure>_high` over (source_boundary,
target_boundary) with each measure's direction and path (docs/methods.md, Similarity
measures)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from align.fitting.runtime.tasks import threaded
from align.measures import MEASURES, SIMILARITY, pairs, streamed, variable
from align.measures.registry import REGISTRY
from align.measures.streamed import HeldSums, Side, Sums
from align.stats import jackknife
from align.stats.bootstrap import Resampling

SCHEME = (
    "delete-a-group jackknife over groups g = heldout_doc index mod {G} ({present} of them "
    "holding rows, G'): theta_(g) every measure recomputed from the sums of every group but g; "
    "se^2 = (G'-1)/G' * sum_g (theta_(g) - mean_g theta_(g))^2; 95% interval theta +- "
    "t_(0.975, G'-1) * se (scipy.stats.t), clipped to the measure's range; NaN with fewer than "
    "{least} groups holding rows"
)


def interval_scheme(present: int) -> str:
    """The streamed measures' interval as a result records it (attrs["summary"]["measures"]
    ["interval"]): SCHEME with the groups holding rows.

    Parameters
    ----------
    present : int
        G', the groups of held-out documents holding rows.

    Returns
    -------
    str
        The scheme in words and formulas.
    """
    return SCHEME.format(G=streamed.MEASURE_GROUPS, present=present, least=jackknife.MIN_GROUPS)


ROW_SCHEMES = {
    "jackknife": "delete-a-group jackknife over groups g = heldout_doc index mod {G} ({present} "
    "of them holding sampled rows, G'): theta_(g) the measure recomputed on the sampled rows of "
    "every group but g; se^2 = (G'-1)/G' * sum_g (theta_(g) - mean_g theta_(g))^2; 95% interval "
    "theta +- t_(0.975, G'-1) * se (scipy.stats.t), clipped to the measure's range; NaN with "
    "fewer than {least} groups holding sampled rows",
    "bootstrap": "percentile document bootstrap over {resamples} resamples of the sampled rows' "
    "documents: the 2.5 and 97.5 percentiles of the measure recomputed on the sampled rows, "
    "each as often as its document was drawn",
}


def row_interval_schemes(first, options: dict | None) -> dict:
    """{measure: its interval's scheme in words} of the row measures of one pair's
    `PairResult.sampled` that carry an interval (`rows.RowMeasure.interval`); `options`: the
    result's recorded options (the bootstrap's resample count, its sample's record)."""
    resamples = ((options or {}).get("sampled_rows") or {}).get("bootstrap_resamples")
    out = {}
    for n, m in (first.sampled or {}).items():
        if m.interval is None or n in (first.measures or {}):
            continue
        out[n] = ROW_SCHEMES[m.interval].format(
            G=streamed.MEASURE_GROUPS,
            present=len(m.groups or ()),
            least=jackknife.MIN_GROUPS,
            resamples=f"{resamples:,}" if resamples else "its",
        )
    return out


def interval_option(options: dict | None = None) -> dict:
    """What the measures' interval is, for the result's attrs["options"] ("measure_interval"):
    the method, the groups, the fewest groups it needs, its level, and the row measures'
    scheme (the recorded `options`' "measure_interval", `--measure-interval`: "jackknife" or
    "bootstrap"; the streamed measures' is the jackknife either way)."""
    row_measures = (options or {}).get("measure_interval")
    return {
        "method": "delete-a-group jackknife, t interval",
        "groups": f"heldout_doc index mod {streamed.MEASURE_GROUPS}",
        "min_groups": jackknife.MIN_GROUPS,
        "level": jackknife.LEVEL,
        "row_measures": row_measures or "jackknife",
    }


def has_intervals(first) -> bool:
    """Whether a pair's results (`PairResult`) carry measures' intervals: the streamed
    measures' jackknife, or a row measure's (`rows.RowMeasure.interval`)."""
    rows_ = any(getattr(m, "interval", None) for m in (first.sampled or {}).values())
    return first.measure_groups is not None or rows_


def interval_kind(name: str, first) -> str:
    """The words a result's `<measure>_low` and `_high` describe their interval with: the
    row measures' bootstrap where `name` was computed on the sampled rows under it, else the
    jackknife; first: one pair's `PairResult`."""
    row = (first.sampled or {}).get(name)
    if name not in (first.measures or {}) and getattr(row, "interval", None) == "bootstrap":
        return "percentile document-bootstrap interval on the sampled rows"
    return "delete-a-group jackknife (t) interval over groups of held-out documents"


def measure_groups_of(spec) -> int:
    """Groups of held-out documents the streamed measures' sums keep for a `FitSpec`: 0
    without a streamed measure, 1 without the bootstrap (no interval), else MEASURE_GROUPS
    (the jackknife's units; the memory planner's count, `budget.measure_bytes`)."""
    if not spec.streamed:
        return 0
    return streamed.MEASURE_GROUPS if spec.bootstrap else 1


HELDOUT_PROCRUSTES = "procrustes-heldout"  # the measure whose rotation the solve fits


def with_rotations(fitted: dict, stats, measures, threads: int | None = None) -> dict:
    """`fitted` ({(i, j): SolvedMap}) with each map's training Procrustes rotation
    (`SolvedMap.rotation`, `streamed.rotation` of the training rows' centred XᵀY from the
    reduced `ridge.Statistics`, every part of which is training) when `measures` holds
    procrustes-heldout; else `fitted` unchanged. The pairs' SVDs run on `threads` threads
    (`tasks.threaded`; None: this process's cores)."""
    if HELDOUT_PROCRUSTES not in measures:
        return fitted
    n = float(np.sum(stats.n))
    sx, sy = stats.view("sx"), stats.view("sy")

    def one(key):
        i, j = key
        C = stats.pair(i, j).sum(0) - np.outer(sx[i].sum(0), sy[j].sum(0)) / n
        return dataclasses.replace(fitted[key], rotation=streamed.rotation(C))

    return dict(zip(fitted, threaded(one, fitted, threads)))


def rotations_of(fitted: dict) -> dict | None:
    """{(i, j): rotation} of the maps that carry one (`with_rotations`), or None."""
    out = {k: m.rotation for k, m in fitted.items() if getattr(m, "rotation", None) is not None}
    return out or None


@dataclass(frozen=True, eq=False)
class Measured:
    """A streamed measure of one pair: θ̂ (`value`, from every held-out row), its jackknife
    interval (`low`, `high`), and the recomputations θ_(g) it was built from (`left_out`,
    (G',): the measure without group g's rows) with the groups' numbers (`groups`, (G',): g =
    held-out document index mod MEASURE_GROUPS); both None where no interval was computed.
    Reads as the tuple (value, low, high)."""

    value: float
    low: float
    high: float
    left_out: np.ndarray | None = None
    groups: tuple | None = None

    def __iter__(self):
        return iter((self.value, self.low, self.high))

    def __len__(self) -> int:
        return 3

    def __getitem__(self, k):
        return (self.value, self.low, self.high)[k]


def pair_measures(heldout: dict, resampling: Resampling | None, threads: int | None = None) -> dict:
    """{(i, j): {name: Measured}} of every pair of a block's held-out sums
    (`graph.heldout_of` with measures): the value θ̂ from all rows; low, high its 95%
    delete-a-group jackknife interval over the G' groups of held-out documents holding rows
    (`jackknife.interval` of θ_(g), the measure from every group but g, clipped to
    `registry.Measure.range`): NaN without `resampling` (the fit's --bootstrap 0), or with fewer
    than `jackknife.MIN_GROUPS` groups holding rows. {} without measures. Each side is
    reduced and decomposed once per recomputation, for all the pairs it is in: G' + 1
    evaluations in all, whatever the bootstrap's resample count. Sides, pairs and
    recomputations run side by side on `threads` threads (`tasks.threaded`; None: this
    process's cores)."""
    if "measures" not in heldout:
        return {}
    held: HeldSums = heldout["measures"]
    names, sums = held.names, held.sums
    keep = np.flatnonzero(sums.rows_per_group() > 0)  # groups holding rows: the units left out
    xr = {i: Side(s.weighted()) for i, s in sums.source.items()}
    yr = {j: Side(s.weighted()) for j, s in sums.target.items()}
    threaded(lambda side: pairs.prepare(side, names), [*xr.values(), *yr.values()], threads)

    def one(key):
        i, j = key
        return pairs.pair_measures(xr[i], yr[j], sums.pair[key].weighted(), names, key)

    value = dict(zip(sums.pair, threaded(one, sums.pair, threads)))
    if held.left_out is not None:  # recomputed by group passes, one group at a time
        keep = np.asarray(held.groups if held.groups is not None else range(len(held.left_out)))
    if resampling is None or len(keep) < jackknife.MIN_GROUPS:
        return {k: {n: Measured(v[n], np.nan, np.nan) for n in names} for k, v in value.items()}
    if held.left_out is not None:
        runs = held.left_out
        left_out = {k: {n: np.array([r[k][n] for r in runs]) for n in names} for k in value}
        return _intervals(value, left_out, names, keep)
    sub = sums.groups(keep)
    w = jackknife.leave_one_out(len(keep))
    runs = threaded(lambda b: pairs.resampled(sub, names, w[b : b + 1]), range(len(w)), threads)
    left_out = {k: {n: np.concatenate([r[k][n] for r in runs]) for n in names} for k in value}
    return _intervals(value, left_out, names, keep)


def _intervals(value: dict, left_out: dict, names, groups) -> dict:
    """{(i, j): {name: Measured}}: `jackknife.interval` of each value and its G'
    recomputations (without each of `groups` in turn), clipped to the measure's range
    (`registry.Measure.range`)."""
    groups = tuple(int(g) for g in groups)

    def one(n, v, lo):
        return Measured(v, *jackknife.interval(v, lo, REGISTRY[n].range), lo, groups)

    return {k: {n: one(n, v[n], left_out[k][n]) for n in names} for k, v in value.items()}


def left_out_values(measures: HeldSums, group: Sums, threads: int | None = None) -> dict:
    """{(i, j): {name: θ_(g)}}: the jackknife's recomputation without one group g, from a
    block's one-group measure sums (`measures`, of every held-out row) and group g's own
    (`group`, a one-group `streamed.row_sums` result of its rows): `pairs.leave_group_out`,
    the sides and pairs on `threads` threads (`tasks.threaded`)."""
    return pairs.leave_group_out(
        measures.sums, group, measures.names, lambda f, xs: threaded(f, xs, threads)
    )


def groups_present(heldout: dict) -> int:
    """How many groups of held-out documents hold rows (the units the measures' jackknife
    leaves out in turn)."""
    held: HeldSums = heldout["measures"]
    if held.left_out is not None:
        return len(held.left_out)
    return int(np.sum(held.sums.rows_per_group() > 0))


FAMILY_LEVEL = 0.05  # a cell survives when its family-wise p-value is below this
CALIBRATION = ("null_mean", "null_std", "calibrated", "p", "p_family")  # from the sampled rows


def measure_arrays(results: dict, src_boundaries, tgt_boundaries) -> tuple:
    """(names, {array name: (S, T)}): every measure the pairs hold, in MEASURES order, and its
    arrays: `<measure>`, `<measure>_low`, `<measure>_high` (a streamed measure's from all the
    held-out rows, `PairResult.measures`; a row measure's from the sampled rows), and from the
    sampled rows (`PairResult.sampled`, `rows.RowMeasure` cells) `<measure>_null_mean`,
    `_null_std`, `_calibrated`,
    `_p`, `_p_family`, plus `<measure>_sampled`, a streamed measure's value on the sample."""
    first = results[(src_boundaries[0], tgt_boundaries[0])]
    streamed_, sampled_ = first.measures or {}, first.sampled or {}
    names = tuple(n for n in MEASURES if n in streamed_ or n in sampled_)
    shape = (len(src_boundaries), len(tgt_boundaries))

    def grid(get):
        v = np.full(shape, np.nan)
        for a, i in enumerate(src_boundaries):
            for b, j in enumerate(tgt_boundaries):
                v[a, b] = get(results[(i, j)])
        return v

    out = {}
    for n in names:
        base = variable(n)
        for k, suffix in enumerate(("", "_low", "_high")):
            if n in streamed_:
                out[base + suffix] = grid(lambda r, n=n, k=k: r.measures[n][k])
            else:
                f = ("value", "low", "high")[k]
                out[base + suffix] = grid(lambda r, n=n, f=f: getattr(r.sampled[n], f))
        if n in sampled_:
            for f in CALIBRATION:
                out[f"{base}_{f}"] = grid(lambda r, n=n, f=f: getattr(r.sampled[n], f))
            if n in streamed_:
                out[base + "_sampled"] = grid(lambda r, n=n: r.sampled[n].value)
    return names, out


GROUP_DIM = "measure_group"  # the jackknife's groups of held-out documents, in a result
# The row measures' groups where they are not the streamed measures' (a sample that misses a
# group of held-out documents): their `_left_out` arrays then lie over a dimension of their own.
SAMPLED_GROUP_DIM = "sampled_measure_group"


def left_out_arrays(results: dict, src_boundaries, tgt_boundaries) -> dict:
    """{variable: (dims, array)} of every measure's jackknife recomputations, for the result:
    `<measure>_left_out` over (source_boundary, target_boundary, measure_group), θ_(g) of each
    pair without group g, and the coordinate `measure_group` (g: held-out document index mod
    MEASURE_GROUPS, the groups holding rows); a row measure's (mknn, cknna, rsa under the
    jackknife, `rows.RowMeasure.left_out`: without group g's sampled rows) over the groups
    holding sampled rows, `measure_group` where they are the streamed measures' groups, else
    `sampled_measure_group`. {} where no measure kept recomputations. `align compare
    --measure` reads them for the paired difference of two results."""
    first = results[(src_boundaries[0], tgt_boundaries[0])]
    kept = {
        n: (m.left_out, m.groups, "measures")
        for n, m in (first.measures or {}).items()
        if getattr(m, "left_out", None) is not None
    }
    for n, m in (first.sampled or {}).items():
        if n not in kept and m.left_out is not None:
            kept[n] = (m.left_out, m.groups, "sampled")
    if not kept:
        return {}
    out = {}
    dim_of = {}
    for n in (n for n in MEASURES if n in kept):
        _, groups, where = kept[n]
        groups = tuple(int(g) for g in groups)
        dim = next((d for d, (_, g) in out.items() if tuple(g) == groups), None)
        if dim is None:
            dim = GROUP_DIM if GROUP_DIM not in out else SAMPLED_GROUP_DIM
            out[dim] = ((dim,), np.asarray(groups, np.int64))
        dim_of[n] = (dim, where, len(groups))
    arrays = {}
    for n, (dim, where, count) in dim_of.items():
        v = np.full((len(src_boundaries), len(tgt_boundaries), count), np.nan)
        for a, i in enumerate(src_boundaries):
            for b, j in enumerate(tgt_boundaries):
                v[a, b] = getattr(results[(i, j)], where)[n].left_out
        arrays[variable(n) + "_left_out"] = (("source_boundary", "target_boundary", dim), v)
    return out | arrays


def path(values: np.ndarray, direction: str, tgt_boundaries) -> list:
    """The target boundary of each source row a measure picks: the row's argmax for a
    similarity, its argmin for a distance (first on ties)."""
    pick = np.argmax if direction == SIMILARITY else np.argmin
    return [int(tgt_boundaries[k]) for k in pick(values, axis=1)]


def measures_summary(
    arrays: dict, names, tgt_boundaries, groups: int | None, row_schemes: dict | None = None
) -> dict:
    """The result's attrs["summary"]["measures"]: per measure its direction, array, path
    (`path`) and interval's scheme ("interval": the streamed measures' jackknife with `groups`
    holding rows, or a row measure's of `row_schemes`, `row_interval_schemes`), and the
    streamed measures' scheme once ("interval")."""
    out = {}
    row_schemes = row_schemes or {}
    for n in names:
        picked = path(arrays[variable(n)], MEASURES[n], tgt_boundaries)
        out[n] = {"direction": MEASURES[n], "array": variable(n), "path": picked}
        if n in row_schemes:
            out[n]["interval"] = row_schemes[n]
        elif groups is not None and n != "ridge":
            out[n]["interval"] = interval_scheme(groups)
        p_family = arrays.get(variable(n) + "_p_family")
        if p_family is not None:  # which cells, and whether the path, beat the grid's null
            cols = [list(tgt_boundaries).index(j) for j in picked]
            survive = p_family < FAMILY_LEVEL
            out[n]["cells_surviving"] = int(survive.sum())
            out[n]["path_surviving"] = bool(all(survive[a, b] for a, b in enumerate(cols)))
    if any("cells_surviving" in v for v in out.values()):
        out["surviving"] = (
            f"cells with p_family < {FAMILY_LEVEL} (the correction for reading the best of the "
            "grid); the path survives when every one of its cells does"
        )
    out["rows"] = "held-out documents (the rows ridge's held-out error is measured on)"
    if groups is not None:
        out["interval"] = interval_scheme(groups)
    return out
