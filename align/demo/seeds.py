"""What holds across the demo's training seeds: the spread of each seed's matrix summary (the
trained pair's and the control's), and sentences chosen by those numbers saying which
statistics separate the trained pair from the control in every seed and whether the exact
argmin path repeats.

The separation rule: a statistic separates the trained pair from the control when every
seed's trained value lies outside the range (min to max) of the control's values over the
seeds, all on the same side. The bootstrap intervals of one seed cover its held-out documents;
this spread covers training (initialisation, batches, training stream).
"""

from __future__ import annotations

import math

# The statistics compared across seeds: summary key -> (label, decimals).
STATS = {
    "slope": ("slope", 2),
    "mean_depth_gap": ("mean depth gap", 3),
    "soft_depth_spread": ("soft-depth spread", 3),
    "spearman": ("Spearman", 2),
}
# Those the separation rule is stated for (Spearman is shown, not used: a near-constant path
# that steps once is still rank-correlated with depth).
SEPARATING = ("slope", "mean_depth_gap", "soft_depth_spread")
RULE = (
    "a statistic separates the trained pair from the control when every seed's trained value lies outside "
    "the min-max range of the control's values over the seeds, all on the same side"
)
PAIRS = {"trained": "the trained pair", "control": "the control"}


def _number(x) -> float:
    return float("nan") if x is None else float(x)


def spread(values: list) -> dict:
    """values, their mean, sample standard deviation (n − 1; None for one value), min and max
    over the finite values (None where no value is finite)."""
    finite = [v for v in (_number(x) for x in values) if math.isfinite(v)]
    if not finite:
        return {
            "values": values,
            "mean": None,
            "sd": None,
            "min": None,
            "max": None,
            "n_defined": 0,
        }
    mean = sum(finite) / len(finite)
    sd = (
        math.sqrt(sum((v - mean) ** 2 for v in finite) / (len(finite) - 1))
        if len(finite) > 1
        else None
    )
    return {
        "values": values,
        "mean": mean,
        "sd": sd,
        "min": min(finite),
        "max": max(finite),
        "n_defined": len(finite),
    }


def separation(trained: dict, control: dict, n_seeds: int) -> str | None:
    """ "above" when the trained minimum exceeds the control maximum, "below" when the trained
    maximum is under the control minimum, None otherwise (or when a seed's value is undefined)."""
    if trained["n_defined"] < n_seeds or control["n_defined"] < n_seeds:
        return None
    if trained["min"] > control["max"]:
        return "above"
    if trained["max"] < control["min"]:
        return "below"
    return None


def statistics(per_seed: list) -> dict:
    """Across-seed statistics from [{seed, trained: summary, control: summary}] (each summary
    an alignment result's attrs["summary"]): per pair and statistic the spread (`spread`), the
    argmin paths and how many distinct ones, the separation of each SEPARATING statistic, and
    the sentences saying what is robust."""
    seeds = [int(x["seed"]) for x in per_seed]
    out = {"seeds": seeds, "rule": RULE, "per_seed": [], "trained": {}, "control": {}}
    for x in per_seed:
        row = {"seed": int(x["seed"])}
        for pair in PAIRS:
            s = x[pair]
            row[pair] = {
                "argmin_path": list(s.get("argmin_path") or []),
                **{k: s.get(k) for k in STATS},
                **{f"{k}_{e}": s.get(f"{k}_{e}") for k in STATS for e in ("low", "high")},
            }
        out["per_seed"].append(row)
    for pair in PAIRS:
        paths = [row[pair]["argmin_path"] for row in out["per_seed"]]
        out[pair] = {k: spread([row[pair][k] for row in out["per_seed"]]) for k in STATS}
        out[pair]["paths"] = paths
        out[pair]["distinct_paths"] = len({tuple(p) for p in paths})
    out["separation"] = {
        k: separation(out["trained"][k], out["control"][k], len(seeds)) for k in SEPARATING
    }
    out["sentences"] = sentences(out)
    return out


def _range(s: dict, digits: int) -> str:
    if s["min"] is None:
        return "undefined"
    return (
        f"{s['min']:.{digits}f}"
        if s["min"] == s["max"]
        else f"{s['min']:.{digits}f}–{s['max']:.{digits}f}"
    )


def sentences(st: dict) -> list:
    """What is robust across the seeds and what is not, each sentence chosen by the numbers."""
    n = len(st["seeds"])
    where = {
        1: "the one seed (no spread across training is measured with one seed)",
        2: "both seeds",
    }.get(n, f"all {n} seeds")
    out = []
    for k in SEPARATING:
        label, digits = STATS[k]
        t, c, side = st["trained"][k], st["control"][k], st["separation"][k]
        ranges = f"trained {_range(t, digits)}, control {_range(c, digits)}"
        if side is not None:
            out.append(
                f"Robust: the {label} separates the trained pair from the control in {where} ({ranges}: "
                f"every trained value lies {side} the control's range)."
            )
        elif t["n_defined"] < n or c["n_defined"] < n:
            out.append(f"Not established: the {label} is undefined in some seed ({ranges}).")
        else:
            out.append(
                f"Not robust: the {label} does not separate the trained pair from the control across the seeds "
                f"({ranges}: the ranges overlap)."
            )
    for pair, name in PAIRS.items():
        paths, k = st[pair]["paths"], st[pair]["distinct_paths"]
        if n == 1:
            out.append(
                f"Not measured: whether {name}'s exact argmin path {paths[0]} repeats needs more than one seed."
            )
        elif k == 1:
            out.append(f"Robust: {name}'s exact argmin path is {paths[0]} in {where}.")
        else:
            listed = ", ".join(f"{p}" for p in paths)
            out.append(
                f"Not robust: {name}'s exact argmin path differs across the seeds ({k} distinct paths in {n} "
                f"seeds: {listed})."
            )
    return out


def lines(st: dict) -> list:
    """The summary's block: per statistic and pair, the per-seed values, mean, sd and range,
    then the rule and the sentences."""
    seeds = st["seeds"]
    out = [
        f"Across seeds {seeds} (seed {seeds[0]} is the one above; its intervals cover held-out documents, "
        "this spread covers training):"
    ]
    for k, (label, digits) in STATS.items():
        for pair in PAIRS:
            s = st[pair][k]
            vals = ", ".join("undefined" if v is None else f"{v:.{digits}f}" for v in s["values"])
            stats = (
                ""
                if s["mean"] is None
                else (
                    f";  mean {s['mean']:.{digits}f}"
                    + (f", sd {s['sd']:.{digits}f}" if s["sd"] is not None else "")
                    + f", range {_range(s, digits)}"
                )
            )
            out.append(f"  {label:<18} {pair:<8} [{vals}]{stats}")
    out.append(f"  rule: {RULE}")
    out += [f"  {x}" for x in st["sentences"]]
    return out
