"""`align fit --live` as a command: refusals in one line, the plan, --dry-run, progress, a
killed run (real SIGKILL at a named fault point) and the peak memory against --memory-limit.

Refusals are checked through the console script in this process (tests/helpers/assertions.py's
one_line_error); the kill and the memory run are child processes, the kill delivered by the
process to itself (align/faults.py), the peak read from the kernel (ru_maxrss of the child)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from align.store import open_result
from tests.helpers.assertions import one_line_error
from tests.helpers.faults import killed_run

BIG = {"num_hidden_layers": 4, "hidden_size": 96}
SMALL = ["--max-length", "64", "--batch-size", "4"]
PROGRESS = ("align fit --live: ",)


@pytest.fixture(scope="module")
def models(zoo):
    return zoo("qwen2"), zoo("qwen2", **BIG)


def test_tokenizers_that_differ_pair_on_the_text_with_the_store_routes_checks(
    zoo, extracted, corpus_file, cli, tmp_path
):
    other = {"vocab_size": 280}  # another BPE vocabulary, trained on the same text
    pair = zoo("qwen2"), zoo("qwen2", **other)
    stores = extracted("qwen2"), extracted("qwen2", model_overrides=other)
    # `--pairing tokens`: both routes refuse, naming the same parts word for word
    code, _, err_live = cli(
        "fit", "--live", *pair, corpus_file, "-o", tmp_path / "a.zarr", "--pairing", "tokens"
    )
    live = one_line_error(
        code, err_live, "differ in vocabulary", "--pairing tokens needs one token stream"
    )
    code, _, err_store = cli(
        "fit",
        *stores,
        "-o",
        tmp_path / "b.zarr",
        "--scheduler",
        "synchronous",
        "--pairing",
        "tokens",
    )
    store = one_line_error(code, err_store)
    assert live.split(" differ in ")[1].split(":")[0] == store.split(" differ in ")[1].split(":")[0]
    # auto pairs them on the text; documents cut into windows at other characters keep their shared
    # contexts' anchors on both routes, which count what they leave out alike
    code, _, err_live = cli(
        "fit", "--live", *pair, corpus_file, "-o", tmp_path / "a.zarr", "--bootstrap", "0"
    )
    assert code == 0, err_live
    code, _, err = cli(
        "fit", *stores, "-o", tmp_path / "c.zarr", "--scheduler", "synchronous", "--bootstrap", "0"
    )
    assert code == 0, err
    left = [x.split(": ", 1)[1] for x in err_live.splitlines() if "anchors left out in" in x]
    assert left and left == [
        x.split(": ", 1)[1] for x in err.splitlines() if "anchors left out in" in x
    ]
    a, b = (
        open_result(str(tmp_path / "a.zarr"), "alignment"),
        open_result(str(tmp_path / "c.zarr"), "alignment"),
    )
    assert a.attrs["pairing"] == b.attrs["pairing"] and a.attrs["pairing"]["windows"]["documents"]
    for n in ("a.zarr", "c.zarr"):
        shutil.rmtree(tmp_path / n)
    # every document read from its start by both: both routes fit
    code, _, err = cli(
        "fit",
        "--live",
        *pair,
        corpus_file,
        "-o",
        tmp_path / "a.zarr",
        "--bootstrap",
        "0",
        "--overflow",
        "truncate",
    )
    assert code == 0, err
    assert "align fit --live: pairing char-anchors (the tokenizers differ in vocabulary" in err
    assert "anchored pairs cover source" in err and "window rows" in err
    whole = (
        extracted("qwen2", overflow="truncate"),
        extracted("qwen2", model_overrides=other, overflow="truncate"),
    )
    code, _, err = cli(
        "fit", *whole, "-o", tmp_path / "c.zarr", "--scheduler", "synchronous", "--bootstrap", "0"
    )
    assert code == 0, err
    assert (
        "pairing char-anchors (the tokenizers differ in vocabulary" in err
        and "anchored pairs cover" in err
    )
    a, b = (
        open_result(str(tmp_path / "a.zarr"), "alignment"),
        open_result(str(tmp_path / "c.zarr"), "alignment"),
    )
    assert a.attrs["pairing"] == b.attrs["pairing"] and a.attrs["route"] == "live"


def test_a_budget_without_room_for_one_target_boundary_names_the_minimum(
    models, corpus_file, cli, tmp_path
):
    code, _, err = cli(
        "fit",
        "--live",
        *models,
        corpus_file,
        "-o",
        tmp_path / "a.zarr",
        "--memory-limit",
        "100MB",
        *SMALL,
    )
    line = one_line_error(
        code,
        err,
        "--memory-limit 95.4 MiB cannot hold one target boundary per pass",
        "the minimum is",
    )
    minimum = line.split("the minimum is ")[1].split(";")[0]
    value, unit = (
        minimum.split()
    )  # the minimum counts this process's idle footprint: MiB or GiB by machine
    assert float(value) * {"MiB": 2**20, "GiB": 2**30}[unit] > 95.4 * 2**20
    assert not (tmp_path / "a.zarr").exists()


@pytest.mark.parametrize(
    "args,needles",
    [
        (["--batch-size", "3"], ["--batch-size applies to `align fit --live` only"]),
        (
            ["--max-length", "64", "--dtype", "float32"],
            ["--dtype, --max-length apply to `align fit --live` only"],
        ),
    ],
)
def test_live_options_given_to_the_store_form_are_refused(fit_pair, cli, tmp_path, args, needles):
    code, _, err = cli("fit", *fit_pair, "-o", tmp_path / "a.zarr", *args)
    one_line_error(code, err, *needles)


def test_a_corpus_without_live_is_refused(models, corpus_file, cli, tmp_path):
    code, _, err = cli("fit", *models, corpus_file, "-o", tmp_path / "a.zarr")
    one_line_error(
        code, err, f"a third argument ({corpus_file}) is a corpus, read only with --live"
    )


def test_dry_run_prints_the_plan_and_an_estimate_and_writes_nothing(
    models, corpus_file, cli, tmp_path
):
    code, _, err = cli(
        "fit", "--live", *models, corpus_file, "-o", tmp_path / "a.zarr", "--dry-run", *SMALL
    )
    assert code == 0, err
    assert "3x5 pairs in 1 block(s)" in err and "one pass over the corpus each" in err
    assert "memory on cpu: models" in err and "planned" in err
    assert (
        "one batch of 4 sequences" in err
        and "whole run ~source forward" in err
        and "nothing was written" in err
    )
    assert os.listdir(tmp_path) == []


def test_dry_run_counts_the_row_measures(models, corpus_file, cli, tmp_path):
    """With row measures the estimate names their seconds (timed on the batch's rows), and
    the first plan line the bytes their sampled rows hold: by hand, float64 rows of 60
    sampled tokens at 3 source boundaries of d 64 and 5 target ones of d 96."""
    args = ("--measures", "mknn,rsa", "--permutations", "3", "--sample-rows", "60")
    code, _, err = cli(
        "fit", "--live", *models, corpus_file, "-o", tmp_path / "a.zarr", "--dry-run", *SMALL, *args
    )
    assert code == 0, err
    total = next(line for line in err.splitlines() if "whole run ~" in line)
    assert "row measures, interval and calibration " in total, total
    lines = err.strip().splitlines()
    rows = next(line for line in lines if "sampled rows: 60 held-out rows" in line)
    assert f"{8 * 60 * (3 * 64 + 5 * 96) / 1024:.1f} KiB (float64)" in rows, rows
    assert lines[0].startswith("align fit --live: measures: ridge, mknn, rsa"), lines[0]
    assert "the sampled rows and row measures hold " in lines[0], lines[0]
    assert os.listdir(tmp_path) == []


def test_the_plan_and_progress_are_printed(models, corpus_file, cli, tmp_path):
    code, _, err = cli("fit", "--live", *models, corpus_file, "-o", tmp_path / "a.zarr", *SMALL)
    assert code == 0, err
    lines = err.strip().splitlines()
    assert (
        lines[0].startswith("align fit --live: 2,455 tokens (")
        and "batches of up to 4 sequences" in lines[0]
    )
    assert any(
        line.startswith("align fit --live: pass 1 of 1, batch ")
        and "source " in line
        and "target " in line
        and " tok/s" in line
        and "ETA" in line
        for line in lines
    ), err
    assert lines[-2].startswith(f"align fit --live: wrote {tmp_path / 'a.zarr'} (3x5 pairs)")
    ds = open_result(str(tmp_path / "a.zarr"), "alignment")  # opens as a complete result
    assert ds.attrs["route"] == "live"
    # the headline: the pair and the result's own path and slope with its interval
    s = ds.attrs["summary"]
    assert lines[-1].startswith("align fit --live: ") and " → " in lines[-1]
    assert f"argmin path j*(i) {s['argmin_path']} for i = {s['source_boundaries']}" in lines[-1]
    assert f"slope {s['slope']:.2f} [{s['slope_low']:.2f}, {s['slope_high']:.2f}]" in lines[-1]


PEAK = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024); sys.exit(r)"
)


def test_a_killed_run_leaves_no_result_and_the_same_command_succeeds(models, corpus_file, tmp_path):
    """SIGKILL in the statistics pass, then (the same command again) just before the result is
    written: after each, nothing is at `-o` or beside it (a run keeps no state, so the first
    kill leaves the second run nothing to meet); the same command (here under --memory-limit
    700MB, whose peak resident size is measured by the kernel) then writes it, within 1.3x the
    limit."""
    out = tmp_path / "a.zarr"
    log = tmp_path / "fault.log"
    args = ["fit", "--live", *models, corpus_file, "-o", str(out), *SMALL]
    for point in ("fit_live_batch:3", "fit_live_before_write"):
        log.unlink(missing_ok=True)
        killed_run([sys.executable, "-m", "align.cli.main", *args], log, point, timeout=600)
        assert not out.exists() and os.listdir(tmp_path) == ["fault.log"], point
    limit = 700 * 1000**2
    q = subprocess.run(
        [
            sys.executable,
            "-c",
            PEAK,
            sys.executable,
            "-m",
            "align.cli.main",
            *args,
            "--memory-limit",
            "700MB",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert q.returncode == 0, q.stderr
    peak = int(q.stdout.split()[-1])
    assert peak <= 1.3 * limit, (peak, q.stderr)
    ds = open_result(str(out), "alignment")
    assert ds.attrs["route"] == "live" and np.all(np.isfinite(ds["relative_error"].values))


def test_progress_on_a_terminal_shows_pass_rates_and_eta(capsys):
    from align.fitting.live_route.progress import Progress

    p = Progress(4, log=None, terminal=True)
    p.forward("source", 2048, 0.5)
    p.forward("target", 2048, 2.0)
    p.step("pass 2 of 3")
    p.close()
    err = capsys.readouterr().err
    assert (
        "pass 2 of 3" in err
        and "source 4,096 tok/s, target 1,024 tok/s" in err
        and "ETA" in err
        and "1/4" in err
    )
