"""The study file (TOML): its keys, their types and allowed values, read into a `Study`.

Every refusal is one line naming the file, the key (`[section] key`), the value found and
what is allowed; an unknown key is refused as a misspelling would otherwise be ignored. The
values are then checked by the library's own records (`ModelSpec`, `CorpusSpec`,
`ExtractOptions`, `FitSpec`), whose messages are prefixed by the file.

TOML is read by `tomllib` (Python 3.11+), or by the `tomli` package on Python 3.10.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields, replace

from align import corpus, models
from align.errors import InputError
from align.extraction.extract_options import ExtractOptions
from align.fitting.fit_options import FitSpec

try:  # the measures `align fit` computes; ridge alone where no other is built in
    from align.measures import MEASURES
except ImportError:
    MEASURES = ("ridge",)

ANALYSES = ("contrib", "lens", "skip", "depth")  # per model; depth needs contrib and lens
PAIR_MODES = ("all", "list", "reference")
ROUTES = ("stores", "live")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

# Each section's keys: (type, default). Types: str, int, float (int accepted), bool, list.
SECTIONS = {
    "study": {"name": (str, "study")},
    "corpus": {
        "path": (str, None),
        "dataset": (str, None),
        "format": (str, "plain"),
        "text_field": (str, "text"),
        "doc_split": (str, None),
        "max_length": (int, 512),
        "overflow": (str, "split"),
        "max_docs": (int, None),
        "pack": (str, None),
        "stand_in_token": (int, None),
    },
    "extraction": {
        "boundaries": (str, None),
        "max_tokens": (int, None),
        "batch_size": (int, 8),
        "store_dtype": (str, None),
        "codec": (str, ExtractOptions.codec),
        "sublayers": (bool, False),
    },
    "pairs": {"mode": (str, "all"), "list": (list, None), "reference": (str, None)},
    "fit": {
        "measures": (list, ["ridge"]),
        "permutations": (int, None),
        "test_fraction": (float, 0.2),
        "val_fraction": (float, 0.2),
        "seed": (int, 0),
        "alphas": (list, None),
        "include_first_token": (bool, False),
        "source_boundaries": (str, None),
        "target_boundaries": (str, None),
        "pairing": (str, "auto"),
    },
    "bootstrap": {"resamples": (int, 1000), "seed": (int, 0)},
    "controls": {"random_init": (list, []), "random_init_seed": (int, 0), "shuffle": (bool, False)},
    "analyses": {"batch_size": (int, 8), "skip_docs": (int, None)},
    "route": {"kind": (str, "stores"), "device": (str, "cpu"), "gpu_resource": (bool, False)},
}
MODEL_KEYS = {
    "name": (str, None),
    "path": (str, None),
    "revision": (str, None),
    "family": (str, None),
    "dtype": (str, None),
    "device": (str, "cpu"),
    "analyses": (list, []),
}
TYPE_WORDS = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}
TYPE_WORDS[list] = "a list"


@dataclass(frozen=True)
class StudyModel:
    """One model of the study: its name (the folder and page names) and its `ModelSpec`."""

    name: str
    spec: models.ModelSpec
    analyses: tuple = ()
    twin_of: str | None = None  # the trained model this random-init twin shadows


@dataclass(frozen=True)
class Study:
    """A study file read and checked: everything its units are built from."""

    path: str
    name: str
    models: tuple  # StudyModel, trained ones then the random-init twins
    corpus: corpus.CorpusSpec
    extraction: ExtractOptions
    pairs: tuple  # (source name, target name), trained models only
    fit: FitSpec
    measures: tuple
    shuffle: bool
    analyses_batch: int
    route: str
    device: str
    gpu_resource: bool = False  # on a Dask cluster: every model or solve unit asks for a GPU worker
    skip_docs: int | None = None  # the skip analyses read the corpus's first skip_docs documents

    def model(self, name: str) -> StudyModel:
        return next(m for m in self.models if m.name == name)

    def twin(self, name: str) -> StudyModel | None:
        return next((m for m in self.models if m.twin_of == name), None)


def read_toml(path: str) -> dict:
    """The study file's tables, or one line naming the file and the TOML error."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise InputError(
                "reading a study file on Python 3.10 needs the tomli package: pip install tomli"
            ) from None
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise InputError(
            f"study file {path} does not exist: write one with `align study --init`"
        ) from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"study file {path} is not valid TOML: {e}") from None


def _value(where: str, key: str, value, kind, path: str):
    """`value` if it is of `kind` (an int is a float), else a one-line InputError."""
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        raise InputError(f"study file {path}: {where} {key} = {value!r} must be {TYPE_WORDS[kind]}")
    return value


def _table(where: str, table, keys: dict, path: str) -> dict:
    """A table's values by key, defaults filled in; unknown keys and wrong types refused."""
    if not isinstance(table, dict):
        raise InputError(f"study file {path}: {where} must be a table, not {table!r}")
    for key in table:
        if key not in keys:
            raise InputError(
                f"study file {path}: {where} has no key {key!r}; the keys are {', '.join(keys)}"
            )
    return {
        k: _value(where, k, table[k], kind, path) if k in table else default
        for k, (kind, default) in keys.items()
    }


def _choice(where: str, key: str, value, allowed, path: str):
    if value not in allowed:
        raise InputError(
            f"study file {path}: {where} {key} = {value!r} is not one of {', '.join(map(str, allowed))}"
        )
    return value


def load_study(path: str) -> Study:
    """Read and check the study file at `path`; relative paths in it are from its folder.

    Parameters
    ----------
    path : str
        The study file (TOML).

    Returns
    -------
    Study
        The checked study.

    Raises
    ------
    InputError
        A file that is not valid TOML, an unknown section or a bad value.
    """
    raw = read_toml(path)
    for section in raw:
        if section not in SECTIONS and section != "models":
            raise InputError(
                f"study file {path}: no section [{section}]; the sections are models, "
                + ", ".join(SECTIONS)
            )
    t = {s: _table(f"[{s}]", raw.get(s, {}), keys, path) for s, keys in SECTIONS.items()}
    base = os.path.dirname(os.path.abspath(path))
    trained = _models(raw.get("models"), base, path)
    names = [m.name for m in trained]
    twins = _twins(t["controls"], trained, path)
    try:
        return Study(
            path=os.path.abspath(path),
            name=t["study"]["name"],
            models=tuple(trained) + twins,
            corpus=_corpus(t["corpus"], t["extraction"], base),
            extraction=_extraction(t["extraction"]),
            pairs=_pairs(t["pairs"], names, path),
            measures=_measures(t["fit"]["measures"], path),
            fit=_fit(t["fit"], t["bootstrap"], _measures(t["fit"]["measures"], path)),
            shuffle=t["controls"]["shuffle"],
            analyses_batch=_positive("[analyses]", "batch_size", t["analyses"]["batch_size"], path),
            route=_choice("[route]", "kind", t["route"]["kind"], ROUTES, path),
            device=t["route"]["device"],
            gpu_resource=t["route"]["gpu_resource"],
            skip_docs=_skip_docs(t["analyses"]["skip_docs"], path),
        )
    except InputError as e:
        if str(e).startswith(f"study file {path}"):
            raise
        raise InputError(f"study file {path}: {e}") from None


def _positive(where, key, value, path):
    if value < 1:
        raise InputError(f"study file {path}: {where} {key} = {value} must be at least 1")
    return value


def _skip_docs(value, path):
    if value is not None and value < 1:
        raise InputError(
            f"study file {path}: [analyses] skip_docs = {value} must be at least 1 document "
            "(leave it out to read the whole corpus)"
        )
    return value


def _models(entries, base: str, path: str) -> list:
    if not isinstance(entries, list) or not entries:
        raise InputError(
            f"study file {path}: no [[models]]: name at least two models, each with name and path"
        )
    out = []
    for k, entry in enumerate(entries):
        where = f"[[models]] {k + 1}"
        m = _table(where, entry, MODEL_KEYS, path)
        for key in ("name", "path"):
            if m[key] is None:
                raise InputError(f"study file {path}: {where} has no {key}")
        if not NAME.match(m["name"]):
            raise InputError(
                f"study file {path}: {where} name = {m['name']!r} must be letters, digits, '.', '_' or '-'"
            )
        if m["name"] in [o.name for o in out]:
            raise InputError(f"study file {path}: {where} name = {m['name']!r} is used twice")
        if m["dtype"] is not None:
            _choice(where, "dtype", m["dtype"], models.DTYPES, path)
        for a in m["analyses"]:
            _choice(where, "analyses", a, ANALYSES, path)
        local = os.path.join(base, os.path.expanduser(m["path"]))
        name = os.path.abspath(local) if os.path.exists(local) else m["path"]
        spec = models.ModelSpec(name, m["revision"], m["dtype"], m["device"], family=m["family"])
        out.append(StudyModel(m["name"], spec, tuple(dict.fromkeys(m["analyses"]))))
    if len(out) < 2:
        raise InputError(f"study file {path}: a study compares at least two [[models]], found 1")
    return out


def _twins(controls: dict, trained: list, path: str) -> tuple:
    """The random-init twin of each model `[controls] random_init` names."""
    names = [m.name for m in trained]
    twins = []
    for name in controls["random_init"]:
        _choice("[controls]", "random_init", name, names, path)
        m = next(m for m in trained if m.name == name)
        spec = replace(m.spec, random_init=True, seed=controls["random_init_seed"])
        twins.append(StudyModel(f"{name}.random", spec, (), twin_of=name))
    return tuple(twins)


def _corpus(c: dict, extraction: dict, base: str) -> corpus.CorpusSpec:
    p = c["path"]
    if p is not None:
        p = os.path.abspath(os.path.join(base, os.path.expanduser(p)))
    spec = corpus.CorpusSpec(
        p,
        c["dataset"],
        c["text_field"],
        c["format"],
        c["doc_split"],
        c["max_length"],
        c["overflow"],
        extraction["max_tokens"],
        c["max_docs"],
        c["pack"],
        c["stand_in_token"],
    )
    corpus.validate(spec)
    return spec


def _extraction(e: dict) -> ExtractOptions:
    keys = {f.name for f in fields(ExtractOptions)}
    opts = ExtractOptions(**{k: v for k, v in e.items() if k in keys})
    opts.check()
    return opts


def _pairs(p: dict, names: list, path: str) -> tuple:
    mode = _choice("[pairs]", "mode", p["mode"], PAIR_MODES, path)
    if mode == "all":
        return tuple((s, t) for s in names for t in names if s != t)
    if mode == "reference":
        ref = _choice("[pairs]", "reference", p["reference"], names, path)
        return tuple((m, ref) for m in names if m != ref)
    listed = p["list"] or []
    if not listed:
        raise InputError(
            f"study file {path}: [pairs] mode = 'list' needs list = [[SOURCE, TARGET], ...]"
        )
    out = []
    for pair in listed:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise InputError(
                f"study file {path}: [pairs] list entry {pair!r} must be [SOURCE, TARGET]"
            )
        for name in pair:
            _choice("[pairs]", "list", name, names, path)
        out.append(tuple(pair))
    return tuple(dict.fromkeys(out))


def _fit(f: dict, b: dict, measures: tuple) -> FitSpec:
    spec = FitSpec(
        test_fraction=f["test_fraction"],
        val_fraction=f["val_fraction"],
        seed=f["seed"],
        alphas=tuple(f["alphas"]) if f["alphas"] is not None else FitSpec.alphas,
        include_first_token=f["include_first_token"],
        source_boundaries=f["source_boundaries"],
        target_boundaries=f["target_boundaries"],
        bootstrap=b["resamples"],
        bootstrap_seed=b["seed"],
        pairing=f["pairing"],
        measures=measures,
        permutations=f["permutations"],
    )
    spec.checked()
    return spec


def _measures(measures: list, path: str) -> tuple:
    if not measures:
        raise InputError(
            f"study file {path}: [fit] measures is empty: name at least one of {', '.join(MEASURES)}"
        )
    for m in measures:
        _choice("[fit]", "measures", m, MEASURES, path)
    return tuple(dict.fromkeys(measures))
