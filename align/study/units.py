"""A study as a graph of units: each unit one run of an existing command's library function
(extraction, fit, analysis) or the report, its output folder under the study's DIR, the units
it reads from, and its definition, the options that decide its output.

A unit's key is the hash of its definition, of the contents of the files it reads (a model
folder's config, weights and tokenizer, the corpus's files: `contents`) and of the keys of the
units it reads: a changed option or a rewritten input file changes the key of its unit and of
every unit downstream, and nothing else. Units are listed in an order where each comes after
every unit it reads (`plan`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace

from align.analyses.analysis_options import LensOptions
from align.study import contents
from align.study.schema import SEPARATOR, SHUFFLE, Study, replicate_name

# "lens" is the logit lens; "lens-linear" and "lens-tuned" the other kinds of `[analyses]
# lens`; "lens-through" a pair's source read through its target's head (`[analyses]
# lens_through`).
LENS_UNITS = {"logit": "lens", "linear": "lens-linear", "tuned": "lens-tuned"}
THROUGH = "lens-through"
KINDS = (
    "extract",
    "fit",
    "contrib",
    "lens",
    "lens-linear",
    "lens-tuned",
    THROUGH,
    "skip",
    "depth",
    "replicates",
    "report",
)
GPU_KINDS = ("extract", "fit", "contrib", "lens", "lens-linear", "lens-tuned", THROUGH, "skip")


@dataclass(frozen=True)
class Unit:
    """One unit: `name` ("fit a->b"), `kind` (KINDS), `output` (relative to DIR), `inputs`
    (names of the units it reads), `definition` (JSON-able: what decides its output), and the
    models it concerns (`models`: names)."""

    name: str
    kind: str
    output: str
    inputs: tuple = ()
    definition: dict = field(default_factory=dict, hash=False)
    models: tuple = ()
    control: str | None = None  # "shuffle" or "random_init" for a control fit
    key: str = ""
    contents: dict = field(default_factory=dict, hash=False)  # {file label: sha256}
    input_keys: dict = field(default_factory=dict, hash=False)  # {input unit: its key}

    @property
    def gpu(self) -> bool:
        """Whether this unit computes on a device where one is asked for (a Dask worker
        resource "GPU" on a cluster)."""
        return self.kind in GPU_KINDS and self.definition.get("device", "cpu") != "cpu"


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def unit_key(kind: str, definition: dict, input_keys: list, contents: dict | None = None) -> str:
    """sha256 (16 hex digits) of the unit's kind, its definition, the contents of the files it
    reads ({label: sha256}) and the keys of the units it reads (two analyses of one model share
    a definition: the kind tells them apart)."""
    blob = json.dumps([kind, _jsonable(definition), input_keys, contents or {}], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def pair_stem(source: str, target: str, control: str | None = None) -> str:
    """SOURCE--TARGET, or SOURCE--TARGET.shuffle for the shuffle control's fit."""
    return f"{source}{SEPARATOR}{target}" + (SHUFFLE if control == "shuffle" else "")


def output_of(kind: str, models: tuple = (), control: str | None = None) -> str:
    """The output of a unit of `kind` (KINDS) on `models` (one name, a fit's two), relative to
    DIR: the one function that names them. Injective over the names `schema.name_refusal`
    accepts (tests/unit/test_study_names.py enumerates them): stores/NAME.zarr,
    results/fits/SOURCE--TARGET[.shuffle].zarr (a random-init target is NAME.random),
    results/KIND/NAME.zarr, results/lens-through/SOURCE--TARGET (a folder: the maps onto the
    target's last boundary, maps.zarr, and the lens, lens.zarr), results/replicates.json (the
    spread across replicates), report."""
    if kind == "report":
        return "report"
    if kind == "replicates":
        return "results/replicates.json"
    if kind == "extract":
        return f"stores/{models[0]}.zarr"
    if kind == "fit":
        return f"results/fits/{pair_stem(models[0], models[1], control)}.zarr"
    if kind == THROUGH:
        return f"results/{THROUGH}/{pair_stem(models[0], models[1])}"
    return f"results/{kind}/{models[0]}.zarr"


def plan(study: Study, hashes: contents.Hashes | None = None) -> list:
    """Every unit of `study`, each after the units it reads, with its key; `hashes` gives the
    input files' hashes (a study's state caches them; None: every file hashed)."""
    units = []
    live = study.route == "live"
    cspec = asdict(study.corpus)
    if not live:
        for m in study.models:
            units.append(
                Unit(
                    f"extract {m.name}",
                    "extract",
                    output_of("extract", (m.name,)),
                    definition={
                        "model": asdict(m.spec),
                        "corpus": cspec,
                        "options": asdict(study.extraction),
                        "device": m.spec.device,
                    },
                    models=(m.name,),
                )
            )
    for s, t in study.pairs:
        fits = [(s, t, None)]
        if study.shuffle:
            fits.append((s, t, "shuffle"))
        twin = study.twin(t)
        if twin is not None:
            fits.append((s, twin.name, "random_init"))
        for src, tgt, control in fits:
            spec = replace(study.fit, control="shuffle" if control == "shuffle" else None)
            definition = {
                "source": src,
                "target": tgt,
                "spec": asdict(spec),
                "measures": list(study.measures),
                "route": study.route,
                "device": study.device,
                "control": control,
            }
            if live:
                definition.update(
                    models=[asdict(study.model(src).spec), asdict(study.model(tgt).spec)],
                    corpus=cspec,
                    batch_size=study.extraction.batch_size,
                )
            units.append(
                Unit(
                    fit_name(src, tgt, control),
                    "fit",
                    output_of("fit", (src, tgt), control),
                    inputs=() if live else (f"extract {src}", f"extract {tgt}"),
                    definition=definition,
                    models=(src, tgt),
                    control=control,
                )
            )
    units += _analyses(study, cspec)
    if study.lens_through:
        units += [through_unit(study, s, t) for s, t in study.pairs]
    if study.replicated:
        units.append(replicates_unit(study))
    units.append(
        Unit(
            "report",
            "report",
            output_of("report"),
            inputs=tuple(u.name for u in units),
            definition=report_definition(study),
        )
    )
    return _keyed([_with_contents(u, study, hashes or contents.Hashes()) for u in units])


def report_definition(study: Study) -> dict:
    """The report unit's definition: the study's name, and the labels its [[models]] give
    their checkpoints where any does (`labels.py`), so that an edit of them writes the pages
    anew and runs nothing else."""
    given = {m.name: m.label for m in study.models if m.label is not None}
    return {"name": study.name, **({"labels": given} if given else {})}


def fit_name(source: str, target: str, control: str | None = None) -> str:
    """The unit name of the fit source -> target (its shuffle control: "... shuffle")."""
    return f"fit {source}->{target}" + (" shuffle" if control == "shuffle" else "")


def controls_of(study: Study, source: str, target: str) -> dict:
    """{control: (source, target)} of the fits the study makes beside source -> target: its
    shuffle control, and the fit into the target's random-init twin."""
    out = {}
    twin = study.twin(target)
    if twin is not None:
        out["random_init"] = (source, twin.name)
    if study.shuffle:
        out["shuffle"] = (source, target)
    return out


def replicates_unit(study: Study) -> Unit:
    """The unit that reads every replicate pair's fits (and their controls') and writes the
    spread of their statistics across replicates (`align.study.replicates`)."""
    pairs, inputs = [], []
    for s, t, replicate_pairs in study.replicated:
        pairs.append([s, t, [list(p) for p in replicate_pairs]])
        for rs, rt in replicate_pairs:
            inputs.append(fit_name(rs, rt))
            for control, (cs, ct) in controls_of(study, rs, rt).items():
                inputs.append(fit_name(cs, ct, control))
    return Unit(
        "replicates",
        "replicates",
        output_of("replicates"),
        inputs=tuple(inputs),
        definition={"pairs": pairs},
    )


def _with_contents(u: Unit, study: Study, hashes) -> Unit:
    """`u` with the contents of the files it reads: a unit that runs a model reads its folder
    and the corpus (its definition's own, the skip units' cut of it), a lens from a store the
    checkpoint whose head it applies; a unit that reads other units' outputs only, nothing
    more (their keys cover it)."""
    d = u.definition
    found = {}
    if "corpus" in d and "store" not in d:
        for name in u.models:
            found.update(contents.of_model(name, study.model(name).spec, hashes))
        found.update(contents.of_corpus(study.corpus, hashes))
    elif u.kind in ("lens", "lens-linear", "lens-tuned", THROUGH):
        head = u.models[-1]  # the model whose head reads the boundaries
        found.update(contents.of_model(head, study.model(head).spec, hashes))
    return replace(u, contents=found)


def reads_stores(study: Study) -> bool:
    """Whether the contrib and lens units read each model's activation store instead of
    running the model: on the stores route with `[extraction] sublayers = true` and every
    boundary kept, the store holds all that `run_contrib(store=...)` and
    `run_lens(store=...)` read (the same numbers as the model's, up to the store's dtype)."""
    return (
        study.route == "stores"
        and study.extraction.sublayers
        and study.extraction.boundaries is None
    )


def skip_corpus(study: Study):
    """The corpus of the skip units: the study's, cut to its first `[analyses] skip_docs`
    documents (within the corpus's own `max_docs`)."""
    n = study.skip_docs
    if n is None:
        return study.corpus
    if study.corpus.max_docs is not None:
        n = min(n, study.corpus.max_docs)
    return replace(study.corpus, max_docs=n)


def _analyses(study: Study, cspec: dict) -> list:
    units = []
    from_store = reads_stores(study)
    for m in analysed(study):
        wanted = set(m.analyses) | ({"contrib", "lens"} if "depth" in m.analyses else set())
        if "logit" not in study.lens_kinds and "depth" not in m.analyses:
            wanted.discard("lens")  # "lens" names the logit lens's unit
        for kind in ("contrib", "lens", "skip"):
            if kind not in wanted:
                continue
            bootstrap = [study.fit.bootstrap, study.fit.bootstrap_seed]
            if from_store and kind != "skip":  # one forward, the extraction's
                definition = {
                    "store": output_of("extract", (m.name,)),
                    "model": asdict(m.spec),  # lens: the checkpoint whose head it applies
                    "bootstrap": bootstrap,
                    "device": m.spec.device if kind == "lens" else "cpu",
                }
                inputs = (f"extract {m.name}",)
            else:
                corpus = asdict(skip_corpus(study)) if kind == "skip" else cspec
                definition = {
                    "model": asdict(m.spec),
                    "corpus": corpus,
                    "batch_size": study.analyses_batch,
                    "bootstrap": bootstrap,
                    "device": m.spec.device,
                }
                inputs = ()
            units.append(
                Unit(
                    f"{kind} {m.name}",
                    kind,
                    output_of(kind, (m.name,)),
                    inputs=inputs,
                    definition=definition,
                    models=(m.name,),
                )
            )
        if "lens" in m.analyses:
            units += [_lens_unit(study, m, k, cspec) for k in study.lens_kinds if k != "logit"]
        if "depth" in m.analyses:
            units.append(
                Unit(
                    f"depth {m.name}",
                    "depth",
                    output_of("depth", (m.name,)),
                    inputs=(f"contrib {m.name}", f"lens {m.name}"),
                    definition={"bootstrap": [study.fit.bootstrap, study.fit.bootstrap_seed]},
                    models=(m.name,),
                )
            )
    return units


def analysed(study: Study) -> list:
    """The models whose analyses the study runs: every model, or where `[analyses]
    checkpoints = "first"`, of a model of several checkpoints its first (NAME@1) only."""
    if study.analysed_checkpoints == "all":
        return list(study.models)
    return [m for m in study.models if m.group is None or m.name == replicate_name(m.group, 1)]


def lens_options(study: Study, kind: str) -> dict:
    """The options that decide a linear or tuned lens unit's output besides its inputs: the
    lens's own (`LensOptions` defaults, the tuned lens's steps `[analyses] lens_steps`) and the
    bootstrap."""
    o = LensOptions()
    out = {"kind": kind, "bootstrap": [study.fit.bootstrap, study.fit.bootstrap_seed]}
    if kind == "tuned":
        out.update(steps=study.lens_steps, train_tokens=o.train_tokens, lens_seed=o.lens_seed)
    return out


def _lens_unit(study: Study, m, kind: str, cspec: dict) -> Unit:
    """The linear or tuned lens of model `m`: from its store on the stores route, else from
    the model over the study's corpus (extracted into a temporary store)."""
    definition = {**lens_options(study, kind), "model": asdict(m.spec), "device": m.spec.device}
    inputs = ()
    if study.route == "stores":
        definition["store"] = output_of("extract", (m.name,))
        inputs = (f"extract {m.name}",)
    else:
        definition["corpus"] = cspec
    unit_kind = LENS_UNITS[kind]
    return Unit(
        f"{unit_kind} {m.name}",
        unit_kind,
        output_of(unit_kind, (m.name,)),
        inputs=inputs,
        definition=definition,
        models=(m.name,),
    )


def through_spec(study: Study):
    """The fit of a lens-through unit: the study's, at the target's last boundary (-1), ridge
    alone, its maps kept, no bootstrap (the lens draws its own intervals)."""
    return replace(
        study.fit,
        target_boundaries="-1",
        save_maps=True,
        measures=("ridge",),
        bootstrap=0,
        permutations=None,
    )


def through_unit(study: Study, source: str, target: str) -> Unit:
    """`source` read through `target`'s head: the ridge maps from every boundary of the
    source's store onto the target's last boundary, fitted with the pair's fit options
    (`FitSpec` with target boundary -1 and maps kept: the column the pair's fit holds), then
    the lens through them (`align lens --through`)."""
    spec = through_spec(study)
    return Unit(
        f"{THROUGH} {source}->{target}",
        THROUGH,
        output_of(THROUGH, (source, target)),
        inputs=(f"extract {source}", f"extract {target}"),
        definition={
            "source": source,
            "target": target,
            "spec": asdict(spec),
            "model": asdict(study.model(target).spec),
            "bootstrap": [study.fit.bootstrap, study.fit.bootstrap_seed],
            "device": study.model(target).spec.device,
        },
        models=(source, target),
    )


def _keyed(units: list) -> list:
    keys, out = {}, []
    for u in units:
        k = unit_key(u.kind, u.definition, [keys[i] for i in u.inputs], u.contents)
        keys[u.name] = k
        out.append(replace(u, key=k, input_keys={i: keys[i] for i in u.inputs}))
    return out


def changed(old: dict, new: dict, prefix: str = "") -> list:
    """The dotted names of the fields that differ between two definitions."""
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += changed(a, b, f"{prefix}{k}.")
        elif _jsonable(a) != _jsonable(b):
            out.append(prefix + k)
    return out
