"""Padding of `align extract`'s batches on a GSM8K-shaped corpus, before and after length grouping.

Corpus: prompts of 100-400 tokens, lengths drawn uniformly by a seeded generator (numpy
default_rng(0)). Two measurements:

1. The plan alone: the padded fraction of computed positions (padded / (batch x longest)
   summed over batches) for 4,096 prompt lengths, with consecutive batches (what align did
   before) and with the grouping windows of 1, 2, 4, 8, 16 x batch size (align uses
   `align.extraction.batches.GROUP_FACTOR`), for batch sizes 4, 8, 16, 32.
2. A real extraction: a small random Qwen2 (hidden 256, 4 heads, 2 layers, vocab 4096, float32,
   CPU) over 384 generated prompts (word counts drawn as above, so token counts are close to
   100-400), once with grouping (the default) and once with windows of one batch (consecutive
   batches), batch size 8: the padding fraction each run records in its provenance segment,
   and its tokens/s.

    .venv/bin/python bench/padding.py

Writes bench/results/padding.json. Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time

import numpy as np
import torch
from common import build_qwen2


def build(root: str, n_docs: int, vocab: int = 4096) -> tuple[str, str]:
    """The bench model (hidden 256, two layers) and a GSM8K-shaped corpus of `n_docs` prompts under `root`."""
    path = os.path.join(root, "model")
    words = build_qwen2(path, vocab, hidden=256, heads=4, kv_heads=2, intermediate=1024, layers=2)
    rng = random.Random(1)
    lengths = np.random.default_rng(0).integers(100, 401, n_docs)
    corpus = os.path.join(root, "gsm8k_shaped.txt")
    with open(corpus, "w") as f:
        f.write(
            "\n\n".join(" ".join(rng.choice(words) for _ in range(int(k) // 2)) for k in lengths)
        )
    return path, corpus


def plan_only(n: int = 4096) -> dict:
    from align.extraction.batches import padding_fraction

    lengths = np.random.default_rng(0).integers(100, 401, n).tolist()
    out = {}
    for b in (4, 8, 16, 32):
        row = {"consecutive": padding_fraction(lengths, b, b)}
        for f in (2, 4, 8, 16):
            row[f"window_{f}x"] = padding_fraction(lengths, b, b * f)
        out[f"batch_{b}"] = row
    return out


def real_run(root: str, n_docs: int, batch: int) -> dict:
    import align
    from align.extraction import batches as ex
    from align.store import open_activations

    model, corpus = build(root, n_docs)
    res = {}
    default = ex.GROUP_FACTOR
    for name, factor in (("consecutive", 1), ("grouped", default)):
        ex.GROUP_FACTOR = factor
        try:
            out = os.path.join(root, f"{name}.zarr")
            t = time.perf_counter()
            rep = align.extract(
                model, corpus, out, align.ExtractOptions(batch_size=batch), log=lambda m: None
            )
            wall = time.perf_counter() - t
        finally:
            ex.GROUP_FACTOR = default
        s = open_activations(out)
        seq = s.tokens("seq")
        lens = np.diff(np.r_[0, np.flatnonzero(np.diff(seq)) + 1, len(seq)])
        run = s.provenance["runs"][-1]
        res[name] = {
            "group_window": run["group_window"],
            "padding_fraction": run["padding_fraction"],
            "tokens_per_s": rep.tokens_per_second,
            "wall_s": wall,
            "n_tokens": s.n_tokens,
            "sequence_tokens": {
                "min": int(lens.min()),
                "mean": float(lens.mean()),
                "max": int(lens.max()),
            },
        }
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=384)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "padding.json")
    )
    args = ap.parse_args()
    from align.extraction import batches as ex

    root = tempfile.mkdtemp(prefix="align-bench-padding-")
    try:
        result = {
            "config": {
                "corpus": "prompt lengths uniform 100-400 tokens, numpy default_rng(0)",
                "align_group_factor": ex.GROUP_FACTOR,
                "real_run_docs": args.docs,
                "real_run_batch_size": args.batch_size,
                "real_run_model": "qwen2, hidden 256, 4 heads, 2 kv, intermediate 1024, 2 layers, vocab 4096, float32, cpu",
                "torch_threads": torch.get_num_threads(),
                "cpu": platform.processor() or platform.machine(),
                "python": sys.version.split()[0],
                "torch": torch.__version__,
            },
            "plan_4096_prompts": plan_only(),
            "real_extraction": real_run(root, args.docs, args.batch_size),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps({k: result[k] for k in ("plan_4096_prompts", "real_extraction")}, indent=2))


if __name__ == "__main__":
    main()
