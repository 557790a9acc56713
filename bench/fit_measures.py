"""Benchmark of `align fit --measures` (not run in CI; `bench/fit.py --measures LIST` runs it):
at the fit benchmark's shape, the store-route fit with ridge alone against the same fit with
the streamed measures, runs alternated, the ratio of the medians; the streamed measures'
group bootstrap, timed per resample and scaled to the grid (its cost does not depend on the
tokens); and the row measures `mknn` and `rsa` on M sampled rows, timed.

    .venv/bin/python bench/fit.py --measures cka,cka-debiased,procrustes,cca,svcca
                                                   # writes bench/results/fit-measures.json

The stores are bench/fit.py's (seeded random arrays; a fit's cost does not depend on the
numbers). Both fits run with `--bootstrap` of this script (default 0: the measures' values
alone; their bootstrap is timed apart, below, because at 1,000 resamples it costs far more
than the fit).
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


def synthetic_sums(nI, nJ, d_s, d_t, n_rows, groups, seed=0):
    """`streamed.row_sums` of seeded random rows of nI source and nJ target boundaries
    sharing a common part (so every cross product has structure), in `groups` groups."""
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
    return streamed.row_sums(xs, ys, shifts, np.arange(n_rows) % groups, groups)


def baseline_module(rev: str, folder: str):
    """align/measures/streamed.py as it was at git revision `rev`, imported as a module of
    its own (the before of a before/after timing in one run)."""
    import importlib.util
    import subprocess

    src = subprocess.run(
        ["git", "show", f"{rev}:align/measures/streamed.py"],
        capture_output=True,
        text=True,
        check=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    ).stdout
    path = os.path.join(folder, "streamed_baseline.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("streamed_baseline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def resample_costs(d_s, d_t, measures, modules: dict, resamples=3, repeats=3) -> dict:
    """Seconds per resample of the group bootstrap (`streamed.resampled`), single-threaded
    BLAS (as each of the fit's task threads runs), for each of `modules` ({label: a
    streamed module}), runs alternated, the median of `repeats`: t_side, each boundary's
    reduction and decompositions, and t_pair, each pair's measures, solved from the times of
    a 1 × 1 and a 3 × 3 grid: T(1,1) = 2 t_side + t_pair, T(3,3) = 6 t_side + 9 t_pair."""
    from threadpoolctl import threadpool_limits

    from align.measures.streamed import MEASURE_GROUPS

    G = MEASURE_GROUPS
    w = np.random.default_rng(0).multinomial(G, [1 / G] * G, resamples).astype(float)
    sums = {n: synthetic_sums(n, n, d_s, d_t, 4096, G) for n in (1, 3)}
    times = {label: {1: [], 3: []} for label in modules}
    with threadpool_limits(1, user_api="blas"):
        for _ in range(repeats):
            for n in (1, 3):
                for label, module in modules.items():
                    t0 = time.perf_counter()
                    module.resampled(sums[n], measures, w)
                    times[label][n].append((time.perf_counter() - t0) / resamples)
    out = {}
    for label, t in times.items():
        t1, t3 = statistics.median(t[1]), statistics.median(t[3])
        t_pair = (t3 - 3 * t1) / 6
        out[label] = {
            "grid_1x1_seconds": t[1],
            "grid_3x3_seconds": t[3],
            "side_seconds": (t1 - t_pair) / 2,
            "pair_seconds": t_pair,
        }
    return out


def row_measure_costs(d_s, d_t, m, k=10) -> dict:
    """Seconds of `mknn` and `rsa` on M rows of one source and one target boundary: the
    observed cell with both boundaries' preparation (`rows.observed_values`), and one null
    draw of the cell beyond it (`rows.null_values` with 11 permutations minus 1, over 10)."""
    from align.measures import rows

    rng = np.random.default_rng(0)
    base = rng.standard_normal((m, 32))
    x = {0: base @ rng.standard_normal((32, d_s)) + rng.standard_normal((m, d_s))}
    y = {0: base @ rng.standard_normal((32, d_t)) + rng.standard_normal((m, d_t))}
    out = {}
    for name in ("mknn", "rsa"):
        t0 = time.perf_counter()
        rows.observed_values(x, y, (name,), k)
        observed = time.perf_counter() - t0
        perms = np.stack([rng.permutation(m) for _ in range(11)])
        t0 = time.perf_counter()
        rows.null_values(x, y, perms[:1], (name,), k)
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows.null_values(x, y, perms, (name,), k)
        eleven = time.perf_counter() - t0
        out[name] = {
            "observed_seconds": observed,
            "null_draw_seconds": (eleven - one) / 10,
        }
    return out


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
            "command": " ".join([".venv/bin/python", "bench/fit.py", *sys.argv[1:]]),
        },
        "load_average_at_start": os.getloadavg(),
    }
    try:
        S, T = fitbench.stores(keep, "speed", args.tokens, Ls, ds, Lt, dt, args.doc_len, (1, 2))
        runs = {"ridge": [], "measures": []}
        load0 = os.getloadavg()
        for r in range(args.repeats):
            for kind, names in (("ridge", ("ridge",)), ("measures", measures)):
                o = fit_once(
                    S, T, os.path.join(tmp, f"{kind}.zarr"), names, args.measures_bootstrap
                )
                runs[kind].append(o)
                print(f"{kind} fit {r + 1}: {o['seconds']:.1f} s {o['task_seconds']}", flush=True)
        med = {k: statistics.median(o["seconds"] for o in v) for k, v in runs.items()}
        result["fits"] = {
            "runs": runs,
            "median_seconds": med,
            "ratio": med["measures"] / med["ridge"],
            "pairs": (Ls + 1) * (Lt + 1),
            "load_average_before_after": [load0, os.getloadavg()],
        }
        print(f"ratio {med['measures'] / med['ridge']:.2f}", flush=True)
        from align.measures import streamed

        modules = {"after": streamed}
        if args.baseline:
            modules = {"before": baseline_module(args.baseline, tmp), "after": streamed}
        costs = resample_costs(ds, dt, measures, modules)
        nI, nJ = Ls + 1, Lt + 1
        for label, cost in costs.items():
            cost["resample_seconds"] = (nI + nJ) * cost["side_seconds"] + nI * nJ * cost[
                "pair_seconds"
            ]
            cost["seconds_at_1000"] = 1000 * cost["resample_seconds"]
            print(f"group bootstrap ({label}): {cost}", flush=True)
        result["bootstrap"] = {"grid": [nI, nJ], "baseline": args.baseline, **costs}
        result["rows"] = row_measure_costs(ds, dt, args.sample_rows) | {"grid": [nI, nJ]}
        print(f"row measures at M {args.sample_rows}: {result['rows']}", flush=True)
        result["version"] = align.__version__
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["load_average_at_end"] = os.getloadavg()
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
