"""Reliability of `align fit` (issue 6): killed runs, a dying Dask worker, stores on S3.

- A fit killed with SIGKILL at a named fault point (ALIGN_FAULT; reached, as its log shows)
  leaves no result that opens as complete, and the same command run again succeeds with the
  result of an undisturbed fit.
- A worker process killed while the fit runs on a `dask scheduler` with two `dask worker`s
  (after both were seen running statistics tasks) is survived: Dask recomputes what the dead
  worker held, and the result equals the undisturbed fit.
- `s3://` stores on moto's S3 server (loopback) give the results of local stores; the
  credentials come from the environment and appear in no result attribute, object or log line.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

from align.fitting import Execution, FitSpec
from tests.conftest import S3_KEY_ID as KEY_ID
from tests.conftest import S3_SECRET as SECRET
from tests.conftest import dask_processes
from tests.helpers.faults import fault_env, killed_run
from tests.helpers.fixtures_fit import token_table

METRICS = ("relative_error", "norm_error", "r2", "alpha", "alpha_rel")
OPTS = ["--alphas", "1e-3,1e-1", "--task-tokens", "256", "--seed", "1"]
SPEC = FitSpec(alphas=[1e-3, 1e-1], seed=1)  # with TASK_TOKENS: the command line's OPTS
TASK_TOKENS = 256


@pytest.fixture(scope="module")
def pair(synthetic):
    """Source (3 boundaries, d 24) and target (2 boundaries, d 16): 16 documents, 4,800 tokens
    (19 tasks of 256 tokens)."""
    tok = token_table(16, 300)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3, len(tok["doc"]), 24)) * 2 + 1
    Y = np.stack(
        [
            X[2] @ rng.normal(size=(24, 16)) + rng.normal(size=(len(tok["doc"]), 16))
            for _ in range(2)
        ]
    )
    return synthetic(X, tok, n_layers=2), synthetic(Y, tok, n_layers=1)


@pytest.fixture(scope="module")
def undisturbed(pair):
    import align

    run = Execution(scheduler="synchronous", task_tokens=TASK_TOKENS)
    return align.fit(*pair, None, SPEC, run, log=lambda m: None).dataset


def _assert_same(ds, ref):
    for name in METRICS:
        np.testing.assert_allclose(
            ds[name].values, ref[name].values, rtol=1e-12, atol=0, err_msg=name
        )
    assert ds.attrs["split"] == ref.attrs["split"]


def _opens_as_complete(path: str) -> bool:
    from align.store import open_alignment

    if not os.path.exists(path):
        return False
    try:
        open_alignment(path)
    except Exception:
        return False
    return True


# -- (a) killed runs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "point", ["fit_statistics_chunk:3", "fit_after_block", "result_before_rename"]
)
def test_killed_fit_leaves_no_complete_result_and_reruns(pair, undisturbed, tmp_path, point, cli):
    from align.store import open_alignment

    S, T = pair
    out = str(tmp_path / "a.zarr")
    log = tmp_path / "fault.log"
    cmd = [
        sys.executable,
        "-m",
        "align.cli.main",
        "fit",
        S,
        T,
        "-o",
        out,
        "--scheduler",
        "synchronous",
        *OPTS,
    ]
    killed_run(cmd, log, point, timeout=180)
    assert not _opens_as_complete(out)

    code, _, err = cli(*cmd[3:])  # the kill needs a process of its own; the rerun does not
    assert code == 0, err
    _assert_same(open_alignment(out), undisturbed)


# -- (b) a worker killed mid-fit ---------------------------------------------------------


def test_a_store_route_fit_imports_neither_torch_nor_matplotlib(pair, undisturbed, tmp_path):
    """What the structure test promises (heavy packages imported where used), seen in a process
    of its own: `align fit` on two stores runs whole, its result equal to the undisturbed
    fit's, and torch, transformers and matplotlib were never imported."""
    import subprocess

    from align.store import open_alignment

    S, T = pair
    out = str(tmp_path / "a.zarr")
    code = (
        "import sys\n"
        "from align.cli.main import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "finally:\n"
        "    print(sorted(m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules))\n"
    )
    args = ["fit", S, T, "-o", out, "--scheduler", "synchronous", *OPTS]
    run = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "[]"
    _assert_same(open_alignment(out), undisturbed)


@pytest.fixture
def paused_cluster(tmp_path):
    """A `dask scheduler` and two `dask worker`s on loopback whose processes stop at their
    second statistics task (ALIGN_FAULT ...:pause) until the test says go; yields
    (address, fault log path)."""
    log = tmp_path / "workers.log"
    env = fault_env("fit_statistics_chunk:2:pause", log, env={})
    try:
        with dask_processes(2, worker_env=env) as addr:
            yield addr, log
    finally:
        (log.parent / (log.name + ".go")).touch()


def _paused_pids(log, want: int, timeout: float) -> list[int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        pids = sorted(
            {
                int(line.split("pid=")[1])
                for line in (log.read_text().splitlines() if log.exists() else [])
            }
        )
        if len(pids) >= want:
            return pids
        time.sleep(0.1)
    return pids


@pytest.mark.slow
def test_worker_killed_mid_fit_is_survived_with_the_same_result(
    pair, undisturbed, paused_cluster, tmp_path
):
    import align
    from align.store import open_alignment

    S, T = pair
    addr, log = paused_cluster
    out = str(tmp_path / "w.zarr")
    outcome = {}

    def run():
        try:
            run = Execution(scheduler=addr, task_tokens=TASK_TOKENS)
            outcome["report"] = align.fit(S, T, out, SPEC, run, log=lambda m: None)
        except BaseException as e:  # noqa: BLE001  (reported by the test below)
            outcome["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    pids = _paused_pids(log, 2, timeout=90)
    # two distinct worker processes each ran a statistics task and are inside their second
    assert len(pids) == 2, log.read_text() if log.exists() else "no worker reached the fault point"
    os.kill(pids[0], signal.SIGKILL)
    (log.parent / (log.name + ".go")).touch()
    t.join(timeout=150)
    assert not t.is_alive(), "the fit did not finish after a worker was killed"
    assert "error" not in outcome, repr(outcome.get("error"))
    _assert_same(open_alignment(out), undisturbed)


# -- (c) stores on S3 --------------------------------------------------------------------

BUCKET = "align-fit"


@pytest.fixture
def fit_s3(s3):
    """The session's S3 server with this module's bucket."""
    if BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=BUCKET)
    return s3


def _upload(client, local: str, prefix: str) -> str:
    """Copy a local store, file for file, to s3://BUCKET/prefix; returns the URL."""
    for root, _, files in os.walk(local):
        for f in files:
            path = os.path.join(root, f)
            client.upload_file(
                path, BUCKET, prefix + "/" + os.path.relpath(path, local).replace(os.sep, "/")
            )
    return f"s3://{BUCKET}/{prefix}"


def _objects(client, prefix):
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def test_fit_on_s3_stores_equals_local_and_leaks_no_credentials(pair, undisturbed, fit_s3, capfd):
    s3 = fit_s3
    import align
    from align.store import open_alignment
    from tests.conftest import run_cli

    S, T = pair
    src, tgt = _upload(s3, S, "stores/s.zarr"), _upload(s3, T, "stores/t.zarr")
    out = f"s3://{BUCKET}/results/a.zarr"
    code, stdout, stderr = run_cli(
        ["fit", src, tgt, "-o", out, "--scheduler", "synchronous", *OPTS], capfd
    )
    assert code == 0, stderr
    ds = open_alignment(out)
    _assert_same(ds, undisturbed)
    assert ds.attrs["source_path"] == src
    keys = _objects(s3, "results/a.zarr/")
    assert "results/a.zarr/zarr.json" in keys and "results/a.zarr/relative_error/zarr.json" in keys
    # the workers of a local cluster read the stores from S3 with the same environment
    lines = []
    run = Execution(scheduler=None, n_workers=2, task_tokens=TASK_TOKENS)
    local_cluster = align.fit(src, tgt, None, SPEC, run, log=lines.append)
    assert len(local_cluster.workers) == 2
    _assert_same(local_cluster.dataset, undisturbed)

    captured = capfd.readouterr()
    texts = [
        stdout,
        stderr,
        captured.out,
        captured.err,
        "\n".join(lines),
        json.dumps(ds.attrs),
        json.dumps(local_cluster.dataset.attrs),
    ]
    texts += [s3.get_object(Bucket=BUCKET, Key=k)["Body"].read().decode("latin-1") for k in keys]
    for text in texts:
        assert KEY_ID not in text and SECRET not in text
