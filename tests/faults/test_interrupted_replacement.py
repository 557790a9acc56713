"""Readers at a result whose replacement was killed between "old result moved aside" and "new
result renamed in" (fault point `result_old_aside`): `align plot`, `align info`, `align
compare` and `open_alignment` say the replacement was interrupted, where the previous version
is, and that rerunning a writer restores it; never "not a store". The rerun then puts it back."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.helpers.assertions import one_line_error
from tests.helpers.faults import fault_env, killed_run, wait_reached
from tests.helpers.fixtures_fit import token_table


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory, synthetic):
    """(result path, fit command, previous relative_error): a fit result whose `--overwrite`
    was killed with the old result aside and the new one not yet in."""
    import zarr

    root = tmp_path_factory.mktemp("replaced")
    tok = token_table(n_docs=12, doc_len=20, seq_len=20)
    rng = np.random.default_rng(0)
    n = len(tok["doc"])
    S = synthetic(rng.normal(size=(2, n, 4)).astype(np.float32), tok)
    T = synthetic(rng.normal(size=(2, n, 4)).astype(np.float32), tok)
    out = str(root / "r.zarr")
    cmd = [sys.executable, "-m", "align.cli.main", "fit", S, T, "-o", out, "--overwrite"]
    cmd += ["--scheduler", "synchronous"]
    assert run_cli(cmd[3:])[0] == 0  # only the kill needs a process of its own
    before = np.asarray(zarr.open_group(out, mode="r")["relative_error"][...])
    killed_run(cmd, root / "fault.log", "result_old_aside")
    assert not os.path.exists(out)
    return out, cmd, before


def test_every_reader_says_the_replacement_was_interrupted(interrupted, cli, tmp_path):
    import align
    from align.errors import StoreError

    out, _, _ = interrupted
    parent = os.path.dirname(out)
    (old,) = [
        os.path.join(parent, n, "old") for n in os.listdir(parent) if n.startswith(".r.zarr.tmp-")
    ]
    needles = (
        f"{out} is not in place: its replacement was interrupted",
        f"its previous version is intact at {old}",
        "rerun the command that wrote",
        "puts the previous version back first",
    )
    for argv in (
        ["plot", out, "-o", tmp_path / "f.png"],
        ["info", out],
        ["compare", out, out],
    ):
        code, _, err = cli(*argv)
        one_line_error(code, err, *needles, absent=("not a store",))
    with pytest.raises(StoreError) as e:
        align.open_alignment(out)
    assert all(n in str(e.value) for n in needles) and "\n" not in str(e.value)


def test_rerunning_the_writer_restores_then_replaces(interrupted, cli):
    """Runs after the readers (file order): the same command puts the old result back, then
    replaces it; the new result equals the old one (same inputs), and no temporary is left."""
    import zarr

    out, cmd, before = interrupted
    code, _, err = cli(*cmd[3:])
    assert code == 0, err
    after = np.asarray(zarr.open_group(out, mode="r")["relative_error"][...])
    np.testing.assert_array_equal(after, before)
    assert [n for n in os.listdir(os.path.dirname(out)) if n.startswith(".r.zarr")] == []


def test_a_reader_during_the_replacement_says_it_is_under_way(interrupted, cli, tmp_path):
    """The writer paused (not killed) with the old result aside: `align info` names the
    replacement under way, its pid and where the previous version waits; the writer then
    finishes and the result reads again."""
    out, cmd, before = interrupted
    log = str(tmp_path / "fault.log")
    writer = subprocess.Popen(
        cmd,
        env=fault_env("result_old_aside:1:pause", log),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_reached(log)
        code, _, err = cli("info", out)
        one_line_error(
            code,
            err,
            f"{out} is being replaced (align pid {writer.pid} is writing it)",
            "its previous version is at",
            "wait for that command to finish",
            absent=("not a store",),
        )
        open(log + ".go", "w").close()
        _, writer_err = writer.communicate(timeout=300)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert writer.returncode == 0, writer_err
    assert cli("info", out)[0] == 0
