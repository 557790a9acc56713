"""Benchmark of `align fit --live` (not run in CI): its wall time against its floor, and the
store route (extract, extract, fit) on the same job with its disk use.

Models: two seeded random Qwen2 (default 6 layers d=256 → 10 layers d=384, vocabulary 4,096,
one tokenizer), float32 on CPU; the corpus is long documents of seeded random words, cut into
sequences of 512 tokens. The floor is what the live route cannot avoid, measured in the same
run: the bare forwards of both models (the decoder without hooks or unembedding, `model.model`)
over the same batches, plus 2·N·ΣD_S·ΣD_T flops (the cross products of N tokens: XᵀY of the
training tokens, the predictions of the held-out ones) at the float64 matmul rate measured
here with torch on the product's own shape. Peak memory: the live run again, in a child
process under --memory-limit, its peak resident size (ru_maxrss) against that limit.

    .venv/bin/python bench/live.py                      # defaults below; writes bench/results/live.json
    .venv/bin/python bench/live.py --tokens 30000 --no-store
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import psutil
import torch
from common import bare_forward, build_qwen2, matmul_rate, widths

ALIGN = os.path.join(os.path.dirname(sys.executable), "align")


def build(root: str, source: str, target: str, vocab: int, tokens: int) -> tuple:
    """Both models and the corpus under `root`: (source folder, target folder, corpus file)."""
    out = []
    for name, spec in (("source", source), ("target", target)):
        L, d = widths(spec)
        path = os.path.join(root, name)
        words = build_qwen2(
            path, vocab, hidden=d, heads=d // 64, kv_heads=2, intermediate=4 * d, layers=L
        )
        out.append(path)
    rng = random.Random(1)
    corpus = os.path.join(root, "corpus.txt")
    with open(corpus, "w") as f:
        # documents of 1,200 words (a few full windows each), enough of them for `tokens`
        n_docs = max(10, tokens // 1500 + 2)
        f.write(
            "\n\n".join(" ".join(rng.choice(words) for _ in range(1200)) for _ in range(n_docs))
        )
    return out[0], out[1], corpus


def bare_forwards(job, batches, table) -> dict:
    """Seconds of the bare decoder forward of each model over `batches` (common.bare_forward)."""
    return {side: bare_forward(getattr(job, side), batches, table) for side in ("source", "target")}


def du(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


PEAK = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024); sys.exit(r)"
)


def live_peak(args, S, T, corpus, out, limit: str) -> dict:
    """The live run under --memory-limit in a child process: its peak resident size (the
    kernel's ru_maxrss of that child alone, read by a wrapper process whose only child it is)."""
    cmd = [
        ALIGN,
        "fit",
        "--live",
        S,
        T,
        corpus,
        "-o",
        out,
        "--memory-limit",
        limit,
        "--batch-size",
        str(args.batch_size),
        "--max-length",
        str(args.seq),
    ] + (["--max-tokens", str(args.tokens)] if args.tokens else [])
    t = time.time()
    p = subprocess.run([sys.executable, "-c", PEAK] + cmd, capture_output=True, text=True)
    return {
        "command": "align " + " ".join(cmd[1:]),
        "returncode": p.returncode,
        "seconds": time.time() - t,
        "peak_rss_bytes": int(p.stdout.split()[-1]),
        "stderr_plan": [
            line for line in p.stderr.splitlines() if "block(s)" in line or "memory on" in line
        ],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--source", default="6x256")
    ap.add_argument("--target", default="10x384")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--memory-limit", default="2GB", help="budget of the peak-memory run")
    ap.add_argument("--no-store", action="store_true", help="skip the store route")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory run")
    ap.add_argument(
        "--note", default="", help="a line recorded with the results (e.g. the machine's load)"
    )
    ap.add_argument(
        "--out",
        default=None,
        help="[default: bench/results/live.json; with --pairing char-anchors live-pairing.json]",
    )
    ap.add_argument(
        "--pairing",
        choices=["tokens", "char-anchors"],
        default="tokens",
        help="char-anchors: a target with another tokenizer, against a same-tokenizer target, each against "
        "its floor (bench/live_pairing.py)",
    )
    ap.add_argument(
        "--target-vocab",
        type=int,
        default=3072,
        help="--pairing char-anchors: the other tokenizer's vocabulary",
    )
    ap.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="--pairing char-anchors: runs of each fit, alternated",
    )
    args = ap.parse_args()
    results = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    if args.pairing == "char-anchors":
        import live_pairing

        args.out = args.out or os.path.join(results, "live-pairing.json")
        return live_pairing.main(args)
    args.out = args.out or os.path.join(results, "live.json")

    import align
    from align import corpus as corpus_mod
    from align import models
    from align.extraction import ExtractOptions
    from align.fitting.live_route import pipeline as live

    root = tempfile.mkdtemp(prefix="align-bench-live-")
    result = {
        "config": {
            **vars(args),
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "torch_threads": torch.get_num_threads(),
            "memory_bytes": psutil.virtual_memory().total,
            "command": " ".join(["bench/live.py"] + sys.argv[1:]),
        },
        "load_average_at_start": list(os.getloadavg()),
    }
    try:
        S, T, corpus = build(root, args.source, args.target, args.vocab, args.tokens)
        job = live.LiveJob(
            models.ModelSpec(S),
            models.ModelSpec(T),
            corpus_mod.CorpusSpec(corpus, max_length=args.seq, max_tokens=args.tokens),
            args.batch_size,
        )
        quiet = lambda m: None  # noqa: E731
        est = live.fit_live(job, None, dry_run=True, log=quiet).dry_run
        t = time.time()
        rep = live.fit_live(job, os.path.join(root, "live.zarr"), log=quiet)
        live_s = time.time() - t
        plan = rep.plan
        n = plan["n_tokens"]
        (Ls, ds), (Lt, dt) = widths(args.source), widths(args.target)
        sum_s, sum_t = (Ls + 1) * ds, (Lt + 1) * dt
        tok = models.load_tokenizer(job.source)
        table = live.token_table(job.corpus, tok)
        batches = live.plan_batches(table, np.zeros(table.n_tokens, np.int8), args.batch_size)
        fwd = bare_forwards(job, batches, table)
        rows = max(len(b.flat) for b in batches)
        rate = matmul_rate(rows, sum_s, sum_t)
        flops = 2.0 * n * sum_s * sum_t
        floor = fwd["source"] + fwd["target"] + flops / rate
        result["live"] = {
            "n_tokens": n,
            "seconds": live_s,
            "loop_seconds": rep.loop_seconds,
            "rates": rep.rates,
            "plan": {k: plan[k] for k in ("blocks", "passes", "keep_heldout", "bytes")},
            "floor_seconds": floor,
            "bare_forward_seconds": fwd,
            "product_flops": flops,
            "matmul_rate_flops": rate,
            "ratio_to_floor": live_s / floor,
            "loop_ratio_to_floor": rep.loop_seconds / floor,
            "target_ratio": 1.25,
            "dry_run_estimate_seconds": est["seconds_estimate"],
            "dry_run_phases": est["seconds"],
        }
        print(json.dumps(result["live"], indent=1), flush=True)
        if not args.no_store:
            st = {}
            for side, m in (("source", S), ("target", T)):
                t = time.time()
                align.extract(
                    m,
                    job.corpus,  # the live fit's corpus: max_length and max_tokens
                    os.path.join(root, f"{side}.zarr"),
                    ExtractOptions(batch_size=args.batch_size),
                    log=quiet,
                )
                st[f"extract_{side}_seconds"] = time.time() - t
                st[f"{side}_store_bytes"] = du(os.path.join(root, f"{side}.zarr"))
            t = time.time()
            fitted = align.fit(
                os.path.join(root, "source.zarr"),
                os.path.join(root, "target.zarr"),
                os.path.join(root, "store.zarr"),
                log=quiet,
            )
            st["fit_seconds"] = time.time() - t
            st["total_seconds"] = (
                st["extract_source_seconds"] + st["extract_target_seconds"] + st["fit_seconds"]
            )
            st["disk_bytes"] = st["source_store_bytes"] + st["target_store_bytes"]
            a, b = fitted.dataset, rep.dataset
            st["max_relative_difference_to_live"] = {
                k: float(
                    np.max(
                        np.abs(a[k].values - b[k].values) / np.maximum(np.abs(a[k].values), 1e-12)
                    )
                )
                for k in ("relative_error", "norm_error", "r2", "alpha")
            }
            result["store_route"] = st
            print(json.dumps(st, indent=1), flush=True)
        if not args.no_memory:
            from dask.utils import parse_bytes

            m = live_peak(
                args, S, T, corpus, os.path.join(root, "live-mem.zarr"), args.memory_limit
            )
            m["limit_bytes"] = parse_bytes(args.memory_limit)
            m["peak_over_limit"] = m["peak_rss_bytes"] / m["limit_bytes"]
            result["memory"] = m
            print(json.dumps(m, indent=1), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result["load_average_at_end"] = list(os.getloadavg())
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
