"""Benchmark of `align fit --pairing char-anchors` (not run in CI; `bench/fit.py --pairing
char-anchors` runs it): the store-route fit of two stores that tokenize one text differently,
against a fit of two same-tokenizer stores holding as many tokens as the anchored pair has
rows, with the same widths, documents and chunking. Ratio of the medians, runs alternated.

    .venv/bin/python bench/fit.py --pairing char-anchors     # writes bench/results/fit-pairing.json

The stores are written from seeded random arrays through align.store (a fit's cost does not
depend on the numbers). The text is words of 2–7 characters; the source tokenizer cuts 30% of
the words in two, the target's 60% (so the anchored pair reads more target tokens than rows).
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

TOKENIZERS = {
    "source": {
        "vocab": "v0",
        "merges": "m0",
        "added_tokens": "a",
        "normalizer_pretokenizer": "n",
        "special_wrapping": "s",
        "all": "x0",
    },
    "target": {
        "vocab": "v1",
        "merges": "m1",
        "added_tokens": "a",
        "normalizer_pretokenizer": "n",
        "special_wrapping": "s",
        "all": "x1",
    },
}


def token_table(n_chars_per_doc: int, n_docs: int, p_cut: float, seed: int) -> dict:
    """token_id, doc, seq, pos, char_start, char_end: documents of `n_chars_per_doc` characters
    in words of 2–7 (the same words for every seed of one text), each word one token or,
    with probability p_cut, two; one sequence per document, no special tokens."""
    words_rng, cut_rng = np.random.default_rng(0), np.random.default_rng(seed)
    cols = {k: [] for k in ("doc", "pos", "char_start", "char_end")}
    for d in range(n_docs):
        s = 0
        ends = []
        while s < n_chars_per_doc:
            e = min(n_chars_per_doc, s + int(words_rng.integers(2, 8)))
            if e - s > 1 and cut_rng.random() < p_cut:
                ends.append(int(cut_rng.integers(s + 1, e)))
            ends.append(e)
            s = e
        starts = [0] + ends[:-1]
        cols["doc"] += [d] * len(ends)
        cols["pos"] += list(range(len(ends)))
        cols["char_start"] += starts
        cols["char_end"] += ends
    t = {k: np.asarray(v, np.int64) for k, v in cols.items()}
    t["pos"] = t["pos"].astype(np.int32)
    t["seq"] = t["doc"].copy()
    t["token_id"] = (np.arange(len(t["doc"])) % 300).astype(np.int32)
    return t


def write(path: str, table: dict, n_layers: int, d_model: int, seed: int, tokenizer: dict) -> str:
    from align.store.arrays import StoreFormat, StoreShape, write_activations

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
        "tokenizer_hash": tokenizer,
        "corpus": {"hash": "bench-text", "source": "bench words"},
    }
    return write_activations(
        path, block, table, prov, StoreShape(n_layers, d_model), StoreFormat(codec="none")
    )


def run(args) -> dict:
    import align

    Ls, ds = (int(x) for x in args.source.split("x"))
    Lt, dt = (int(x) for x in args.target.split("x"))
    tmp = tempfile.mkdtemp(prefix="align-bench-pairing-", dir=args.tmp)
    try:
        chars = args.doc_len * 4  # ~doc_len source tokens per document
        n_docs = max(3, args.tokens // args.doc_len)
        src_t, tgt_t = token_table(chars, n_docs, 0.3, 1), token_table(chars, n_docs, 0.6, 2)
        S = write(os.path.join(tmp, "as.zarr"), src_t, Ls, ds, 1, TOKENIZERS["source"])
        T = write(os.path.join(tmp, "at.zarr"), tgt_t, Lt, dt, 2, TOKENIZERS["target"])
        no_bootstrap = align.FitSpec(bootstrap=0)
        probe = align.fit(S, T, None, no_bootstrap, log=lambda m: None).dataset
        rows = sum(probe.attrs["options"]["n_tokens"].values())
        coverage = {k: probe.attrs["pairing"][k]["coverage"] for k in ("source", "target")}
        # the baseline: one tokenizer, as many rows (tokens outside position 0) over as many documents
        per_doc = -(-rows // n_docs) + 1
        base = token_table(
            per_doc * 8, n_docs, 0.0, 3
        )  # words of 2–7 characters: more than per_doc tokens
        keep = np.concatenate([np.flatnonzero(base["doc"] == d)[:per_doc] for d in range(n_docs)])
        base = {k: v[keep] for k, v in base.items()}
        BS = write(os.path.join(tmp, "bs.zarr"), base, Ls, ds, 1, TOKENIZERS["source"])
        BT = write(os.path.join(tmp, "bt.zarr"), base, Lt, dt, 2, TOKENIZERS["source"])
        times = {"char-anchors": [], "tokens": []}
        base_rows = None
        for _ in range(args.repeats):
            for mode, (a, b) in (("char-anchors", (S, T)), ("tokens", (BS, BT))):
                t0 = time.perf_counter()
                rep = align.fit(a, b, None, no_bootstrap, log=lambda m: None)
                times[mode].append(time.perf_counter() - t0)
                if mode == "tokens":
                    base_rows = sum(rep.dataset.attrs["options"]["n_tokens"].values())
        med = {k: statistics.median(v) for k, v in times.items()}
        return {
            "config": {
                "source": args.source,
                "target": args.target,
                "documents": n_docs,
                "repeats": args.repeats,
                "source_tokens": len(src_t["doc"]),
                "target_tokens": len(tgt_t["doc"]),
                "baseline_tokens": len(base["doc"]),
                "machine": platform.processor() or platform.machine(),
                "cpus": os.cpu_count(),
                "load_average_at_start": args.load0,
            },
            "anchored_rows": rows,
            "baseline_rows": base_rows,
            "coverage": coverage,
            "seconds": times,
            "median_seconds": med,
            "ratio_char_anchors_over_tokens": med["char-anchors"] / med["tokens"],
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(args) -> None:
    args.load0 = os.getloadavg()
    result = run(args)
    result["load_average_at_end"] = os.getloadavg()
    out = os.path.join(os.path.dirname(__file__), "results", "fit-pairing.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
