"""A seed's extractions and fits run as a study (`align.study`): the demo writes a study file
for its shallow and deep model (the deep model's untrained twin the control) and runs it in
ROOT/study, so its units are a study's units, with their provenance, keys and resume, and
the study's report is written beside them.

The demo's own paths stay what its pages and examples name: ROOT/stores/{shallow,deep,
control}.zarr and ROOT/results/{alignment,alignment-control}.zarr are relative links to the
study's stores and fits, and the first seed's ROOT/report to its report.
"""

from __future__ import annotations

import json
import os

FOLDER = "study"  # ROOT/study: the study's DIR
FILE = "study.toml"  # ROOT/study.toml: its study file (outside DIR, which holds only the study)
# The demo's names -> the study's outputs, relative to ROOT/study.
STORES = {
    "shallow": "stores/shallow.zarr",
    "deep": "stores/deep.zarr",
    "control": "stores/deep.random.zarr",
}
RESULTS = {
    "alignment": "results/fits/shallow--deep.zarr",
    "alignment-control": "results/fits/shallow--deep.random.zarr",
}
# The study's units -> the demo's step names (its timings).
STEPS = {
    "extract shallow": "extract shallow",
    "extract deep": "extract deep",
    "extract deep.random": "extract control",
    "fit shallow->deep": "fit alignment",
    "fit shallow->deep.random": "fit alignment-control",
    "report": "report",
}


def study_text(models: dict, corpus_path: str, config, seed: int, first: bool) -> str:
    """The seed's study file: the two models, the corpus cut at `max_length`, the
    extraction (sublayers for the first seed's analyses), the one pair, the fit's seed, and
    the deep model's untrained twin drawn with control_seed + seed. The fits compute ridge
    alone: cka and procrustes beside it took 10 to 20 s more per fit of the tiny demo, whose
    ridge fit takes about one."""
    from align.demo.pipeline import MAX_LENGTH

    q = json.dumps  # a TOML basic string is a JSON string
    return f"""# The demo's seed {seed}, written by align demo.
[study]
name = {q(f"demo, seed {seed}")}

[[models]]
name = "shallow"
path = {q(os.path.abspath(models["shallow"]))}

[[models]]
name = "deep"
path = {q(os.path.abspath(models["deep"]))}

[corpus]
path = {q(os.path.abspath(corpus_path))}
max_length = {MAX_LENGTH}

[extraction]
batch_size = {config.batch_size}
sublayers = {"true" if first else "false"}

[pairs]
mode = "list"
list = [["shallow", "deep"]]

[fit]
seed = {config.fit_seed}

[controls]
random_init = ["deep"]
random_init_seed = {config.control_seed + seed}
"""


def run(root: str, models: dict, corpus_path: str, config, seed: int, first: bool, log) -> dict:
    """Run the seed's study in ROOT/study and link the demo's paths to its outputs; returns
    {"stores": name -> path, "results": name -> path, "seconds": step -> seconds of the units
    run now}."""
    from align.study import load_study, run_study
    from align.study.state import read_state

    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, FILE)
    text = study_text(models, corpus_path, config, seed, first)
    if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    folder = os.path.join(root, FOLDER)
    report = run_study(load_study(path), folder, log=log)
    units = read_state(folder).get("units", {})
    seconds = {STEPS[n]: units[n].get("seconds", 0.0) for n in report.ran if n in STEPS}
    out = {"stores": {}, "results": {}, "seconds": seconds}
    for kind, names in (("stores", STORES), ("results", RESULTS)):
        for name, rel in names.items():
            out[kind][name] = link(
                os.path.join(root, kind, f"{name}.zarr"), os.path.join(folder, rel)
            )
    if first:
        link(os.path.join(root, "report"), os.path.join(folder, "report"))
    return out


def link(path: str, target: str) -> str:
    """`path` made a relative link to `target` (replaced in one rename); returns `path`."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rel = os.path.relpath(target, os.path.dirname(path))
    if os.path.islink(path) and os.readlink(path) == rel:
        return path
    tmp = f"{path}.link-tmp"
    if os.path.lexists(tmp):
        os.remove(tmp)
    os.symlink(rel, tmp)
    os.replace(tmp, path)
    return path
