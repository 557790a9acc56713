"""The plan of `align fit --measures all` for Qwen2.5-1.5B → Qwen2.5-14B, from the memory
planner's own functions (align.fitting.planning.budget) and flop counts; nothing is run or loaded.

`align fit --dry-run` times a piece of the real work, so it needs the weights (`--live`) or
the stores (the store route). This script therefore does the arithmetic the fit would do: the
store route's blocks (`plan_blocks`) under a host budget, the live route's passes
(`plan_passes`) under a GPU's budget, each with and without the measures' sums, and the
flops of the products and of the measures' decompositions, turned into time at rates given
on the command line (stated in the output: a plan, not a measurement).

    .venv/bin/python bench/plan_measures.py      # writes bench/results/plan-measures.json
"""

from __future__ import annotations

import argparse
import json
import math
import os

from align.measures import SAMPLE_ROWS

SOURCE = {"name": "Qwen2.5-1.5B", "layers": 28, "d": 1536, "params": 1.54e9}
TARGET = {
    "name": "Qwen2.5-14B",
    "layers": 48,
    "d": 5120,
    "params": 14.7e9,
    "inter": 13824,
    "heads": 40,
}
HELDOUT = 0.2  # FitSpec.test_fraction: the held-out documents' share of the tokens


def store_plan(budget: int, tokens: int, chunk: int, groups: int) -> dict:
    """The store route's blocks under `budget` bytes per worker (one worker)."""
    from align.fitting.planning import budget as b

    grid = b.PairGrid(
        tuple(range(SOURCE["layers"] + 1)),
        tuple(range(TARGET["layers"] + 1)),
        SOURCE["d"],
        TARGET["d"],
        measure_groups=groups,
        rotations=groups > 0,  # --measures all holds procrustes-heldout's rotations
    )
    task = b.default_task_tokens(chunk, tokens, 1, "cpu")
    plan = b.plan_blocks(grid, task, budget, chunk, n_tokens=tokens)
    if plan is None:
        return {"budget_bytes": budget, "groups": groups, "fits": False}
    nI, nJ = len(plan.blocks[0][0]), len(plan.blocks[0][1])
    ridge = b.block_bytes(
        nI,
        nJ,
        SOURCE["d"],
        TARGET["d"],
        plan.task_tokens,
        chunk,
        math.ceil(tokens / plan.task_tokens),
    )
    sums = b.measure_bytes(nI, nJ, SOURCE["d"], TARGET["d"], groups, rotations=groups > 0)
    return {
        "budget_bytes": budget,
        "groups": groups,
        "fits": True,
        "blocks": len(plan.blocks),
        "block_shape": [nI, nJ],
        "task_tokens": plan.task_tokens,
        "block_bytes": ridge,
        "measure_bytes": sums,
    }


def live_plan(budget: int, tokens: int, batch: int, length: int, groups: int) -> dict:
    """The live route's passes under a device budget of `budget` bytes (bfloat16 models)."""
    from align.fitting.planning import budget as b

    shape = b.LiveShape(
        n_source=SOURCE["layers"] + 1,
        d_s=SOURCE["d"],
        n_target=TARGET["layers"] + 1,
        d_t=TARGET["d"],
        batch_positions=batch * length,
        batch_width=length,
        inter=TARGET["inter"],
        heads=TARGET["heads"],
        itemsize=2,
        n_heldout=int(HELDOUT * tokens),
        model_bytes=int(2 * (SOURCE["params"] + TARGET["params"])),
        measure_groups=groups,
        rotations=groups > 0,
        measure_host=True,  # a GPU's fit: the measures' float64 sums are host memory
    )
    plan = b.plan_passes(shape, tuple(range(TARGET["layers"] + 1)), budget)
    if plan is None:
        return {"budget_bytes": budget, "groups": groups, "fits": False}
    host = b.measure_host_bytes(shape, len(plan.blocks[0]), plan.keep_heldout)
    return {
        "budget_bytes": budget,
        "groups": groups,
        "fits": True,
        "passes": len(plan.blocks),
        "targets_per_pass": len(plan.blocks[0]),
        "keep_heldout": plan.keep_heldout,
        "model_bytes": shape.model_bytes,
        "pass_bytes": plan.bytes,
        "host_bytes": host,
    }


def sample_plan(rows: int, permutations: int, resamples: int) -> dict:
    """The M sampled rows of `--measures all --permutations K` and `row_measures`' working
    memory on them, from the planner's own functions (align.fitting.planning.sample_budget), float64
    rows as the live route keeps them; the largest bootstrap resample taken as M."""
    from align.fitting.planning import sample_budget as sb
    from align.measures.rows import ROW_MEASURES

    shape = sb.SampleShape(
        rows,
        SOURCE["layers"] + 1,
        SOURCE["d"],
        TARGET["layers"] + 1,
        TARGET["d"],
        tuple(ROW_MEASURES),
        10,
        permutations + resamples,
        rows,
    )
    return {
        "rows": rows,
        "permutations": permutations,
        "resamples": resamples,
        "rows_bytes": sb.sample_bytes(shape),
        "row_measures_bytes": sb.row_measures_bytes(shape),
    }


def flops(tokens: int, groups: int) -> dict:
    """Floating-point operations (multiply and add counted apart) of the fit's parts:
    ridge's statistics 2·N·ΣD_S·ΣD_T; the measures' sums over the held-out rows, every pair's
    Σxyᵀ and every boundary's Σxxᵀ (2·N_h·(ΣD_S·ΣD_T + Σ d²)); and one evaluation of the
    streamed measures of every pair (Q_xᵀ C_xy Q_y, the nuclear norm's Gram and its
    eigenvalues, SVCCA's SVD at most d_S³) and of every boundary (one eigh, about 9 d³),
    which the jackknife interval repeats once a group (G recomputations, whatever
    --bootstrap), after its group passes' products (each group's rows once: the measures'
    sums' flops again)."""
    nI, nJ = SOURCE["layers"] + 1, TARGET["layers"] + 1
    dS, dT = SOURCE["d"], TARGET["d"]
    held = HELDOUT * tokens
    pair = 2 * (dS * dS * dT + dS * dT * dT) + 2 * dS * dS * dT + 4 / 3 * dS**3 + 4 * dS**3
    side = 9 * (nI * dS**3 + nJ * dT**3)
    evaluation = nI * nJ * pair + side
    return {
        "statistics": 2.0 * tokens * nI * dS * nJ * dT,
        "measure_sums": 2.0 * held * (nI * dS * nJ * dT + nI * dS * dS + nJ * dT * dT),
        # the jackknife's group passes: each group's rows once, the same products again
        "measure_group_passes": 2.0 * held * (nI * dS * nJ * dT + nI * dS * dS + nJ * dT * dT),
        "measure_evaluation": evaluation,
        "measure_interval": groups * evaluation,
        "forwards_per_pass": 2.0 * (SOURCE["params"] + TARGET["params"]) * tokens,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=4096, help="the stores' chunk, in tokens")
    ap.add_argument(
        "--host-memory", type=float, default=512, help="GiB of the store route's budget"
    )
    ap.add_argument(
        "--device-memory", type=float, default=125, help="GiB of the GPU's budget (live)"
    )
    ap.add_argument("--batch", type=int, default=8, help="sequences a batch (live)")
    ap.add_argument("--length", type=int, default=2048, help="tokens a sequence (live)")
    ap.add_argument(
        "--groups", type=int, default=10, help="groups of held-out documents (MEASURE_GROUPS)"
    )
    ap.add_argument(
        "--sample-rows",
        type=int,
        default=SAMPLE_ROWS,
        help="M, the sampled rows [align fit's default]",
    )
    ap.add_argument("--permutations", type=int, default=99, help="K of the calibration")
    ap.add_argument(
        "--rate", type=float, default=50e12, help="assumed float64 flop/s of the products"
    )
    ap.add_argument(
        "--forward-rate", type=float, default=400e12, help="assumed bfloat16 flop/s of the forwards"
    )
    ap.add_argument(
        "--out",
        default=os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "results", "plan-measures.json"
        ),
    )
    args = ap.parse_args(argv)
    gib = 1 << 30
    f = flops(args.tokens, args.groups)
    out = {
        "config": {k: v for k, v in vars(args).items() if k != "out"}
        | {"source": SOURCE, "target": TARGET, "heldout_fraction": HELDOUT},
        "command": "bench/plan_measures.py" + (" " + " ".join(argv) if argv else ""),
        "store": {
            label: store_plan(int(args.host_memory * gib), args.tokens, args.chunk, g)
            for label, g in (("ridge", 0), ("measures", 1), ("measures_bootstrap", 10))
        },
        "live": {
            label: live_plan(int(args.device_memory * gib), args.tokens, args.batch, args.length, g)
            for label, g in (("ridge", 0), ("measures", 1), ("measures_bootstrap", 10))
        },
        "sampled": sample_plan(args.sample_rows, args.permutations, 1000),
        "flops": f,
        "seconds": {
            k: v / (args.forward_rate if k == "forwards_per_pass" else args.rate)
            for k, v in f.items()
        },
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=2)
        fh.write("\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
