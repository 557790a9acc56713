"""Running a study's units in order, each through the library function of its command
(`align.extract`, `align.fit`, `align.fitting.live_route.pipeline.fit_live`, `align.analyses.run`'s
`run_*`), under one lock on DIR, with the state of every unit in DIR/study.json.

Resume: a unit is skipped when the state records it done with the same key and its output
exists; otherwise it runs, and the log says why (new, options changed and which, an input
changed, the last run stopped in it, its output is missing). A unit whose key changed has its
old output removed first (an activation store of other options would be refused, not
replaced). Every output is written by the command's own writer, atomically; the state is
written whole (a temporary file renamed) after each unit.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import asdict, dataclass, field

from align import boundaries as bmod
from align import messages, models, textfiles
from align import store as st
from align.errors import AlignError, InputError, StoreLocked
from align.faults import fault_point
from align.store.lock import LOCK_NAME
from align.study import contents
from align.study import units as units_mod
from align.study.placement import run_on_cluster
from align.study.runners import run_unit
from align.study.schema import Study
from align.study.state import (
    BLOCKED,
    DONE,
    FAILED,
    RUNNING,
    STATE_FILE,
    is_study,
    read_state,
    write_state,
)


@dataclass
class StudyReport:
    """What a run did: units run, skipped, failed (name -> one-line error), blocked."""

    root: str
    ran: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    failed: dict = field(default_factory=dict)
    blocked: list = field(default_factory=list)
    seconds: float = 0.0


def check_root(root: str) -> None:
    """DIR is new, empty or a study's (its study.json carries align's marker: `state`): never
    a folder holding anything else. A lock file alone is what a study killed before its first
    state write left (the lock decides)."""
    if os.path.islink(root):
        raise InputError(
            f"`output` {root} is a symbolic link: give the study's folder itself (a new or empty folder)"
        )
    if os.path.exists(root) and not os.path.isdir(root):
        raise InputError(f"`output` {root} is a file: give a folder for the study")
    if not os.path.isdir(root) or not set(os.listdir(root)) - {LOCK_NAME}:
        return
    if not is_study(root):
        raise InputError(
            f"`output` {root} holds files that are not a study's (no {STATE_FILE}): give a new or empty folder"
        )
    read_state(root)  # a study.json of align's, or one line naming it


def check_lens_boundaries(study: Study) -> None:
    """On the stores route, every model whose final boundary L a linear or tuned lens
    (`[analyses] lens`) or a read through its head (`[analyses] lens_through`, each pair's
    target) takes as its reference keeps L in its store (`[extraction] boundaries`): else one
    line naming the model, L and what to do, before any unit runs (its lens would fail after
    the extractions and fits)."""
    spec = study.extraction.boundaries
    if study.route != "stores" or spec is None:
        return
    kinds = [k for k in study.lens_kinds if k in ("linear", "tuned")]
    needs = {}  # model -> the key that reads its final boundary
    if kinds:
        for m in units_mod.analysed(study):
            if "lens" in m.analyses:
                needs.setdefault(
                    m.name,
                    (f"lens = {list(study.lens_kinds)!r}", f"drop {' and '.join(kinds)} from lens"),
                )
    if study.lens_through:
        for _, t in study.pairs:
            needs.setdefault(t, ("lens_through = true", "leave lens_through out"))
    for name, (key, instead) in needs.items():
        L = models.load_config(study.model(name).spec).num_hidden_layers
        if L not in bmod.parse_boundaries(spec, L, "[extraction] boundaries"):
            raise InputError(
                f"study file {study.path}: [analyses] {key} reads model {name}'s final boundary "
                f"{L}, but [extraction] boundaries = {spec!r} leaves it out of its store: include "
                f"{L} (or -1) in boundaries, or {instead}"
            )


def why(unit, entry: dict | None, root: str) -> str | None:
    """Why `unit` must run, or None when its recorded output is current: what changed since
    its last run (its options, the files it reads, the units it reads, each named: only what
    changed), the last run stopped in it or failed, or its output is missing."""
    if entry is None:
        return "new"
    if entry.get("key") != unit.key:
        return _changed(unit, entry)
    if entry.get("state") == RUNNING:
        return "the last run stopped in it"
    if entry.get("state") != DONE:
        return f"{entry.get('state')} in the last run"
    if not os.path.exists(os.path.join(root, unit.output)):
        return "its output is missing"
    return None


def _changed(unit, entry: dict) -> str:
    """What made `unit`'s key differ from the recorded one, in the log's words."""
    fields = units_mod.changed(entry.get("definition", {}), unit.definition)
    if fields:
        return "options changed: " + ", ".join(fields)
    if "contents" not in entry or "inputs" not in entry:
        return "its inputs' contents were not recorded (a study run by an earlier align)"
    files = contents.differ(entry["contents"], unit.contents)
    if files:
        return "changed: " + ", ".join(files)
    inputs = [n for n in unit.inputs if entry["inputs"].get(n) != unit.input_keys.get(n)]
    if inputs:
        return "an input changed: " + ", ".join(inputs)
    return "its recorded key differs (written by another version of align)"


def run_units(
    study: Study, root: str, keep_going: bool = False, scheduler: str | None = None, log=None
) -> StudyReport:
    """Run every unit of `study` not already current in `root`, under its lock: one after
    another in this process, or on the Dask cluster at `scheduler` (`placement`). A failing
    unit stops the study (an AlignError naming it) unless `keep_going`: then the units that
    read its output are blocked and the others run."""
    log = log or messages.say
    check_root(root)
    check_lens_boundaries(study)
    os.makedirs(root, exist_ok=True)
    t0 = time.time()
    try:
        with st.write_lock(root):
            check_root(root)  # again under the lock: what DIR holds now
            ledger = Ledger(study, root, log)
            if scheduler is None:
                _run(ledger, keep_going)
            else:
                run_on_cluster(ledger, scheduler, keep_going)
    except StoreLocked as e:
        raise StoreLocked(str(e).replace(f"store {root}", f"study {root}", 1)) from None
    ledger.report.seconds = time.time() - t0
    return ledger.report


class Ledger:
    """The study's units and their recorded state: what must run and why, and each unit's
    start, end or failure written to DIR/study.json as it happens."""

    def __init__(self, study: Study, root: str, log):
        self.study, self.root, self.log = study, root, log
        self.state = read_state(root)
        hashes = contents.Hashes(self.state.get("hashes"))
        self.units = units_mod.plan(study, hashes)
        self.state["hashes"] = hashes.used  # the files this study reads, nothing older
        self.state.update(
            study=study.path,
            name=study.name,
            order=[u.name for u in self.units],
            models=[m.name for m in study.models],
            corpus=asdict(study.corpus),
            study_text=textfiles.read(study.path, "study file"),
        )
        self.entries = self.state.setdefault("units", {})
        for gone in [n for n in self.entries if n not in self.state["order"]]:
            log(f"align study: {gone} is no longer in the study (its output is kept)")
            self.entries.pop(gone)
        write_state(root, self.state)  # the marker first: DIR is this study's from here on
        self.report = StudyReport(root)
        self.bad = set()  # failed and blocked units

    def blocked(self, u) -> bool:
        """Whether `u` reads a failed or blocked unit (the report never is: it shows what is done)."""
        if u.kind == "report" or not (self.bad & set(u.inputs)):
            return False
        self.report.blocked.append(u.name)
        self.entries[u.name] = {**self.entries.get(u.name, {}), "state": BLOCKED}
        self.bad.add(u.name)
        write_state(self.root, self.state)
        return True

    def start(self, u) -> bool:
        """Mark `u` running and say why (True), or record it skipped, current (False)."""
        reason = why(u, self.entries.get(u.name), self.root)
        if reason is None:
            self.report.skipped.append(u.name)
            return False
        self.log(f"align study: run {u.name} ({reason})")
        old = self.entries.get(u.name, {})
        if old.get("key") not in (None, u.key) and u.kind != "report":
            _remove(os.path.join(self.root, u.output))
        self.entries[u.name] = {
            "key": u.key,
            "definition": u.definition,
            "contents": u.contents,
            "inputs": u.input_keys,
            "state": RUNNING,
            "output": u.output,
            "kind": u.kind,
        }
        write_state(self.root, self.state)
        return True

    def done(self, u, seconds: float, worker: str | None = None) -> None:
        self.entries[u.name].update(state=DONE, seconds=round(seconds, 3))
        self.entries[u.name].pop("error", None)
        if worker is not None:
            self.entries[u.name]["worker"] = worker
        write_state(self.root, self.state)
        self.report.ran.append(u.name)
        fault_point("study_unit_done")

    def failed(self, u, error: AlignError, seconds: float, keep_going: bool) -> None:
        """Record the failure; raise it named unless `keep_going`."""
        self.entries[u.name].update(state=FAILED, error=str(error), seconds=round(seconds, 3))
        write_state(self.root, self.state)
        self.report.failed[u.name] = str(error)
        self.bad.add(u.name)
        if not keep_going:
            raise type(error)(
                f"study unit {u.name} failed: {error} (fix it and re-run; done units are kept)"
            ) from None
        self.log(f"align study: {u.name} failed: {error}")


def _run(ledger: Ledger, keep_going: bool) -> None:
    """The units one after another in this process."""
    for u in ledger.units:
        if ledger.blocked(u) or not ledger.start(u):
            continue
        t = time.time()
        try:
            # a unit silent for 10 s (the report writing its pages, a store's fit planning)
            # still says it runs
            with messages.heartbeat(_prefixed(ledger.log, u.name), "align study") as log:
                run_unit(u, ledger.study, ledger.root, log)
        except AlignError as e:
            ledger.failed(u, e, time.time() - t, keep_going)
            continue
        ledger.done(u, time.time() - t)


def _prefixed(log, name):
    return lambda line: log(f"  [{name}] {line}")


def _remove(path: str) -> None:
    """A unit's old output (the state records it this study's): a link is removed, never
    followed."""
    if os.path.islink(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.unlink(path)
