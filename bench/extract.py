"""Throughput of `align extract` against a bare forward of the same model over the same batches.

Model: Qwen2 with Qwen2.5-1.5B's widths (hidden 1536, 12 heads, 2 KV heads, intermediate
8960), two layers, a 4096-token vocabulary, random weights, float32 on CPU. Sequences of 512
tokens, all boundaries plus sublayers. The bare forward runs the decoder (`model.model`: no
hooks, no storage, no unembedding) over identical batches, after one warm-up batch; align's
rate is its forward-and-write loop (model load and tokenization excluded on both sides), and
the end-to-end wall time of the whole command is reported too.

    .venv/bin/python bench/extract.py [--sequences 24] [--batch-size 4]

Writes bench/results/extract.json. Not run in CI.
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


def build(root: str, vocab: int = 4096) -> str:
    """The bench model (Qwen2.5-1.5B's widths, two layers) and its corpus under `root`."""
    path = os.path.join(root, "model")
    words = build_qwen2(path, vocab, hidden=1536, heads=12, kv_heads=2, intermediate=8960, layers=2)
    rng = random.Random(1)
    with open(os.path.join(root, "corpus.txt"), "w") as f:
        # One long document: every window of 512 tokens is full.
        f.write(" ".join(rng.choice(words) for _ in range(200_000)))
    return path


def bare_forward(model_path: str, batches: list[list[np.ndarray]]) -> float:
    """Seconds of the bare decoder forward over `batches` (after one warm-up batch)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    base = model.model

    def run(batch):
        ids = torch.from_numpy(np.stack(batch).astype(np.int64))
        with torch.inference_mode():
            base(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)

    run(batches[0])
    t = time.perf_counter()
    for b in batches:
        run(b)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sequences", type=int, default=24)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "extract.json"))
    args = ap.parse_args()

    import align
    from align.store import open_activations

    root = tempfile.mkdtemp(prefix="align-bench-extract-")
    try:
        model_path = build(root)
        corpus = os.path.join(root, "corpus.txt")
        n_tokens = args.sequences * 512
        store = os.path.join(root, "store.zarr")
        t0 = time.perf_counter()
        report = align.extract(model_path, corpus, store, max_length=512, max_tokens=n_tokens, batch_size=args.batch_size,
                               sublayers=True, log=lambda m: None)
        wall = time.perf_counter() - t0
        s = open_activations(store)
        ids, seq = s.tokens("token_id"), s.tokens("seq")
        seqs = np.split(ids, np.flatnonzero(np.diff(seq)) + 1)
        assert all(len(x) == 512 for x in seqs), "every sequence must be 512 tokens"
        batches = [seqs[i:i + args.batch_size] for i in range(0, len(seqs), args.batch_size)]
        bare_s = bare_forward(model_path, batches)
        bare_rate = n_tokens / bare_s
        result = {
            "config": {"model": "qwen2, hidden 1536, 12 heads, 2 kv, intermediate 8960, 2 layers, vocab 4096",
                       "dtype": "float32", "device": "cpu", "sequence_length": 512, "sequences": args.sequences,
                       "batch_size": args.batch_size, "boundaries": "0..2", "sublayers": True,
                       "store_bytes": s.nbytes_stored(), "chunk_tokens": s.chunk_tokens, "codec": s.layout.codec,
                       "torch_threads": torch.get_num_threads(), "cpu": platform.processor() or platform.machine(),
                       "python": sys.version.split()[0], "torch": torch.__version__},
            "results": {"n_tokens": n_tokens, "align_tokens_per_s": report.tokens_per_second,
                        "bare_forward_tokens_per_s": bare_rate,
                        "slowdown_vs_bare": bare_rate / report.tokens_per_second - 1.0,
                        "align_end_to_end_wall_s": wall, "bare_forward_s": bare_s},
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result["results"], indent=2))


if __name__ == "__main__":
    main()
