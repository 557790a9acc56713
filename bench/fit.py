"""Benchmark of `align fit` (not run in CI): wall time against scikit-learn RidgeCV per pair
and against the flop floor 2·N·ΣD_S·ΣD_T at the float64 matmul rate measured in this run
(two floors: one pair's product over a chunk through numpy, the floor the targets were set
against, and the strict one, the best rate of either library on that shape or on the
side-by-side (ΣD_S, ΣD_T) product the fit computes),
the end-to-end time of a small fit (`align fit` as a command, and the call in a fresh
process), and the peak memory of the client and its workers under --memory-limit.

    .venv/bin/python bench/fit.py                       # defaults below; writes bench/results/fit.json
    .venv/bin/python bench/fit.py --tokens 20000 --quick    # no memory run
    .venv/bin/python bench/fit.py --stores /tmp/fb      # keep (and re-use) the generated stores there
    .venv/bin/python bench/fit.py --pairing char-anchors --tokens 65536   # an anchored pair against tokens
    .venv/bin/python bench/fit.py --measures all --repeats 2   # ridge alone against ridge + the streamed measures

The stores are written from seeded random arrays through align.store (the fit's cost does not
depend on what the numbers are), in float32 without compression.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import psutil

from align.measures import SAMPLE_ROWS


def make_store(path, n_tokens, n_layers, d_model, doc_len, seed):
    from align.store.arrays import StoreFormat, StoreShape, write_activations

    doc = np.arange(n_tokens) // doc_len
    pos = (np.arange(n_tokens) % 256).astype(np.int32)
    seq = np.arange(n_tokens) // 256
    tok = {
        "token_id": (np.arange(n_tokens) % 300).astype(np.int32),
        "doc": doc,
        "seq": seq,
        "pos": pos,
    }
    mix = np.random.default_rng(seed).normal(size=(d_model, d_model)).astype(np.float32) / np.sqrt(
        d_model
    )

    def block(start, stop):
        rng = np.random.default_rng([seed, start])
        return np.stack(
            [
                (rng.standard_normal((stop - start, d_model), dtype=np.float32) @ mix) + b
                for b in range(n_layers + 1)
            ]
        )

    prov = {
        "model": f"random-{n_layers}x{d_model}",
        "model_type": "synthetic",
        "tokenizer_hash": {
            "vocab": "v",
            "merges": "m",
            "added_tokens": "a",
            "normalizer_pretokenizer": "n",
            "special_wrapping": "s",
            "all": "x",
        },
    }
    return write_activations(
        path, block, tok, prov, StoreShape(n_layers, d_model), StoreFormat(codec="none")
    )


def matmul_rates(shapes: dict, chunk: int, seconds: float = 3.0) -> dict:
    """float64 flop/s of XᵀY over one chunk, (chunk, p)ᵀ (chunk, q), with every core: one
    process per core each running single-threaded BLAS, as the fit's threads (or a local
    cluster's workers) do. For each named shape {name: (p, q)}, through numpy (OpenBLAS) and
    through torch (MKL): {"<name>-<library>": flop/s}."""
    from concurrent.futures import ProcessPoolExecutor

    n = os.cpu_count()
    out = {}
    with ProcessPoolExecutor(n) as ex:
        for name, (p, q) in shapes.items():
            for lib in ("numpy", "torch"):
                out[f"{name}-{lib}"] = sum(ex.map(_one_rate, [(lib, p, q, chunk, seconds)] * n))
    return out


def _one_rate(args):
    import torch
    from threadpoolctl import threadpool_limits

    lib, p, q, chunk, seconds = args
    torch.set_num_threads(1)
    X, Y, acc = np.random.rand(chunk, p), np.random.rand(chunk, q), np.zeros((p, q))
    tX, tY, tacc = torch.from_numpy(X), torch.from_numpy(Y), torch.from_numpy(acc)
    step = (
        (lambda: np.matmul(X.T, Y, out=acc)) if lib == "numpy" else (lambda: tacc.addmm_(tX.T, tY))
    )
    with threadpool_limits(1, user_api="blas"):
        step()
        k, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            step()
            k += 1
        return 2.0 * chunk * p * q * k / (time.perf_counter() - t0)


def tree_rss(pid: int) -> int:
    """Summed RSS of process `pid` and all its descendants."""
    p = psutil.Process(pid)
    total = 0
    for q in [p, *p.children(recursive=True)]:
        try:
            total += q.memory_info().rss
        except psutil.Error:
            pass
    return total


def idle_probe(n_workers: int, memory_limit: int) -> None:
    """Run in a fresh process (`--idle-probe`): start a local cluster as `align fit` does,
    warm it as the fit does, and print the summed RSS of this process and its workers
    (n_workers 0: a fit in threads of its own process, warmed as the fit does)."""
    import logging

    if n_workers == 0:
        from align.fitting.runtime.cluster import _warm_rss

        print(_warm_rss())
        return

    import dask
    from distributed import Client, LocalCluster

    from align.fitting.runtime.cluster import _no_memory_guard, _warm_rss

    with dask.config.set(_no_memory_guard()):
        cl = LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            memory_limit=memory_limit // n_workers,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
    with cl, Client(cl) as c:
        c.run(_warm_rss)
        _warm_rss()
        time.sleep(1.0)
        print(tree_rss(os.getpid()))


def idle_footprint(n_workers: int, memory_limit: int) -> int:
    """Idle footprint of a fit's client and workers, measured before the fit in a fresh
    process (the benchmark's own process holds the arrays of the runs before)."""
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--idle-probe",
            "--workers",
            str(n_workers),
            "--memory-limit",
            str(memory_limit),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip().splitlines()[-1])


def fit_with_peak_rss(S, T, out, n_workers, memory_limit):
    """Run `align fit` in a fresh process (n_workers 0: in its threads, the default; else a
    local cluster of that many), sampling the summed RSS of it and its workers every 50 ms.
    Returns (peak bytes, wall seconds, its log)."""
    cmd = [
        sys.executable,
        "-m",
        "align.cli.main",
        "fit",
        S,
        T,
        "-o",
        out,
        "--memory-limit",
        str(memory_limit),
    ]
    cmd += ["--workers", str(n_workers)] if n_workers else []
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak, errs = 0, []
    reader = threading.Thread(target=lambda: errs.extend(p.stderr), daemon=True)
    reader.start()
    while p.poll() is None:
        try:
            peak = max(peak, tree_rss(p.pid))
        except psutil.Error:
            pass
        time.sleep(0.05)
    reader.join()
    if p.returncode != 0:
        raise RuntimeError("".join(errs))
    return peak, time.time() - t0, "".join(errs)


def small_fit(S, T, out, repeats: int = 3) -> dict:
    """Seconds of a small fit end to end: `align fit S T -o OUT` as a command (interpreter
    start, imports, checks, fit, writing), and `align.fit(S, T, OUT)` called in a fresh
    process after `import align`; the least of `repeats` runs of each."""
    cmd = [sys.executable, "-m", "align.cli.main", "fit", S, T, "-o", out, "--overwrite"]
    code = (
        "import sys, time, align; t = time.perf_counter(); "
        "r = align.fit(sys.argv[1], sys.argv[2], sys.argv[3], None, align.Execution(overwrite=True), "
        "log=lambda m: None); "
        "print(time.perf_counter() - t, r.plan['mode'])"
    )
    command, call, mode = [], [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        command.append(time.perf_counter() - t0)
        p = subprocess.run(
            [sys.executable, "-c", code, S, T, out], check=True, capture_output=True, text=True
        )
        seconds, mode = p.stdout.split()
        call.append(float(seconds))
    shutil.rmtree(out, ignore_errors=True)
    return {
        "command_seconds": command,
        "call_seconds": call,
        "best_command_seconds": min(command),
        "best_call_seconds": min(call),
        "mode": mode,
    }


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def stores(folder, name, n_tokens, Ls, ds, Lt, dt, doc_len, seeds):
    """(source, target) stores of `n_tokens` in `folder`, written unless already there."""
    out = []
    for side, (L, d, seed) in zip("st", ((Ls, ds, seeds[0]), (Lt, dt, seeds[1]))):
        path = os.path.join(folder, f"{name}-{side}-{n_tokens}-{L}x{d}-{doc_len}-{seed}.zarr")
        if not os.path.exists(os.path.join(path, "zarr.json")):
            make_store(path, n_tokens, L, d, doc_len, seed)
        out.append(path)
    return out


def ridgecv_time(S, T, src_boundaries, tgt_boundaries, n_sample, alphas):
    """Seconds per pair of scikit-learn RidgeCV (same α grid, scaled per pair as align does)
    fitted on the training tokens, timed on a sample of pairs."""
    from sklearn.linear_model import RidgeCV

    from align.store import open_activations

    s, t = open_activations(S), open_activations(T)
    doc, pos = s.tokens("doc"), s.tokens("pos")
    rng = np.random.default_rng(0)
    pairs = [
        (int(rng.choice(src_boundaries)), int(rng.choice(tgt_boundaries))) for _ in range(n_sample)
    ]
    times = []
    test_docs = set(
        np.random.default_rng(0).permutation(np.unique(doc))[
            : max(1, round(0.2 * len(np.unique(doc))))
        ]
    )
    train = ~np.isin(doc, list(test_docs)) & (pos != 0)
    for i, j in pairs:
        X = s.resid(i)[train].astype(np.float64)
        Y = t.resid(j)[train].astype(np.float64)
        t0 = time.perf_counter()
        Xc = X - X.mean(0)
        scale = np.einsum("nd,nd->", Xc, Xc) / X.shape[1]
        RidgeCV(alphas=np.asarray(alphas) * scale).fit(X, Y)
        times.append(time.perf_counter() - t0)
    return pairs, times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=131_072)
    ap.add_argument(
        "--small-tokens",
        type=int,
        default=4096,
        help="tokens of the end-to-end small fit (0: none)",
    )
    ap.add_argument(
        "--stores", default=None, help="folder to keep the generated stores in and re-use them from"
    )
    ap.add_argument("--source", default="8x256", help="LAYERSxD_MODEL of the source store")
    ap.add_argument("--target", default="12x384", help="LAYERSxD_MODEL of the target store")
    ap.add_argument("--doc-len", type=int, default=400)
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="--workers of the speed run (a local cluster of that many) [default: as align fit decides]",
    )
    ap.add_argument("--ridgecv-pairs", type=int, default=3)
    ap.add_argument(
        "--memory-tokens",
        type=int,
        default=None,
        help="tokens of the memory run's stores [default: sized to 4x --memory-limit]",
    )
    ap.add_argument("--memory-limit", default="600MB", help="budget of the memory run")
    ap.add_argument(
        "--memory-workers",
        type=int,
        default=0,
        help="the memory run on a local cluster of that many workers [default 0: threads, as align fit runs]",
    )
    ap.add_argument("--idle-probe", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="skip the memory run")
    ap.add_argument(
        "--pairing",
        choices=["tokens", "char-anchors"],
        default="tokens",
        help="char-anchors: time an anchored pair against a same-tokenizer pair of as many rows "
        "(bench/fit_pairing.py; writes bench/results/fit-pairing.json)",
    )
    ap.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="--pairing char-anchors, --measures: runs of each fit, alternated",
    )
    ap.add_argument(
        "--measures",
        default=None,
        help="time ridge alone against ridge and these streamed measures (LIST or all) in the same "
        "run, their interval (the jackknife's recomputations) and mknn, cknna, rsa on --sample-rows rows "
        "(bench/fit_measures.py; writes bench/results/fit-measures.json)",
    )
    ap.add_argument(
        "--interval-only",
        action="store_true",
        help="--measures: time the streamed measures' interval alone and merge it into the JSON "
        "at the output, keeping its fits and row timings (and their command)",
    )
    ap.add_argument(
        "--fits-only",
        action="store_true",
        help="--measures: time the fits alone (ridge against ridge and the streamed measures) "
        "and merge them into the JSON at the output, keeping its interval and row timings",
    )
    ap.add_argument(
        "--whole-only",
        action="store_true",
        help="--measures: time `align fit --measures all` with every default against ridge alone "
        "with its defaults, each whole, and merge them into the JSON at the output",
    )
    ap.add_argument(
        "--rows-only",
        action="store_true",
        help="--measures: time the row measures alone and merge them into the JSON at the "
        "output, keeping its fits and interval timings",
    )
    ap.add_argument(
        "--measures-bootstrap",
        type=int,
        default=0,
        help="--measures: --bootstrap of both fits (0: the values alone; the interval is timed apart)",
    )
    ap.add_argument(
        "--sample-rows",
        type=int,
        default=SAMPLE_ROWS,
        help="--measures: M of the row measures' timing [default: align fit's, SAMPLE_ROWS]",
    )
    ap.add_argument(
        "--baseline",
        default=None,
        metavar="REV",
        help="--measures: also time the recomputations of align/measures/pairs.py (streamed.py "
        "before it) at git revision REV, alternated with the working tree's (before/after)",
    )
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "fit.json"))
    ap.add_argument("--tmp", default=None)
    args = ap.parse_args()
    if args.idle_probe:
        from dask.utils import parse_bytes

        return idle_probe(
            args.workers if args.workers is not None else os.cpu_count(),
            parse_bytes(args.memory_limit),
        )
    if args.pairing == "char-anchors":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import fit_pairing

        return fit_pairing.main(args)
    if args.measures:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import fit_measures

        return fit_measures.main(args)

    from dask.utils import parse_bytes

    import align
    from align import ridge

    Ls, ds = map(int, args.source.split("x"))
    Lt, dt = map(int, args.target.split("x"))
    workers = args.workers or os.cpu_count()
    tmp = tempfile.mkdtemp(dir=args.tmp, prefix="align-bench-fit-")
    keep = args.stores or tmp
    os.makedirs(keep, exist_ok=True)
    result = {
        "config": vars(args)
        | {
            "workers": workers,
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "memory_bytes": psutil.virtual_memory().total,
            "command": " ".join([".venv/bin/python", "bench/fit.py", *sys.argv[1:]]),
        },
        "load_average_at_start": os.getloadavg(),
        "uptime_at_start": uptime(),
    }
    try:
        if args.small_tokens:
            s_small, t_small = stores(
                keep, "small", args.small_tokens, Ls, ds, Lt, dt, args.doc_len, (5, 6)
            )
            load0 = os.getloadavg()
            small = small_fit(s_small, t_small, os.path.join(tmp, "small.zarr"))
            result["small"] = {
                "n_tokens": args.small_tokens,
                **small,
                "load_average_before_after": [load0, os.getloadavg()],
            }
            print(
                f"small fit of {args.small_tokens:,} tokens ({small['mode']}): `align fit` "
                f"{small['best_command_seconds']:.2f} s, align.fit() {small['best_call_seconds']:.2f} s",
                flush=True,
            )
        t0 = time.time()
        S, T = stores(keep, "speed", args.tokens, Ls, ds, Lt, dt, args.doc_len, (1, 2))
        result["store_seconds"] = time.time() - t0
        chunk = align.store.open_activations(S).chunk_tokens
        sum_ds, sum_dt = (Ls + 1) * ds, (Lt + 1) * dt
        # the floor: one pair's product over a chunk through numpy (what the fit
        # computed when the target was set); the strict one: the best rate measured, on the
        # side-by-side shape the fit computes now, through either library
        rates = matmul_rates({"pair": (ds, dt), "side-by-side": (sum_ds, sum_dt)}, chunk)
        rate, best = rates["pair-numpy"], max(rates.values())
        flops = 2.0 * args.tokens * sum_ds * sum_dt
        floor = flops / rate
        print(
            f"float64 matmul rates { ({k: round(v / 1e9, 1) for k, v in rates.items()}) } GFLOP/s; floor {flops:.3g} "
            f"flop = {floor:.1f} s at the pair shape through numpy, {flops / best:.1f} s at the best rate",
            flush=True,
        )

        t0 = time.time()
        load0 = os.getloadavg()
        rep = align.fit(
            S,
            T,
            os.path.join(tmp, "a.zarr"),
            None,
            align.Execution(n_workers=args.workers or None),
        )
        wall = time.time() - t0
        load1 = os.getloadavg()
        print(
            f"align fit: {wall:.1f} s ({rep.plan['mode']}, {len(rep.blocks)} block(s)); compute seconds by task kind "
            f"{ {k: round(v, 1) for k, v in rep.task_seconds.items()} }; load {load0} -> {load1}",
            flush=True,
        )

        pairs, times = ridgecv_time(
            S, T, list(range(Ls + 1)), list(range(Lt + 1)), args.ridgecv_pairs, ridge.DEFAULT_ALPHAS
        )
        n_pairs = (Ls + 1) * (Lt + 1)
        ridgecv_total = float(np.mean(times)) * n_pairs
        print(
            f"RidgeCV: {np.mean(times):.2f} s per pair x {n_pairs} pairs = {ridgecv_total:.0f} s (extrapolated)",
            flush=True,
        )
        result["speed"] = {
            "n_tokens": args.tokens,
            "sum_d_source": sum_ds,
            "sum_d_target": sum_dt,
            "pairs": n_pairs,
            "floor_flops": flops,
            "matmul_rate_flops": rate,
            "floor_seconds": floor,
            "fit_seconds": wall,
            "blocks": len(rep.blocks),
            "fraction_of_floor_rate": floor / wall,
            "matmul_rates_flops": rates,
            "strict_floor_seconds": flops / best,
            "fraction_of_strict_floor_rate": flops / best / wall,
            "plan": rep.plan,
            "task_compute_seconds": rep.task_seconds,
            "load_average_before_after": [load0, load1],
            "ridgecv_sample_pairs": pairs,
            "ridgecv_sample_seconds": times,
            "ridgecv_seconds_extrapolated": ridgecv_total,
            "speedup_vs_ridgecv": ridgecv_total / wall,
            "note": "RidgeCV timed on a sample of pairs (training tokens only, no scoring) and multiplied by the pair count",
        }
        shutil.rmtree(os.path.join(tmp, "a.zarr"), ignore_errors=True)

        if not args.quick:
            limit = parse_bytes(args.memory_limit)
            per_token = 4 * (sum_ds + sum_dt)
            n_mem = args.memory_tokens or int(4 * limit / per_token) + 1
            if not args.stores:
                for p in (S, T):
                    shutil.rmtree(p)
            S = make_store(os.path.join(tmp, "ms.zarr"), n_mem, Ls, ds, args.doc_len, 3)
            T = make_store(os.path.join(tmp, "mt.zarr"), n_mem, Lt, dt, args.doc_len, 4)
            store_bytes = n_mem * per_token
            idle = idle_footprint(args.memory_workers, limit)
            peak, wall, log = fit_with_peak_rss(
                S, T, os.path.join(tmp, "m.zarr"), args.memory_workers, limit
            )
            bound = 1.3 * limit + idle
            plan = [line for line in log.splitlines() if "pairs in" in line or "used idle" in line]
            print(
                f"memory: stores {store_bytes / 1e6:.0f} MB, limit {limit / 1e6:.0f} MB, idle {idle / 1e6:.0f} MB, "
                f"peak {peak / 1e6:.0f} MB, bound {bound / 1e6:.0f} MB, {wall:.1f} s",
                flush=True,
            )
            print("\n".join(plan), flush=True)
            result["memory"] = {
                "n_tokens": n_mem,
                "workers": args.memory_workers,
                "store_bytes": store_bytes,
                "memory_limit": limit,
                "idle_footprint_bytes": idle,
                "peak_rss_bytes": peak,
                "bound_bytes": bound,
                "within_bound": peak < bound,
                "fit_seconds": wall,
                "peak_over_limit": peak / limit,
                "excess_over_idle_per_limit": (peak - idle) / limit,
                "fit_log": plan,
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["load_average_at_end"] = os.getloadavg()
    result["uptime_at_end"] = uptime()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
