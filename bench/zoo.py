"""The study planner's numbers for a zoo of nine public models (72 ordered pairs) at 10⁶
tokens: disk, memory and estimated hours on one H200 node and on four. No weights are read and
nothing runs on a GPU: every number is arithmetic on each model's public config (`ZOO`, copied
from its config.json on the hub) through the study estimator's own functions
(align.study.estimate.fit_flops, align.fitting.planning.budget.statistics_bytes and result_bytes), at
rates stated here (`RATES`): fractions of the H200's published peaks, and the extraction
writer's rate measured in bench/results/store_writer.json. Parameters are counted by building
each model from its config on PyTorch's meta device (no memory, no weights).

    .venv/bin/python bench/zoo.py --out bench/results/zoo.json

Writes the JSON (every model's numbers, every unit's estimate, the totals and the rates they
come from). Not run in CI.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (model_type, layers, d_model, intermediate, heads, kv heads, vocab, tied embeddings):
# the public config.json of each checkpoint.
ZOO = {
    "Qwen2.5-0.5B": ("qwen2", 24, 896, 4864, 14, 2, 151936, True),
    "Qwen2.5-1.5B": ("qwen2", 28, 1536, 8960, 12, 2, 151936, True),
    "Qwen2.5-3B": ("qwen2", 36, 2048, 11008, 16, 2, 151936, True),
    "Qwen2.5-7B": ("qwen2", 28, 3584, 18944, 28, 4, 152064, False),
    "Qwen2.5-14B": ("qwen2", 48, 5120, 13824, 40, 8, 152064, False),
    "Llama-3.2-1B": ("llama", 16, 2048, 8192, 32, 8, 128256, True),
    "Llama-3.2-3B": ("llama", 28, 3072, 8192, 24, 8, 128256, True),
    "OLMo-2-0425-1B": ("olmo2", 16, 2048, 8192, 16, 16, 100352, False),
    "OLMo-2-1124-7B": ("olmo2", 32, 4096, 11008, 32, 32, 100352, False),
}

# The rates every estimate uses, each with where it comes from.
H200_BF16_PEAK = 989e12  # dense bf16 FLOP/s, NVIDIA's H200 SXM datasheet
H200_FP64_PEAK = 67e12  # fp64 tensor-core FLOP/s, the same datasheet
H200_MEMORY = 141e9  # bytes of HBM3e per GPU
GPUS_PER_NODE = 8  # an HGX H200 node
FORWARD_FRACTION = 0.4  # of the bf16 peak, for the extraction's forward
FIT_FRACTION = 0.5  # of the fp64 peak, for the fit's float64 products on the GPU
TOKENS = 1_000_000
CONTEXT = 512  # tokens per sequence: the study's default max_length
STORE_BYTES = 2  # bfloat16 values in the stores (the compute dtype, `store_dtype` unset)


def config_of(name: str):
    """The transformers config of `name` from its public numbers."""
    from transformers import AutoConfig

    kind, layers, d, inter, heads, kv, vocab, tied = ZOO[name]
    return AutoConfig.for_model(
        kind,
        num_hidden_layers=layers,
        hidden_size=d,
        intermediate_size=inter,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        vocab_size=vocab,
        tie_word_embeddings=tied,
    )


def parameters(name: str) -> int:
    """Every parameter of the model built from its config on the meta device."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config_of(name))
    seen, total = set(), 0
    for p in model.parameters():  # tied embeddings are one tensor, counted once
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def writer_rate(results: str) -> float:
    """Bytes/s: the slowest of the best align-writer rates per shape in store_writer.json."""
    with open(os.path.join(results, "store_writer.json"), encoding="utf-8") as f:
        rows = json.load(f)["summary"]
    best = {}
    for r in rows:
        if r["threads"] is not None:
            best[r["model"]] = max(best.get(r["model"], 0.0), r["MiB_s_median"])
    return min(best.values()) * 2**20


def model_numbers(name: str) -> dict:
    """What the estimates need of one model, and its forward's FLOPs per token: 2 per weight
    of the blocks (the forward stops after the last block: no embedding product, no logits) and
    attention's 2·L·n·d at context n (the causal mean n/2, for QKᵀ and for AV)."""
    kind, layers, d, _, _, _, vocab, tied = ZOO[name]
    params = parameters(name)
    blocks = params - vocab * d * (1 if tied else 2)
    return {
        "model_type": kind,
        "layers": layers,
        "d_model": d,
        "vocab": vocab,
        "tied_embeddings": tied,
        "parameters": params,
        "block_parameters": blocks,
        "forward_flops_per_token": 2 * blocks + 2 * layers * CONTEXT * d,
        "weights_bytes": 2 * params,
    }


def estimates(numbers: dict, write: float) -> list:
    """Every unit of the zoo's study (store route): an extraction per model, a fit per ordered
    pair, each with disk, memory and seconds."""
    from align.fitting.planning.budget import ResultShape, result_bytes, statistics_bytes
    from align.study.estimate import fit_flops

    units = []
    forward_rate = FORWARD_FRACTION * H200_BF16_PEAK
    fit_rate = FIT_FRACTION * H200_FP64_PEAK
    for name, m in numbers.items():
        store = TOKENS * (m["layers"] + 1) * m["d_model"] * STORE_BYTES
        units.append(
            {
                "unit": f"extract {name}",
                "disk": store,
                "memory": m["weights_bytes"],
                "seconds": TOKENS * m["forward_flops_per_token"] / forward_rate + store / write,
            }
        )
    held = round(0.2 * TOKENS / CONTEXT)  # the held-out documents: test_fraction 0.2
    for s, a in numbers.items():
        for t, b in numbers.items():
            if s == t:
                continue
            S, T, ds, dt = a["layers"] + 1, b["layers"] + 1, a["d_model"], b["d_model"]
            read = TOKENS * (S * ds + T * dt) * STORE_BYTES
            units.append(
                {
                    "unit": f"fit {s}->{t}",
                    "disk": sum(result_bytes(ResultShape(S, T, ds, dt, held), False)),
                    "memory": statistics_bytes(S, T, ds, dt),
                    "seconds": fit_flops(TOKENS, S, T, ds, dt) / fit_rate + read / write,
                }
            )
    return units


def makespan(seconds: list, workers: int) -> float:
    """The longest worker's time when `seconds` are given, longest first, to the least
    loaded of `workers` (the units of one phase run in parallel)."""
    load = [0.0] * workers
    for s in sorted(seconds, reverse=True):
        heapq.heapreplace(load, load[0] + s)
    return max(load)


def totals(units: list) -> dict:
    ext = [u["seconds"] for u in units if u["unit"].startswith("extract")]
    fits = [u["seconds"] for u in units if u["unit"].startswith("fit")]
    out = {
        "disk": sum(u["disk"] for u in units),
        "stores_disk": sum(u["disk"] for u in units if u["unit"].startswith("extract")),
        "largest_fit_statistics": max(u["memory"] for u in units if u["unit"].startswith("fit")),
        "fits_over_gpu_memory": sum(
            1 for u in units if u["unit"].startswith("fit") and u["memory"] > H200_MEMORY
        ),
        "largest_weights": max(u["memory"] for u in units if u["unit"].startswith("extract")),
        "one_gpu_hours": (sum(ext) + sum(fits)) / 3600,
        "extract_hours_one_gpu": sum(ext) / 3600,
        "fit_hours_one_gpu": sum(fits) / 3600,
    }
    for nodes in (1, 4):
        gpus = nodes * GPUS_PER_NODE
        out[f"hours_{nodes}_node"] = (makespan(ext, gpus) + makespan(fits, gpus)) / 3600
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "results", "zoo.json"))
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    write = writer_rate(args.results)
    numbers = {name: model_numbers(name) for name in ZOO}
    units = estimates(numbers, write)
    out = {
        "command": "bench/zoo.py --out bench/results/zoo.json",
        "tokens": TOKENS,
        "context": CONTEXT,
        "rates": {
            "h200_bf16_peak_flops": H200_BF16_PEAK,
            "h200_fp64_peak_flops": H200_FP64_PEAK,
            "h200_memory_bytes": H200_MEMORY,
            "gpus_per_node": GPUS_PER_NODE,
            "forward_fraction_of_bf16_peak": FORWARD_FRACTION,
            "fit_fraction_of_fp64_peak": FIT_FRACTION,
            "store_write_and_read_bytes_per_s": write,
            "store_bytes_per_value": STORE_BYTES,
        },
        "models": numbers,
        "units": units,
        "totals": totals(units),
    }
    assert all(math.isfinite(u["seconds"]) for u in units)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps(out["totals"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
