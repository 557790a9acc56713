"""The write lock tells a live holder from a reused pid, and SIGTERM unwinds like Ctrl-C.

A lock records its holder's host, pid, process start time and boot id. These tests write lock
files by hand, as a dead run would have left them, with a live process behind the pid where
the scenario needs one, and check what `align extract` does with each. The SIGTERM tests
signal a real `align` process paused at a named fault point."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest
import zarr

from tests.helpers.assertions import one_line_error
from tests.helpers.faults import fault_env, wait_reached

ARGS = ["--max-docs", "3", "--batch-size", "2", "--chunk-tokens", "64"]


@pytest.fixture
def sleeper():
    """A live process that is not an align run (its pid is what a reused pid looks like)."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield p
    p.kill()
    p.wait()


def _boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def _write_lock(folder, **info):
    folder.mkdir(exist_ok=True)
    base = {"host": socket.gethostname(), "started": "2026-11-29T01:02:03+0000"}
    (folder / "align.lock").write_text(json.dumps({**base, **info}))


def _complete(out) -> bool:
    return zarr.open_group(str(out), mode="r").attrs["progress"]["complete"]


def test_lock_of_a_reused_pid_is_stale(zoo, corpus_file, tmp_path, cli, sleeper):
    """The pid is alive, but the process behind it started at another time than the holder:
    the holder is gone (a container restart hands the same pids out again)."""
    out = tmp_path / "s.zarr"
    _write_lock(
        out,
        pid=sleeper.pid,
        process_start=psutil.Process(sleeper.pid).create_time() - 3600,
        boot_id=_boot_id(),
    )
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out, *ARGS)
    assert code == 0, err
    assert "stale lock" in err and f"pid {sleeper.pid}" in err
    assert _complete(out) and not (out / "align.lock").exists()


def test_lock_recording_this_very_pid_is_stale(zoo, corpus_file, tmp_path, cli):
    """A restarted container's run is pid 1 again, as the dead run was: the recorded pid is
    the new run's own, which does not hold the lock yet. (Here: the test process's pid, since
    the CLI runs in it.)"""
    out = tmp_path / "s.zarr"
    _write_lock(
        out, pid=os.getpid(), process_start=psutil.Process().create_time(), boot_id=_boot_id()
    )
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out, *ARGS)
    assert code == 0, err
    assert "stale lock" in err and _complete(out)


def test_lock_from_before_a_reboot_is_stale(zoo, corpus_file, tmp_path, cli, sleeper):
    out = tmp_path / "s.zarr"
    _write_lock(
        out,
        pid=sleeper.pid,
        process_start=psutil.Process(sleeper.pid).create_time(),
        boot_id="00000000-0000-0000-0000-000000000000",
    )
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out, *ARGS)
    assert code == 0, err
    assert "stale lock" in err and _complete(out)


def test_lock_of_a_live_holder_is_kept_even_with_break_lock(
    zoo, corpus_file, tmp_path, cli, sleeper
):
    """Same pid, same start time, same boot: the holder is running, and --break-lock does not
    take a live run's lock away."""
    out = tmp_path / "s.zarr"
    _write_lock(
        out,
        pid=sleeper.pid,
        process_start=psutil.Process(sleeper.pid).create_time(),
        boot_id=_boot_id(),
    )
    for extra in ((), ("--break-lock",)):
        code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out, *ARGS, *extra)
        line = one_line_error(code, err, f"pid {sleeper.pid}", "wait for it to finish")
        assert "--break-lock" not in line
    assert json.loads((out / "align.lock").read_text())["pid"] == sleeper.pid


def test_lock_without_a_start_time_needs_break_lock(zoo, corpus_file, tmp_path, cli, sleeper):
    """A lock that records only a pid (older align) proves nothing about a live pid: refused,
    naming --break-lock, which then works."""
    out = tmp_path / "s.zarr"
    _write_lock(out, pid=sleeper.pid)
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out, *ARGS)
    one_line_error(code, err, "--break-lock")
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out, *ARGS, "--break-lock")
    assert code == 0, err
    assert _complete(out)


def test_sigterm_unwinds_like_ctrl_c(zoo, corpus_file, tmp_path, cli):
    """SIGTERM mid-extraction: exit 143, one line, the lock released, the store incomplete;
    the same command then resumes it to completion."""
    out = tmp_path / "s.zarr"
    log = str(tmp_path / "fault.log")
    cmd = [
        sys.executable,
        "-m",
        "align.cli.main",
        "extract",
        zoo("qwen2"),
        corpus_file,
        "-o",
        str(out),
        "--batch-size",
        "2",
        "--chunk-tokens",
        "64",
    ]
    env = fault_env("between_batches:2:pause", log)
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_reached(log)  # paused between two batches, holding the lock
        assert (out / "align.lock").exists()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert "between_batches:2" in open(log).read()
    assert p.returncode == 143, err
    line = one_line_error(p.returncode, err, progress=("align extract:",))  # no blank line either
    assert line.startswith("align: error: interrupted by SIGTERM"), err
    assert not (out / "align.lock").exists()
    assert not _complete(out)
    code, _, err = cli(*cmd[3:])  # the signal needs a process of its own; the rerun does not
    assert code == 0, err
    assert "resuming" in err and _complete(out)


def test_sigterm_mid_fit_says_what_a_rerun_of_the_fit_does(fit_pair, tmp_path, cli):
    """SIGTERM while a fit computes its statistics: exit 143 and one line that names the fit
    (it starts again; a fit keeps nothing to resume from), not extraction's resume; nothing at
    -o; the same command then writes the result."""
    out = tmp_path / "r.zarr"
    log = str(tmp_path / "fault.log")
    args = ["fit", *fit_pair, "-o", str(out), "--bootstrap", "0"]
    cmd = [sys.executable, "-m", "align.cli.main", *args]
    env = fault_env("fit_statistics_chunk:2:pause", log)
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_reached(log)  # a task thread paused at its second chunk
        p.send_signal(signal.SIGTERM)
        time.sleep(1)  # the main thread unwinds; the paused task then goes on and the threads end
        open(log + ".go", "w").close()
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert "fit_statistics_chunk:2" in open(log).read()
    assert p.returncode == 143, err
    line = one_line_error(p.returncode, err, progress=("align fit:",))
    assert line == (
        "align: error: interrupted by SIGTERM: nothing incomplete opens as complete; re-run the "
        "same command (`align fit` starts the fit again: a fit keeps nothing to resume from)"
    ), err
    assert not out.exists()
    code, _, err = cli(*args)
    assert code == 0, err
    assert (out / "zarr.json").exists()
