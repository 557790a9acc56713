"""A result writer killed with SIGKILL never leaves a result that opens as complete, and the
same command then succeeds (here `align lens`; `align fit` has its own crash tests)."""

from __future__ import annotations

import os
import sys

import pytest

from align.errors import StoreError
from align.store import open_result
from tests.helpers.faults import killed_run


@pytest.mark.parametrize("point", ["result_before_rename", "result_before_marker"])
def test_killed_result_write_never_opens_as_complete(zoo, corpus_file, tmp_path, point, cli):
    out = tmp_path / "lens.zarr"
    log = tmp_path / "fault.log"
    cmd = [
        sys.executable,
        "-m",
        "align.cli.main",
        "lens",
        zoo("qwen2"),
        corpus_file,
        "-o",
        str(out),
        "--max-docs",
        "3",
    ]
    killed_run(cmd, log, point)
    # Whatever the kill left (a temporary sibling, or the renamed folder without its schema
    # marker) is refused as a result.
    leftovers = [
        tmp_path / n for n in os.listdir(tmp_path) if n.startswith((".lens.zarr.tmp-", "lens.zarr"))
    ]
    assert leftovers
    for path in leftovers:
        with pytest.raises(StoreError):
            open_result(str(path), "lens")
    code, _, err = cli(*cmd[3:])  # the kill needs a process of its own; the rerun does not
    assert code == 0, err
    ds = open_result(str(out), "lens")
    assert ds["kl"].shape == (2, 3)
    assert [
        n for n in os.listdir(tmp_path) if n.startswith(".lens.zarr.tmp-")
    ] == []  # debris removed
