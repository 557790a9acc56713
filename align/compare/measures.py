"""Alignment results compared on one similarity measure of `align fit --measures` (`align
compare --measure NAME`): each result's path on that measure's matrix, picked by its
direction (a similarity's row argmax, a distance's row argmin: `align.measures.MEASURES`),
the mean of the measure along the path (the closer of two results is the one with the
larger mean for a similarity, the smaller for a distance), the path's Spearman correlation
with depth and mean depth gap, and, where the fit calibrated the measure, the cells and the
path that beat the grid's permutation null (docs/methods.md, Similarity measures)."""

from __future__ import annotations

import numpy as np

from align.compare import checks
from align.compare.series import Comparison, Series
from align.errors import InputError
from align.fitting.measuring.measured import FAMILY_LEVEL
from align.fitting.results.uncertainty import path_statistics
from align.measures import MEASURES, SIMILARITY, variable
from align.measures.registry import REGISTRY
from align.names import labelled
from align.ridge.matrix import spearman
from align.stats import jackknife


def pick_of(direction: str) -> str:
    """ "argmax" for a similarity, "argmin" for a distance: how a row's closest target
    boundary is picked."""
    return "argmax" if direction == SIMILARITY else "argmin"


def held_measures(ds) -> list:
    """The measures an alignment result holds (attrs["summary"]["measures"] records with
    their array present), in MEASURES order."""
    records = (ds.attrs.get("summary") or {}).get("measures") or {}
    return [
        n for n in MEASURES if isinstance(records.get(n), dict) and records[n].get("array") in ds
    ]


def check_measure(name: str, kind: str, items) -> None:
    """Refuse (InputError, one line) a `measure` that is no measure, results that are not
    alignment results, or a result that does not hold it (naming what it holds); "ridge"
    (the held-out error every alignment result holds) passes for alignment results."""
    if name not in MEASURES:
        raise InputError(f"`measure` {name}: not a measure; the measures are {', '.join(MEASURES)}")
    if kind != "alignment":
        raise InputError(
            f"`measure` {name}: only alignment results hold measures; these are {kind} results"
        )
    if name == "ridge":
        return
    for _, path, ds in items:
        if name not in held_measures(ds):
            held = held_measures(ds)
            raise InputError(
                f"{path} holds no {name} (it holds {', '.join(held) or 'no measure but ridge'}): "
                f"fit it again with `align fit --measures {name}`, or compare on another measure"
            )
    if REGISTRY[name].neighbours:
        refuse_other_samples(name, items)


def refuse_other_samples(name: str, items) -> None:
    """Refuse (InputError, one line) results whose neighbour measure `name` (mknn, cknna) was
    read on samples of another size M or another k: the share of k neighbours among M rows is
    another quantity at another M or k, not another estimate of one (rsa, a correlation of the
    pairs' distances, estimates the same number at any M and compares across them)
    (attrs["options"]["sampled_rows"], "rows" and "neighbours")."""
    said = {
        "rows": ("sampled rows", "align fit --sample-rows"),
        "neighbours": ("neighbours", "align fit --neighbours"),
    }
    first = None
    for _, path, ds in items:
        sample = (ds.attrs.get("options") or {}).get("sampled_rows") or {}
        here = tuple(sample.get(key) for key in said)
        if first is None:
            first = (path, here)
            continue
        for key, a, b in zip(said, first[1], here, strict=True):
            if a != b:
                what, option = said[key]
                a, b = (f"{v:,}" if isinstance(v, int) else str(v) for v in (a, b))
                raise InputError(
                    f"{path} holds {name} of {b} {what} and {first[0]} of {a}: {name} depends "
                    f"on them; fit both with the same `{option}`"
                )


def measure_path(values: np.ndarray, direction: str, tgt) -> list:
    """The target boundary each source row picks: its argmax for a similarity, its argmin
    for a distance (the first on ties)."""
    pick = np.argmax if direction == SIMILARITY else np.argmin
    return [int(tgt[k]) for k in pick(values, axis=1)]


def path_summary(values: np.ndarray, direction: str, src, tgt, Ls: int, Lt: int) -> dict:
    """A measure's path (`measure_path` of `values` (source_boundary, target_boundary)) and
    its statistics over the source rows i ≥ 1, as ridge's summary has them: "spearman" of
    j/L_T with i/L_S (NaN for a constant path or fewer than two rows), "gap" the mean depth
    gap mean |j/L_T − i/L_S|, "slope" the least-squares slope of j/L_T on i/L_S
    (`fitting.results.uncertainty.path_statistics`); "cols" the path's column indices, "rows" the
    row indices i ≥ 1."""
    j = measure_path(values, direction, tgt)
    cols = [list(tgt).index(b) for b in j]
    rows = [a for a, i in enumerate(src) if i >= 1]
    sdepth = np.array([src[a] / Ls for a in rows], np.float64)
    jd = np.array([j[a] / Lt for a in rows], np.float64)
    rho = spearman(sdepth, jd) if len(rows) >= 2 and len(set(jd)) > 1 else np.nan
    gap = float(np.mean(np.abs(jd - sdepth))) if rows else np.nan
    slope = (
        float(path_statistics(np.array([[j[a] for a in rows]]), sdepth, Lt)["slope"][0])
        if len(rows) >= 2
        else np.nan
    )
    return {
        "path": j,
        "cols": cols,
        "rows": rows,
        "spearman": float(rho),
        "gap": gap,
        "slope": slope,
    }


def _surviving(ds, name: str, cols: list) -> str:
    """ "5 of 12 cells, path yes" where the fit calibrated `name` (its `_p_family` array),
    else ""."""
    var = variable(name) + "_p_family"
    if var not in ds:
        return ""
    p = ds[var].transpose("source_boundary", "target_boundary").values.astype(np.float64)
    survive = p < FAMILY_LEVEL
    on_path = all(survive[a, b] for a, b in enumerate(cols))
    return f"{int(survive.sum())} of {survive.size} cells, path {'yes' if on_path else 'no'}"


def compare_measure(items, name: str) -> Comparison:
    """Alignment results (`load`'s items, each holding `name`, `check_measure`) side by side
    on measure `name`: per result its path (`measure_path`), the mean of the measure over the
    path's cells ("<name> on path"), the Spearman correlation of the path over source
    boundaries ≥ 1 with i/L_S (NaN: a constant path or fewer than two rows) and its mean depth
    gap mean |j*(i)/L_T − i/L_S| over those rows, and the calibrated cells and path where the
    fit calibrated the measure. The mean on the path gets its delete-a-group jackknife
    interval from the cells' recomputations the fit kept (`<measure>_left_out`,
    `path_left_out`), and each two results their difference, later minus earlier, with the
    paired jackknife interval over the groups of held-out documents both share
    (`paired_interval`; results fitted on other documents refused, `refuse_unpaired`). A
    result without the recomputations (fitted before results kept them, or a row measure
    under `--measure-interval bootstrap`) gets the interval of its cells' bounds averaged, [mean low, mean high]
    (`path_interval`), and its differences the interval of the bounds' difference
    (`difference`), said in a note. The Spearman correlation and the depth gap get none (a
    result keeps per-cell values, not the resamples a statistic of the path would need)."""
    direction = MEASURES[name]
    pick = pick_of(direction)
    var = variable(name)
    calibrated = any(variable(name) + "_p_family" in ds for _, _, ds in items)
    info = ["result", "source", "target", "L_S", "L_T", f"{pick} path"]
    cmp = Comparison(
        "alignment",
        info + (["beat the null"] if calibrated else []),
        [f"{name} on path", "Spearman", "mean depth gap"],
        measure=name,
    )
    left = {}  # label -> θ_(g) of the mean on the path, or None (no stored recomputations)
    for label, path, ds in items:
        checks.refuse_nonfinite(path, var, ds[var], f"fit again with `align fit --measures {name}`")
        m = ds[var].transpose("source_boundary", "target_boundary")
        values = m.values.astype(np.float64)
        src, tgt = m["source_boundary"].values, m["target_boundary"].values
        Ls, Lt = int(ds.attrs["n_layers_source"]), int(ds.attrs["n_layers_target"])
        ps = path_summary(values, direction, src, tgt, Ls, Lt)
        j, cols, rows, rho, gap = ps["path"], ps["cols"], ps["rows"], ps["spearman"], ps["gap"]
        s = Series(
            label,
            {
                "result": label,
                "source": labelled(ds.attrs, "source"),
                "target": labelled(ds.attrs, "target"),
                "L_S": Ls,
                "L_T": Lt,
                f"{pick} path": " ".join(str(b) for b in j),
            },
            {f"{name} on path": float(values[np.arange(len(j)), cols].mean())},
            {},
            {},
        )
        s.value["Spearman"], s.value["mean depth gap"] = float(rho), gap
        for c in cmp.columns:
            s.low[c] = s.high[c] = np.nan
        s.low[f"{name} on path"], s.high[f"{name} on path"] = path_interval(ds, var, cols)
        left[label] = path_left_out(ds, var, cols)
        if left[label] is not None:  # the mean's own jackknife interval, not the cells' bound
            s.low[f"{name} on path"], s.high[f"{name} on path"] = jackknife.interval(
                s.value[f"{name} on path"], left[label], REGISTRY[name].range
            )
        if calibrated:
            s.info["beat the null"] = _surviving(ds, name, cols) or "not calibrated"
        s.path = {
            "source_boundaries": [int(i) for i in src],
            "argmin_path": j,
            "pick": pick,
            "n_source": Ls,
            "n_target": Lt,
        }
        if not np.isfinite(rho) and len(rows) >= 2:
            cmp.notes.append(f"{label}: Spearman undefined: the {pick} path is constant")
        cmp.series.append(s)
    closer = "larger" if direction == SIMILARITY else "smaller"
    cmp.notes.append(
        f"{name} is a {direction}: each row's path is its {pick}, and a {closer} {name} on the "
        f"path is the closer pair; {name} on path: its delete-a-group jackknife interval where "
        "the result keeps the recomputations, else [mean of the path cells' low, mean of their "
        "high]; no interval for Spearman and the depth gap (the results keep per-cell "
        "intervals, not resamples of the path)"
    )
    if len(items) > 1:
        best = (max if direction == SIMILARITY else min)(
            cmp.series, key=lambda s: s.value[f"{name} on path"]
        )
        cmp.notes.append(f"closest on {name}: {best.label}")
        models = list(cmp.series)
        bounded = []
        for a in range(len(models)):
            for b in range(a + 1, len(models)):
                d = difference(models[a], models[b], cmp.columns)
                pair = (items[a], items[b])
                la, lb = left[models[a].label], left[models[b].label]
                if la is not None and lb is not None:
                    refuse_unpaired(*pair, name, var)
                    d.low[f"{name} on path"], d.high[f"{name} on path"] = paired_interval(
                        d.value[f"{name} on path"], la, lb
                    )
                    d.info["result"] += " (paired)"
                else:
                    bounded.append(d.label)
                cmp.series.append(d)
        cmp.notes.append(difference_note(name, bounded, [k for k, v in left.items() if v is None]))
    return cmp


def path_left_out(ds, var: str, cols: list) -> np.ndarray | None:
    """θ_(g) of the mean of `var` on the path (row a, column cols[a]): the mean of the path
    cells' jackknife recomputations without group g (`<var>_left_out`, stored by the fit),
    one per group (of its group dimension, `group_dim`); None where the result holds none (a
    result fitted before they were kept, or a row measure under `--measure-interval
    bootstrap`)."""
    if f"{var}_left_out" not in ds:
        return None
    dim = group_dim(ds, var)
    m = ds[f"{var}_left_out"].transpose("source_boundary", "target_boundary", dim).values
    return np.asarray(m, np.float64)[np.arange(len(cols)), cols].mean(axis=0)


def group_dim(ds, var: str) -> str:
    """The dimension of `<var>_left_out`'s jackknife groups: `measure_group`, or a row
    measure's own where its sample's groups are not the streamed measures'
    (`measured.left_out_arrays`)."""
    dims = ds[f"{var}_left_out"].dims
    return next(d for d in dims if d not in ("source_boundary", "target_boundary"))


def paired_interval(value: float, left_a: np.ndarray, left_b: np.ndarray) -> tuple:
    """The delete-a-group jackknife interval of the paired difference b − a of two results'
    means on their paths, from the same groups' recomputations: d_(g) = θ_b,(g) − θ_a,(g),
    value ± t_(0.975, G'−1) · se(d_(g)) (`jackknife.interval`, unclipped)."""
    return jackknife.interval(value, np.asarray(left_b) - np.asarray(left_a))


def refuse_unpaired(a, b, name: str, var: str) -> None:
    """Refuse (InputError, one line) results a and b (label, path, ds) whose jackknife groups
    of `name` (array `var`) are not the same held-out documents: their recomputations do not
    pair, naming what differs (the documents' count, the first document that differs, or the
    groups)."""
    da, db = (x[2]["heldout_doc"].values.tolist() for x in (a, b))
    fix = (
        f"the paired difference of {name} needs the same held-out documents; fit both on one "
        "corpus with the same split (`align fit --seed`, `--test-fraction`, `--val-fraction`)"
    )
    if len(da) != len(db):
        raise InputError(f"{b[1]} holds {len(db)} held-out documents and {a[1]} {len(da)}: {fix}")
    k = next((k for k, (x, y) in enumerate(zip(da, db)) if x != y), None)
    if k is not None:
        raise InputError(
            f"{b[1]} and {a[1]} differ in held-out document {k + 1} of {len(da)} (document {db[k]} "
            f"against {da[k]}): {fix}"
        )
    ga, gb = (x[2][group_dim(x[2], var)].values.tolist() for x in (a, b))
    if ga != gb:
        raise InputError(
            f"{b[1]} holds its rows in jackknife groups {gb} and {a[1]} in {ga} of the same "
            f"held-out documents: {fix}"
        )


def difference_note(name: str, bounded: list, without: list) -> str:
    """What each difference's interval of `name` on path is: the paired jackknife, or for
    the differences in `bounded` (a result in `without` holds no recomputations) the bounds'
    difference."""
    note = (
        f"each difference's {name} on path: later minus earlier, its interval the paired "
        "delete-a-group jackknife over the held-out document groups both results share "
        "(d_(g) = the later's recomputation without group g minus the earlier's)"
    )
    if bounded:
        note += (
            f"; for {', '.join(bounded)} the bounds' difference [low_b - high_a, high_b - low_a] "
            "(it holds the paired interval whatever the two results share), as "
            f"{', '.join(without)} holds no jackknife recomputations of {name} (fitted before "
            "results kept them, or a row measure under `--measure-interval bootstrap`)"
        )
    return note + "; Spearman and the depth gap: the difference alone"


def path_interval(ds, var: str, cols: list) -> tuple[float, float]:
    """[mean low, mean high] of the cells (row a, column cols[a]) of `var`_low and
    `var`_high: the interval of the mean on the path when its cells' errors move together,
    and wider than its delete-a-group jackknife interval otherwise (a jackknife standard error
    is a seminorm: se(mean of cells) <= mean of their se); NaN where the result holds no
    interval of `var`."""
    if f"{var}_low" not in ds or f"{var}_high" not in ds:
        return np.nan, np.nan
    rows = np.arange(len(cols))
    out = []
    for end in ("low", "high"):
        m = ds[f"{var}_{end}"].transpose("source_boundary", "target_boundary").values
        out.append(float(np.asarray(m, np.float64)[rows, cols].mean()))
    return out[0], out[1]


def difference(a: Series, b: Series, columns: list) -> Series:
    """b − a of every column; the interval [low_b − high_a, high_b − low_a] where both have
    one (NaN otherwise)."""
    s = Series(
        f"{b.label} − {a.label}",
        {k: "" for k in a.info} | {"result": f"{b.label} − {a.label}"},
        {},
        {},
        {},
        difference=True,
    )
    for c in columns:
        s.value[c] = b.value[c] - a.value[c]
        s.low[c] = b.low[c] - a.high[c]
        s.high[c] = b.high[c] - a.low[c]
    return s
