"""The demo's extractions, fits and analyses run as one study (`align.study`): the demo writes
a study file whose shallow and deep models name one checkpoint per training seed (replicates,
NAME@K for the K-th seed), the deep model's untrained twin of each seed the control, and runs
it in ROOT/study, so its units are a study's units, with their provenance, keys and resume,
its `replicates` unit computes the spread across seeds and the robust / not robust verdicts
(`align.study.replicates`), and its report is written beside them. The study also holds the
companion analyses of the first seed's models (`[analyses] checkpoints = "first"`:
contributions and lens read from their stores, layer skipping on the first `skip_docs`
documents, effective depth) and the third model with another tokenizer (`tokenizers_pair`),
fitted from each seed's shallow model on character anchors.

The demo's own paths stay what its pages and examples name: ROOT/stores/{shallow,deep,
control}.zarr and ROOT/results/{alignment,alignment-control}.zarr are relative links to the
first seed's stores and fits in the study, ROOT/seeds/seed-<s>/{stores,results}/ every other
seed's, ROOT/stores/deep-bpe.zarr, ROOT/results/alignment-bpe.zarr and
ROOT/results/{contributions,lens,skipping,depth}-{shallow,deep}.zarr the third model's store,
the first seed's fit of it and the first seed's analyses, and ROOT/report the study's report.
"""

from __future__ import annotations

import json
import os

from align.demo.data import MAX_LENGTH
from align.study import load_study, replicates, run_study
from align.study.schema import replicate_name, twin_name
from align.study.state import read_state
from align.study.units import fit_name, output_of

FOLDER = "study"  # ROOT/study: the study's DIR
FILE = "study.toml"  # ROOT/study.toml: its study file (outside DIR, which holds only the study)
BPE = "deep-bpe"  # the third model's name (tokenizers_pair.NAME)
ANALYSED = ("shallow", "deep")  # the models whose first seed's analyses the study runs
UNIT_KINDS = {"contributions": "contrib", "lens": "lens", "skipping": "skip", "depth": "depth"}


def checkpoint(name: str, k: int, n: int) -> str:
    """The study's name of seed k's (from 0) checkpoint of model `name` among `n` seeds: NAME@K+1
    (NAME itself where there is one seed)."""
    return name if n == 1 else replicate_name(name, k + 1)


def outputs(k: int, n: int, bpe: bool) -> dict:
    """Seed k's outputs in the study, relative to ROOT/study, by the demo's names: {"stores",
    "results"}, and for the first seed "more": the third model's store and fit, the analyses."""
    s, d = checkpoint("shallow", k, n), checkpoint("deep", k, n)
    out = {
        "stores": {
            "shallow": output_of("extract", (s,)),
            "deep": output_of("extract", (d,)),
            "control": output_of("extract", (twin_name(d),)),
        },
        "results": {
            "alignment": output_of("fit", (s, d)),
            "alignment-control": output_of("fit", (s, twin_name(d)), "random_init"),
        },
    }
    if k == 0:
        analysed = {
            f"{kind}-{name}": output_of(unit, (checkpoint(name, 0, n),))
            for name in ANALYSED
            for kind, unit in UNIT_KINDS.items()
        }
        out["more"] = {"stores": {}, "results": analysed}
        if bpe:
            out["more"]["stores"][BPE] = output_of("extract", (BPE,))
            out["more"]["results"]["alignment-bpe"] = output_of("fit", (s, BPE))
    return out


def steps(seeds: tuple) -> dict:
    """The study's units -> the demo's step names (its timings): seed s's are suffixed " seed
    s" but the first seed's; another unit keeps its name."""
    out, n = {}, len(seeds)
    for k, seed in enumerate(seeds):
        tag = "" if k == 0 else f" seed {seed}"
        s, d = checkpoint("shallow", k, n), checkpoint("deep", k, n)
        out.update(
            {
                f"extract {s}": f"extract shallow{tag}",
                f"extract {d}": f"extract deep{tag}",
                f"extract {twin_name(d)}": f"extract control{tag}",
                fit_name(s, d): f"fit alignment{tag}",
                fit_name(s, twin_name(d)): f"fit alignment-control{tag}",
                fit_name(s, BPE): f"fit alignment-bpe{tag}",
            }
        )
        if k == 0:
            for name in ANALYSED:
                for unit in UNIT_KINDS.values():
                    out[f"{unit} {checkpoint(name, 0, n)}"] = f"{unit} {name}"
    return out


def study_text(models: dict, corpus_path: str, config) -> str:
    """The demo's study file: the shallow and deep models with a checkpoint per seed (`paths`,
    labelled `seed S` on the pages) and their first seed's analyses, the third model where
    `models` names it, the corpus cut at `max_length`, the extraction (sublayers, so
    contributions and lens read the stores), the pairs, the fit's seed, the analyses' batch
    size and skip's `skip_docs`, and the deep model's untrained twin of each seed: seed k's
    (from 0) drawn with control_seed + seeds[0] + k (control_seed + seed for consecutive
    seeds). The fits compute ridge alone: cka and procrustes beside it took 10 to 20 s more
    per fit of the tiny demo, whose ridge fit takes about one. `models`: name -> a folder per
    seed (the third model: one folder)."""
    q = json.dumps  # a TOML basic string is a JSON string

    def where(folders) -> str:
        if isinstance(folders, str) or len(folders) == 1:
            one = folders if isinstance(folders, str) else folders[0]
            return f"path = {q(os.path.abspath(one))}"
        paths = ", ".join(q(os.path.abspath(f)) for f in folders)
        labels = ", ".join(q(f"seed {seed}") for seed in config.seeds)
        return f"paths = [{paths}]\nlabels = [{labels}]"

    names = ["shallow", "deep"] + ([BPE] if BPE in models else [])
    blocks = "".join(
        f"\n[[models]]\nname = {q(name)}\n{where(models[name])}"
        + ('\nanalyses = ["contrib", "lens", "skip", "depth"]' if name in ANALYSED else "")
        + "\n"
        for name in names
    )
    pairs = ", ".join(f'["shallow", {q(name)}]' for name in names[1:])
    seeds = config.seeds
    return f"""# The demo's seeds {list(seeds)}, written by align demo.
[study]
name = {q(f"demo, seeds {', '.join(map(str, seeds))}")}
{blocks}
[corpus]
path = {q(os.path.abspath(corpus_path))}
max_length = {MAX_LENGTH}

[extraction]
batch_size = {config.batch_size}
sublayers = true

[pairs]
mode = "list"
list = [{pairs}]

[fit]
seed = {config.fit_seed}

[controls]
random_init = ["deep"]
random_init_seed = {config.control_seed + seeds[0]}

[analyses]
batch_size = {config.batch_size}
skip_docs = {config.skip_docs}
checkpoints = "first"
"""


def run(root: str, models: dict, corpus_path: str, config, log) -> dict:
    """Run the demo's study in ROOT/study and link the demo's paths to its outputs; returns
    {"seeds": per seed {"stores", "results"} (name -> path), "more": {"stores", "results"}
    (the third model and the first seed's analyses), "seconds": step -> seconds of the units
    run now, "replicates": the study's record of the pair shallow -> deep across seeds (None
    with one seed)}."""
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, FILE)
    text = study_text(models, corpus_path, config)
    if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    folder = os.path.join(root, FOLDER)
    report = run_study(load_study(path), folder, log=log)
    state = read_state(folder)
    units, named = state.get("units", {}), steps(config.seeds)
    seconds = {named.get(n, n): units[n].get("seconds", 0.0) for n in report.ran}
    per_seed, n = [], len(config.seeds)
    for k, seed in enumerate(config.seeds):
        held = outputs(k, n, BPE in models)
        top = root if k == 0 else os.path.join(root, "seeds", f"seed-{seed}")
        for part in [held] + ([held["more"]] if k == 0 else []):
            for kind in ("stores", "results"):
                part[kind] = {
                    name: link(os.path.join(top, kind, f"{name}.zarr"), os.path.join(folder, rel))
                    for name, rel in part[kind].items()
                }
        per_seed.append(held)
    link(os.path.join(root, "report"), os.path.join(folder, "report"))
    record = replicates.read(folder, state)
    pair = next(
        (
            p
            for p in (record or {}).get("pairs", [])
            if (p["source"], p["target"]) == ("shallow", "deep")
        ),
        None,
    )
    return {
        "seeds": [{"stores": x["stores"], "results": x["results"]} for x in per_seed],
        "more": per_seed[0]["more"],
        "seconds": seconds,
        "replicates": pair,
    }


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
