"""`align fit` while it runs (issue 9: items 4 and 8; docs/reliability.md): non-finite values are
refused and never summarised over, and whatever stops a fit (a NaN read by a worker, a
damaged chunk, Ctrl-C, SIGTERM, a disk that fills while the result is written) reaches the
user as one line: no Dask worker log, no asyncio traceback, no leaked-semaphore warning.

Runs that involve worker processes or signals are real `align` processes
(subprocess.Popen), so everything written to the terminal by any process is seen.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr

from align.fitting import Execution, FitSpec
from tests.helpers.assertions import one_line_error
from tests.helpers.faults import fault_env

BIG = {"num_hidden_layers": 4, "hidden_size": 96}
ALIGN = os.path.join(os.path.dirname(sys.executable), "align")
OPTS = ["--alphas", "1e-3,1e-1"]
CHUNK = 256


def _run(*args, env=None, timeout=300):
    p = subprocess.run(
        [ALIGN, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, **(env or {})),
    )
    return p.returncode, p.stdout, p.stderr


# A fit's other stderr lines are its own progress log (click adds a blank line before an
# interrupt's message); no Dask worker log and no leaked-semaphore warning reach the terminal.
FIT_ERROR = dict(
    progress=("align fit: ",), blank_lines=True, absent=("Compute Failed", "leaked semaphore")
)


# -- item 4: non-finite values ---------------------------------------------------------------


def test_summary_refuses_a_non_finite_error():
    from align import ridge
    from align.errors import NonFiniteError

    err = np.array([[0.3, 0.2, 0.4], [0.5, np.nan, 0.1], [0.2, 0.3, np.inf]])
    with pytest.raises(NonFiniteError) as e:
        ridge.summary(err, [0, 2, 4], [0, 1, 3], 4, 3)
    assert "(2, 1), (4, 3)" in str(e.value) and "no summary" in str(e.value)


@pytest.fixture(scope="module")
def chunked(extracted):
    """Source and target stores of 256-token chunks (crc32c), and the document split of a
    fit of them (from its result): the NaN tests put values where each part reads them."""
    import align

    S = extracted("qwen2", chunk_tokens=CHUNK)
    T = extracted("qwen2", model_overrides=BIG, chunk_tokens=CHUNK)
    split = align.fit(
        S,
        T,
        None,
        FitSpec(alphas=[1e-3, 1e-1]),
        Execution(scheduler="synchronous"),
        log=lambda m: None,
    ).dataset.attrs["split"]
    return S, T, split


def _last_token_of(store, docs) -> int:
    """The last token of `docs` at a position > 0 (position 0 is not fitted or scored),
    beyond the first two chunks (so that a worker reads it, not the client's first-chunk
    reads)."""
    g = zarr.open_group(store, mode="r")
    doc, pos = g["doc"][:], g["pos"][:]
    t = int(np.flatnonzero(np.isin(doc, docs) & (pos > 0))[-1])
    assert t >= 2 * CHUNK
    return t


def _with_nan(store, tmp_path, token: int, boundary: int = 1) -> str:
    """A copy of `store` with NaN in one value of `token` at `boundary`, written through
    zarr (so the chunk's crc32c checksum matches its new bytes)."""
    out = str(tmp_path / "nan.zarr")
    shutil.copytree(store, out)
    a = zarr.open_array(os.path.join(out, "resid"), mode="r+")
    row = list(zarr.open_group(out, mode="r")["boundary"][:]).index(boundary)
    a[row, token, 3] = np.nan
    assert np.isnan(zarr.open_array(os.path.join(out, "resid"), mode="r")[row, token, 3])
    return out


@pytest.mark.parametrize("scheduler", ["synchronous", "threads", "local cluster"])
@pytest.mark.parametrize("part", ["heldout_docs", "fit_docs"])
def test_nan_in_a_token_is_one_line_naming_array_chunk_and_token(
    chunked, tmp_path, part, scheduler
):
    """In every place a fit runs: the NaN's own line (in threads, not the "cancelled" of the
    tasks it stopped)."""
    S, T, split = chunked
    t = _last_token_of(T, split[part])
    bad = _with_nan(T, tmp_path, t)
    out = tmp_path / "a.zarr"
    where = {
        "synchronous": ["--scheduler", "synchronous"],
        "threads": [],
        "local cluster": ["--workers", "2"],
    }[scheduler]
    code, _, err = _run("fit", S, bad, "-o", out, *where, *OPTS)
    one_line_error(
        code,
        err,
        bad,
        "'resid'",
        "boundary 1",
        f"token {t:,}",
        f"chunk {t // CHUNK}",
        "non-finite",
        **FIT_ERROR,
    )
    assert not out.exists()


def test_degenerate_heldout_target_is_refused_not_summarised(synthetic, cli, tmp_path):
    """A target boundary that is constant over the held-out tokens: r2 = 1 − 0/0 there.
    The old result held NaN and a summary computed around it, exit 0."""
    from tests.helpers.fixtures_fit import token_table

    tok = token_table(10, 120)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2, len(tok["doc"]), 6))
    Y = np.stack(
        [X[1] @ rng.normal(size=(6, 5)), np.ones((len(tok["doc"]), 5))]
    )  # boundary 1 constant
    S, T = synthetic(X, tok, n_layers=1), synthetic(Y, tok, n_layers=1)
    out = tmp_path / "a.zarr"
    code, _, err = cli("fit", S, T, "-o", out, "--scheduler", "synchronous", *OPTS)
    assert code == 2
    one_line_error(
        code,
        err,
        "source 0 -> target 1: r2 nan",
        "source 1 -> target 1: r2 nan",
        "no variance",
        **FIT_ERROR,
    )
    assert "target 0" not in err  # the other target boundary is fine
    assert not out.exists()


# -- item 8: one line, whatever stops the fit ------------------------------------------------


def test_damaged_chunk_under_the_local_cluster_is_one_line(chunked, tmp_path):
    """A flipped byte in a chunk that a worker reads: the worker's error comes back as the
    one line (it used to follow a "Compute Failed" traceback from the worker). The run holds
    the dashboard's usual port 8787 as a second local cluster would (another fit, a
    notebook's): the cluster still starts and runs the tasks, and its stderr is that one line,
    with no warning of distributed's about the port."""
    import socket

    S, T, _ = chunked
    bad = str(tmp_path / "T.zarr")
    shutil.copytree(T, bad)
    path = os.path.join(bad, "resid", "c", "1", "5", "0")
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(path, "wb").write(bytes(data))
    held = socket.socket()
    try:
        held.bind(("", 8787))
        held.listen()
    except OSError:  # another process holds it already: the case under test
        pass
    try:
        code, _, err = _run("fit", S, bad, "-o", tmp_path / "a.zarr", "--workers", "2", *OPTS)
    finally:
        held.close()
    one_line_error(code, err, "'resid'", "(1, 5, 0)", "resid/c/1/5/0", "checksum", **FIT_ERROR)
    assert "8787" not in err and "Warning" not in err, err
    assert not (tmp_path / "a.zarr").exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: it only waits to be reaped
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "ctrl-c synchronous"])
def test_interrupted_fit_is_one_line_and_stops_its_workers(chunked, tmp_path, how):
    """Each worker pauses inside its first statistics task (ALIGN_FAULT ...:pause; the fault
    log shows the point was reached); then Ctrl-C (SIGINT to the whole process group, as a
    terminal sends it) or SIGTERM (to the `align` process only, as `kill` sends it)."""
    S, T, _ = chunked
    log = tmp_path / "fault.log"
    out = tmp_path / "a.zarr"
    where = ["--scheduler", "synchronous"] if "synchronous" in how else ["--workers", "2"]
    env = fault_env("fit_statistics_chunk:1:pause", log)
    p = subprocess.Popen(
        [ALIGN, "fit", S, T, "-o", str(out), *where, *OPTS],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        # as a terminal's foreground job: SIGINT at its default (a shell's background job, such
        # as a CI step started with `&`, inherits it ignored, and Python then never raises
        # KeyboardInterrupt)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.time() + 120
        while (
            not (log.exists() and log.read_text()) and p.poll() is None and time.time() < deadline
        ):
            time.sleep(0.1)
        reached = log.read_text() if log.exists() else ""
        assert reached.startswith("fit_statistics_chunk:1 pid="), (reached, p.poll())
        pids = [int(line.split("pid=")[1]) for line in reached.splitlines()]
        if "synchronous" in how:
            assert pids == [p.pid]
        else:
            assert p.pid not in pids  # a worker process is inside the statistics
        if how.startswith("ctrl-c"):
            os.killpg(p.pid, signal.SIGINT)
        else:
            os.kill(p.pid, signal.SIGTERM)
        _, err = p.communicate(timeout=120)
    finally:
        (tmp_path / "fault.log.go").touch()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == (143 if how == "sigterm" else 130), err
    one_line_error(p.returncode, err, "interrupted", **FIT_ERROR)
    assert not out.exists() and [n for n in os.listdir(tmp_path) if n.startswith(".a.zarr")] == []
    deadline = time.time() + 10
    while any(_alive(pid) for pid in pids) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids), "a worker process outlived the interrupted fit"


def test_disk_that_fills_while_the_result_is_written_is_one_line(fit_pair, tmpfs):
    """--save-maps writes 731 KiB into a 64 KiB file system. The free-space check before the
    fit would refuse that at once, so ALIGN_FREE_DISK_BYTES tells it there is room: the disk
    fills between the check and the write, as when another process takes the space."""
    out = tmpfs / "a.zarr"
    code, _, err = _run(
        "fit",
        *fit_pair,
        "-o",
        out,
        "--scheduler",
        "synchronous",
        "--save-maps",
        *OPTS,
        env={"ALIGN_FREE_DISK_BYTES": str(1 << 40)},
    )
    one_line_error(code, err, "no space left", str(out), **FIT_ERROR)
    assert os.listdir(tmpfs) == []


def test_a_cancelled_fit_stops_its_own_tasks_only(chunked):
    """A task of a cancelled run stops at its first chunk, naming the cancellation; a task of
    another run of the same process computes (its sums equal a direct float64 XᵀY)."""
    from align import ridge
    from align.errors import InputError
    from align.fitting.runtime import tasks
    from align.fitting.store_route import graph

    S, T, _ = chunked
    s, t = zarr.open_group(S, mode="r"), zarr.open_group(T, mode="r")
    n = 2 * CHUNK
    part = np.zeros(n, dtype=np.int8)
    shifts = ({1: np.zeros(s["resid"].shape[2])}, {2: np.zeros(t["resid"].shape[2])})
    tasks.cancel("run-a")
    jobs = {r: graph.Job(S, T, None, "cpu", 1, CHUNK, run=r) for r in ("run-a", "run-b")}
    with pytest.raises(InputError, match="the fit was cancelled"):
        graph.stats_task(jobs["run-a"], (1,), (2,), 0, n, graph.Tokens(part), shifts, False)
    stats, _ = graph.stats_task(jobs["run-b"], (1,), (2,), 0, n, graph.Tokens(part), shifts, False)
    rows = (
        {int(b): k for k, b in enumerate(s["boundary"][:])},
        {int(b): k for k, b in enumerate(t["boundary"][:])},
    )
    X = np.asarray(s["resid"][rows[0][1], :n], dtype=np.float64)
    Y = np.asarray(t["resid"][rows[1][2], :n], dtype=np.float64)
    np.testing.assert_allclose(stats.xy[ridge.FIT], X.T @ Y, rtol=1e-12, atol=1e-9)
