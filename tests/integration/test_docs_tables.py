"""docs/performance.md against bench/results/*.json: every benchmark table on the page is what
its JSON gives (bench/tables.py --check), the check catches a table that drifted from its JSON,
and the rendered numbers are the JSON's own, read here independently. Nothing here imports align."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "tables.py")
DOC = os.path.join(ROOT, "docs", "performance.md")
DEMO_DOC = os.path.join(ROOT, "docs", "commands", "demo.md")
README = os.path.join(ROOT, "README.md")
RESULTS = os.path.join(ROOT, "bench", "results")


def check(*args):
    """bench/tables.py --check with `args`: (exit status, stderr)."""
    p = subprocess.run(
        [sys.executable, SCRIPT, "--check", *args], capture_output=True, text=True, timeout=60
    )
    return p.returncode, p.stderr


def section(name: str, page: str | None = None) -> str:
    """The text between a table's markers in the page."""
    page = page if page is not None else open(DOC, encoding="utf-8").read()
    m = re.search(rf"<!-- table: {re.escape(name)} -->\n(.*?)<!-- /table -->", page, re.S)
    assert m, f"docs/performance.md has no table {name}"
    return m.group(1)


def rows(text: str) -> list[list[str]]:
    """The body rows of the Markdown tables in `text`, as lists of cell strings."""
    out = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            out.append([c.strip() for c in line.strip("|").split("|")])
    return out


def number(cell: str) -> float:
    """The first number of a cell: "1,234", "**0.88×**", "11.4%" -> 1234, 0.88, 11.4."""
    m = re.search(r"-?\d[\d,]*(\.\d+)?", cell.replace("*", ""))
    assert m, cell
    return float(m.group(0).replace(",", ""))


def test_performance_tables_match_their_json():
    code, err = check()
    assert code == 0 and err == "", err


def test_a_changed_json_number_is_caught(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    d = json.loads((results / "fit.json").read_text())
    d["speed"]["fit_seconds"] += 2.5  # a new run of the benchmark, the page not regenerated
    (results / "fit.json").write_text(json.dumps(d))
    code, err = check("--results", str(results))
    assert code == 1
    named = re.findall(r"table (\S+) in .* differs from what its JSON gives", err)
    assert named == ["fit"], err


def test_a_table_edited_by_hand_is_caught(tmp_path):
    page = open(DOC, encoding="utf-8").read()
    body = section("store-writer", page)
    edited = body.replace("| 1.00 |", "| 1.01 |", 1)
    assert edited != body
    doc = tmp_path / "performance.md"
    doc.write_text(page.replace(body, edited), encoding="utf-8")
    code, err = check("--doc", str(doc))
    assert code == 1 and "table store-writer" in err and "differs" in err, err


def test_a_table_without_its_markers_is_caught(tmp_path):
    page = open(DOC, encoding="utf-8").read()
    doc = tmp_path / "performance.md"
    doc.write_text(
        re.sub(r"<!-- table: padding -->\n.*?<!-- /table -->\n", "", page, flags=re.S),
        encoding="utf-8",
    )
    code, err = check("--doc", str(doc))
    assert code == 1 and "table padding has no" in err, err


def test_the_writer_table_quotes_its_json():
    """Each row of the writer table against the JSON's summary, read here: MiB/s and tokens/s
    to the rounding of a whole number, the share of raw to two decimals."""
    summary = json.load(open(os.path.join(RESULTS, "store_writer.json")))["summary"]
    got = rows(section("store-writer"))[1:]  # the header row first
    assert len(got) == len(summary)
    for cells, x in zip(got, summary):
        assert cells[0] == x["model"]
        assert ("raw" in cells[1]) == (x["threads"] is None)
        assert abs(number(cells[2]) - x["MiB_s_median"]) <= 0.5
        assert abs(number(cells[3]) - x["tokens_s_median"]) <= 0.5
        assert abs(number(cells[4]) - x["tokens_s_all_boundaries"]) <= 0.5
        assert abs(number(cells[5]) - x["of_raw"]) <= 0.005


def test_the_padding_table_quotes_its_json():
    """The padded fraction of every batch size and window, in percent to one decimal."""
    plan = json.load(open(os.path.join(RESULTS, "padding.json")))["plan_4096_prompts"]
    got = {int(r[0]): r for r in rows(section("padding")) if r[0].isdigit()}
    assert sorted(got) == sorted(int(k.split("_")[1]) for k in plan)
    for batch, cells in got.items():
        want = plan[f"batch_{batch}"]
        for cell, key in zip(
            cells[1:], ("consecutive", "window_2x", "window_4x", "window_8x", "window_16x")
        ):
            assert abs(number(cell) - 100 * want[key]) <= 0.05, (batch, key, cell)


def test_the_live_and_fit_tables_quote_their_json():
    """The headline numbers of the fit and --live benchmarks, each computed here from its JSON."""
    fit = json.load(open(os.path.join(RESULTS, "fit.json")))
    text = section("fit")
    assert f"**{fit['speed']['fit_seconds']:.1f} s**" in text
    assert f"**{100 * fit['speed']['fraction_of_floor_rate']:.0f}%**" in text
    mem = fit["memory"]
    assert (
        f"{mem['peak_rss_bytes'] / 1e6:.0f} MB = {mem['peak_rss_bytes'] / mem['memory_limit']:.2f}× the limit"
        in text
    )
    live = section("live")
    ratio_row = next(r for r in rows(live) if r[0].startswith("`--live` against the floor"))
    for cell, name in zip(
        ratio_row[1:], ("live.json", "live-nostore-1.json", "live-nostore-2.json")
    ):
        d = json.load(open(os.path.join(RESULTS, name)))["live"]
        assert abs(number(cell) - d["seconds"] / d["floor_seconds"]) <= 0.0005, (name, cell)
    for name in ("live.json", "live-nostore-1.json", "live-nostore-2.json"):
        cmd = json.load(open(os.path.join(RESULTS, name)))["config"]["command"]
        assert cmd in live, (name, cmd)


def test_the_demo_tables_quote_their_json():
    """docs/commands/demo.md and README.md against bench/results/demo.json, read here: every
    seed's slope, gap and spread of both pairs in the across-seed table, the sentences saying
    what is robust on both pages, the whole run's seconds and the machine's cores."""
    d = json.load(open(os.path.join(RESULTS, "demo.json")))
    a = d["across_seeds"]
    page = section("demo", open(DEMO_DOC, encoding="utf-8").read())
    readme = section("demo-readme", open(README, encoding="utf-8").read())
    got = {(r[0], r[1]): r for r in rows(page) if len(r) == 7 and r[1] in ("trained", "control")}
    for key, label, digits in (
        ("slope", "slope of j*/L_T on i/L_S", 2),
        ("mean_depth_gap", "mean depth gap", 3),
        ("soft_depth_spread", "soft-depth spread", 3),
    ):
        for pair in ("trained", "control"):
            cells = got[(label, pair)]
            values = [row[pair][key] for row in a["per_seed"]]
            assert [float(v) for v in cells[2].split(", ")] == [round(v, digits) for v in values], (
                key,
                pair,
            )
            assert abs(number(cells[3]) - sum(values) / len(values)) <= 0.5 * 10**-digits
            lo, hi = (float(x) for x in cells[5].split("–"))
            assert (lo, hi) == (round(min(values), digits), round(max(values), digits))
    for sentence in a["sentences"]:
        assert f"- {sentence}" in page and sentence in readme
    assert (
        f"**{d['timings']['total']:,.0f}**" in page
        and f"took {d['timings']['total']:,.0f} s" in readme
    )
    assert f"{d['machine']['cores']} CPU cores" in page
    assert [x["seed"] for x in d["seeds"]] == a["seeds"] and len(a["seeds"]) >= 3


def test_a_new_demo_run_is_kept_and_its_tables_caught(tmp_path):
    """--demo copies a demo.json into the results folder; the pages, not regenerated, then
    differ in both demo tables; a JSON of a cached rerun, or without the across-seed
    statistics, is refused."""
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    d = json.loads((results / "demo.json").read_text())
    d["timings"]["total"] += 100.0
    run = tmp_path / "demo.json"
    run.write_text(json.dumps(d))
    code, err = check("--results", str(results), "--demo", str(run))
    assert code == 1
    assert re.findall(r"table (\S+) in .* differs from what its JSON gives", err) == [
        "demo",
        "demo-readme",
    ], err
    assert json.loads((results / "demo.json").read_text()) == d
    d["timings"] = {
        "figures": 3.0,
        "total": 9.0,
    }  # a second run into the same folder reuses everything
    run.write_text(json.dumps(d))
    code, err = check("--results", str(results), "--demo", str(run))
    assert code == 1 and "reused its models" in err and err.count("\n") == 1, err
    del d["across_seeds"]
    run.write_text(json.dumps(d))
    code, err = check("--results", str(results), "--demo", str(run))
    assert code == 1 and "across_seeds" in err and err.count("\n") == 1, err


# The parameter counts of the zoo's model cards, in billions as each card rounds them.
MODEL_CARDS = {
    "Qwen2.5-0.5B": 0.49,
    "Qwen2.5-1.5B": 1.54,
    "Qwen2.5-3B": 3.09,
    "Qwen2.5-7B": 7.61,
    "Qwen2.5-14B": 14.7,
    "Llama-3.2-1B": 1.23,
    "Llama-3.2-3B": 3.21,
    "OLMo-2-0425-1B": 1.48,
    "OLMo-2-1124-7B": 7.30,
}


def test_the_zoo_estimates_are_their_arithmetic():
    """bench/results/zoo.json recomputed here from its stated rates and each model's config
    numbers: parameters as the model cards give them, every unit's bytes and seconds, the
    totals, the node times between the even split and the even split plus the longest unit;
    the page shows the totals."""
    d = json.load(open(os.path.join(RESULTS, "zoo.json")))
    rates, N, n = d["rates"], d["tokens"], d["context"]
    assert len(d["models"]) == 9 and len(d["units"]) == 9 + 72
    for name, m in d["models"].items():
        card = MODEL_CARDS[name]
        assert abs(m["parameters"] / 1e9 - card) <= 0.01 * card, (name, m["parameters"])
        L, dm = m["layers"], m["d_model"]
        embeddings = m["vocab"] * dm * (1 if m["tied_embeddings"] else 2)
        assert m["forward_flops_per_token"] == 2 * (m["parameters"] - embeddings) + 2 * L * n * dm
    units = {u["unit"]: u for u in d["units"]}
    write = rates["store_write_and_read_bytes_per_s"]
    for name, m in d["models"].items():
        u = units[f"extract {name}"]
        store = N * (m["layers"] + 1) * m["d_model"] * 2
        assert u["disk"] == store and u["memory"] == 2 * m["parameters"]
        forward = N * m["forward_flops_per_token"]
        want = forward / (0.4 * 989e12) + store / write
        assert abs(u["seconds"] - want) <= 1e-9 * want, name
    for s, a in d["models"].items():
        for t, b in d["models"].items():
            if s == t:
                continue
            u = units[f"fit {s}->{t}"]
            S, T, ds, dt = a["layers"] + 1, b["layers"] + 1, a["d_model"], b["d_model"]
            flops = 4 * N * (S * ds * ds + S * T * ds * dt)
            want = flops / (0.5 * 67e12) + N * (S * ds + T * dt) * 2 / write
            assert abs(u["seconds"] - want) <= 1e-9 * want, (s, t)
            stats = 8 * 2 * (S * ds * ds + S * T * ds * dt + S * ds + T * dt + T + 1)
            assert u["memory"] == stats, (s, t)
    tot = d["totals"]
    seconds = [u["seconds"] for u in d["units"]]
    assert abs(tot["one_gpu_hours"] * 3600 - sum(seconds)) <= 1e-6 * sum(seconds)
    for nodes in (1, 4):
        gpus = 8 * nodes
        hours = tot[f"hours_{nodes}_node"]
        ext = [u["seconds"] for u in d["units"] if u["unit"].startswith("extract")]
        fit = [u["seconds"] for u in d["units"] if u["unit"].startswith("fit")]
        low = max(sum(ext) / gpus, max(ext)) + max(sum(fit) / gpus, max(fit))
        high = sum(ext) / gpus + max(ext) + sum(fit) / gpus + max(fit)
        assert low / 3600 - 1e-9 <= hours <= high / 3600 + 1e-9, (nodes, hours)
    text = section("zoo")
    assert "Estimates, not measurements" in text
    assert f"**{tot['hours_1_node']:.1f} h**" in text and f"**{tot['hours_4_node']:.1f} h**" in text
    assert f"**{tot['disk'] / 1e12:.2f} TB**" in text
