"""Benchmark of `align fit --measures` (not run in CI; `bench/fit.py --measures LIST` runs it):
at the fit benchmark's shape, the store-route fit with ridge alone against the same fit with
the streamed measures, runs alternated, the ratio of the medians; the streamed measures'
interval, the delete-a-group jackknife's G recomputations, timed per recomputation and scaled
to the grid, and timed whole on the grid (its cost does not depend on the tokens); and the row
measures (mknn, cknna, rsa) on M sampled rows of the grid: the values, a few null draws and
bootstrap resamples timed on the whole grid and scaled to the calibration's and the
interval's defaults.

    .venv/bin/python bench/fit.py --measures cka,cka-debiased,procrustes,cca,svcca
                                                   # writes bench/results/fit-measures.json
    .venv/bin/python bench/fit.py --measures all --interval-only
                                                   # the interval's timing alone, merged into it

The stores are bench/fit.py's (seeded random arrays; a fit's cost does not depend on the
numbers). Both fits run with `--bootstrap` of this script (default 0: the measures' values
alone; their interval is timed apart, below). `--interval-only` runs the interval's timing
alone (a minute, not the fits' ten) and keeps the fits and row timings of the JSON already at
the output, each part with the command that made it; `--rows-only` likewise the row measures'.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import tempfile
import time

import numpy as np


def fit_once(S, T, out, measures, bootstrap) -> dict:
    import align

    t0 = time.perf_counter()
    rep = align.fit(
        S,
        T,
        out,
        align.FitSpec(measures=measures, bootstrap=bootstrap),
        align.Execution(overwrite=True),
    )
    wall = time.perf_counter() - t0
    shutil.rmtree(out, ignore_errors=True)
    return {"seconds": wall, "task_seconds": rep.task_seconds, "mode": rep.plan["mode"]}


def synthetic_sums(nI, nJ, d_s, d_t, n_rows, groups, seed=0, rotations=False):
    """`streamed.row_sums` of seeded random rows of nI source and nJ target boundaries
    sharing a common part (so every cross product has structure), in `groups` groups; with
    `rotations`, every pair's sums of procrustes-heldout too (a seeded rotation a pair)."""
    from align.measures import streamed

    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n_rows, 32))
    xs = {
        i: base @ rng.standard_normal((32, d_s)) + rng.standard_normal((n_rows, d_s))
        for i in range(nI)
    }
    ys = {
        j: base @ rng.standard_normal((32, d_t)) + rng.standard_normal((n_rows, d_t))
        for j in range(nJ)
    }
    shifts = ({i: np.zeros(d_s) for i in xs}, {j: np.zeros(d_t) for j in ys})
    R = None
    if rotations:
        R = {(i, j): streamed.rotation(rng.standard_normal((d_s, d_t))) for i in xs for j in ys}
    return streamed.row_sums(xs, ys, shifts, np.arange(n_rows) % groups, groups, rotations=R)


def baseline_module(rev: str, folder: str):
    """The streamed measures' recomputations as they were at git revision `rev`, imported as
    a module of its own (the before of a before/after timing in one run): align/measures/
    pairs.py, or before it existed align/measures/streamed.py, whose `resampled` took the sums
    as nested dicts (`as_dicts`; such a module gets `takes_dicts` True)."""
    import importlib.util
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def show(path: str) -> str:
        run = ["git", "show", f"{rev}:{path}"]
        return subprocess.run(run, capture_output=True, text=True, check=True, cwd=root).stdout

    takes_dicts = False
    try:
        src = show("align/measures/pairs.py")
    except subprocess.CalledProcessError:
        takes_dicts = True
        src = show("align/measures/streamed.py")
    path = os.path.join(folder, "measures_baseline.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("measures_baseline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.takes_dicts = takes_dicts
    return module


def as_dicts(sums) -> dict:
    """A `streamed.Sums` as the nested dicts the sums were before they were typed:
    {"source": {i: {field: array}}, "target": ..., "pair": {(i, j): ...}} (fields that are
    None left out)."""
    import dataclasses

    def fields(record) -> dict:
        return {
            f.name: getattr(record, f.name)
            for f in dataclasses.fields(record)
            if getattr(record, f.name) is not None
        }

    return {
        key: {k: fields(v) for k, v in getattr(sums, key).items()}
        for key in ("source", "target", "pair")
    }


def recompute_costs(d_s, d_t, measures, modules: dict, repeats=3) -> dict:
    """Seconds per recomputation of the streamed measures from weighted group sums
    (`pairs.resampled` with the jackknife's weights, `jackknife.leave_one_out`: the G
    recomputations of the interval), single-threaded BLAS (as each of the fit's task threads
    runs), for each of `modules` ({label: a module with `resampled`}), runs alternated, the median of
    `repeats` in wall-clock seconds and in this process's CPU seconds (`cpu_`): t_side, each boundary's reduction and decompositions, and t_pair, each pair's
    measures, solved from the times of a 1 × 1 and a 3 × 3 grid: T(1,1) = 2 t_side + t_pair,
    T(3,3) = 6 t_side + 9 t_pair."""
    from threadpoolctl import threadpool_limits

    from align.measures.streamed import MEASURE_GROUPS
    from align.stats import jackknife

    G = MEASURE_GROUPS
    w = jackknife.leave_one_out(G)
    R = "procrustes-heldout" in measures
    sums = {n: synthetic_sums(n, n, d_s, d_t, 4096, G, rotations=R) for n in (1, 3)}
    inputs = {  # a baseline from before the sums were typed takes them as dicts
        label: {n: as_dicts(v) if getattr(m, "takes_dicts", False) else v for n, v in sums.items()}
        for label, m in modules.items()
    }
    clocks = {"": time.perf_counter, "cpu_": time.process_time}
    times = {label: {(c, n): [] for c in clocks for n in (1, 3)} for label in modules}
    with threadpool_limits(1, user_api="blas"):
        for _ in range(repeats):
            for n in (1, 3):
                for label, module in modules.items():
                    t0 = {c: clock() for c, clock in clocks.items()}
                    module.resampled(inputs[label][n], measures, w)
                    for c, clock in clocks.items():
                        times[label][(c, n)].append((clock() - t0[c]) / G)
    out = {}
    for label, t in times.items():
        out[label] = {}
        for c in clocks:  # wall clock, and this process's CPU time (less moved by others' load)
            t1, t3 = statistics.median(t[(c, 1)]), statistics.median(t[(c, 3)])
            t_pair = (t3 - 3 * t1) / 6
            out[label] |= {
                f"{c}grid_1x1_seconds": t[(c, 1)],
                f"{c}grid_3x3_seconds": t[(c, 3)],
                f"{c}side_seconds": (t1 - t_pair) / 2,
                f"{c}pair_seconds": t_pair,
            }
    return out


def whole_interval(nI, nJ, d_s, d_t, measures) -> dict:
    """Seconds of the interval of every pair of an nI × nJ grid as the fit computes it
    (`measured.pair_measures` on sums kept in MEASURE_GROUPS groups, with a bootstrap asked
    for: the values once and the jackknife's G recomputations), single-threaded BLAS, timed
    once whole, against the same call without the interval (the values alone); on one thread,
    and on this machine's cores as the fit runs it (`threads`)."""
    from threadpoolctl import threadpool_limits

    from align.fitting.measuring import measured
    from align.fitting.runtime.cluster import cpu_cores
    from align.measures.streamed import MEASURE_GROUPS, HeldSums
    from align.stats.bootstrap import Resampling

    R = "procrustes-heldout" in measures
    sums = synthetic_sums(nI, nJ, d_s, d_t, 4096, MEASURE_GROUPS, rotations=R)
    import scipy.stats  # noqa: F401  (loaded before the clock: the t quantile's module)

    heldout = {"measures": HeldSums(measures, sums)}
    out = {"threads": cpu_cores()}
    with threadpool_limits(1, user_api="blas"):
        for label, resampling in (("values", None), ("values_and_interval", Resampling(1000, 0))):
            for suffix, threads in (("", 1), ("_threaded", out["threads"])):
                t0, c0 = time.perf_counter(), time.process_time()
                measured.pair_measures(heldout, resampling, threads)
                out[label + suffix + "_seconds"] = time.perf_counter() - t0
                out[label + suffix + "_cpu_seconds"] = time.process_time() - c0
    return out


def interval_timing(args, measures, tmp) -> dict:
    """The interval's timing at the grid of --source and --target (`recompute_costs` scaled to
    the grid and multiplied by G; `whole_interval` on the grid), with the command, cores and
    load it ran under."""
    import sys

    from align.measures import pairs, streamed

    Ls, ds = map(int, args.source.split("x"))
    Lt, dt = map(int, args.target.split("x"))
    nI, nJ, G = Ls + 1, Lt + 1, streamed.MEASURE_GROUPS
    load0 = os.getloadavg()
    modules = {"after": pairs}
    if args.baseline:
        modules = {"before": baseline_module(args.baseline, tmp), "after": pairs}
    costs = recompute_costs(ds, dt, measures, modules)
    for label, cost in costs.items():
        for c in ("", "cpu_"):
            one = (nI + nJ) * cost[f"{c}side_seconds"] + nI * nJ * cost[f"{c}pair_seconds"]
            cost[f"{c}recompute_seconds"] = one
            cost[f"{c}interval_seconds"] = G * one
        print(f"jackknife interval ({label}): {cost}", flush=True)
    whole = whole_interval(nI, nJ, ds, dt, measures)
    print(f"the whole grid: {whole}", flush=True)
    return {
        "grid": [nI, nJ],
        "groups": G,
        "baseline": args.baseline,
        "measures": list(measures),
        **costs,
        "whole_grid": whole,
        "cpu_count": os.cpu_count(),
        "load_average_before_after": [load0, os.getloadavg()],
        "command": " ".join([".venv/bin/python", "bench/fit.py", *sys.argv[1:]]),
    }


def row_grid_costs(nI, nJ, d_s, d_t, m, draws=16, resamples=3, groups=10, k=10) -> dict:
    """Seconds of the measures on the sampled rows as `--measures all` computes them (mknn,
    cknna, rsa by default; with `--permutations` given, the spectral measures' values on the
    sample too, for their calibration) on M sampled rows of an nI × nJ grid (each side's rows
    mixed by a random matrix, as bench/fit.py's stores are), single-threaded BLAS and one
    thread (as `fitting.sampled.attach` runs them at these widths, before it cuts the draws
    among the cores): the default's values (its boundaries prepared and cells read), every
    boundary prepared for every measure (`rows.prepare_all`), the values of every
    cell (`rows.observed_values`), `draws` null draws of the grid of every measure
    (`rows.null_values`: RSA's in batches, the spectral measures' one product a target), the delete-a-group jackknife's `groups` recomputations with 0/1 weights
    (w_r = 0 for the rows of group g, the groups the held-out documents' index mod `groups`:
    `cells.weighted_grid`, every one timed) and `resamples` bootstrap resamples (the opt-in
    interval), each timed on the whole grid, mknn and cknna apart from rsa; then scaled to
    the defaults: the calibration PERMUTATIONS draws (of mknn, cknna and rsa against the
    default's values; of every measure against every measure's values), the jackknife's
    `groups`, the bootstrap's RESAMPLES, each against the default's values (preparation
    included)."""
    from threadpoolctl import threadpool_limits

    from align.measures import PERMUTATIONS, ROW_ONLY, calibration, cells, rows
    from align.measures.registry import reweighted
    from align.measures.spectral_null import SPECTRAL
    from align.stats.bootstrap import RESAMPLES, Resampling

    rng = np.random.default_rng(0)
    base = rng.standard_normal((m, 32))
    # each side's rows mixed by a random d × d matrix, as bench/fit.py's stores are: their
    # covariances then span about five orders of magnitude, as a model's do
    mix_s = rng.standard_normal((d_s, d_s)) / np.sqrt(d_s)
    mix_t = rng.standard_normal((d_t, d_t)) / np.sqrt(d_t)
    xs = {
        i: (base @ rng.standard_normal((32, d_s)) + rng.standard_normal((m, d_s))) @ mix_s
        for i in range(nI)
    }
    ys = {
        j: (base @ rng.standard_normal((32, d_t)) + rng.standard_normal((m, d_t))) @ mix_t
        for j in range(nJ)
    }
    docs = np.arange(m) // max(1, m // 64)  # 64 documents, as the bench's held-out sample has
    out = {
        "grid": [nI, nJ],
        "rows": m,
        "draws_timed": draws,
        "resamples_timed": resamples,
        "groups": groups,
    }
    _, doc_index = np.unique(docs, return_inverse=True)
    jackknife = (doc_index[None, :] % groups != np.arange(groups)[:, None]).astype(np.int64)
    with threadpool_limits(1, user_api="blas"):
        t0 = time.perf_counter()
        rows.observed_values(xs, ys, ROW_ONLY, k, rows.prepare_all(xs, ys, ROW_ONLY, k))
        out["row_only_values_seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        records = rows.prepare_all(xs, ys, ROW_ONLY + SPECTRAL, k)
        out["prepare_seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows.observed_values(xs, ys, ROW_ONLY + SPECTRAL, k, records)
        out["cells_seconds"] = time.perf_counter() - t0
        perms, _ = calibration.draw_permutations(docs, draws, 0)
        kinds = (("neighbours", ("mknn", "cknna")), ("rsa", ("rsa",)), ("spectral", SPECTRAL))
        for label, names in kinds:
            t0 = time.perf_counter()
            rows.null_values(xs, ys, perms, names, k, records)
            out[f"draw_{label}_seconds"] = (time.perf_counter() - t0) / draws
        out["draw_seconds"] = sum(out[f"draw_{label}_seconds"] for label, _ in kinds)
        weights = rows.multiplicities(docs, Resampling(RESAMPLES, 0))[:resamples]
        for kind, ws in (("jackknife", jackknife), ("resample", weights)):
            for label, names in (("neighbours", ("mknn", "cknna")), ("rsa", ("rsa",))):
                forms = reweighted(names)
                scratch = cells.Scratch.of(m, forms)
                t0 = time.perf_counter()
                for w in ws:
                    cells.weighted_grid(*records, forms, k, w, scratch)
                out[f"{kind}_{label}_seconds"] = (time.perf_counter() - t0) / len(ws)
    # the default: mknn, cknna and rsa prepared, read and calibrated alone; with
    # `--permutations` given, every measure (the spectral ones' values on the sample too)
    values = out["row_only_values_seconds"]
    values_every = out["prepare_seconds"] + out["cells_seconds"]
    default_draw = out["draw_neighbours_seconds"] + out["draw_rsa_seconds"]
    resample = out["resample_neighbours_seconds"] + out["resample_rsa_seconds"]
    recompute = out["jackknife_neighbours_seconds"] + out["jackknife_rsa_seconds"]
    out |= {
        "values_seconds": values,
        "values_every_seconds": values_every,
        "permutations": PERMUTATIONS,
        "resamples": RESAMPLES,
        "calibration_seconds": PERMUTATIONS * default_draw,
        "calibration_every_seconds": PERMUTATIONS * out["draw_seconds"],
        "jackknife_seconds": groups * recompute,
        "bootstrap_seconds": RESAMPLES * resample,
        "calibration_ratio": PERMUTATIONS * default_draw / values,
        "calibration_every_ratio": PERMUTATIONS * out["draw_seconds"] / values_every,
        "jackknife_ratio": groups * recompute / values,
        "bootstrap_ratio": RESAMPLES * resample / values,
    }
    return out


def command_line() -> str:
    import sys

    return " ".join([".venv/bin/python", "bench/fit.py", *sys.argv[1:]])


def whole_timing(args, keep, tmp, fitbench) -> dict:
    """`align fit --measures all` with every default (the streamed measures' interval, the row
    measures on the default M sampled rows with their jackknife interval and their
    calibration against the default permutations) against ridge alone with its defaults, each
    and `--measures all --permutations 99` (every measure calibrated), each timed whole
    through `align.fit`, `args.repeats` rounds of the three alternated on bench/fit.py's
    stores: the runs, their medians, the ratios, `--dry-run`'s estimate of each (made first)
    and the load average before and after."""
    import align
    from align.measures import PERMUTATIONS, parse_measures

    Ls, ds = map(int, args.source.split("x"))
    Lt, dt = map(int, args.target.split("x"))
    S, T = fitbench.stores(keep, "speed", args.tokens, Ls, ds, Lt, dt, args.doc_len, (1, 2))
    every = parse_measures("all")
    specs = {
        "ridge": align.FitSpec(),
        "all": align.FitSpec(measures=every),
        "all_calibrated": align.FitSpec(measures=every, permutations=PERMUTATIONS),
    }
    runs = {k: [] for k in specs}
    load0 = os.getloadavg()
    said = {}  # `--dry-run`'s estimate of each run, made before it
    for kind, spec in specs.items():
        rep = align.fit(S, T, os.path.join(tmp, "dry.zarr"), spec, dry_run=True)
        said[kind] = rep.dry_run["seconds_estimate"]
    for r in range(args.repeats):
        for kind, spec in specs.items():
            out = os.path.join(tmp, f"whole-{kind}.zarr")
            t0 = time.perf_counter()
            align.fit(S, T, out, spec, align.Execution(overwrite=True))
            runs[kind].append(time.perf_counter() - t0)
            shutil.rmtree(out, ignore_errors=True)
            print(f"whole {kind} {r + 1}: {runs[kind][-1]:.1f} s", flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    return {
        "runs": runs,
        "median_seconds": med,
        "dry_run_seconds": said,
        "ratio": med["all"] / med["ridge"],
        "round_ratios": [a / r for a, r in zip(runs["all"], runs["ridge"], strict=True)],
        "all_calibrated_ratio": med["all_calibrated"] / med["ridge"],
        "permutations": PERMUTATIONS,
        "pairs": (Ls + 1) * (Lt + 1),
        "load_average_before_after": [load0, os.getloadavg()],
    }


def fit_timing(args, measures, keep, tmp, fitbench) -> dict:
    """Ridge alone against ridge with `measures`, `args.repeats` runs of each alternated on
    bench/fit.py's stores (made in `keep`, or found there): the runs, their medians and the
    ratio, and the load average before and after."""
    Ls, ds = map(int, args.source.split("x"))
    Lt, dt = map(int, args.target.split("x"))
    S, T = fitbench.stores(keep, "speed", args.tokens, Ls, ds, Lt, dt, args.doc_len, (1, 2))
    runs = {"ridge": [], "measures": []}
    load0 = os.getloadavg()
    for r in range(args.repeats):
        for kind, names in (("ridge", ("ridge",)), ("measures", measures)):
            o = fit_once(S, T, os.path.join(tmp, f"{kind}.zarr"), names, args.measures_bootstrap)
            runs[kind].append(o)
            print(f"{kind} fit {r + 1}: {o['seconds']:.1f} s {o['task_seconds']}", flush=True)
    med = {k: statistics.median(o["seconds"] for o in v) for k, v in runs.items()}
    print(f"ratio {med['measures'] / med['ridge']:.2f}", flush=True)
    return {
        "runs": runs,
        "median_seconds": med,
        "ratio": med["measures"] / med["ridge"],
        "pairs": (Ls + 1) * (Lt + 1),
        "load_average_before_after": [load0, os.getloadavg()],
    }


def main(args):
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import fit as fitbench

    import align
    from align.measures import STREAMED, parse_measures

    measures = tuple(m for m in parse_measures(args.measures) if m in STREAMED)
    Ls, ds = map(int, args.source.split("x"))
    Lt, dt = map(int, args.target.split("x"))
    tmp = tempfile.mkdtemp(dir=args.tmp, prefix="align-bench-measures-")
    keep = args.stores or tmp
    os.makedirs(keep, exist_ok=True)
    out_path = args.out
    if os.path.basename(out_path) == "fit.json":
        out_path = os.path.join(os.path.dirname(out_path), "fit-measures.json")
    if args.interval_only or args.fits_only or args.rows_only or args.whole_only:  # the rest stays
        try:
            with open(out_path) as f:
                result = json.load(f)
        except OSError as e:
            flag = "--interval-only" if args.interval_only else "--fits-only"
            flag = "--rows-only" if args.rows_only else flag
            flag = "--whole-only" if args.whole_only else flag
            raise SystemExit(
                f"bench/fit.py {flag}: cannot read {out_path} ({e.strerror}); run "
                "bench/fit.py --measures LIST without it first"
            ) from None
        try:
            if args.rows_only:
                load0 = os.getloadavg()
                result["rows"] = row_grid_costs(Ls + 1, Lt + 1, ds, dt, args.sample_rows)
                result["rows"]["command"] = command_line()
                result["rows"]["load_average_at_end"] = os.getloadavg()
                result["rows"]["load_average_at_start"] = load0
            elif args.whole_only:
                result["whole"] = whole_timing(args, keep, tmp, fitbench)
                result["whole"]["command"] = command_line()
            elif args.interval_only:
                result["interval"] = interval_timing(args, measures, tmp)
            else:
                result["fits"] = fit_timing(args, measures, keep, tmp, fitbench)
                result["fits"]["command"] = command_line()
                result["fits"]["measures"] = list(measures)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        with open(out_path, "w") as f:
            json.dump(result, f, indent=2)
        part = "rows" if args.rows_only else "interval" if args.interval_only else "fits"
        part = "whole" if args.whole_only else part
        print(json.dumps(result[part], indent=2))
        return
    result = {
        "config": {
            "tokens": args.tokens,
            "source": args.source,
            "target": args.target,
            "doc_len": args.doc_len,
            "measures": list(measures),
            "bootstrap": args.measures_bootstrap,
            "repeats": args.repeats,
            "sample_rows": args.sample_rows,
            "baseline": args.baseline,
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "command": command_line(),
        },
        "load_average_at_start": os.getloadavg(),
    }
    try:
        result["fits"] = fit_timing(args, measures, keep, tmp, fitbench)
        result["interval"] = interval_timing(args, measures, tmp)
        result["rows"] = row_grid_costs(Ls + 1, Lt + 1, ds, dt, args.sample_rows)
        print(f"row measures at M {args.sample_rows}: {result['rows']}", flush=True)
        result["version"] = align.__version__
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["load_average_at_end"] = os.getloadavg()
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
