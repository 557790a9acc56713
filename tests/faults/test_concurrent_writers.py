"""One writer per store: a second writer is refused at once, naming the holder; the first run
is unharmed; stale locks are detected and broken as documented in store/lock.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import zarr

import align
from align.extraction import ExtractOptions
from tests.helpers.assertions import one_line_error
from tests.helpers.faults import fault_env, wait_reached


def test_second_writer_refused_first_unharmed(zoo, corpus_file, tmp_path, cli):
    out = str(tmp_path / "s.zarr")
    log = str(tmp_path / "fault.log")
    env = fault_env("between_batches:2:pause", log)
    cmd = [
        sys.executable,
        "-m",
        "align.cli.main",
        "extract",
        zoo("qwen2"),
        corpus_file,
        "-o",
        out,
        "--batch-size",
        "2",
        "--chunk-tokens",
        "256",
    ]
    first = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_reached(log)  # the first run is mid-way, holding the lock
        t = time.time()
        code, _, err = cli(*cmd[3:])
        assert time.time() - t < 30  # refused at once, not after waiting
        one_line_error(code, err, f"pid {first.pid}", f"host {socket.gethostname()}", "started 20")
        open(log + ".go", "w").close()
        _, first_err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, first_err
    base = str(tmp_path / "base.zarr")
    align.extract(
        zoo("qwen2"),
        corpus_file,
        base,
        ExtractOptions(batch_size=2, chunk_tokens=256),
        log=lambda m: None,
    )
    a, b = zarr.open_group(out, mode="r"), zarr.open_group(base, mode="r")
    for name, _ in b.arrays():
        np.testing.assert_array_equal(a[name][...], b[name][...], err_msg=name)
    assert a.attrs["progress"]["complete"] and not os.path.exists(os.path.join(out, "align.lock"))


def test_lock_from_another_host_needs_break_lock(zoo, corpus_file, tmp_path, cli):
    out = tmp_path / "s.zarr"
    out.mkdir()
    (out / "align.lock").write_text(
        json.dumps({"host": "gpu-node-7", "pid": 4242, "started": "2026-11-29T01:02:03+0000"})
    )
    args = ["extract", zoo("qwen2"), corpus_file, "-o", out, "--max-docs", "2"]
    code, _, err = cli(*args)
    one_line_error(code, err, "gpu-node-7", "pid 4242", "--break-lock")
    code, _, err = cli(*args, "--break-lock")
    assert code == 0, err
    assert zarr.open_group(str(out), mode="r").attrs["progress"]["complete"]
