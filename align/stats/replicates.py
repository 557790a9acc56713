"""What holds across replicates of a pair (the demo's training seeds, a study's checkpoints of
one model): the spread of each replicate's matrix summary (the trained pair's and the
control's), and sentences chosen by those numbers saying which statistics separate the trained
pair from the control in every replicate and whether the exact argmin path repeats.

The separation rule: a statistic separates the trained pair from the control when every
replicate's trained value lies outside the range (min to max) of the control's values over the
replicates, all on the same side. The bootstrap intervals of one replicate cover its held-out
documents; this spread covers training (initialisation, batches, training stream).

The word for a replicate (`word`: "seed" for the demo, "replicate" for a study) names the keys
of `statistics`' record ("seeds", "per_seed") and appears in its sentences.
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


def statistics(per_seed: list, word: str = "seed") -> dict:
    """Across-replicate statistics from [{WORD: number, trained: summary, control: summary}]
    (each summary an alignment result's attrs["summary"]): per pair and statistic the spread
    (`spread`), the argmin paths and how many distinct ones, the separation of each SEPARATING
    statistic, and the sentences saying what is robust. The record's keys are "WORDs" (the
    replicates' numbers) and "per_WORD" (their rows), beside "trained", "control",
    "separation", "rule" and "sentences"."""
    seeds = [int(x[word]) for x in per_seed]
    out = {f"{word}s": seeds, "rule": rule(word), f"per_{word}": [], "trained": {}, "control": {}}
    for x in per_seed:
        row = {word: int(x[word])}
        for pair in PAIRS:
            s = x[pair]
            row[pair] = {
                "argmin_path": list(s.get("argmin_path") or []),
                **{k: s.get(k) for k in STATS},
                **{f"{k}_{e}": s.get(f"{k}_{e}") for k in STATS for e in ("low", "high")},
            }
        out[f"per_{word}"].append(row)
    for pair in PAIRS:
        paths = [row[pair]["argmin_path"] for row in out[f"per_{word}"]]
        out[pair] = {k: spread([row[pair][k] for row in out[f"per_{word}"]]) for k in STATS}
        out[pair]["paths"] = paths
        out[pair]["distinct_paths"] = len({tuple(p) for p in paths})
    out["separation"] = {
        k: separation(out["trained"][k], out["control"][k], len(seeds)) for k in SEPARATING
    }
    out["sentences"] = sentences(out, word)
    return out


def rule(word: str = "seed") -> str:
    """The separation rule in words, of replicates called `word`."""
    return RULE.replace("seed", word)


def _range(s: dict, digits: int) -> str:
    if s["min"] is None:
        return "undefined"
    return (
        f"{s['min']:.{digits}f}"
        if s["min"] == s["max"]
        else f"{s['min']:.{digits}f}–{s['max']:.{digits}f}"
    )


def sentences(st: dict, word: str = "seed") -> list:
    """What is robust across the replicates and what is not, each sentence chosen by the
    numbers."""
    n = len(st[f"{word}s"])
    where = {
        1: f"the one {word} (no spread across training is measured with one {word})",
        2: f"both {word}s",
    }.get(n, f"all {n} {word}s")
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
            out.append(f"Not established: the {label} is undefined in some {word} ({ranges}).")
        else:
            out.append(
                f"Not robust: the {label} does not separate the trained pair from the control across the {word}s "
                f"({ranges}: the ranges overlap)."
            )
    for pair, name in PAIRS.items():
        paths, k = st[pair]["paths"], st[pair]["distinct_paths"]
        if n == 1:
            out.append(
                f"Not measured: whether {name}'s exact argmin path {paths[0]} repeats needs more than one {word}."
            )
        elif k == 1:
            out.append(f"Robust: {name}'s exact argmin path is {paths[0]} in {where}.")
        else:
            listed = ", ".join(f"{p}" for p in paths)
            out.append(
                f"Not robust: {name}'s exact argmin path differs across the {word}s ({k} distinct paths "
                f"in {n} {word}s: {listed})."
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
