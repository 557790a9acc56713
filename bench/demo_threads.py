"""The demo's training throughput with 1 and with 2 torch threads, on the machine as it is and
beside a load of busy processes: the measurement behind the demo's thread choice
(align.demo.threads). Each run is a child process that trains the demo's shallow model
(6 layers, d_model 128, batches of 16 × 64 tokens) for `--steps` steps after 3 warm-up steps
and reports tokens per second; the thread counts alternate within each condition.

    .venv/bin/python bench/demo_threads.py --steps 30 --busy 0 2 --out bench/results/demo-threads.json

Writes the JSON (per condition and thread count: every run's tokens/s, the median, the load
averages around it). Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time

CHILD = """
import time, torch
torch.set_num_threads({threads})
from align.demo.train import TrainConfig, qwen2_config
from transformers import Qwen2ForCausalLM
cfg = TrainConfig(n_layers=6, d_model=128)
torch.manual_seed(0)
model = Qwen2ForCausalLM(qwen2_config(cfg, 64))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
batch = torch.randint(0, 64, (cfg.batch_size, cfg.seq_len + 1))
def step():
    logits = model(input_ids=batch[:, :-1]).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 64), batch[:, 1:].reshape(-1))
    opt.zero_grad(); loss.backward(); opt.step()
for _ in range(3):
    step()
t = time.perf_counter()
for _ in range({steps}):
    step()
print({steps} * cfg.batch_size * cfg.seq_len / (time.perf_counter() - t))
"""


def _spin(stop_at: float) -> None:
    x = 0
    while time.time() < stop_at:
        x += 1


def _rate(threads: int, steps: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(threads=threads, steps=steps)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def _condition(busy: int, steps: int, repeats: int) -> dict:
    spinners = [
        multiprocessing.Process(target=_spin, args=(time.time() + 3600,)) for _ in range(busy)
    ]
    for p in spinners:
        p.start()
    try:
        time.sleep(2 if busy else 0)
        load = os.getloadavg()
        runs = {1: [], 2: []}
        for _ in range(repeats):
            for threads in (1, 2):
                runs[threads].append(_rate(threads, steps))
        return {
            "busy_processes": busy,
            "load_before": load,
            "load_after": os.getloadavg(),
            "tokens_per_second": {str(k): v for k, v in runs.items()},
            "median": {str(k): statistics.median(v) for k, v in runs.items()},
        }
    finally:
        for p in spinners:
            p.terminate()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument(
        "--busy",
        type=int,
        nargs="+",
        default=[0, 2],
        help="busy processes started beside each condition (0: the machine as it is)",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="bench/results/demo-threads.json")
    args = ap.parse_args()
    result = {
        "command": "bench/demo_threads.py " + " ".join(sys.argv[1:]),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "steps": args.steps,
        "load_before": os.getloadavg(),
        "conditions": [_condition(busy, args.steps, args.repeats) for busy in args.busy],
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    for c in result["conditions"]:
        print(c["busy_processes"], "busy, load", c["load_before"], "median tok/s", c["median"])


if __name__ == "__main__":
    main()
