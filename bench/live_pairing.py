"""Benchmark of `align fit --live` for two tokenizers (not run in CI; `bench/live.py --pairing
char-anchors` runs it): the anchored live fit against a live fit of one tokenizer on the same
models' shapes and corpus, each against its own floor measured in the same run.

    .venv/bin/python bench/live.py --pairing char-anchors --tokens 50000   # bench/results/live-pairing.json

Models: seeded random Qwen2, source `--source` (6x256) with the byte-level BPE of `--vocab`
(4,096) words, and two targets of shape `--target` (10x384): one with the same tokenizer, one
with a BPE of `--target-vocab` (3,072) trained on the same words (other merges: most words cut
at other characters). The corpus is documents of 80 seeded random words, each held whole by
one window (`--max-length` 512, `--overflow truncate`).

A fit's floor is what its route cannot avoid: the bare forwards of each model over its own
extraction batches (common.bare_forward), plus 2·N·ΣD_S·ΣD_T flops for its N rows (anchored
pairs, or tokens) at the float64 matmul rate measured here. The anchored fit also forwards the
target in its own batches and lays each grouping window's kept rows beside the source's; the
ratio of the two fits' ratios to their floors is what that costs. Runs alternate, medians.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import statistics
import tempfile
import time

import numpy as np
import psutil
import torch
from common import bare_forward, build_qwen2, matmul_rate, widths


def build(root: str, args) -> dict:
    """The source, the two targets and the corpus under `root`."""
    (Ls, ds), (Lt, dt) = widths(args.source), widths(args.target)
    paths = {name: os.path.join(root, name) for name in ("source", "same", "other")}
    words = build_qwen2(
        paths["source"],
        args.vocab,
        hidden=ds,
        heads=ds // 64,
        kv_heads=2,
        intermediate=4 * ds,
        layers=Ls,
    )
    for name, vocab in (("same", args.vocab), ("other", args.target_vocab)):
        build_qwen2(
            paths[name],
            vocab,
            hidden=dt,
            heads=dt // 64,
            kv_heads=2,
            intermediate=4 * dt,
            layers=Lt,
        )
    rng = random.Random(1)
    n_docs = max(10, args.tokens // 150)  # ~150 source tokens a document
    paths["corpus"] = os.path.join(root, "corpus.txt")
    with open(paths["corpus"], "w") as f:
        f.write("\n\n".join(" ".join(rng.choice(words) for _ in range(80)) for _ in range(n_docs)))
    return paths


def one_fit(job, quiet) -> dict:
    from align.fitting import FitSpec
    from align.fitting.live_route import pipeline as live

    t = time.time()
    rep = live.fit_live(job, None, FitSpec(bootstrap=0), log=quiet)
    return {
        "seconds": time.time() - t,
        "loop_seconds": rep.loop_seconds,
        "plan": rep.plan,
        "dataset": rep.dataset,
    }


def floor_of(job, args, rows: int, rate: float, sums: tuple) -> dict:
    """The bare forwards of each model over its own batches and the rows' products."""
    from align import models
    from align.fitting.live_route import pipeline as live

    fwd = {}
    for side in ("source", "target"):
        spec = getattr(job, side)
        table = live.token_table(job.corpus, models.load_tokenizer(spec))
        batches = live.plan_batches(table, np.zeros(table.n_tokens, np.int8), args.batch_size)
        fwd[side] = {"seconds": bare_forward(spec, batches, table), "tokens": table.n_tokens}
    flops = 2.0 * rows * sums[0] * sums[1]
    return {
        "bare_forwards": fwd,
        "product_flops": flops,
        "seconds": fwd["source"]["seconds"] + fwd["target"]["seconds"] + flops / rate,
    }


def pairing_summary(pairing: dict) -> dict:
    """A result's attrs["pairing"] without its per-document coverage."""
    return {
        k: ({"coverage": v["coverage"], "tokens": v["tokens"]} if k in ("source", "target") else v)
        for k, v in pairing.items()
        if k != "documents"
    }


def main(args) -> None:
    from align import corpus, models
    from align.fitting.live_route import pipeline as live

    root = tempfile.mkdtemp(prefix="align-bench-live-pairing-")
    result = {
        "config": {
            k: v
            for k, v in vars(args).items()
            if k not in ("no_store", "no_memory", "memory_limit")
        },
        "machine": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_bytes": psutil.virtual_memory().total,
        "load_average_at_start": list(os.getloadavg()),
    }
    quiet = lambda m: None  # noqa: E731
    try:
        paths = build(root, args)
        cspec = corpus.CorpusSpec(
            paths["corpus"], max_length=args.seq, overflow="truncate"
        )  # the documents set the size
        jobs = {
            mode: live.LiveJob(
                models.ModelSpec(paths["source"]),
                models.ModelSpec(paths[target]),
                cspec,
                args.batch_size,
            )
            for mode, target in (("char-anchors", "other"), ("tokens", "same"))
        }
        runs = {mode: [] for mode in jobs}
        for _ in range(args.repeats):
            for mode, job in jobs.items():
                runs[mode].append(one_fit(job, quiet))
        (Ls, ds), (Lt, dt) = widths(args.source), widths(args.target)
        sums = ((Ls + 1) * ds, (Lt + 1) * dt)
        out = {}
        for mode, job in jobs.items():
            ds_ = runs[mode][0]["dataset"]
            rows = sum(ds_.attrs["options"]["n_tokens"].values())
            rate = matmul_rate(min(rows, 4096), *sums)
            floor = floor_of(job, args, rows, rate, sums)
            med = statistics.median(r["seconds"] for r in runs[mode])
            out[mode] = {
                "rows": rows,
                "seconds": [r["seconds"] for r in runs[mode]],
                "median_seconds": med,
                "loop_seconds": [r["loop_seconds"] for r in runs[mode]],
                "floor": floor,
                "matmul_rate_flops": rate,
                "ratio_to_floor": med / floor["seconds"],
                "plan_bytes": runs[mode][0]["plan"]["bytes"],
                "pairing": pairing_summary(ds_.attrs["pairing"]),
            }
        result["fits"] = out
        result["ratio_of_ratios"] = (
            out["char-anchors"]["ratio_to_floor"] / out["tokens"]["ratio_to_floor"]
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result["load_average_at_end"] = list(os.getloadavg())
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
    print(f"wrote {args.out}")
