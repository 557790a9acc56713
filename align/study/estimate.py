"""`align study --dry-run`: every unit with its inputs, disk, memory and estimated time, and
the totals, from the commands' own estimators: `align extract --dry-run` (one batch timed end
to end, align.extraction.dryrun) for each extraction, `align fit --live --dry-run`
(align.fitting.live_route.estimate) for a live pair, and for a fit from stores the budget's
arithmetic (align.fitting.planning.budget: the result's bytes on disk, the statistics' bytes in
memory) with a time from its products' floating-point operations at the rate of one timed
float64 product on this machine. A contrib or lens unit that reads its model's store
(`units.reads_stores`) runs no forward: its time is that of the extraction's encoding and
writes, what reading the store back costs. A study whose outputs will not fit the free disk is
refused before anything runs."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace

from align import boundaries as bmod
from align import models
from align import store as st
from align.errors import DiskSpaceError
from align.extraction import extract
from align.extraction.plan import DISK_MARGIN
from align.fitting import Execution
from align.fitting.fit_options import LiveJob
from align.fitting.live_route.pipeline import fit_live
from align.fitting.planning.budget import ResultShape, result_bytes, statistics_bytes
from align.messages import human_bytes as human
from align.study import contents
from align.study import units as units_mod
from align.study.execute import check_lens_boundaries, check_root, why
from align.study.schema import Study
from align.study.state import read_state


@dataclass
class Estimate:
    """One unit's estimate: bytes on disk, bytes of memory, seconds (None: not estimated)."""

    unit: units_mod.Unit
    disk: int | None = None
    memory: int | None = None
    seconds: float | None = None
    note: str = ""


@dataclass
class StudyPlan:
    """Every unit's estimate, the free disk of DIR and the route's note."""

    root: str
    estimates: list = field(default_factory=list)
    free: int | None = None

    def totals(self) -> tuple:
        """(disk bytes, largest memory of one unit, seconds) over the units."""
        disk = sum(e.disk or 0 for e in self.estimates)
        memory = max((e.memory or 0 for e in self.estimates), default=0)
        seconds = sum(e.seconds or 0.0 for e in self.estimates)
        return disk, memory, seconds

    def lines(self) -> list:
        out = [f"align study --dry-run: {self.root}, {len(self.estimates)} units (estimates)"]
        out.append(f"  {'unit':<34} {'disk':>10} {'memory':>10} {'time':>10}  inputs")
        for e in self.estimates:
            u = e.unit
            out.append(
                f"  {u.name:<34} {_size(e.disk):>10} {_size(e.memory):>10} {_time(e.seconds):>10}  "
                + (", ".join(u.inputs[:3]) + (" ..." if len(u.inputs) > 3 else "") or "-")
                + (f"  ({e.note})" if e.note else "")
            )
        disk, memory, seconds = self.totals()
        out.append(
            f"  total: disk {human(disk)}"
            + (f" of {human(self.free)} free" if self.free is not None else "")
            + f", peak memory of one unit {human(memory)}, time ~{_time(seconds)} run one unit after another"
        )
        return out


def _size(n):
    return "-" if n is None else human(n)


def _time(s):
    if s is None:
        return "-"
    return f"{s:,.1f} s" if s < 120 else f"{s / 60:,.1f} min" if s < 7200 else f"{s / 3600:,.1f} h"


def matmul_rate(d: int = 256, n: int = 4096) -> float:
    """Floating-point operations per second of one float64 product XᵀY (n × d by n × d) on
    this machine: the fastest of three timed runs."""
    import numpy as np

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        x.T @ y
        best = min(best, time.perf_counter() - t)
    return 2.0 * n * d * d / max(best, 1e-9)


def plan_study(study: Study, root: str, log=None) -> StudyPlan:
    """Estimate every unit of `study` written to `root`.

    A unit already done there with the same options is marked skipped and costs nothing.

    Parameters
    ----------
    study : Study
        The study (`load_study`).
    root : str
        The study's folder.
    log : callable, optional
        Receives each message.

    Returns
    -------
    StudyPlan
        Every unit's estimate, the free disk of `root` and the route's note.

    Raises
    ------
    DiskSpaceError
        A study whose outputs would not fit the free disk.
    """
    check_root(root)  # what the run would refuse, refused here too
    check_lens_boundaries(study)
    state = read_state(root) if os.path.isdir(root) else {}
    units = units_mod.plan(study, contents.Hashes(state.get("hashes")))
    plan = StudyPlan(root, free=st.free_bytes(root))
    entries = state.get("units", {})
    extracted = {}
    rate = None
    for u in units:
        e = Estimate(u)
        current = why(u, entries.get(u.name), root) is None
        if current:  # done with these options: skipped by the run, nothing more on disk
            e.disk, e.seconds, e.note = 0, 0.0, "done: skipped"
            if u.kind == "extract":
                extracted[u.models[0]] = _extracted(os.path.join(root, u.output))
        elif u.kind == "extract":
            info = _extraction(study, u, root)
            extracted[u.models[0]] = info
            e.disk, e.seconds = info["total_bytes"], info["seconds_estimate"]
            e.memory = _weights_bytes(study.model(u.models[0]).spec)
            e.note = f"{info['n_tokens']:,} tokens; memory: the weights"
        elif u.kind == "fit" and study.route == "live":
            e.seconds, e.disk = _live(study, u), None
            e.note = "one batch of each model timed (model loading not counted)"
        elif u.kind == "fit":
            rate = rate or matmul_rate()
            e.disk, e.memory, e.seconds = _store_fit(study, u, extracted, rate)
            e.note = f"statistics at {rate / 1e9:,.1f} GFLOP/s (one timed float64 product)"
        elif u.kind in ("contrib", "lens") and "store" in u.definition:
            phases = extracted.get(u.models[0], {}).get("phases_seconds")
            e.seconds = phases["encode"] + phases["write"] if phases else None
            e.note = f"reads {u.definition['store']}, no forward" + (
                ": as long as the extraction's encoding and writes" if phases else ""
            )
        elif u.kind in ("contrib", "lens") and "phases_seconds" in extracted.get(u.models[0], {}):
            e.seconds = extracted[u.models[0]]["phases_seconds"]["forward"]
            e.memory = _weights_bytes(study.model(u.models[0]).spec)
            e.note = "one forward over the corpus, as the extraction's"
        elif u.kind in ("lens-linear", "lens-tuned", "lens-through"):
            e.note = {
                "lens-linear": "not estimated: a ridge fit of every boundary onto the last",
                "lens-tuned": "not estimated: a translator trained per boundary",
                "lens-through": "not estimated: a ridge fit onto the target's last boundary",
            }[u.kind]
        else:
            e.note = "small"
            if u.kind == "skip":
                n = u.definition["corpus"].get("max_docs")
                e.note = "not estimated" + (f"; the first {n:,} documents" if n else "")
        plan.estimates.append(e)
    disk = plan.totals()[0]
    if plan.free is not None and disk * DISK_MARGIN > plan.free:
        raise DiskSpaceError(
            f"study {root} needs ~{human(disk)} on disk and {human(plan.free)} is free: free space, "
            "fewer `max_tokens` or boundaries, or another `output`"
        )
    return plan


def _extraction(study: Study, u, root: str) -> dict:
    m = study.model(u.models[0])
    out = os.path.join(root, u.output)
    if os.path.exists(out):  # made with other options: the run replaces it; time a new one
        out = os.path.join(os.path.dirname(out), f".dry-run-{os.path.basename(out)}")
    report = extract(
        m.spec, study.corpus, out, replace(study.extraction, dry_run=True), log=lambda line: None
    )
    return report.dry_run


def _extracted(path: str) -> dict:
    """What the fits' estimates read of an extraction already done: its token counts."""
    store = st.open_activations(path)
    counts = store.provenance.get("counts", {})
    return {
        "n_tokens": store.n_tokens,
        "n_sequences": store.layout.n_sequences,
        "n_docs": counts.get("n_docs", store.layout.n_sequences),
    }


def _live(study: Study, u) -> float | None:
    src, tgt = (study.model(n).spec for n in u.models)
    job = LiveJob(src, tgt, study.corpus, study.extraction.batch_size, study.extraction.allow_long)
    report = fit_live(
        job, None, study.fit, Execution(device=study.device), dry_run=True, log=lambda line: None
    )
    return (report.dry_run or {}).get("seconds_estimate")


def _boundaries(spec: str | None, n_layers: int) -> int:
    return len(bmod.parse_boundaries(spec, n_layers)) if spec else n_layers + 1


def _store_fit(study: Study, u, extracted: dict, rate: float) -> tuple:
    """(disk, memory, seconds) of a fit from two stores: the result's bytes
    (budget.result_bytes), its statistics' bytes for the whole grid in one block
    (budget.statistics_bytes: an upper bound, the fit plans blocks within its memory), and
    2·N·(S·d_S² + S·T·d_S·d_T) operations for the statistics and as many for the held-out sums."""
    shapes = []
    for name in u.models:
        config = models.load_config(study.model(name).spec)
        shapes.append((config.num_hidden_layers, config.hidden_size))
    (Ls, ds), (Lt, dt) = shapes
    S = _boundaries(study.fit.source_boundaries or study.extraction.boundaries, Ls)
    T = _boundaries(study.fit.target_boundaries or study.extraction.boundaries, Lt)
    info = extracted[u.models[0]]
    n_docs = info.get("n_docs", info["n_sequences"])
    held = max(1, round(study.fit.test_fraction * n_docs))
    disk = sum(result_bytes(ResultShape(S, T, ds, dt, held), False))
    memory = statistics_bytes(S, T, ds, dt)
    return disk, memory, fit_flops(info["n_tokens"], S, T, ds, dt) / rate


def fit_flops(n_tokens: int, S: int, T: int, d_s: int, d_t: int) -> float:
    """Floating-point operations of a fit from stores of `n_tokens` tokens, S source × T
    target boundaries of widths d_s and d_t: 2·N·(S·d_S² + S·T·d_S·d_T) for the statistics and
    as many for the held-out sums."""
    return 2 * 2.0 * n_tokens * (S * d_s * d_s + S * T * d_s * d_t)


def _weights_bytes(spec) -> int | None:
    """Bytes of a local checkpoint's weight files (None for a hub id not in a local folder)."""
    if not os.path.isdir(spec.name):
        return None
    return sum(
        os.path.getsize(os.path.join(spec.name, f))
        for f in os.listdir(spec.name)
        if f.endswith((".safetensors", ".bin"))
    )
