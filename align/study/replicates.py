"""Replicates in a study: the spread of each pair's statistics across its replicate pairs.

A [[models]] entry naming several checkpoints (`paths`, or `revisions` beside `path`) is one
model per checkpoint, NAME@K (`schema`); the study fits checkpoint k of the source with
checkpoint k of the target (a single checkpoint with each of the other's), each with its
controls. The `replicates` unit reads those fits' summaries and writes, per pair of [[models]]
names, DIR/results/replicates.json: each replicate pair's statistics with their bootstrap
intervals, their spread across replicates (`align.stats.replicates.spread`: mean, sd, min,
max) and, against each control the study fitted, the separation rule's verdicts and sentences
(`align.stats.replicates.statistics`, the demo's rule). The report shows it on
replicates.html, linked from the index (`pages`).
"""

from __future__ import annotations

import json
import math
import os

from align.stats import replicates as rules
from align.store import open_result
from align.study import html as h
from align.study import labels
from align.study import units as units_mod
from align.study.state import DONE

WORD = "replicate"
FILE = units_mod.output_of("replicates")
CONTROL_WORDS = {"random_init": "random-init", "shuffle": "shuffle"}


def _summary(root: str, source: str, target: str, control: str | None = None) -> dict:
    path = os.path.join(root, units_mod.output_of("fit", (source, target), control))
    return dict(open_result(path).attrs.get("summary") or {})


def _clean(x):
    """JSON without NaN: a non-finite number is null."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def pair_record(root: str, study, source: str, target: str, replicate_pairs) -> dict:
    """The record of one pair of [[models]] names: per replicate pair its statistics with
    their intervals, the spread of each across replicates, and the verdicts against each
    control the study fitted."""
    trained = [_summary(root, s, t) for s, t in replicate_pairs]
    rows = [
        {
            WORD: k + 1,
            "source": s,
            "target": t,
            "argmin_path": list(sm.get("argmin_path") or []),
            **{key: sm.get(key) for key in rules.STATS},
            **{f"{key}_{e}": sm.get(f"{key}_{e}") for key in rules.STATS for e in ("low", "high")},
        }
        for k, ((s, t), sm) in enumerate(zip(replicate_pairs, trained))
    ]
    paths = [r["argmin_path"] for r in rows]
    record = {
        "source": source,
        "target": target,
        "pairs": [list(p) for p in replicate_pairs],
        f"per_{WORD}": rows,
        "spread": {key: rules.spread([r[key] for r in rows]) for key in rules.STATS},
        "paths": paths,
        "distinct_paths": len({tuple(p) for p in paths}),
        "against": {},
    }
    for control in ("random_init", "shuffle"):
        fitted = [units_mod.controls_of(study, s, t).get(control) for s, t in replicate_pairs]
        if None in fitted:
            continue
        per = [
            {WORD: k + 1, "trained": sm, "control": _summary(root, cs, ct, control)}
            for k, (sm, (cs, ct)) in enumerate(zip(trained, fitted))
        ]
        record["against"][control] = rules.statistics(per, WORD)
    record["sentences"] = sentences(record)
    return record


def sentences(record: dict) -> list:
    """The verdicts of a pair's record: against each control, the separation rule's sentence
    per statistic (`align.stats.replicates.sentences`), naming the control; then whether the
    trained pair's exact argmin path repeats across the replicates."""
    out = []
    for control, st in record["against"].items():
        for s in st["sentences"][: len(rules.SEPARATING)]:
            verdict, rest = s.split(": ", 1)
            out.append(f"{verdict} (against the {CONTROL_WORDS[control]} control): {rest}")
    if not record["against"]:
        out.append(
            "Not established: no control to separate the trained pair from (set [controls] "
            "random_init or shuffle)."
        )
    n, k, paths = len(record["paths"]), record["distinct_paths"], record["paths"]
    out.append(
        f"Robust: the trained pair's exact argmin path is {paths[0]} in "
        + ("both replicates." if n == 2 else f"all {n} replicates.")
        if k == 1
        else f"Not robust: the trained pair's exact argmin path differs across the replicates "
        f"({k} distinct paths in {n} replicates: {', '.join(map(str, paths))})."
    )
    return out


def holds(sentence: str) -> bool | None:
    """True for a robust verdict, False for a not robust one, None otherwise."""
    verdict = sentence.split(":", 1)[0]
    if verdict.startswith("Robust"):
        return True
    return False if verdict.startswith("Not robust") else None


def write(root: str, record: dict) -> str:
    """`record` as DIR/results/replicates.json, whole or not at all."""
    path = os.path.join(root, FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(_clean(record), f, indent=1, allow_nan=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def run(u, study, root, log) -> None:
    """The `replicates` unit: every replicated pair's record, written to its file."""
    record = {
        "rule": rules.rule(WORD),
        "pairs": [
            pair_record(root, study, s, t, [tuple(p) for p in ps])
            for s, t, ps in u.definition["pairs"]
        ],
    }
    write(root, record)
    log(f"wrote {FILE} ({len(record['pairs'])} pairs across replicates)")


def read(root: str, state: dict) -> dict | None:
    """DIR/results/replicates.json where the study's `replicates` unit is done (a file left by
    an earlier form of the study, whose replicates are gone, is not read), else None (also
    where it cannot be read)."""
    if "replicates" not in state.get("order", []):
        return None
    if state.get("units", {}).get("replicates", {}).get("state") != DONE:
        return None
    try:
        with open(os.path.join(root, FILE), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def info_lines(root: str, state: dict) -> list:
    """`align info DIR`'s lines on replicates: each pair's verdicts."""
    record = read(root, state)
    if not record:
        return []
    out = ["  across replicates:"]
    for p in record["pairs"]:
        out.append(f"    {p['source']} -> {p['target']} ({len(p['pairs'])} replicate pairs)")
        out += [f"      {s}" for s in p["sentences"]]
    return out


def _value_cell(row: dict, key: str, digits: int) -> str:
    return h.interval(row.get(key), row.get(f"{key}_low"), row.get(f"{key}_high"), digits)


def _spread_cell(s: dict, digits: int) -> str:
    if s["mean"] is None:
        return "—"
    sd = "" if s["sd"] is None else f", sd {h.number(s['sd'], digits)}"
    return (
        f"mean {h.number(s['mean'], digits)}{sd}, range "
        f"{h.number(s['min'], digits)} – {h.number(s['max'], digits)}"
    )


def section(record: dict, named: dict | None = None) -> str:
    """The replicates page's body: per pair, a table with a row per statistic, each replicate
    pair's value with its 95% bootstrap interval (within the run: held-out documents), then
    the spread across replicates (training), then the verdicts; `named`: what the study file
    named each replicate's checkpoint by (`labels.labels`), beside its name."""
    named = named or {}
    out = [
        "<p>Each replicate pair's value with its 95% bootstrap interval over held-out documents "
        "(within one run), and the spread of the values across replicates (mean, sample sd, "
        f"range): what varies between checkpoints. Rule: {h.esc(record['rule'])}.</p>"
    ]
    for p in record["pairs"]:
        rows = p[f"per_{WORD}"]
        head = ["statistic"] + [
            f"{labels.shown(r['source'], named)} → {labels.shown(r['target'], named)}" for r in rows
        ]
        body = [
            [label]
            + [_value_cell(r, key, digits) for r in rows]
            + [_spread_cell(p["spread"][key], digits)]
            for key, (label, digits) in rules.STATS.items()
        ]
        body.append(
            ["argmin path"]
            + [str(r["argmin_path"]) for r in rows]
            + [f"{p['distinct_paths']} distinct"]
        )
        out.append(f"<h2>{h.esc(p['source'])} → {h.esc(p['target'])}</h2>")
        out.append(h.table(head + ["across replicates"], body))
        out += [h.sentence(s, holds(s)) for s in p["sentences"]]
    return "".join(out)


def index_table(record: dict) -> str:
    """The index's table: a row per pair of models, each statistic's spread across the
    replicates (mean, range), the number of distinct argmin paths, and how many verdicts are
    robust."""
    rows = []
    for p in record["pairs"]:
        said = [holds(s) for s in p["sentences"]]
        rows.append(
            [f"{p['source']} → {p['target']} ({len(p['pairs'])} replicates)"]
            + [_spread_cell(p["spread"][key], digits) for key, (_, digits) in rules.STATS.items()]
            + [str(p["distinct_paths"]), f"{said.count(True)} of {len(said)}"]
        )
    head = ["pair"] + [label for label, _ in rules.STATS.values()]
    return h.table(head + ["distinct paths", "robust verdicts"], rows)


def pages(root: str, state: dict, pages_so_far: dict) -> dict:
    """The report's pages on replicates: replicates.html, and the index with its table and a
    link to the page (nothing where the study has no replicates)."""
    record = read(root, state)
    if not record:
        return {}
    page = h.page("Across replicates", section(record, labels.labels(state)))
    index = pages_so_far.get("index.html", "")
    part = (
        "<h2>Across replicates</h2><p>Each statistic's spread across the replicates of a pair "
        '(<a href="replicates.html">each replicate\'s value beside its bootstrap interval, and '
        "the verdicts</a>).</p>" + index_table(record)
    )
    return {"replicates.html": page, "index.html": index.replace("</body>", part + "</body>", 1)}
