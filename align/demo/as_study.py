"""A seed's extractions, fits and analyses run as a study (`align.study`): the demo writes a
study file for its shallow and deep model (the deep model's untrained twin the control) and
runs it in ROOT/study, so its units are a study's units, with their provenance, keys and
resume, and the study's report is written beside them. The first seed's study also holds the
companion analyses of both models (contributions and lens read from their stores, layer
skipping on the first `skip_docs` documents, effective depth) and the third model with another
tokenizer (`tokenizers_pair`), fitted from the shallow model on character anchors.

The demo's own paths stay what its pages and examples name: ROOT/stores/{shallow,deep,
control}.zarr and ROOT/results/{alignment,alignment-control}.zarr are relative links to the
study's stores and fits, the first seed's ROOT/stores/deep-bpe.zarr,
ROOT/results/alignment-bpe.zarr and ROOT/results/{contributions,lens,skipping,depth}-
{shallow,deep}.zarr to its third model's store and fit and its analyses, and its ROOT/report
to its report.
"""

from __future__ import annotations

import json
import os

from align.demo.data import MAX_LENGTH

FOLDER = "study"  # ROOT/study: the study's DIR
FILE = "study.toml"  # ROOT/study.toml: its study file (outside DIR, which holds only the study)
BPE = "deep-bpe"  # the third model's name (tokenizers_pair.NAME)
ANALYSED = ("shallow", "deep")  # the first seed's models whose analyses the study runs
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
# The first seed's more: the third model's store and fit, each analysed model's results.
BPE_STORES = {BPE: f"stores/{BPE}.zarr"}
BPE_RESULTS = {"alignment-bpe": f"results/fits/shallow--{BPE}.zarr"}
UNIT_KINDS = {"contributions": "contrib", "lens": "lens", "skipping": "skip", "depth": "depth"}
ANALYSES = {
    f"{kind}-{name}": f"results/{unit}/{name}.zarr"
    for name in ANALYSED
    for kind, unit in UNIT_KINDS.items()
}
# The study's units -> the demo's step names (its timings); another unit keeps its name.
STEPS = {
    "extract deep.random": "extract control",
    "fit shallow->deep": "fit alignment",
    "fit shallow->deep.random": "fit alignment-control",
    f"fit shallow->{BPE}": "fit alignment-bpe",
}


def study_text(models: dict, corpus_path: str, config, seed: int, first: bool) -> str:
    """The seed's study file: the two models (the first seed's with their analyses, and the
    third model where `models` names it), the corpus cut at `max_length`, the extraction
    (sublayers for the first seed, so contributions and lens read the stores), the pairs, the
    fit's seed, the analyses' batch size and skip's `skip_docs`, and the deep model's untrained
    twin drawn with control_seed + seed. The fits compute ridge alone: cka and procrustes
    beside it took 10 to 20 s more per fit of the tiny demo, whose ridge fit takes about one."""
    q = json.dumps  # a TOML basic string is a JSON string
    analyses = '\nanalyses = ["contrib", "lens", "skip", "depth"]' if first else ""
    names = ["shallow", "deep"] + ([BPE] if first and BPE in models else [])
    blocks = "".join(
        f"\n[[models]]\nname = {q(name)}\npath = {q(os.path.abspath(models[name]))}"
        + (analyses if name in ANALYSED else "")
        + "\n"
        for name in names
    )
    pairs = ", ".join(f'["shallow", {q(name)}]' for name in names[1:])
    analysed = (
        f"\n[analyses]\nbatch_size = {config.batch_size}\nskip_docs = {config.skip_docs}\n"
        if first
        else ""
    )
    return f"""# The demo's seed {seed}, written by align demo.
[study]
name = {q(f"demo, seed {seed}")}
{blocks}
[corpus]
path = {q(os.path.abspath(corpus_path))}
max_length = {MAX_LENGTH}

[extraction]
batch_size = {config.batch_size}
sublayers = {"true" if first else "false"}

[pairs]
mode = "list"
list = [{pairs}]

[fit]
seed = {config.fit_seed}

[controls]
random_init = ["deep"]
random_init_seed = {config.control_seed + seed}
{analysed}"""


def run(root: str, models: dict, corpus_path: str, config, seed: int, first: bool, log) -> dict:
    """Run the seed's study in ROOT/study and link the demo's paths to its outputs; returns
    {"stores": name -> path, "results": name -> path (the seed's pair and control), "more":
    {"stores", "results"} (the first seed's third model and analyses), "seconds": step ->
    seconds of the units run now}."""
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
    seconds = {STEPS.get(n, n): units[n].get("seconds", 0.0) for n in report.ran}
    more = {"stores": {}, "results": {}}
    if first:
        more["results"] = dict(ANALYSES)
        if BPE in models:
            more["stores"], more["results"] = dict(BPE_STORES), {**BPE_RESULTS, **ANALYSES}
    out = {"stores": dict(STORES), "results": dict(RESULTS)}
    for held in (out, more):
        for kind, names in held.items():
            held[kind] = {
                name: link(os.path.join(root, kind, f"{name}.zarr"), os.path.join(folder, rel))
                for name, rel in names.items()
            }
    if first:
        link(os.path.join(root, "report"), os.path.join(folder, "report"))
    return {**out, "more": more, "seconds": seconds}


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
