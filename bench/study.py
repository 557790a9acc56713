"""The overhead of `align study` over running its units by hand: two random-weight Qwen2
models, both extracted and both ordered pairs fitted, once through `align.extract` /
`align.fit` called one after another, once as a study (its report timed apart: the single
commands write none). Both in one process after the same imports, alternated `--repeats`
times (by hand first); the fastest run of each way counts.

    .venv/bin/python bench/study.py --docs 100 --out bench/results/study.json

Writes the JSON (seconds per unit each way, the study's wall time, its overhead, the load
averages before and after). Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time

from common import build_qwen2

STUDY = """
[study]
name = "bench"
[[models]]
name = "a"
path = "{a}"
[[models]]
name = "b"
path = "{b}"
[corpus]
path = "{corpus}"
[fit]
bootstrap = 200
"""


def build(root: str, n_docs: int, vocab: int = 2048) -> tuple:
    a, b = os.path.join(root, "a"), os.path.join(root, "b")
    words = build_qwen2(a, vocab, hidden=128, heads=4, kv_heads=2, intermediate=512, layers=4)
    build_qwen2(b, vocab, hidden=192, heads=4, kv_heads=2, intermediate=768, layers=6)
    rng = random.Random(1)
    corpus = os.path.join(root, "docs.txt")
    with open(corpus, "w") as f:
        f.write("\n\n".join(" ".join(rng.choice(words) for _ in range(120)) for _ in range(n_docs)))
    return a, b, corpus


def by_hand(a: str, b: str, corpus: str, root: str) -> dict:
    import align

    quiet = lambda m: None  # noqa: E731
    seconds = {}
    stores = {"a": os.path.join(root, "a.zarr"), "b": os.path.join(root, "b.zarr")}
    for name, model in (("a", a), ("b", b)):
        t = time.perf_counter()
        align.extract(model, corpus, stores[name], log=quiet)
        seconds[f"extract {name}"] = time.perf_counter() - t
    for s, t_ in (("a", "b"), ("b", "a")):
        t = time.perf_counter()
        align.fit(
            stores[s],
            stores[t_],
            os.path.join(root, f"{s}-{t_}.zarr"),
            align.FitSpec(bootstrap=200),
            log=quiet,
        )
        seconds[f"fit {s}->{t_}"] = time.perf_counter() - t
    return seconds


def as_study(a: str, b: str, corpus: str, root: str) -> dict:
    from align.study import load_study, run_study

    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, "bench.toml")
    with open(path, "w") as f:
        f.write(STUDY.format(a=a, b=b, corpus=corpus))
    t = time.perf_counter()
    run_study(load_study(path), os.path.join(root, "out"), log=lambda m: None)
    wall = time.perf_counter() - t
    with open(os.path.join(root, "out", "study.json")) as f:
        units = {n: u["seconds"] for n, u in json.load(f)["units"].items()}
    return {"wall_s": wall, "units": units}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default="bench/results/study.json")
    args = ap.parse_args()
    import align.extraction  # noqa: F401  (the imports both ways share, paid before either)
    import align.fitting  # noqa: F401
    import align.study  # noqa: F401

    load0 = os.getloadavg()
    hands, studies = [], []
    with tempfile.TemporaryDirectory() as root:
        a, b, corpus = build(root, args.docs)
        for k in range(args.repeats):
            hands.append(by_hand(a, b, corpus, os.path.join(root, f"hand{k}")))
            studies.append(as_study(a, b, corpus, os.path.join(root, f"study{k}")))
    hand = min(hands, key=lambda x: sum(x.values()))
    study = min(studies, key=lambda x: x["wall_s"] - x["units"].get("report", 0.0))
    report_s = study["units"].get("report", 0.0)
    hand_total = sum(hand.values())
    study_units = study["wall_s"] - report_s
    out = {
        "config": {
            "docs": args.docs,
            "models": "qwen2 4x128 and 6x192, random weights",
            "bootstrap": 200,
            "repeats": args.repeats,
        },
        "by_hand_totals_s": [sum(x.values()) for x in hands],
        "study_totals_s": [x["wall_s"] - x["units"].get("report", 0.0) for x in studies],
        "by_hand_s": hand,
        "by_hand_total_s": hand_total,
        "study": study,
        "study_without_report_s": study_units,
        "overhead_fraction": study_units / hand_total - 1,
        "machine": {"cores": os.cpu_count(), "cpu": platform.processor() or platform.machine()},
        "load_average_before_after": [load0, os.getloadavg()],
        "command": "bench/study.py " + " ".join(sys.argv[1:]),
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(
        json.dumps(
            {k: out[k] for k in ("by_hand_total_s", "study_without_report_s", "overhead_fraction")}
        )
    )


if __name__ == "__main__":
    main()
