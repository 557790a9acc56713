"""The benchmark tables of docs/performance.md, rendered from bench/results/*.json.

Each table lives in the page between two markers, `<!-- table: NAME -->` and `<!-- /table -->`;
what lies between them is generated here from the JSON the benchmark wrote, with the command
that wrote it, and is never edited by hand.

    python bench/tables.py            # rewrite every table of docs/performance.md, docs/families.md,
                                      # docs/commands/demo.md and README.md
    python bench/tables.py --check    # exit 1, naming each table that differs from its JSON
    python bench/tables.py --demo OUT/demo.json   # keep a demo run as bench/results/demo.json, then rewrite

Plain Python (json, argparse): it imports nothing of align, so the docs test and a reader
without the package installed can run it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
DOCS = os.path.join(os.path.dirname(HERE), "docs")
DOC = os.path.join(DOCS, "performance.md")
FAMILIES_DOC = os.path.join(DOCS, "families.md")
DEMO_DOC = os.path.join(DOCS, "commands", "demo.md")
README = os.path.join(os.path.dirname(HERE), "README.md")
BLOCK = re.compile(r"(<!-- table: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)


class Results:
    """The JSON files of one results folder, read once each."""

    def __init__(self, folder: str):
        self.folder = folder
        self._cache: dict = {}

    def __call__(self, name: str) -> dict:
        if name not in self._cache:
            path = os.path.join(self.folder, name)
            try:
                with open(path, encoding="utf-8") as f:
                    self._cache[name] = json.load(f)
            except OSError as e:
                raise SystemExit(
                    f"bench/tables.py: cannot read {path}: {e.strerror or e}"
                ) from None
            except ValueError as e:
                raise SystemExit(f"bench/tables.py: {path} is not JSON ({e})") from None
        return self._cache[name]


# -- formatting ----------------------------------------------------------------------------


def n(x, digits: int = 0) -> str:
    """A number with thousands separators and `digits` decimals."""
    return f"{x:,.{digits}f}"


def mib(b) -> str:
    return f"{b / 2**20:,.0f} MiB"


def gb(b) -> str:
    return f"{b / 1e9:.2f} GB"


def pct(x, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"


def gflops(x) -> str:
    return f"{x / 1e9:.1f} GFLOP/s"


def sci(x) -> str:
    """2.1·10⁻¹³ style."""
    if x == 0:
        return "0"
    m, e = f"{x:.1e}".split("e")
    sup = str(int(e)).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"{m}·10{sup}"


def load_range(pair) -> str:
    """Load averages before and after a run: the 1-minute values, "1.6–1.7"."""
    lo, hi = sorted((pair[0][0], pair[1][0]))
    return f"{lo:.1f}–{hi:.1f}"


def table(header: list, rows: list) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def command_line(cmd: str) -> str:
    """The benchmark's command as a reader types it: through the checkout's interpreter."""
    cmd = cmd.strip()
    if cmd.startswith("bench/"):
        cmd = ".venv/bin/python " + cmd
    return cmd


def sources(*items) -> str:
    """The lines under a table: the command of each run it shows, and the JSON kept of it."""
    lines = [f"    {command_line(cmd)}    # {path}" for cmd, path in items]
    return (
        "Produced by (each command, then the JSON of its run in bench/results/):\n\n"
        + "\n".join(lines)
    )


# -- the tables ----------------------------------------------------------------------------

CODEC_ORDER = ("none", "crc32c", "zstd", "zstd+crc32c", "blosc-lz4")


def store_layout(r: Results) -> str:
    d = r("store_layout.json")
    rows = []
    order = {c: k for k, c in enumerate(CODEC_ORDER)}
    for x in sorted(
        d["results"],
        key=lambda x: (x["dtype"] != "float32", order.get(x["codec"], 99), x["chunk_tokens"]),
    ):
        codec = f"**{x['codec']}** (default)" if x["codec"] == "crc32c" else x["codec"]
        rows.append(
            [
                x["dtype"],
                codec,
                f"{n(x['chunk_tokens'])} tokens ({x['chunk_MiB']:g} MiB)",
                n(x["write_MiB_s"]),
                n(x["read_MiB_s"]),
                f"{x['ratio']:.3f}",
            ]
        )
    text = table(["stored as", "codec", "chunk", "write MiB/s", "read MiB/s", "size ratio"], rows)
    return f"Data: {d['config']['data']}.\n\n{text}\n\n" + sources(
        (".venv/bin/python bench/store_layout.py", "bench/results/store_layout.json")
    )


WRITER_TARGET = 0.90  # the writer's rate over raw Zarr's


def met(ok: bool) -> str:
    return "**met**" if ok else "not met"


def store_writer(r: Results) -> str:
    d = r("store_writer.json")
    rows = []
    for x in d["summary"]:
        path = (
            x["path"]
            if x["threads"] is None
            else f"{x['path']}, {x['threads']} thread{'s' if x['threads'] > 1 else ''}"
        )
        target = "" if x["threads"] is None else met(x["of_raw"] >= WRITER_TARGET)
        rows.append(
            [
                x["model"],
                path,
                n(x["MiB_s_median"]),
                n(x["tokens_s_median"]),
                n(x["tokens_s_all_boundaries"]),
                f"{x['of_raw']:.2f}",
                target,
            ]
        )
    text = table(
        [
            "shape",
            "path",
            "MiB/s",
            "tokens/s (these boundaries)",
            "tokens/s (all boundaries: 49 / 29)",
            "of raw",
            f"target: ≥ {WRITER_TARGET:.2f} of raw",
        ],
        rows,
    )
    c = d["config"]
    return (
        f"Data: {c['data']}; median of {c['reps']} interleaved repetitions on {c['cpus']} CPU cores ({c['note']}).\n\n"
        f"{text}\n\n"
        + sources(
            (".venv/bin/python bench/store_layout.py --writer", "bench/results/store_writer.json")
        )
    )


EXTRACT_RUNS = (  # (JSON, what the run was, the command that wrote it, its target: ("ratio", least align / bare)
    # or ("slowdown", most (bare − align) / bare), or None)
    (
        "extract-pipeline.json",
        "the overlapping pipeline (length-grouped batches, 4 chunk-writer threads), idle machine",
        "bench/extract.py --sequences 16 --out bench/results/extract-pipeline.json",
        ("ratio", 0.85),
    ),
    (
        "extract.json",
        "the single-writer loop before it, idle machine",
        "bench/extract.py --sequences 16",
        ("slowdown", 0.15),
    ),
    (
        "extract-32seq-loaded.json",
        "machine shared with other jobs",
        "bench/extract.py --sequences 32 --out bench/results/extract-32seq-loaded.json",
        None,
    ),
)


def extract(r: Results) -> str:
    rows, made = [], []
    for name, what, cmd, goal in EXTRACT_RUNS:
        d = r(name)
        c, x = d["config"], d["results"]
        ratio = x["align_tokens_per_s"] / x["bare_forward_tokens_per_s"]
        if goal is None:
            target = "—"
        elif goal[0] == "ratio":
            target = f"at least {goal[1]:.2f}× the bare forward: {met(ratio >= goal[1])}"
        else:
            target = f"at most {pct(goal[1], 0)} slower: {met(x['slowdown_vs_bare'] <= goal[1])}"
        rows.append(
            [
                f"{c['sequences']} sequences ({n(x['n_tokens'])} tokens), {what}",
                n(x["align_tokens_per_s"]),
                n(x["bare_forward_tokens_per_s"]),
                f"{ratio:.2f}×",
                pct(x["slowdown_vs_bare"]),
                target,
                f"`bench/results/{name}`",
            ]
        )
        made.append((cmd, f"bench/results/{name}"))
    c = r(EXTRACT_RUNS[0][0])["config"]
    head = (
        f"Model: {c['model']}; sequences of {c['sequence_length']}, boundaries {c['boundaries']} plus sublayers, "
        f"{c['dtype']} on {c['torch_threads']} CPU threads, batches of {c['batch_size']}, codec {c['codec']}."
    )
    text = table(
        [
            "run",
            "align extract, tok/s",
            "bare forward, tok/s",
            "align / bare",
            "align is slower by",
            "target",
            "JSON",
        ],
        rows,
    )
    return f"{head}\n\n{text}\n\n" + sources(*made)


def padding(r: Results) -> str:
    d = r("padding.json")
    plan = d["plan_4096_prompts"]
    factors = ("consecutive", "window_2x", "window_4x", "window_8x", "window_16x")
    head = [
        "batch size",
        "consecutive batches",
        "windows of 2 × batch",
        "**4 × batch** (align)",
        "8 ×",
        "16 ×",
    ]
    rows = [
        [k.split("_")[1]] + [pct(plan[k][f]) for f in factors]
        for k in sorted(plan, key=lambda k: int(k.split("_")[1]))
    ]
    real = d["real_extraction"]
    c = d["config"]
    run_rows = [
        [
            name,
            n(x["n_tokens"]),
            x["group_window"],
            pct(x["padding_fraction"]),
            n(x["tokens_per_s"]),
            f"{x['wall_s']:.1f}",
        ]
        for name, x in (
            ("consecutive batches", real["consecutive"]),
            ("grouped (align)", real["grouped"]),
        )
    ]
    return (
        f"Corpus: {c['corpus']}. Padded positions over all positions computed, for 4,096 prompt lengths:\n\n"
        + table(head, rows)
        + f"\n\nA real extraction of {c['real_run_docs']} such prompts ({c['real_run_model']}, batch size "
        f"{c['real_run_batch_size']}):\n\n"
        + table(
            ["batches", "tokens", "window (sequences)", "padding", "tokens/s", "seconds"], run_rows
        )
        + "\n\n"
        + sources((".venv/bin/python bench/padding.py", "bench/results/padding.json"))
    )


def fit(r: Results) -> str:
    d = r("fit.json")
    s, small, mem, c = d["speed"], d["small"], d["memory"], d["config"]
    rates = s["matmul_rates_flops"]
    (ls, ds_), (lt, dt) = c["source"].split("x"), c["target"].split("x")
    others = lambda xs, best: ", ".join(f"{x:.2f}" for x in xs if x != best)  # noqa: E731
    rows = [
        [
            f"{n(s['n_tokens'])} tokens, {s['plan']['mode']} of the `align fit` process (the default), products through "
            f"{s['plan']['products']}",
            f"**{s['fit_seconds']:.1f} s** against the floor of {s['floor_seconds']:.1f} s: **{pct(s['fraction_of_floor_rate'], 0)}** "
            f"of its rate; against the strict floor of {s['strict_floor_seconds']:.1f} s: {pct(s['fraction_of_strict_floor_rate'], 0)}",
            f"≥ 70% of the floor's rate: {met(s['fraction_of_floor_rate'] >= 0.7)}",
        ],
        [
            "the same, against scikit-learn RidgeCV (timed on "
            f"{len(s['ridgecv_sample_pairs'])} pairs, multiplied by {s['pairs']})",
            f"{n(s['ridgecv_seconds_extrapolated'])} s: **{s['speedup_vs_ridgecv']:.0f}×**",
            f"≥ 10×: {met(s['speedup_vs_ridgecv'] >= 10)}",
        ],
        [
            f"{n(small['n_tokens'])} tokens, `align.fit()` called in a fresh process after `import align`",
            f"**{small['best_call_seconds']:.2f} s** (best of {len(small['call_seconds'])}; "
            f"{others(small['call_seconds'], small['best_call_seconds'])} in the others)",
            f"≤ 3 s: {met(small['best_call_seconds'] <= 3)}",
        ],
        [
            f"{n(small['n_tokens'])} tokens, `align fit` as a command (interpreter start and every import included)",
            f"**{small['best_command_seconds']:.2f} s** (best of {len(small['command_seconds'])}; "
            f"{others(small['command_seconds'], small['best_command_seconds'])} in the others)",
            f"≤ 3 s: {met(small['best_command_seconds'] <= 3)}",
        ],
        [
            f"memory: {n(mem['n_tokens'])} tokens, stores {gb(mem['store_bytes'])} "
            f"({mem['store_bytes'] / mem['memory_limit']:.1f}× the budget), `--memory-limit {mem['memory_limit'] / 1e6:.0f}MB`",
            f"peak RSS **{mem['peak_rss_bytes'] / 1e6:.0f} MB = {mem['peak_over_limit']:.2f}× the limit** in "
            f"{mem['fit_seconds']:.1f} s; plan: {mem['fit_log'][0].removeprefix('align fit: ')}",
            f"within 1.3× the limit: {met(mem['peak_over_limit'] <= 1.3)}",
        ],
    ]
    floors = table(["product", "float64 rate"], [[k, gflops(v)] for k, v in rates.items()])
    flops = s["floor_flops"]
    return (
        f"Stores of seeded random float32 arrays: source {ls} layers × d {ds_}, target {lt} layers × d {dt} "
        f"({int(ls) + 1} × {int(lt) + 1} = {s['pairs']} boundary pairs), documents of {c['doc_len']} tokens, `align fit`'s "
        f"default options (the document bootstrap, `--alphas auto`). The floor is "
        f"2·N·ΣD_S·ΣD_T = {sci(flops)} flop at the float64 rate measured in the same run (one single-threaded "
        f"process per core; the floor the targets were set against: one pair's XᵀY over a store chunk through "
        f"numpy; the strict floor: the best of the rates below). Load average {load_range(s['load_average_before_after'])} "
        f"during the run.\n\n"
        + table(["run", "measured", "target"], rows)
        + "\n\nThe rates behind the two floors:\n\n"
        + floors
        + "\n\n"
        + sources((c["command"], "bench/results/fit.json"))
    )


def fit_measures(r: Results) -> str:
    d = r("fit-measures.json")
    c, f, rows_ = d["config"], d["fits"], d["rows"]
    med = f["median_seconds"]
    runs = lambda k: ", ".join(f"{o['seconds']:.1f}" for o in f["runs"][k])  # noqa: E731
    pairs = [m["seconds"] / r["seconds"] for r, m in zip(f["runs"]["ridge"], f["runs"]["measures"])]
    fits = table(
        ["run", "seconds (median)", "runs"],
        [
            ["ridge alone", f"{med['ridge']:.1f}", runs("ridge")],
            [
                f"ridge + {', '.join(f.get('measures', c['measures']))}",
                f"{med['measures']:.1f}",
                runs("measures"),
            ],
            [
                "ratio",
                f"**{f['ratio']:.2f}×**",
                f"run by run {', '.join(f'{x:.2f}×' for x in pairs)}; target ≤ 1.3×: "
                f"{met(f['ratio'] <= 1.3)}",
            ],
        ],
    )
    rowm = row_measures_table(rows_)
    # each part with the command that made it: the first run's, or a rerun merged alone
    merged = [
        (part, got["command"])
        for part, got in (("fits", f), ("row measures", rows_), ("interval", d["interval"]))
        if got.get("command") and got["command"] != c["command"]
    ]
    own = [p for p in ("fits", "row measures", "interval") if p not in dict(merged)]
    where = "bench/results/fit-measures.json: the "
    said = ", ".join(own[:-1]) + (" and " if len(own) > 1 else "") + (own[-1] if own else "")
    commands = [(c["command"], where + said)] if own else []
    commands += [(cmd, f"{where}{part} (merged)") for part, cmd in merged]
    return (
        f"{n(c['tokens'])} tokens of bench/fit.py's stores (source {c['source']}, target "
        f"{c['target']}: {f['pairs']} pairs), `--bootstrap {c['bootstrap']}`, runs alternated; load "
        f"average {load_range(f['load_average_before_after'])} on {c['cpu_count']} cores.\n\n"
        + fits
        + "\n\n"
        + interval_table(d)
        + f"\n\nThe measures on the sample (`mknn`, `cknna`, `rsa`, and with `--permutations` "
        f"given the spectral measures' values there, which their calibration reads; each side's "
        f"rows mixed by a random matrix, as the stores' are) on M = {n(rows_['rows'])} sampled rows "
        f"of the {rows_['grid'][0]} × {rows_['grid'][1]} grid (d {c['source'].split('x')[1]} and "
        f"{c['target'].split('x')[1]}), one BLAS thread and one thread (the fit cuts the work "
        "among its cores), as the fit computes them in one process: "
        f"every boundary prepared and every cell's values timed, then null draws of the whole "
        "grid of every measure (RSA's in batches, the spectral measures' one product a target), the delete-a-group jackknife's recomputations (the held-out "
        "documents' index mod 10 as the groups) and bootstrap resamples, scaled to the defaults "
        f"(load average {rows_load(rows_, d)} over the run, on a shared machine):\n\n"
        + rowm
        + "\n\n"
        + all_defaults(d)
        + "\n\n"
        + sources(*commands)
    )


def row_measures_table(rows_: dict) -> str:
    """The row measures' values, calibration, jackknife interval and the opt-in bootstrap on
    the grid, each against the values; the targets: the values with their calibration, and
    with their interval, within 1.3× the values alone (the draws, the recomputations ≤ 0.3×)."""
    values = rows_["values_seconds"]
    one = rows_["resample_neighbours_seconds"] + rows_["resample_rsa_seconds"]
    recompute = rows_["jackknife_neighbours_seconds"] + rows_["jackknife_rsa_seconds"]

    def against(ratio, target=True):
        said = f"**{ratio:.2f}×**"
        if target:
            said += f" (with the values {1 + ratio:.2f}×); target ≤ 0.3×: {met(ratio <= 0.3)}"
        return said

    cells = rows_["grid"][0] * rows_["grid"][1]
    return table(
        ["part", "seconds", "against the values"],
        [
            [
                f"values (the default: `mknn`, `cknna`, `rsa`): {sum(rows_['grid'])} boundaries "
                f"prepared, {cells} cells read",
                f"{values:.1f}",
                "1×",
            ],
            [
                f"calibration (the default: `mknn`, `cknna`, `rsa`): {n(rows_['permutations'])} "
                f"null draws ({rows_['draw_neighbours_seconds'] + rows_['draw_rsa_seconds']:.3f} s "
                f"a draw of the grid: `mknn` and `cknna` {rows_['draw_neighbours_seconds']:.3f} s, "
                f"`rsa` {rows_['draw_rsa_seconds']:.3f} s; {rows_['draws_timed']} draws timed)",
                f"{rows_['calibration_seconds']:.1f}",
                against(rows_["calibration_ratio"]),
            ],
            [
                f"with `--permutations {n(rows_['permutations'])}` given, every measure: the "
                f"values, the spectral measures' too ({sum(rows_['grid'])} boundaries prepared "
                f"in {rows_['prepare_seconds']:.1f} s)",
                f"{rows_['values_every_seconds']:.1f}",
                "1×",
            ],
            [
                f"with `--permutations {n(rows_['permutations'])}` given, every measure: the "
                f"calibration ({rows_['draw_seconds']:.2f} s a draw of the grid, the spectral "
                f"measures {rows_['draw_spectral_seconds']:.2f} s of it)",
                f"{rows_['calibration_every_seconds']:.1f}",
                f"**{rows_['calibration_every_ratio']:.2f}×** against every measure's values "
                f"(with them {1 + rows_['calibration_every_ratio']:.2f}×); target ≤ 0.3×: "
                f"{met(rows_['calibration_every_ratio'] <= 0.3)}",
            ],
            [
                f"interval: the jackknife's {rows_['groups']} recomputations with 0/1 weights "
                f"({recompute:.2f} s a recomputation of the grid, "
                f"{rows_['jackknife_rsa_seconds']:.2f} s of it `rsa`; all timed)",
                f"{rows_['jackknife_seconds']:.1f}",
                against(rows_["jackknife_ratio"]),
            ],
            [
                f"opt-in: {n(rows_['resamples'])} bootstrap resamples ({one:.2f} s a resample "
                f"of the grid, {rows_['resample_rsa_seconds']:.2f} s of it `rsa`; "
                f"{rows_['resamples_timed']} timed)",
                n(rows_["bootstrap_seconds"]),
                against(rows_["bootstrap_ratio"], target=False),
            ],
        ],
    )


def all_defaults(d: dict) -> str:
    """`--measures all` with every default against ridge alone: timed whole where the JSON
    keeps the run (`whole`, `--whole-only`), else added up from its parts (the fits' values,
    the streamed interval on the 2 cores, the row measures with their calibration and their
    jackknife interval)."""
    if "whole" in d:
        w = d["whole"]
        med = w["median_seconds"]
        runs = lambda k: ", ".join(f"{x:.1f}" for x in w["runs"][k])  # noqa: E731
        return (
            f"`align fit --measures all` with every default, timed whole against ridge alone "
            f"with its defaults ({w['pairs']} pairs, runs alternated, load average "
            f"{load_range(w['load_average_before_after'])}):\n\n"
            + table(
                ["run", "seconds (median)", "runs"],
                [
                    ["ridge alone", f"{med['ridge']:.1f}", runs("ridge")],
                    ["`--measures all`", f"{med['all']:.1f}", runs("all")],
                    [
                        "ratio",
                        f"**{w['ratio']:.2f}×**",
                        (
                            "round by round "
                            + ", ".join(f"{x:.2f}×" for x in w["round_ratios"])
                            + "; "
                            if "round_ratios" in w
                            else ""
                        )
                        + f"target ≤ 2×: {met(w['ratio'] <= 2)}",
                    ],
                ]
                + calibrated_rows(w),
            )
            + "\n\n`--dry-run` said, before the runs: "
            + "; ".join(
                f"{WHOLE_RUNS.get(k, k).format(K=w.get('permutations'))} "
                f"{w['dry_run_seconds'][k]:.1f} s "
                f"({w['dry_run_seconds'][k] / seconds:.2f}× the median run)"
                for k, seconds in med.items()
            )
            + "."
            + "\n\nMade by `"
            + w["command"]
            + "` (merged into bench/results/fit-measures.json)."
        )
    f, iv, rows_ = d["fits"], d["interval"]["whole_grid"], d["rows"]
    streamed_interval = iv["values_and_interval_threaded_seconds"] - iv["values_threaded_seconds"]
    rows_total = rows_["values_seconds"] + rows_["calibration_seconds"] + rows_["jackknife_seconds"]
    total = f["median_seconds"]["measures"] + streamed_interval + rows_total
    ratio = total / f["median_seconds"]["ridge"]
    return (
        "`--measures all` with every default, added up from these parts (not timed as one run): "
        f"the fit with the streamed measures' values {f['median_seconds']['measures']:.0f} s, their "
        f"interval {streamed_interval:.0f} s, the row measures with their calibration and "
        f"jackknife interval {rows_total:,.0f} s: {total:,.0f} s, **{ratio:.1f}×** ridge alone "
        f"({f['median_seconds']['ridge']:.0f} s); target ≤ 2×: {met(ratio <= 2)}. The parts ran "
        f"at the loads given with each (the fits {load_range(f['load_average_before_after'])}, "
        f"the row measures {rows_load(rows_, d)}): read the ratio's order of magnitude."
    )


WHOLE_RUNS = {
    "ridge": "ridge alone",
    "all": "`--measures all`",
    "all_calibrated": "`--measures all --permutations {K}`",
}


def calibrated_rows(w: dict) -> list:
    """The row of `--measures all --permutations K` (every measure calibrated), where the
    JSON keeps its runs."""
    if "all_calibrated" not in w["runs"]:
        return []
    return [
        [
            f"`--measures all --permutations {w['permutations']}` (every measure calibrated)",
            f"{w['median_seconds']['all_calibrated']:.1f}",
            ", ".join(f"{x:.1f}" for x in w["runs"]["all_calibrated"])
            + f"; **{w['all_calibrated_ratio']:.2f}×** ridge alone",
        ]
    ]


def rows_load(rows_: dict, d: dict) -> str:
    """The load average of the row measures' run: at its start and end where both are kept."""
    end = rows_.get("load_average_at_end", d["load_average_at_end"])[0]
    start = rows_.get("load_average_at_start")
    return f"{start[0]:.1f}–{end:.1f}" if start else f"{end:.1f}"


def interval_table(d: dict) -> str:
    """The streamed measures' interval: the jackknife's recomputations per boundary and pair
    (scaled to the grid, times G) and timed whole on the grid; beside it, from the first run,
    the group bootstrap it replaced, where the JSON keeps it."""
    iv = d["interval"]
    nI, nJ, G = iv["grid"][0], iv["grid"][1], iv["groups"]
    same = iv["command"] == d["config"]["command"]

    def both(cost, key, scale, unit, digits):  # wall clock, then this process's CPU time
        wall = f"{n(scale * cost[key], digits)} {unit}"
        cpu = cost.get("cpu_" + key)
        return wall + (f" ({n(scale * cpu, digits)} {unit} CPU)" if cpu is not None else "")

    rows = [
        [
            f"jackknife, {G} recomputations"
            + (f" ({k}, {iv['baseline']})" if k == "before" else ""),
            both(iv[k], "side_seconds", 1e3, "ms", 0),
            both(iv[k], "pair_seconds", 1e3, "ms", 0),
            both(iv[k], "recompute_seconds", 1, "s", 2),
            both(iv[k], "interval_seconds", 1, "s", 1),
        ]
        for k in ("before", "after")
        if k in iv
    ]
    b = d.get("bootstrap")
    if b is not None:
        rows.append(
            [
                "group bootstrap it replaced, 1,000 resamples (the fits' run)",
                f"{1e3 * b['after']['side_seconds']:.0f} ms",
                f"{1e3 * b['after']['pair_seconds']:.0f} ms",
                f"{b['after']['resample_seconds']:.2f} s",
                f"{n(b['after']['seconds_at_1000'])} s",
            ]
        )
    whole = iv["whole_grid"]
    timed = (
        f"{whole['values_seconds']:.2f} s for the values alone, "
        f"{whole['values_and_interval_seconds']:.2f} s with the interval"
    )
    if "values_cpu_seconds" in whole:
        timed += (
            f" ({whole['values_cpu_seconds']:.2f} s and "
            f"{whole['values_and_interval_cpu_seconds']:.2f} s of CPU)"
        )
    if "values_threaded_seconds" in whole:
        timed += (
            f"; on the {whole['threads']} cores side by side, as the fit computes it, "
            f"{whole['values_threaded_seconds']:.2f} s and "
            f"{whole['values_and_interval_threaded_seconds']:.2f} s"
        )
    return (
        f"The streamed measures' interval ({', '.join(iv['measures'])}), per recomputation of "
        "the measures from weighted group sums (single-threaded BLAS, a 1 × 1 and a 3 × 3 grid "
        "timed and solved for the cost of a boundary and of a pair, scaled to the grid; wall "
        "clock, and in brackets this process's CPU time, which others' load moves less)"
        + (
            ""
            if same
            else f", from its own run, load average {load_range(iv['load_average_before_after'])} "
            f"on {iv['cpu_count']} cores"
        )
        + ":\n\n"
        + table(
            [
                "interval",
                "a boundary",
                "a pair",
                f"a recomputation of the {nI} × {nJ} grid",
                "the interval of the grid",
            ],
            rows,
        )
        + f"\n\nTimed whole on the {nI} × {nJ} grid (`measured.pair_measures`), one thread: "
        f"{timed}."
    )


def plan_measures(r: Results) -> str:
    d = r("plan-measures.json")
    c = d["config"]
    gib = 2**30
    kinds = (
        ("ridge", "ridge alone"),
        ("measures", "`--measures all --bootstrap 0`"),
        (
            "measures_bootstrap",
            f"`--measures all` with `--bootstrap` (the interval: {c['groups']} groups, one at a time)",
        ),
    )

    def store(p):
        if not p["fits"]:
            return "does not fit"
        return (
            f"{p['blocks']} blocks of {p['block_shape'][0]} × {p['block_shape'][1]}: "
            f"{(p['block_bytes'] + p['measure_bytes']) / gib:.0f} GiB a block "
            f"({p['measure_bytes'] / gib:.0f} GiB of it the measures' sums and rotations)"
        )

    def live(p):
        if not p["fits"]:
            return "does not fit"
        held = sum(p["pass_bytes"].values()) + p["model_bytes"]
        gather = p["pass_bytes"].get("measure gather", 0)
        host = p.get("host_bytes") or {}
        on_host = (
            "; on the host " + ", ".join(f"{k} {v / gib:.0f} GiB" for k, v in host.items())
            if host
            else ""
        )
        return (
            f"{p['passes']} passes of {p['targets_per_pass']} target "
            f"boundar{'y' if p['targets_per_pass'] == 1 else 'ies'}: "
            f"{held / gib:.0f} GiB on the device ({gather / gib:.0f} GiB of it the measures' "
            f"rows and products){on_host}"
        )

    def ratio(route, key):
        return d[route][key][key_of[route]] / d[route]["ridge"][key_of[route]]

    key_of = {"store": "blocks", "live": "passes"}
    worst = max(ratio(route, "measures_bootstrap") for route in key_of)

    mem = table(
        [
            "fit",
            f"store route, {c['host_memory']:g} GiB per worker",
            f"`--live`, {c['device_memory']:g} GiB of one GPU",
        ],
        [[label, store(d["store"][k]), live(d["live"][k])] for k, label in kinds]
        + [
            [
                "`--measures all` with the interval against ridge alone",
                f"{ratio('store', 'measures_bootstrap'):.2f}× the blocks",
                f"{ratio('live', 'measures_bootstrap'):.2f}× the passes; target ≤ 1.5×: "
                + ("**met**" if worst <= 1.5 else "not met"),
            ]
        ],
    )
    fl, sec = d["flops"], d["seconds"]
    what = (
        ("statistics", "ridge's statistics, 2·N·ΣD_S·ΣD_T"),
        ("measure_sums", "the measures' sums over the held-out rows"),
        ("measure_group_passes", "the interval's group passes, the held-out rows' products again"),
        ("measure_evaluation", "the streamed measures of every pair, once"),
        ("measure_interval", f"their jackknife interval, {n(c['groups'])} recomputations"),
        ("forwards_per_pass", "both models' forwards, one pass (`--live`)"),
    )
    work = table(
        ["part", "flop", "seconds at the assumed rate"],
        [[label, sci(fl[k]), n(sec[k])] for k, label in what],
    )
    return (
        f"**A plan, not a measurement**: {c['source']['name']} ({c['source']['layers'] + 1} boundaries, "
        f"d {n(c['source']['d'])}) → {c['target']['name']} ({c['target']['layers'] + 1} boundaries, "
        f"d {n(c['target']['d'])}), {n(c['tokens'])} tokens, {pct(c['heldout_fraction'], 0)} held out, "
        f"from the planner's own functions (`plan_blocks`, `plan_passes`; `--live` with bfloat16 models "
        f"and batches of {c['batch']} × {n(c['length'])} tokens). Times assume "
        f"{c['rate'] / 1e12:g} TFLOP/s float64 for the products and decompositions and "
        f"{c['forward_rate'] / 1e12:g} TFLOP/s bfloat16 for the forwards.\n\n"
        + mem
        + "\n\n"
        + work
        + "\n\n"
        + sources((d["command"], "bench/results/plan-measures.json"))
    )


PHASES = {
    "stats": "statistics",
    "heldout": "held-out pass",
    "stats-sum": "tree sums of the statistics",
    "solve": "solves",
    "heldout-sum": "tree sums of the held-out sums",
    "shifts": "shifts",
    "result": "result",
}


def fit_200k(r: Results) -> str:
    d = r("fit-200k.json")
    s, c = d["speed"], d["config"]
    phases = s["task_compute_seconds"]
    row = [
        f"{n(s['n_tokens'])} tokens, {s['pairs']} pairs, {c['workers']}-worker local cluster, load "
        f"{load_range(s['load_average_before_after'])}",
        f"{s['fit_seconds']:.1f} s",
        f"{n(s['ridgecv_seconds_extrapolated'])} s: **{s['speedup_vs_ridgecv']:.1f}×** ({met(s['speedup_vs_ridgecv'] >= 10)})",
        gflops(s["matmul_rate_flops"]),
        f"**{pct(s['fraction_of_floor_rate'], 0)}** (floor {s['floor_seconds']:.1f} s; {met(s['fraction_of_floor_rate'] >= 0.5)})",
    ]
    text = table(
        [
            "run",
            "`align fit`",
            "RidgeCV, extrapolated (target then ≥ 10×)",
            "float64 rate",
            "share of the floor's rate (target then ≥ 50%)",
        ],
        [row],
    )
    ph = table(
        ["phase", "compute seconds, both workers"],
        [
            [PHASES.get(k, k), f"{v:.1f}"]
            for k, v in sorted(phases.items(), key=lambda kv: -kv[1])
            if v >= 0.05
        ],
    )
    return f"{text}\n\nWhere the workers' time went:\n\n{ph}\n\n" + sources(
        (c["command"], "bench/results/fit-200k.json")
    )


LIVE_RUNS = ("live.json", "live-nostore-1.json", "live-nostore-2.json")


def live(r: Results) -> str:
    runs = [(name, r(name)) for name in LIVE_RUNS]
    first = runs[0][1]
    c = first["config"]

    def col(d):
        x = d["live"]
        est = x["dry_run_estimate_seconds"]
        return {
            "wall": f"**{x['seconds']:.1f} s** (passes, solve, held-out sums: {x['loop_seconds']:.1f} s); {x['rates']}",
            "floor": (
                f"**{x['floor_seconds']:.1f} s** = bare forwards {x['bare_forward_seconds']['source']:.1f} s + "
                f"{x['bare_forward_seconds']['target']:.1f} s + {sci(x['product_flops'])} flop at "
                f"{gflops(x['matmul_rate_flops'])}"
            ),
            "ratio": f"**{x['ratio_to_floor']:.3f}×** (the passes: {x['loop_ratio_to_floor']:.3f}×)",
            "target": f"≤ {x['target_ratio']:.2f}×: "
            + ("**met**" if x["ratio_to_floor"] <= x["target_ratio"] else "not met"),
            "dry": f"{est:.1f} s ({100 * (est / x['seconds'] - 1):+.0f}% of the run)",
            "plan": (
                f"{x['plan']['passes']} pass, {len(x['plan']['blocks'])} block; held-out rows "
                + ("kept" if x["plan"]["keep_heldout"] else "forwarded again")
            ),
        }

    cols = [col(d) for _, d in runs]
    labels = [
        ("wall", "`align fit --live`, wall time (loading and tokenizing included)"),
        ("floor", "floor"),
        ("ratio", "`--live` against the floor"),
        ("target", "target"),
        ("dry", "`--dry-run` estimate"),
        ("plan", "plan"),
    ]
    rows = [[label] + [cl[key] for cl in cols] for key, label in labels]
    sr = first.get("store_route")
    if sr:
        diff = sr["max_relative_difference_to_live"]
        blank = [""] * (len(runs) - 1)
        rows.append(
            [
                "store route on the same job",
                f"{sr['total_seconds']:.1f} s = extract {sr['extract_source_seconds']:.1f} + "
                f"extract {sr['extract_target_seconds']:.1f} + fit {sr['fit_seconds']:.1f} "
                f"({sr['total_seconds'] / first['live']['seconds']:.2f}× `--live`)",
            ]
            + blank
        )
        rows.append(
            [
                "store route's disk",
                f"{gb(sr['disk_bytes'])} ({gb(sr['source_store_bytes'])} + "
                f"{gb(sr['target_store_bytes'])}); `--live`: the result only",
            ]
            + blank
        )
        rows.append(
            [
                "largest relative difference, store route vs `--live`",
                ", ".join(f"{k} {sci(v)}" for k, v in diff.items()),
            ]
            + blank
        )
    mem = first.get("memory")
    if mem:
        rows.append(
            [
                f"peak resident size, `--memory-limit {c['memory_limit']}` (a second run, read from the kernel)",
                f"{gb(mem['peak_rss_bytes'])} = **{mem['peak_over_limit']:.2f}× the limit**",
            ]
            + [""] * (len(runs) - 1)
        )
    head = [""] + [f"`bench/results/{name}`" for name, _ in runs]
    src, tgt = c["source"].split("x"), c["target"].split("x")
    intro = (
        f"Two seeded random Qwen2 models, {src[0]} layers d {src[1]} → {tgt[0]} layers d {tgt[1]}, vocabulary "
        f"{n(c['vocab'])}, float32 on the CPU ({c['torch_threads']} torch threads); {n(c['tokens'])} tokens in "
        f"sequences of {c['seq']}, batches of {c['batch_size']}."
    )
    return (
        f"{intro}\n\n"
        + table(head, rows)
        + "\n\n"
        + sources(*[(d["config"]["command"], f"bench/results/{name}") for name, d in runs])
    )


def extract_families(r: Results) -> str:
    """Extraction against the bare forward per family, in CPU time (bench/extract.py --family)."""
    runs = [(f, r(f"extract-{f}.json")) for f in ("qwen2", "gpt_neox", "gemma2")]
    base = runs[0][1]["results"]["align_over_bare_cpu"]
    rows = []
    for f, d in runs:
        c, res = d["config"], d["results"]
        rows.append(
            [
                f"`{f}`",
                c["attention"],
                f"{res['align_cpu_ms_per_token']:.3f}",
                f"{res['bare_cpu_ms_per_token']:.3f}",
                f"{res['align_over_bare_cpu']:.3f}",
                "—" if f == "qwen2" else f"{res['align_over_bare_cpu'] / base:.3f}×",
                f"{res['align_tokens_per_s'] / res['bare_forward_tokens_per_s']:.3f}",
                f"`bench/results/extract-{f}.json`",
            ]
        )
    c = runs[0][1]["config"]
    intro = (
        f"Each family at Qwen2.5-1.5B's widths ({c['model'].split(', ', 1)[1]}), every boundary and the sublayers, "
        f"{n(c['sequences'] * c['sequence_length'])} tokens in batches of {c['batch_size']}, float32 on "
        f"{c['torch_threads']} torch thread, best of {c['repeats']} alternating runs on a 2-core machine shared "
        "with other jobs: CPU milliseconds per token over batches 2 onward (the wall clock there measured the "
        "neighbours more than align). Target: each family within 5% of Qwen2's ratio."
    )
    return (
        f"{intro}\n\n"
        + table(
            [
                "family",
                "attention",
                "align, CPU ms/token",
                "bare forward, CPU ms/token",
                "align / bare (CPU; 1: free)",
                "that over Qwen2's (above 1: cheaper)",
                "align / bare (wall, best)",
                "JSON",
            ],
            rows,
        )
        + "\n\n"
        + sources(*[(d["config"]["command"], f"bench/results/extract-{f}.json") for f, d in runs])
    )


def families(r: Results) -> str:
    """The conformance suite's numbers per model_type (bench/families.py)."""
    d = r("families.json")
    c, fam = d["config"], d["families"]
    cols = [
        ("resid", "h_b vs hidden states (rel.)"),
        ("last_hidden", "final norm of h_L vs last hidden state (rel.)"),
        ("logits", "head(h_L) vs logits (abs.)"),
        ("identity", "h_l + a_l + m_l vs h_(l+1) (rel.)"),
        ("lens_kl_at_L", "lens KL at L"),
        ("contrib", "contributions vs reference (abs.)"),
        ("skip_R", "skip R vs reference (abs.)"),
        ("fit_store_vs_live", "fit: stores vs --live (abs.)"),
        ("igrad_completeness", "igrad completeness gap, 64 steps (rel.)"),
        ("bf16_resid", "bf16 h_b vs hidden states (rel.)"),
    ]
    rows = [
        [f"`{t}`"] + [sci(v[k]) if k in v else "" for k, _ in cols] for t, v in sorted(fam.items())
    ]
    intro = (
        f"{len(fam)} model_types, float32 on the CPU, transformers {c['transformers']}, torch {c['torch']}; "
        f"the suite {'passed' if c['passed'] else 'FAILED'}. Each cell is the largest difference over the "
        "family's tiny model (3 layers, d_model 32, the family's options on)."
    )
    return (
        f"{intro}\n\n"
        + table(["model_type"] + [h for _, h in cols], rows)
        + "\n\n"
        + sources((c["command"], "bench/results/families.json"))
    )


# -- the demo (align demo's OUT/demo.json) -------------------------------------------------

DEMO_COMMAND = (
    "align demo -o /tmp/demo-full && python bench/tables.py --demo /tmp/demo-full/demo.json"
)
DEMO_STATS = (
    ("slope", "slope of j*/L_T on i/L_S", 2),
    ("mean_depth_gap", "mean depth gap", 3),
    ("soft_depth_spread", "soft-depth spread", 3),
    ("spearman", "Spearman", 2),
)
DEMO_STEPS = (
    ("train", "training (every seed, both models; the BPE model once)"),
    ("extract", "extraction (every seed, three stores; the BPE model's)"),
    ("fit", "fits (every seed, two; shallow → BPE)"),
    ("contrib", "contributions"),
    ("lens", "logit lens"),
    ("skip", "layer skipping"),
    ("depth", "effective depth"),
    ("figures", "figures"),
)


def opt(x, digits: int) -> str:
    return "undefined" if x is None else f"{x:.{digits}f}"


def ci(s: dict, key: str, digits: int) -> str:
    """ " [low, high]" of a statistic's document-bootstrap interval, or ""."""
    lo, hi = s.get(f"{key}_low"), s.get(f"{key}_high")
    return "" if lo is None or hi is None else f" [{lo:.{digits}f}, {hi:.{digits}f}]"


def demo_machine(d: dict) -> str:
    m = d["machine"]
    before, after = m["load_average_before"][0], m["load_average_after"][0]
    threads = f"{m['torch_threads']} torch thread{'s' if m['torch_threads'] != 1 else ''}"
    return (
        f"{m['cores']} CPU cores ({m['cpu_model']}), {threads}, load average "
        f"{before:.1f} at the start and {after:.1f} at the end"
    )


def demo_steps(d: dict) -> dict:
    """Seconds per kind of step (the first word of each timing), the total kept apart."""
    out = {}
    for k, v in d["timings"].items():
        if k != "total":
            out[k.split()[0]] = out.get(k.split()[0], 0.0) + v
    return out


def demo(r: Results) -> str:
    d = r("demo.json")
    a, c = d["across_seeds"], d["config"]
    first = d["seeds"][0]
    s0 = {pair: a["per_seed"][0][pair] for pair in ("trained", "control")}
    tr = first["training"]
    losses = "; ".join(
        f"seed {x['seed']}: "
        + ", ".join(
            f"{name} {t['heldout_loss_init']:.2f} → {t['heldout_loss_trained']:.2f}"
            for name, t in x["training"].items()
        )
        for x in d["seeds"]
    )
    intro = (
        f"One run of `align demo` (seeds {a['seeds']}; seed {a['seeds'][0]} analysed and drawn) on "
        f"{demo_machine(d)}. Every model saw {n(tr['shallow']['tokens_seen'])} training tokens "
        f"({c['shallow']['n_layers']} layers d_model {c['shallow']['d_model']} against {c['deep']['n_layers']} "
        f"layers d_model {c['deep']['d_model']}); held-out loss in nats per character, {losses}. Relative error "
        f"of the shallow → deep maps on {c['n_docs']} held-out documents, boundaries ≥ 1, seed {a['seeds'][0]}, "
        "with the document bootstrap's 95% intervals:"
    )
    Ls, Lt = c["shallow"]["n_layers"], c["deep"]["n_layers"]
    diag = [round(i * Lt / Ls) for i in range(1, Ls + 1)]
    pairs = [
        ("trained → trained", s0["trained"]),
        ("trained → untrained deep (control)", s0["control"]),
    ]
    other = d.get("tokenizers_pair")
    if other:
        cov = other["pairing"]
        pairs.append(
            (
                f"trained → trained deep, BPE tokenizer (char-anchors: {cov['source']:.0%} of the shallow "
                f"model's tokens, {cov['target']:.0%} of the BPE model's)",
                other["summary"],
            )
        )
    rows0 = [
        [
            label,
            str(x["argmin_path"]),
            f"**{opt(x['slope'], 2)}{ci(x, 'slope', 2)}**",
            f"{opt(x['spearman'], 2)}{ci(x, 'spearman', 2)}",
            f"{opt(x['mean_depth_gap'], 3)}{ci(x, 'mean_depth_gap', 3)}",
            f"{opt(x['soft_depth_spread'], 3)}{ci(x, 'soft_depth_spread', 3)}",
        ]
        for label, x in pairs
    ]
    t0 = table(
        [
            "pair",
            f"argmin path j*(i), i = 1..{Ls} (equal relative depth: {diag})",
            "slope",
            "Spearman",
            "mean depth gap",
            "soft-depth spread",
        ],
        rows0,
    )
    rows = []
    for key, label, digits in DEMO_STATS:
        for pair, name in (("trained", "trained"), ("control", "control")):
            sp = a[pair][key]
            vals = ", ".join(opt(v, digits) for v in sp["values"])
            rng = "—" if sp["min"] is None else f"{sp['min']:.{digits}f}–{sp['max']:.{digits}f}"
            rows.append(
                [
                    label,
                    name,
                    vals,
                    opt(sp["mean"], digits),
                    "—" if sp["sd"] is None else f"{sp['sd']:.{digits}f}",
                    rng,
                    f"{opt(s0[pair][key], digits)}{ci(s0[pair], key, digits)}",
                ]
            )
    seeds = ", ".join(str(x) for x in a["seeds"])
    t1 = table(
        [
            "statistic",
            "pair",
            f"per seed ({seeds})",
            "mean",
            "sd",
            "min–max",
            f"seed {a['seeds'][0]} [bootstrap 95%]",
        ],
        rows,
    )
    paths = table(
        ["seed", "trained pair's argmin path", "control's argmin path"],
        [
            [x["seed"], str(x["trained"]["argmin_path"]), str(x["control"]["argmin_path"])]
            for x in a["per_seed"]
        ],
    )
    said = "\n".join(f"- {x}" for x in a["sentences"])
    steps = demo_steps(d)
    trows = [[label, f"{steps[k]:,.0f}"] for k, label in DEMO_STEPS if k in steps]
    trows.append(["**the whole run**", f"**{d['timings']['total']:,.0f}**"])
    return (
        f"{intro}\n\n{t0}\n\nAcross the seeds (the spread of training; the intervals above are over held-out "
        f"documents of one seed):\n\n{t1}\n\n{paths}\n\nThe rule: {a['rule']}. What it gives:\n\n{said}\n\n"
        f"Wall time of the run's steps, seconds ({demo_machine(d)}):\n\n"
        + table(["step", "seconds"], trows)
        + "\n\n"
        + sources((DEMO_COMMAND, "bench/results/demo.json"))
    )


def demo_readme(r: Results) -> str:
    """The README's sentences on the demo, from the same JSON."""
    d = r("demo.json")
    a = d["across_seeds"]
    s0 = {pair: a["per_seed"][0][pair] for pair in ("trained", "control")}
    t, c = a["trained"]["slope"], a["control"]["slope"]
    robust = [x for x in a["sentences"] if x.startswith("Robust")]
    not_robust = [x for x in a["sentences"] if not x.startswith("Robust")]
    return (
        f"On the machine the docs quote ({demo_machine(d)}) the whole `align demo` took "
        f"{d['timings']['total']:,.0f} s. On seed {a['seeds'][0]} the trained pair's argmin path has slope "
        f"{opt(s0['trained']['slope'], 2)}{ci(s0['trained'], 'slope', 2)} and the control's "
        f"{opt(s0['control']['slope'], 2)}{ci(s0['control'], 'slope', 2)} (document-bootstrap intervals); over "
        f"the {len(a['seeds'])} seeds {a['seeds']} the trained slope ranged "
        f"{opt(t['min'], 2)}–{opt(t['max'], 2)} and the control's {opt(c['min'], 2)}–{opt(c['max'], 2)}. "
        + " ".join(robust + not_robust)
        + " ([the demo's numbers](docs/commands/demo.md#what-the-demo-shows-measured))"
    )


def study(r: Results) -> str:
    """`align study` against its units run by hand (bench/study.py)."""
    d = r("study.json")
    hand, units = d["by_hand_s"], d["study"]["units"]
    rows = [[name, f"{hand[name]:.1f}", f"{units[name]:.1f}"] for name in hand]
    rows.append(
        [
            "**total** (the study's wall time less its report)",
            f"**{d['by_hand_total_s']:.1f}**",
            f"**{d['study_without_report_s']:.1f}**",
        ]
    )
    loads = d["load_average_before_after"]
    return (
        f"{d['config']['docs']} documents, {d['config']['models']}, both ordered pairs, "
        f"{d['config']['bootstrap']} bootstrap resamples; {d['machine']['cores']} cores, load "
        f"{load_range(loads)}. Seconds:\n\n"
        + table(["unit", "by hand", "as a study"], rows)
        + f"\n\nThe study against the units by hand: {pct(d['overhead_fraction'])} (the fastest of "
        f"{d['config']['repeats']} alternated runs each way: by hand "
        + ", ".join(f"{x:.1f}" for x in d["by_hand_totals_s"])
        + " s, as a study "
        + ", ".join(f"{x:.1f}" for x in d["study_totals_s"])
        + f" s). The study's own time beyond its units (plan, state, lock): "
        f"{d['study']['wall_s'] - sum(units.values()):.2f} s; its report, which the single commands "
        f"do not write, took {units.get('report', 0.0):.1f} s more.\n\n"
        + sources((d["command"], "bench/results/study.json"))
    )


def zoo(r: Results) -> str:
    """The study planner's estimates for nine public models (bench/zoo.py): arithmetic on
    their configs at stated rates, nothing run."""
    d = r("zoo.json")
    rates, tot = d["rates"], d["totals"]
    units = {u["unit"]: u for u in d["units"]}
    rows = []
    for name, m in d["models"].items():
        e = units[f"extract {name}"]
        fits = [u for k, u in units.items() if k.startswith(f"fit {name}->")]
        rows.append(
            [
                name,
                f"{m['layers']} × {m['d_model']:,}",
                f"{m['parameters'] / 1e9:.2f} B",
                f"{e['disk'] / 1e9:,.1f} GB",
                f"{e['memory'] / 1e9:.1f} GB",
                f"{e['seconds'] / 60:.1f} min",
                f"{max(u['memory'] for u in fits) / 1e9:,.0f} GB",
                f"{sum(u['seconds'] for u in fits) / 3600:.1f} h",
            ]
        )
    gpus = rates["gpus_per_node"]
    return (
        f"Estimates, not measurements: {len(d['models'])} models, {len(units) - len(d['models'])} "
        f"ordered pairs, {d['tokens']:,} tokens in sequences of {d['context']}, every boundary, "
        "the store route (an extraction per model, a fit per pair; no analyses or controls). "
        "Per model:\n\n"
        + table(
            [
                "model",
                "layers × d",
                "parameters",
                "store on disk",
                "weights (bf16)",
                "extraction",
                "largest statistics of its fits as source",
                "its fits as source, one GPU",
            ],
            rows,
        )
        + "\n\n"
        + table(
            ["the whole study", "estimate"],
            [
                ["disk (stores and results)", f"**{tot['disk'] / 1e12:.2f} TB**"],
                [
                    "memory of the largest fit's statistics (whole grid in one block)",
                    f"**{tot['largest_fit_statistics'] / 1e9:,.0f} GB**; "
                    f"{tot['fits_over_gpu_memory']} fits exceed one GPU's "
                    f"{rates['h200_memory_bytes'] / 1e9:.0f} GB and are split into blocks",
                ],
                ["largest weights on one GPU", f"{tot['largest_weights'] / 1e9:.1f} GB"],
                [
                    "one GPU, every unit after another",
                    f"{tot['one_gpu_hours']:.1f} h (extractions "
                    f"{tot['extract_hours_one_gpu']:.1f} h, fits {tot['fit_hours_one_gpu']:.1f} h)",
                ],
                [f"one H200 node ({gpus} GPUs)", f"**{tot['hours_1_node']:.1f} h**"],
                [f"four H200 nodes ({4 * gpus} GPUs)", f"**{tot['hours_4_node']:.1f} h**"],
            ],
        )
        + "\n\nThe rates: the extraction's forward at "
        f"{pct(rates['forward_fraction_of_bf16_peak'], 0)} of the H200's dense bf16 peak "
        f"({rates['h200_bf16_peak_flops'] / 1e12:,.0f} TFLOP/s), 2 FLOPs per weight of the blocks "
        "and attention's 2·L·n·d per token; the fit's 2·2·N·(S·d_S² + S·T·d_S·d_T) float64 "
        f"FLOPs (`align.study.estimate.fit_flops`) at {pct(rates['fit_fraction_of_fp64_peak'], 0)} "
        f"of its fp64 tensor-core peak ({rates['h200_fp64_peak_flops'] / 1e12:,.0f} TFLOP/s); "
        "writing a store, and reading both of a fit's stores once, at "
        f"{rates['store_write_and_read_bytes_per_s'] / 2**20:,.0f} MiB/s, the slower of the "
        "extraction writer's best rates measured above (store-writer, on 2 CPU cores); disk and "
        "memory from the fit's own budget (`align.fitting.planning.budget`). A node runs one unit per "
        "GPU, the extractions first, each phase's units given longest first to the least loaded "
        "GPU. Not counted: loading the weights, the extra reads of a fit split into blocks, "
        "several GPUs of a node sharing one disk. None of these rates has been measured on an "
        "H200 (see GPU status below).\n\n" + sources((d["command"], "bench/results/zoo.json"))
    )


def demo_threads(r: Results) -> str:
    """The demo's training with one and two torch threads (bench/demo_threads.py), each run
    kept: beside other jobs (busy 0 on a shared machine) and beside busy processes."""
    rows, cmds = [], []
    for name in ("demo-threads-loaded.json", "demo-threads.json"):
        if not os.path.exists(os.path.join(r.folder, name)):
            continue
        d = r(name)
        cmds.append((d["command"], f"bench/results/{name}"))
        for c in d["conditions"]:
            m = c["median"]
            rows.append(
                [
                    f"{d['machine']['cores']} cores"
                    + (
                        f", {c['busy_processes']} busy processes beside"
                        if c["busy_processes"]
                        else ""
                    ),
                    load_range((c["load_before"], c["load_after"])),
                    n(m["1"]),
                    n(m["2"]),
                    f"{m['1'] / m['2']:.1f}×",
                ]
            )
    header = [
        "machine",
        "load average (1 min)",
        "1 thread, tokens/s",
        "2 threads, tokens/s",
        "1 over 2",
    ]
    return (
        table(header, rows)
        + "\n\nThe demo's shallow model trained for the runs' steps (medians of the runs). "
        + sources(*cmds)
    )


LENS_ORDER = (
    "forward of the held-out tokens",
    "logit lens",
    "linear lens, existing self-fit",
    "linear lens, fitting its maps",
    "tuned lens",
)


def lens(r: Results) -> str:
    """Each lens of `align lens` against one forward of the held-out tokens (bench/lens.py)."""
    d = r("lens.json")
    c, runs = d["config"], d["runs"]
    rows = []
    for name in LENS_ORDER:
        m = runs[name]["median"]
        inside = m.get("self-fit", m.get("training"))
        what = "self-fit" if "self-fit" in m else "training" if "training" in m else ""
        rest = m["s"] - m.get("held-out evaluation", 0.0) - (inside or 0.0)
        rows.append(
            [
                name,
                f"{m['s']:.2f}",
                f"{runs[name]['ratio_to_forward']:.2f}×",
                f"{m['held-out evaluation']:.2f}" if "held-out evaluation" in m else "—",
                f"{inside:.2f} ({what})" if inside is not None else "—",
                f"{rest:.2f}" if len(m) > 1 else "—",  # a run with parts timed inside it
            ]
        )
    linear = runs["linear lens, existing self-fit"]
    m = linear["median"]
    loads = d["load_average_before_after"]
    return (
        f"{c['model']}: {c['boundaries']} boundaries, a store of {n(c['tokens'])} tokens, "
        f"{c['heldout_docs']} held-out documents ({n(c['forward_tokens'])} tokens through the "
        f"forward, {n(c['scored_tokens'])} scored by the lenses); the tuned lens "
        f"{c['tuned_steps']} steps of {n(c['tuned_train_tokens'])} tokens a boundary. "
        f"{d['machine']['cores']} cores shared with other jobs, load {load_range(loads)}, torch "
        f"on {c['torch_threads']} thread{'s' * (c['torch_threads'] > 1)}. Medians of {c['repeats']} interleaved repeats (the "
        f"tuned lens: {c['tuned_repeats']}), seconds, each run end to end as `align lens` pays it "
        "(imports excluded):\n\n"
        + table(
            ["run", "seconds", "× the forward", "held-out evaluation", "inside", "the rest"],
            rows,
        )
        + f"\n\nThe linear lens from an existing self-fit costs {linear['ratio_to_forward']:.2f}× "
        f"the forward and runs none: its held-out evaluation ({m['held-out evaluation']:.2f} s) "
        f"applies one map and the head at each of the {c['boundaries']} boundaries (the forward "
        "applies the head once, after its blocks) and scores each against the output "
        "(softmax, KL, top-1, cross-entropy over the vocabulary); the rest "
        f"({m['s'] - m['held-out evaluation']:.2f} s) opens the stores and the self-fit, reads "
        "the head from the checkpoint, draws the bootstrap over the held-out documents and writes "
        "the result. The logit lens runs the forward itself (over the held-out documents as "
        "prompts) and the head at every boundary."
        + _lens_profile(d.get("profile_linear_existing_self_fit"))
        + "\n\n"
        + sources((d["command"], "bench/results/lens.json"))
    )


def _lens_profile(top) -> str:
    """The functions of one more run of the linear lens from the self-fit by their own time."""
    if not top:
        return ""
    return (
        " One more run of it under cProfile, the functions that took the most time in their "
        "own code: " + "; ".join(f"`{name}` {t:.2f} s" for name, t in top) + "."
    )


TABLES = {
    "store-layout": store_layout,
    "store-writer": store_writer,
    "extract": extract,
    "padding": padding,
    "fit": fit,
    "fit-200k": fit_200k,
    "fit-measures": fit_measures,
    "plan-measures": plan_measures,
    "live": live,
    "families": families,
    "extract-families": extract_families,
    "demo": demo,
    "demo-readme": demo_readme,
    "study": study,
    "zoo": zoo,
    "demo-threads": demo_threads,
    "lens": lens,
}
# The page each table lives on (default: docs/performance.md, the --doc page).
PAGES = {
    "families": FAMILIES_DOC,
    "demo": DEMO_DOC,
    "demo-readme": README,
    "demo-threads": DEMO_DOC,
}


# -- the page ------------------------------------------------------------------------------


def render_all(results: str = RESULTS) -> dict:
    """{table name: its Markdown} from the JSON files of `results`."""
    r = Results(results)
    return {name: make(r).rstrip("\n") + "\n" for name, make in TABLES.items()}


def rendered_page(page: str, tables: dict) -> tuple[str, list]:
    """(the page with every marked table replaced by its rendering, problems): a problem is
    a marker naming no known table, or a known table without its markers."""
    problems, seen = [], set()

    def repl(m):
        name = m.group("name")
        seen.add(name)
        if name not in tables:
            problems.append(f"docs marker 'table: {name}' names no table of bench/tables.py")
            return m.group(0)
        return m.group(1) + tables[name] + m.group(4)

    out = BLOCK.sub(repl, page)
    problems += [
        f"table {name} has no '<!-- table: {name} -->' ... '<!-- /table -->' markers in the page"
        for name in tables
        if name not in seen
    ]
    return out, problems


def differing(page: str, tables: dict) -> list:
    """The names of the tables whose text in `page` is not what their JSON gives."""
    return [
        m.group("name")
        for m in BLOCK.finditer(page)
        if m.group("name") in tables and m.group("body") != tables[m.group("name")]
    ]


def _page_tables(tables: dict, page_path: str, performance: str) -> dict:
    return {k: v for k, v in tables.items() if PAGES.get(k, performance) == page_path}


def keep_demo(path: str, results: str) -> None:
    """Copy a demo run's demo.json into the results folder, refusing one without the
    across-seed statistics and the machine record, or of a run that reused cached models
    (its timings would not be the whole run's)."""
    d = Results(os.path.dirname(os.path.abspath(path)))(os.path.basename(path))
    missing = [k for k in ("across_seeds", "machine", "timings", "seeds", "config") if k not in d]
    if missing:
        raise SystemExit(
            f"bench/tables.py: {path} has no {', '.join(missing)}: is it an align demo's demo.json?"
        )
    if not any(k.startswith("train ") for k in d["timings"]):
        raise SystemExit(
            f"bench/tables.py: {path} is of a run that reused its models (no training timed): "
            "run align demo into a fresh folder"
        )
    with open(os.path.join(results, "demo.json"), "w", encoding="utf-8") as f:
        json.dump(d, f, indent=1)
        f.write("\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when a table differs from its JSON",
    )
    ap.add_argument("--doc", default=DOC, help="the performance page (default docs/performance.md)")
    ap.add_argument("--results", default=RESULTS, help="the JSON folder (default bench/results)")
    ap.add_argument(
        "--demo",
        metavar="DEMO_JSON",
        help="first copy this OUT/demo.json of `align demo` to RESULTS/demo.json",
    )
    args = ap.parse_args(argv)
    if args.demo:
        keep_demo(args.demo, args.results)
    tables = render_all(args.results)
    failed = False
    for path in dict.fromkeys([args.doc, *(p for p in PAGES.values())]):
        try:
            with open(path, encoding="utf-8") as f:
                page = f.read()
        except OSError as e:
            print(f"bench/tables.py: cannot read {path}: {e.strerror or e}", file=sys.stderr)
            return 1
        mine = _page_tables(tables, path, args.doc)
        new, problems = rendered_page(page, mine)
        for p in problems:
            print(f"bench/tables.py: {p}", file=sys.stderr)
        failed |= bool(problems)
        if args.check:
            for name in differing(page, mine):
                print(
                    f"bench/tables.py: table {name} in {path} differs from what its JSON gives: "
                    "run `python bench/tables.py`",
                    file=sys.stderr,
                )
                failed = True
        elif new != page:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
