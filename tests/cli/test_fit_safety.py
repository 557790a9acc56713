"""`align fit` refuses, before computing anything, what used to fail after the fit or never
(issue 9: items 1, 5, 7, 9 and 11; docs/reliability.md).

- -o: never one of the fit's own stores, never the current folder, even with --overwrite.
- Two stores of the same token ids cut into different windows (--max-length, --doc-split)
  are refused, naming the first token whose (doc, seq, pos) differs and the option.
- An output folder that cannot be written, or a disk without room for the result (its size
  is known in advance, maps included), is one line before any worker starts.
- Bad values that ended in "internal error" are one line naming the value.
- More --workers than cores are capped (logged); a memory limit that cannot hold the
  workers is refused before any worker starts.

The error tests check one line on stderr naming the value, and (where a Dask cluster would
start) that none did: the fit logs "started a local Dask cluster" once it has one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr

from tests.cli.test_outputs_property import snapshot
from tests.helpers.assertions import one_line_error

BIG = {"num_hidden_layers": 4, "hidden_size": 96}  # the target model of fixtures_fit.fit_pair
CLUSTER_LINE = "started a local Dask cluster"
ALIGN = os.path.join(os.path.dirname(sys.executable), "align")


def _no_cluster(err: str) -> None:
    assert CLUSTER_LINE not in err and "pairs in" not in err, err


def _zarr_tokens(path):
    """doc, seq, pos of a store, read with zarr (not align)."""
    g = zarr.open_group(path, mode="r")
    return {k: g[k][:] for k in ("doc", "seq", "pos")}


@pytest.fixture(scope="module")
def pair_dir(fit_pair, tmp_path_factory):
    """A folder holding copies of the fit pair (S.zarr, T.zarr) and a notes file."""
    root = tmp_path_factory.mktemp("pairdir")
    shutil.copytree(fit_pair[0], root / "S.zarr")
    shutil.copytree(fit_pair[1], root / "T.zarr")
    (root / "notes.txt").write_text("the researcher's notes\n")
    return root


# -- item 1: -o is never one of fit's inputs, nor the current folder ----------------------


@pytest.mark.parametrize(
    "where,needle",
    [
        ("T.zarr", "is this command's input target"),
        ("S.zarr", "is this command's input source"),
        (".", "holds this command's input"),
    ],
)
def test_overwrite_never_replaces_an_input_or_the_current_folder(
    pair_dir, cli, monkeypatch, where, needle
):
    monkeypatch.chdir(pair_dir)
    before = snapshot(pair_dir)
    code, _, err = cli("fit", "S.zarr", "T.zarr", "-o", where, "--overwrite")
    one_line_error(code, err, f"-o {where}", needle)
    _no_cluster(err)
    assert snapshot(pair_dir) == before


# -- item 5: the same tokens cut into different windows -----------------------------------


def test_stores_cut_into_other_windows_are_refused_naming_token_and_option(
    fit_pair, extracted, cli, tmp_path
):
    S = fit_pair[0]  # --max-length 512 (the default)
    T64 = extracted("qwen2", model_overrides=BIG, max_length=64)
    a, b = _zarr_tokens(S), _zarr_tokens(T64)
    assert len(a["pos"]) == len(b["pos"])  # the same token stream: only the windows differ
    moved = np.flatnonzero((a["doc"] != b["doc"]) | (a["seq"] != b["seq"]) | (a["pos"] != b["pos"]))
    t = int(moved[0])
    code, _, err = cli("fit", S, T64, "-o", tmp_path / "w.zarr", "--scheduler", "synchronous")
    msg = one_line_error(
        code, err, f"token {t:,} is at", "max_length 512 in source, 64 in target", "--max-length"
    )
    assert (
        f"(doc {a['doc'][t]}, seq {a['seq'][t]}, pos {a['pos'][t]}) in source" in msg
        and f"(doc {b['doc'][t]}, seq {b['seq'][t]}, pos {b['pos'][t]}) in target" in msg
    ), msg
    assert not (tmp_path / "w.zarr").exists()


def test_stores_split_into_other_documents_are_refused_naming_the_option(
    fit_pair, extracted, cli, tmp_path
):
    T_lines = extracted("qwen2", model_overrides=BIG, doc_split="line")
    code, _, err = cli(
        "fit", fit_pair[0], T_lines, "-o", tmp_path / "d.zarr", "--scheduler", "synchronous"
    )
    one_line_error(code, err, "doc_split None in source, line in target")
    assert not (tmp_path / "d.zarr").exists()


# -- item 7: an output that cannot be written, or a full disk, before any computing --------


@pytest.fixture
def unwritable(tmp_path):
    """A folder this process cannot create files in. chmod 0o500 does that for a normal
    user; root ignores permission bits, so as root the folder is made immutable
    (chattr +i, which binds root too); skipped where neither is possible."""
    folder = tmp_path / "readonly"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o500)
        yield folder
        folder.chmod(0o700)
        return
    if (
        shutil.which("chattr") is None
        or subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode
    ):
        pytest.skip(
            "as root only an immutable folder (chattr +i) is unwritable, and chattr is not available here"
        )
    try:
        probe = folder / "probe"
        try:  # check that the attribute really stops this process
            probe.write_text("x")
            pytest.skip("chattr +i did not make the folder read-only on this file system")
        except OSError:
            pass
        yield folder
    finally:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)


def test_unwritable_output_folder_is_refused_before_any_worker(fit_pair, unwritable, cli):
    out = unwritable / "a.zarr"
    code, _, err = cli("fit", *fit_pair, "-o", out)  # the default: a local Dask cluster
    one_line_error(code, err, f"-o {out}", f"cannot write in {unwritable}", "nothing was computed")
    _no_cluster(err)
    assert os.listdir(unwritable) == []


def test_output_under_a_file_is_refused_before_any_worker(fit_pair, tmp_path, cli):
    (tmp_path / "notes.txt").write_text("x")
    out = tmp_path / "notes.txt" / "a.zarr"
    code, _, err = cli("fit", *fit_pair, "-o", out)
    one_line_error(code, err, f"{tmp_path / 'notes.txt'} is a file, not a folder")
    _no_cluster(err)
    assert (tmp_path / "notes.txt").read_text() == "x"


def test_full_disk_is_refused_before_any_worker_naming_the_sizes(
    fit_pair, tmp_path, cli, monkeypatch
):
    g = [zarr.open_group(p, mode="r") for p in fit_pair]
    (nI, _, d_s), (nJ, _, d_t) = g[0]["resid"].shape, g[1]["resid"].shape
    maps = 8 * nI * nJ * (d_s + 1) * d_t  # W and c, float64: 3 x 5 x 65 x 96 x 8 = 748,800 bytes
    assert maps == 748_800
    monkeypatch.setenv("ALIGN_FREE_DISK_BYTES", "1000")
    t0 = time.time()
    code, _, err = cli("fit", *fit_pair, "-o", tmp_path / "a.zarr", "--save-maps")
    line = one_line_error(
        code,
        err,
        "KiB of it the maps of --save-maps",
        "only 1000 B is free",
        "nothing was computed",
    )
    # The maps as written: their raw bytes, and at most 10% more (compression bound, blocks, folders).
    shown = float(line.split(" KiB of it the maps")[0].rsplit(" ", 1)[1]) * 1024
    assert maps <= shown <= 1.1 * maps, line
    _no_cluster(err)
    assert time.time() - t0 < 30
    assert os.listdir(tmp_path) == []


# -- item 9: named messages instead of "internal error" ----------------------------------


@pytest.mark.parametrize(
    "args,needles",
    [
        (["--seed", "-1"], ["'--seed': -1", "0<=x<=9223372036854775807"]),
        (["--scheduler", "notaurl"], ["--scheduler notaurl is not a Dask scheduler address"]),
        (
            ["--alphas", "1e308,1e-308", "--scheduler", "synchronous"],
            ["--alphas 1e+308", "overflows float64"],
        ),
        (["-o", "foo://x"], ["-o foo://x", "unknown storage protocol 'foo'"]),
    ],
)
def test_bad_values_are_named_in_one_line(fit_pair, cli, tmp_path, monkeypatch, args, needles):
    monkeypatch.chdir(tmp_path)
    if "-o" not in args:
        args = ["-o", "a.zarr", *args]
    code, _, err = cli("fit", *fit_pair, *args)
    one_line_error(code, err, *needles)
    _no_cluster(err)
    assert os.listdir(tmp_path) == []


def test_file_urls_are_local_paths(fit_pair, cli, tmp_path):
    from align.store import open_alignment

    S, T = fit_pair
    opts = ["--scheduler", "synchronous", "--alphas", "1e-3,1e-1"]
    code, _, err = cli("fit", S, T, "-o", tmp_path / "plain.zarr", *opts)
    assert code == 0, err
    url = f"file://{tmp_path}/url.zarr"
    code, _, err = cli("fit", f"file://{S}", f"file://{T}", "-o", url, *opts)
    assert code == 0, err
    plain, viaurl = (
        open_alignment(str(tmp_path / "plain.zarr")),
        open_alignment(str(tmp_path / "url.zarr")),
    )
    for name in ("relative_error", "r2", "alpha"):
        np.testing.assert_array_equal(viaurl[name].values, plain[name].values)
    assert sorted(os.listdir(tmp_path)) == ["plain.zarr", "url.zarr"]


def test_unreachable_object_store_is_named(fit_pair, cli, tmp_path, monkeypatch):
    """S3 configured as the other S3 tests do (environment variables), pointing at a port
    where nothing listens. One attempt a request: botocore's retries after the refused
    connection, with their backoff, took 9.5 of this test's 10 s and meet the same refusal."""
    s3fs = pytest.importorskip("s3fs")
    for k, v in {
        "AWS_ACCESS_KEY_ID": "AKIAUNREACHABLE00001",
        "AWS_SECRET_ACCESS_KEY": "not-a-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
        "AWS_MAX_ATTEMPTS": "1",
    }.items():
        monkeypatch.setenv(k, v)
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        code, _, err = cli(
            "fit",
            "s3://nowhere/s.zarr",
            fit_pair[1],
            "-o",
            tmp_path / "a.zarr",
            "--scheduler",
            "synchronous",
        )
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
    one_line_error(code, err, "SOURCE s3://nowhere/s.zarr cannot be reached", "127.0.0.1:1")
    assert os.listdir(tmp_path) == []


def test_shrunken_array_is_named(fit_pair, cli, tmp_path):
    """The target's resid array metadata edited to hold 100 tokens fewer than its layout."""
    T = str(tmp_path / "T.zarr")
    shutil.copytree(fit_pair[1], T)
    meta = os.path.join(T, "resid", "zarr.json")
    m = json.load(open(meta))
    m["shape"][1] -= 100
    json.dump(m, open(meta, "w"))
    root = json.load(
        open(os.path.join(T, "zarr.json"))
    )  # the consolidated copy, if any, says the same
    cm = (root.get("consolidated_metadata") or {}).get("metadata", {})
    if "resid" in cm:
        cm["resid"]["shape"][1] -= 100
        json.dump(root, open(os.path.join(T, "zarr.json"), "w"))
    code, _, err = cli(
        "fit", fit_pair[0], T, "-o", tmp_path / "a.zarr", "--scheduler", "synchronous"
    )
    one_line_error(code, err, "'resid'", "shape")
    assert not (tmp_path / "a.zarr").exists()


# -- item 11: workers are capped by cores and planned before they start ---------------------


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


@pytest.mark.slow
def test_more_workers_than_cores_are_capped_and_the_fit_runs(fit_pair, tmp_path):
    """What a researcher expects of `--workers 64 --memory-limit 2GB` on a small machine: one
    worker per core (said in the log), then a plan within 2 GB, then the result."""
    cores = _cores()
    if cores >= 64:
        pytest.skip(f"this machine has {cores} cores: --workers 64 is not more than it has")
    out = tmp_path / "a.zarr"
    p = subprocess.run(
        [
            ALIGN,
            "fit",
            *fit_pair,
            "-o",
            str(out),
            "--workers",
            "64",
            "--memory-limit",
            "2GB",
            "--alphas",
            "1e-3,1e-1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert f"--workers 64 capped to {cores}" in p.stderr, p.stderr
    assert f"{CLUSTER_LINE} of {cores} worker processes" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    from align.store import open_alignment

    assert np.isfinite(open_alignment(str(out))["relative_error"].values).all()


def test_memory_limit_that_cannot_hold_the_workers_is_refused_before_they_start(
    fit_pair, cli, tmp_path
):
    """50 MB cannot hold this process and one worker (each uses more than that idle): refused
    from the estimate, before a worker process exists."""
    t0 = time.time()
    code, _, err = cli(
        "fit", *fit_pair, "-o", tmp_path / "a.zarr", "--workers", "1", "--memory-limit", "50MB"
    )
    one_line_error(
        code,
        err,
        "--memory-limit 47.7 MiB cannot hold 1 worker process",
        "estimated before starting any",
        "raise --memory-limit",
    )
    _no_cluster(err)
    assert time.time() - t0 < 30
    assert not (tmp_path / "a.zarr").exists()
