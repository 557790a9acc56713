"""The study file (TOML): its keys, their types and allowed values, read into a `Study`.

`[corpus]`, `[extraction]` and `[fit]` are the options of `align extract` and `align fit` as
tables: each key is an option of the corpus (`CorpusSpec`), of the extraction
(`ExtractOptions`) or of what a fit computes (`FitSpec`), named, typed and defaulted by the
option's declaration (`[fit] bootstrap = 1000` is `--bootstrap 1000`; a list where the option
takes a comma-separated list); an option the study sets otherwise says where (`ELSEWHERE`).

Every refusal is one line naming the file, the key (`[section] key`), the value found and
what is allowed; an unknown key is refused as a misspelling would otherwise be ignored. The
values are then checked by the library's own records (`ModelSpec`, `CorpusSpec`,
`ExtractOptions`, `FitSpec`), whose messages are prefixed by the file.

TOML is read by `tomllib` (Python 3.11+), or by the `tomli` package on Python 3.10.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from align import corpus, messages, models, seeding, textfiles
from align.analyses.analysis_options import LensOptions
from align.declarations import declaration, keys, refusal
from align.errors import InputError
from align.extraction.extract_options import ExtractOptions
from align.fitting.fit_options import FitSpec

try:  # the measures `align fit` computes; ridge alone where no other is built in
    from align.measures import MEASURES
except ImportError:
    MEASURES = ("ridge",)

ANALYSES = ("contrib", "lens", "skip", "depth")  # per model; depth needs contrib and lens
LENS_KINDS = ("logit", "linear", "tuned")  # `[analyses] lens`: the lenses a model's lens runs
PAIR_MODES = ("all", "list", "reference")
ROUTES = ("stores", "live")
CHECKPOINTS = ("all", "first")  # [analyses] checkpoints: which checkpoints of a model are analysed
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# How outputs are named from model names (`units.output_of`): a pair's as SOURCE--TARGET, a
# random-init twin as NAME.random, a shuffle control's fit as SOURCE--TARGET.shuffle. A model
# name holding the separator or ending in a suffix could name another unit's output: refused.
SEPARATOR = "--"
RANDOM, SHUFFLE = ".random", ".shuffle"
# A model of several checkpoints (`paths`, or `revisions` beside `path`) is one model per
# checkpoint, named NAME@K (K from 1): `@` is no character of a name the schema accepts, so a
# replicate's name is never another model's, and holds neither the separator nor a suffix.
REPLICATE = "@"

# The sections that are a command's options as a table, each key the option of its name with
# its type and default (`declarations.keys`): [corpus] the corpus's (`CorpusSpec`), [extraction]
# `align extract`'s (`ExtractOptions`), [fit] what a fit computes (`FitSpec`). An option of
# `align extract` or `align fit` that is no key says where the study sets it (`ELSEWHERE`, by
# its parameter; `RECORDS_ELSEWHERE`, a whole record).
ELSEWHERE = {
    "control": "[controls] shuffle: each pair's shuffle control is fitted beside it, its own unit",
    "output": "the study names each unit's output (stores/NAME.zarr, results/fits/S--T.zarr)",
    "live": "[route] kind = 'live'",
    "dry_run": "`align study --dry-run`",
    "device_memory": "the live route's default (90% of the GPU's free memory)",
    "break_lock": "`align extract --break-lock` on the store (the study's units hold their locks)",
    "overwrite": "a unit's output is replaced when its key changes",
}
RECORDS_ELSEWHERE = {
    "Execution": "[route] device, `align study --scheduler`: the study places its units",
    "ModelSpec": "[[models]] and [controls] random_init",
    "LiveJob": "[route] kind = 'live'; its batch_size and allow_long are [extraction]'s",
}
CORPUS_KEYS = keys(corpus.CorpusSpec)  # {key: (type, default, field)}
EXTRACTION_KEYS = keys(ExtractOptions, leave_out=ELSEWHERE)
FIT_KEYS = keys(FitSpec, leave_out=ELSEWHERE)
# `[analyses] lens_steps`: the tuned lens's optimiser steps, `align lens --steps` (its type,
# default and limits from that option's declaration)
LENS_STEPS = keys(LensOptions)["steps"]
# Keys of earlier study files, refused with the key that replaced them.
RENAMED = {
    ("bootstrap", "resamples"): "[fit] bootstrap",
    ("bootstrap", "seed"): "[fit] bootstrap_seed",
    ("extraction", "max_tokens"): "[corpus] max_tokens",
}


def _typed(generated: dict) -> dict:
    return {key: (kind, default) for key, (kind, default, _) in generated.items()}


# Each section's keys: (type, default). Types: str, int, float (int accepted), bool, list.
SECTIONS = {
    "study": {"name": (str, "study")},
    "corpus": {"path": (str, None), **_typed(CORPUS_KEYS)},
    "extraction": {**_typed(EXTRACTION_KEYS), "reuse": (list, [])},
    "pairs": {"mode": (str, "all"), "list": (list, None), "reference": (str, None)},
    "fit": _typed(FIT_KEYS),
    "controls": {"random_init": (list, []), "random_init_seed": (int, 0), "shuffle": (bool, False)},
    "analyses": {
        "batch_size": (int, 8),
        "skip_docs": (int, None),
        "lens": (object, ["logit"]),  # true, a kind, or a list of kinds (`_lens_kinds`)
        "lens_through": (bool, False),
        "lens_steps": LENS_STEPS[:2],
        "checkpoints": (str, "all"),
    },
    "route": {"kind": (str, "stores"), "device": (str, "cpu"), "gpu_resource": (bool, False)},
}
MODEL_KEYS = {
    "name": (str, None),
    "path": (str, None),
    "paths": (list, None),
    "revision": (str, None),
    "revisions": (list, None),
    "labels": (list, None),
    "family": (str, None),
    "dtype": (str, None),
    "device": (str, "cpu"),
    "analyses": (list, []),
}
# The study keys an option of the command line also sets: (record, field), whose declaration
# (`align.declarations`) gives the limits the command line enforces; the study enforces them
# with the command line's words (`declarations.refusal`) before anything runs.
DECLARED = {
    **{("corpus", key): (corpus.CorpusSpec, name) for key, (_, _, name) in CORPUS_KEYS.items()},
    **{
        ("extraction", key): (ExtractOptions, name) for key, (_, _, name) in EXTRACTION_KEYS.items()
    },
    **{("fit", key): (FitSpec, name) for key, (_, _, name) in FIT_KEYS.items()},
    ("controls", "random_init_seed"): (models.ModelSpec, "seed"),
    ("analyses", "lens_steps"): (LensOptions, LENS_STEPS[2]),
    ("models", "dtype"): (models.ModelSpec, "dtype"),
    ("models", "family"): (models.ModelSpec, "family"),
}
# A record field as the study file names it, for the records' own messages: each section's
# keys, then the declared fields (the first section of a key wins: `seed` is [fit] seed).
TERMS = {k: f"[{section}] {k}" for section, keys in reversed(SECTIONS.items()) for k in keys}
TERMS.update({name: f"[{s}] {k}" for (s, k), (_, name) in reversed(DECLARED.items())})
TYPE_WORDS = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}
TYPE_WORDS[list] = "a list"


@dataclass(frozen=True)
class StudyModel:
    """One model of the study: its name (the folder and page names) and its `ModelSpec`."""

    name: str
    spec: models.ModelSpec
    analyses: tuple = ()
    twin_of: str | None = None  # the trained model this random-init twin shadows
    group: str | None = None  # the [[models]] name of which this is a replicate (NAME@K)
    label: str | None = None  # the entry's K-th `labels`: what the pages show beside NAME@K


@dataclass(frozen=True)
class Study:
    """A study file read and checked: everything its units are built from."""

    path: str
    name: str
    models: tuple  # StudyModel, trained ones then the random-init twins
    corpus: corpus.CorpusSpec
    extraction: ExtractOptions
    pairs: tuple  # (source name, target name), trained models (replicates) only
    fit: FitSpec
    measures: tuple
    shuffle: bool
    analyses_batch: int
    route: str
    device: str
    gpu_resource: bool = False  # on a Dask cluster: every model or solve unit asks for a GPU worker
    skip_docs: int | None = None  # the skip analyses read the corpus's first skip_docs documents
    # "all": a model of several checkpoints has its analyses run on each; "first": on its first
    analysed_checkpoints: str = "all"
    reuse: tuple = ()  # folders whose complete stores of the same identity an extraction reuses
    # ((source, target, ((replicate source, replicate target), ...)), ...): each pair of
    # [[models]] names where one names several checkpoints, and the pairs fitted for it
    replicated: tuple = ()
    lens_kinds: tuple = ("logit",)  # the lenses of a model whose analyses name "lens"
    lens_through: bool = False  # each pair's source read through its target's head
    lens_steps: int = LENS_STEPS[1]  # the tuned lens's optimiser steps per boundary

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
    if not os.path.lexists(path):
        raise InputError(f"study file {path} does not exist: write one with `align study --init`")
    text = textfiles.read(path, "study file")  # not UTF-8 (binary, UTF-16): one line
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"study file {path} is not valid TOML: {e}") from None


def _value(where: str, key: str, value, kind, path: str):
    """`value` if it is of `kind` (an int is a float; `object`: any value, its key's own
    check follows), else a one-line InputError."""
    if kind is object:
        return value
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        raise InputError(f"study file {path}: {where} {key} = {value!r} must be {TYPE_WORDS[kind]}")
    return value


def _declared(section: str, where: str, values: dict, path: str) -> None:
    """Refuse a value the command line's option for the same field would refuse, in its
    words, naming the option (`DECLARED`)."""
    for key, value in values.items():
        if (section, key) not in DECLARED:
            continue
        record, name = DECLARED[(section, key)]
        flag = declaration(record, name).flag
        why = refusal(flag, value)
        if why:
            raise InputError(
                f"study file {path}: {where} {key} = {value!r}: {why} (as {flag.flags[0]} on the "
                "command line)"
            )


def _renamed(section: str, table, path: str) -> None:
    """Refuse a key of an earlier study file, naming the key that replaced it."""
    for (old_section, key), now in RENAMED.items():
        if old_section == section and isinstance(table, dict) and key in table:
            raise InputError(
                f"study file {path}: [{section}] {key} is now {now} (as the command line's "
                f"option of that name): write {now.split()[-1]} = {table[key]!r} under "
                f"{now.split()[0]}"
            )
    if section in {s for s, _ in RENAMED} and section not in SECTIONS:
        raise InputError(
            f"study file {path}: no section [{section}]; its keys are now "
            f"{', '.join(now for (s, _), now in RENAMED.items() if s == section)}"
        )


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
        _renamed(section, raw[section], path)
        if section not in SECTIONS and section != "models":
            raise InputError(
                f"study file {path}: no section [{section}]; the sections are models, "
                + ", ".join(SECTIONS)
            )
    for section in ("corpus", "extraction", "fit"):
        for key in raw.get(section, {}) if isinstance(raw.get(section), dict) else ():
            if key in ELSEWHERE:
                raise InputError(
                    f"study file {path}: [{section}] has no key {key!r}: {ELSEWHERE[key]}"
                )
    t = {s: _table(f"[{s}]", raw.get(s, {}), keys, path) for s, keys in SECTIONS.items()}
    for section, values in t.items():
        _declared(section, f"[{section}]", values, path)
    base = os.path.dirname(os.path.abspath(path))
    trained = _models(raw.get("models"), base, path)
    groups = {}  # [[models]] name -> its models' names (NAME@K for each checkpoint, or NAME)
    for m in trained:
        groups.setdefault(m.group or m.name, []).append(m.name)
    names = list(groups)
    twins = _twins(t["controls"], trained, names, path)
    try:
        pairs = _pairs(t["pairs"], names, path)
        replicated = _replicated(pairs, groups, path)
        return Study(
            path=os.path.abspath(path),
            name=t["study"]["name"],
            models=tuple(trained) + twins,
            corpus=_corpus(t["corpus"], base),
            extraction=_extraction(t["extraction"]),
            pairs=tuple(p for _, _, ps in replicated for p in ps),
            replicated=tuple(r for r in replicated if len(r[2]) > 1),
            measures=_measures(t["fit"]["measures"], path),
            fit=_fit(t["fit"], _measures(t["fit"]["measures"], path)),
            shuffle=t["controls"]["shuffle"],
            analyses_batch=_positive("[analyses]", "batch_size", t["analyses"]["batch_size"], path),
            route=_choice("[route]", "kind", t["route"]["kind"], ROUTES, path),
            device=t["route"]["device"],
            gpu_resource=t["route"]["gpu_resource"],
            skip_docs=_skip_docs(t["analyses"]["skip_docs"], path),
            analysed_checkpoints=_choice(
                "[analyses]", "checkpoints", t["analyses"]["checkpoints"], CHECKPOINTS, path
            ),
            lens_kinds=_lens_kinds(t["analyses"]["lens"], path),
            lens_through=_lens_through(t["analyses"]["lens_through"], t["route"]["kind"], path),
            lens_steps=t["analyses"]["lens_steps"],
            reuse=_reuse(t["extraction"]["reuse"], base, path),
        )
    except InputError as e:
        if str(e).startswith(f"study file {path}"):
            raise
        # The records' checks name their fields (`test_fraction`): shown as the study's keys.
        raise InputError(f"study file {path}: {messages.shown(str(e), TERMS.get)}") from None


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


def _lens_kinds(value, path: str) -> tuple:
    """The lenses `[analyses] lens` names: true (the logit lens), one kind or a list of kinds
    of LENS_KINDS; anything else refused in one line naming the value."""
    if value is True:
        return ("logit",)
    kinds = [value] if isinstance(value, str) else value
    allowed = ", ".join(LENS_KINDS)
    if not isinstance(kinds, list) or not kinds or not all(isinstance(k, str) for k in kinds):
        raise InputError(
            f"study file {path}: [analyses] lens = {value!r} must be true or a list of lens "
            f"kinds ({allowed})"
        )
    unknown = [k for k in kinds if k not in LENS_KINDS]
    if unknown:
        raise InputError(
            f"study file {path}: [analyses] lens names unknown kinds {', '.join(map(repr, unknown))}; "
            f"the kinds are {allowed}"
        )
    return tuple(dict.fromkeys(kinds))


def _lens_through(value: bool, route: str, path: str) -> bool:
    """`[analyses] lens_through`: the maps are fitted between the pair's stores, so the stores
    route alone."""
    if value and route != "stores":
        raise InputError(
            f"study file {path}: [analyses] lens_through = true reads the models' activation "
            f'stores: set [route] kind = "stores" (it is {route!r}) or leave lens_through out'
        )
    return value


def _models(entries, base: str, path: str) -> list:
    if not isinstance(entries, list) or not entries:
        raise InputError(
            f"study file {path}: no [[models]]: name at least two models, each with name and path"
        )
    out = []
    names = []
    for k, entry in enumerate(entries):
        where = f"[[models]] {k + 1}"
        m = _table(where, entry, MODEL_KEYS, path)
        _declared("models", where, m, path)
        if m["name"] is None:
            raise InputError(f"study file {path}: {where} has no name")
        refusal = name_refusal(m["name"], names)
        if refusal:
            raise InputError(f"study file {path}: {where} name = {m['name']!r} {refusal}")
        if m["dtype"] is not None:
            _choice(where, "dtype", m["dtype"], models.DTYPES, path)
        for a in m["analyses"]:
            _choice(where, "analyses", a, ANALYSES, path)
        names.append(m["name"])
        checkpoints = _checkpoints(where, m, base, path)
        shown = _labels(where, m, len(checkpoints), path)
        for j, (where_from, revision) in enumerate(checkpoints):
            spec = models.ModelSpec(
                where_from, revision, m["dtype"], m["device"], family=m["family"]
            )
            one = len(checkpoints) == 1
            name = m["name"] if one else replicate_name(m["name"], j + 1)
            analyses = tuple(dict.fromkeys(m["analyses"]))
            group = None if one else m["name"]
            out.append(StudyModel(name, spec, analyses, group=group, label=shown[j]))
    if len(names) < 2:
        raise InputError(f"study file {path}: a study compares at least two [[models]], found 1")
    return out


def replicate_name(name: str, k: int) -> str:
    """The name of checkpoint `k` (from 1) of model `name`: NAME@K."""
    return f"{name}{REPLICATE}{k}"


def _checkpoints(where: str, m: dict, base: str, path: str) -> list:
    """(path or hub id, revision) of each checkpoint of a [[models]] entry: its `path` (at its
    `revision`), each of its `paths`, or its `path` at each of its `revisions`."""
    for one, several in (("path", "paths"), ("revision", "revisions")):
        if m[one] is not None and m[several] is not None:
            raise InputError(
                f"study file {path}: {where} has both {one} and {several}: give {one} for one "
                f"checkpoint or {several} for several"
            )
    if m["paths"] is not None and m["revisions"] is not None:
        raise InputError(
            f"study file {path}: {where} has both paths and revisions: give paths (one folder or "
            "hub id per checkpoint) or path with revisions, not both"
        )
    if m["path"] is None and m["paths"] is None:
        raise InputError(f"study file {path}: {where} has no path")
    for key in ("paths", "revisions"):
        listed = m[key]
        if listed is None:
            continue
        if len(listed) < 2 or not all(isinstance(x, str) and x for x in listed):
            raise InputError(
                f"study file {path}: {where} {key} = {listed!r} must list at least two "
                f"checkpoints as strings (one checkpoint: give {key[:-1]} = ...)"
            )
    located = [_located(p, base) for p in m["paths"] or [m["path"]]]
    revisions = m["revisions"] or [m["revision"]]
    checkpoints = [(p, r) for p in located for r in revisions]
    for j, c in enumerate(checkpoints):
        if c in checkpoints[:j]:
            key = "paths" if m["paths"] else "revisions"
            raise InputError(
                f"study file {path}: {where} {key} names checkpoint {m[key][j]!r} twice: its "
                "replicates would be one model and their spread nothing but a copy"
            )
    return checkpoints


def _labels(where: str, m: dict, count: int, path: str) -> list:
    """What the pages show beside each checkpoint's NAME@K: the entry's `labels`, one string a
    checkpoint in their order, or None each where it gives none (`labels.py` names them)."""
    given = m["labels"]
    if given is None:
        return [None] * count
    if count == 1:
        raise InputError(
            f"study file {path}: {where} labels = {given!r} names checkpoints, and it has one: "
            "give labels beside paths or revisions, one a checkpoint, or leave it out"
        )
    if len(given) != count or not all(isinstance(x, str) and x.strip() for x in given):
        raise InputError(
            f"study file {path}: {where} labels = {given!r} must list {count} strings, one for "
            f"each of its {count} checkpoints in their order"
        )
    for j, label in enumerate(given):
        if label in given[:j]:
            raise InputError(
                f"study file {path}: {where} labels names {label!r} twice: give each "
                "checkpoint its own label, or leave labels out"
            )
    return list(given)


def _located(p: str, base: str) -> str:
    """A local folder's absolute path (relative to the study file's), or the hub id as named."""
    local = os.path.join(base, os.path.expanduser(p))
    return os.path.abspath(local) if os.path.exists(local) else p


def _replicated(pairs: tuple, groups: dict, path: str) -> list:
    """(source, target, replicate pairs) of each pair of [[models]] names: checkpoint k of the
    source with checkpoint k of the target where both name the same count, a single checkpoint
    with each of the other's; different counts above one refused (no pairing is given)."""
    out = []
    for s, t in pairs:
        a, b = groups[s], groups[t]
        if len(a) == len(b):
            out.append((s, t, tuple(zip(a, b))))
        elif len(a) == 1 or len(b) == 1:
            out.append((s, t, tuple((x, y) for x in a for y in b)))
        else:
            raise InputError(
                f"study file {path}: [pairs] {s} -> {t}: {s} names {len(a)} checkpoints and {t} "
                f"{len(b)}; replicates pair checkpoint k of one with checkpoint k of the other, "
                "so both need the same count (or one of them a single checkpoint)"
            )
    return out


def name_refusal(name: str, before=()) -> str | None:
    """Why a model may not be named `name` beside the names `before` (None: it may), in words
    that follow `[[models]] K name = '...'`. Every name this accepts names its own outputs:
    `units.output_of` is injective over them (a pair's SOURCE--TARGET splits at its last
    `--`, as no name holds one and none starts with `-`; no name ends in a suffix the study
    appends), and no two differ only in case (one file on a case-insensitive disk)."""
    if not NAME.match(name):
        return "must be letters, digits, '.', '_' or '-', starting with a letter or digit"
    if SEPARATOR in name:
        return (
            f"holds {SEPARATOR!r}, which separates source and target in a pair's outputs "
            f"(results/fits/SOURCE{SEPARATOR}TARGET.zarr): two pairs could write one output; rename it"
        )
    base = name.rsplit(".", 1)[0]
    if name.endswith(RANDOM):
        return (
            f"ends in {RANDOM!r}, which names a random-init twin (random_init = [{base!r}] makes "
            f"{name}, stores/{name}.zarr): two units could write one output; rename it"
        )
    if name.endswith(SHUFFLE):
        return (
            f"ends in {SHUFFLE!r}, which names a shuffle control's fit ([controls] shuffle writes "
            f"the pair S -> {base} to results/fits/S{SEPARATOR}{name}.zarr): two units could write "
            "one output; rename it"
        )
    same = next((b for b in before if b.casefold() == name.casefold()), None)
    if same == name:
        return "is used twice"
    if same is not None:
        return (
            f"differs from {same!r} only in case: on a case-insensitive disk their outputs are "
            "one file; rename one"
        )
    return None


def twin_name(name: str) -> str:
    """The name of the random-init twin of model `name`."""
    return name + RANDOM


def _twins(controls: dict, trained: list, names: list, path: str) -> tuple:
    """The random-init twin of each model `[controls] random_init` names: of each of its
    checkpoints, the one of checkpoint K drawn with `random_init_seed` + K − 1 (so the
    control's spread across replicates holds its initialisation's too)."""
    twins = []
    for name in controls["random_init"]:
        _choice("[controls]", "random_init", name, names, path)
        members = [m for m in trained if (m.group or m.name) == name]
        last = controls["random_init_seed"] + len(members) - 1
        if len(members) > 1 and last > seeding.MAX_SEED:
            raise InputError(
                f"study file {path}: [controls] random_init_seed = {controls['random_init_seed']}: "
                f"the twins of {name}'s {len(members)} checkpoints take it to {last}, past the "
                f"largest seed {seeding.MAX_SEED}: give a smaller random_init_seed"
            )
        for k, m in enumerate(members):
            spec = replace(m.spec, random_init=True, seed=controls["random_init_seed"] + k)
            twins.append(StudyModel(twin_name(m.name), spec, (), twin_of=m.name, group=m.group))
    return tuple(twins)


def _corpus(c: dict, base: str) -> corpus.CorpusSpec:
    """The CorpusSpec of `[corpus]`: `path` from the study file's folder, each other key's
    value in the field its option fills."""
    p = c["path"]
    if p is not None:
        p = os.path.abspath(os.path.join(base, os.path.expanduser(p)))
    given = {name: c[key] for key, (_, _, name) in CORPUS_KEYS.items()}
    spec = corpus.CorpusSpec(path=p, **given)
    corpus.validate(spec)
    return spec


def _reuse(folders: list, base: str, path: str) -> tuple:
    """`[extraction] reuse`: folders (relative to the study file) to look in for a store to
    reuse; each must be an existing folder."""
    found = []
    for folder in folders:
        if not isinstance(folder, str):
            raise InputError(
                f"study file {path}: [extraction] reuse holds {folder!r}: give folder paths as strings"
            )
        full = os.path.abspath(os.path.join(base, os.path.expanduser(folder)))
        if not os.path.isdir(full):
            raise InputError(
                f"study file {path}: [extraction] reuse folder {folder} does not exist: give a "
                "folder of stores (e.g. demo-output/stores)"
            )
        found.append(full)
    return tuple(found)


def _extraction(e: dict) -> ExtractOptions:
    """The ExtractOptions of `[extraction]`, each key's value in the field its option fills."""
    opts = ExtractOptions(**{name: e[key] for key, (_, _, name) in EXTRACTION_KEYS.items()})
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


def _fit(f: dict, measures: tuple) -> FitSpec:
    """The FitSpec of `[fit]`: each key's value in the field its option fills."""
    given = {name: f[key] for key, (_, _, name) in FIT_KEYS.items()}
    spec = FitSpec(**{**given, "alphas": tuple(given["alphas"]), "measures": measures})
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
