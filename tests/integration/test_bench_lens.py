"""bench/lens.py --quick: the lens benchmark runs in the suite on a tiny model (a subprocess
with a timeout; 5 tuned steps: its numbers measure nothing), so it cannot rot between the runs
kept in bench/results/lens.json. Its JSON holds every run with the parts it times, each
median and ratio recomputed here from the repeats it lists, the profile of one more run of the
linear lens, and bench/tables.py renders it."""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
RUNS = {  # each run and the library functions timed inside it
    "forward of the held-out tokens": set(),
    "logit lens": set(),
    "linear lens, existing self-fit": {"held-out evaluation"},
    "linear lens, fitting its maps": {"held-out evaluation", "self-fit"},
    "tuned lens": {"held-out evaluation", "training"},
}


def test_the_quick_lens_bench_writes_every_run_and_its_table(tmp_path):
    out = tmp_path / "lens.json"
    done = subprocess.run(
        [sys.executable, os.path.join(BENCH, "lens.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=BENCH,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    d = json.loads(out.read_text(encoding="utf-8"))
    c = d["config"]
    assert (c["tuned_steps"], c["repeats"], c["layers"], c["boundaries"]) == (5, 1, 2, 3)
    assert 0 < c["scored_tokens"] <= c["forward_tokens"] < c["tokens"]
    assert set(d["runs"]) == set(RUNS)
    floor = statistics.median(x["s"] for x in d["runs"]["forward of the held-out tokens"]["runs"])
    for name, parts in RUNS.items():
        run = d["runs"][name]
        assert len(run["runs"]) == 1
        assert set(run["median"]) == {"s"} | parts, name
        for part in parts:  # a part is inside its run
            assert 0 < run["median"][part] < run["median"]["s"], (name, part)
        s = statistics.median(x["s"] for x in run["runs"])
        assert run["median"]["s"] == s
        assert abs(run["ratio_to_forward"] - s / floor) <= 1e-12 * s / floor
    top = d["profile_linear_existing_self_fit"]  # one more run, its functions by own time
    assert len(top) == 10 and all(isinstance(f, str) and t >= 0 for f, t in top)
    assert [t for _, t in top] == sorted((t for _, t in top), reverse=True)
    spec = importlib.util.spec_from_file_location("bench_tables", os.path.join(BENCH, "tables.py"))
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    text = tables.lens(tables.Results(str(tmp_path)))
    for name in RUNS:
        assert f"| {name} | " in text
    linear = d["runs"]["linear lens, existing self-fit"]
    assert f"costs {linear['ratio_to_forward']:.2f}× the forward" in text
    assert f"`{top[0][0]}` {top[0][1]:.2f} s" in text
