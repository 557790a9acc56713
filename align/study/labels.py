"""How the report names a replicate to a person. A [[models]] entry of several checkpoints is
one model per checkpoint, NAME@K by position (`schema.replicate_name`): the position is the
unit's id, in its outputs' names and in study.json, so a study already run resumes with its
units unchanged. The pages add what the study file named each checkpoint by: the entry's
`labels` where it gives them (`shallow@2 (seed 1)`), else its revision where the entry lists
`revisions`, else the last parts of its path (or hub id) that tell it from the entry's other
checkpoints, e.g. `shallow@2 (shallow-7e87ddcc1a72)`. The given labels reach the pages through
the report unit's definition (`units.report_definition`), so an edit of them writes the pages
anew and reruns nothing else."""

from __future__ import annotations

from align.study.schema import RANDOM, REPLICATE


def checkpoints(state: dict) -> dict:
    """{model name: (path or hub id, revision)} of every trained model a unit of the study
    read (a unit's definition's model: `extract NAME`, `contrib NAME`, ...)."""
    out = {}
    for unit, entry in (state.get("units") or {}).items():
        model = (entry.get("definition") or {}).get("model")
        name = unit.split(" ", 1)[-1]
        if isinstance(model, dict) and not model.get("random_init") and model.get("name"):
            out.setdefault(name, (str(model["name"]), model.get("revision")))
    return out


def labels(state: dict) -> dict:
    """{replicate name: what the study file named its checkpoint by} (`module doc`), for
    every replicate NAME@K whose checkpoint a unit records or that the file labels."""
    groups = {}
    for name, where in checkpoints(state).items():
        if REPLICATE in name and not name.endswith(RANDOM):
            groups.setdefault(name.split(REPLICATE)[0], {})[name] = where
    out = {}
    for members in groups.values():
        revisions = {r for _, r in members.values()}
        if len(revisions) == len(members):
            out.update({n: str(r) for n, (_, r) in members.items()})
        else:
            out.update(distinct_tails({n: p for n, (p, _) in members.items()}))
    report = (state.get("units") or {}).get("report") or {}
    out.update((report.get("definition") or {}).get("labels") or {})
    return out


def distinct_tails(paths: dict) -> dict:
    """{name: the fewest last "/"-separated parts of its path that no other path ends in}:
    a folder's name where the folders' names differ."""
    parts = {n: [x for x in p.replace("\\", "/").split("/") if x] for n, p in paths.items()}
    longest = max((len(p) for p in parts.values()), default=0)
    for k in range(1, longest + 1):
        tails = {n: "/".join(p[-k:]) for n, p in parts.items()}
        if len(set(tails.values())) == len(tails):
            return tails
    return {n: "/".join(p) for n, p in parts.items()}


def shown(name: str, named: dict) -> str:
    """`name` as a page shows it: a replicate with what its checkpoint was named by."""
    return f"{name} ({named[name]})" if name in named else name
