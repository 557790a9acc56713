"""The fault runner: a command stopped at a named fault point of align/faults.py. Nothing here
imports align.

A point is `NAME`, `NAME:K` (the K-th time it is reached, K = 1 by default) or `NAME:K:pause`.
`ALIGN_FAULT` names it; the process appends `NAME:K pid=PID` to the file `ALIGN_FAULT_LOG` when
it gets there, then kills itself with SIGKILL (no cleanup, as an OOM kill or a preemption), or,
for `pause`, waits until the file `ALIGN_FAULT_LOG + ".go"` exists.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def fault_env(point: str, log, env: dict | None = None) -> dict:
    """`env` (os.environ by default) with ALIGN_FAULT=point and ALIGN_FAULT_LOG=log."""
    return dict(os.environ if env is None else env, ALIGN_FAULT=point, ALIGN_FAULT_LOG=str(log))


def wait_reached(log, timeout: float = 120) -> str:
    """Wait until a process has written to the fault log (it is at its point, paused there or
    dying); returns what the log holds."""
    t = time.time()
    while not os.path.exists(log) or not open(log).read():
        assert time.time() - t < timeout, f"{log} never appeared"
        time.sleep(0.05)
    return open(log).read()


def reached(point: str) -> str:
    """The line a process writes to the fault log at `point`, up to the pid: "NAME:K "."""
    name, _, rest = point.partition(":")
    return f"{name}:{rest.partition(':')[0] or 1} "


def killed_run(
    cmd, log, point: str, env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run `cmd` under fault_env(point, log, env); check it died of SIGKILL and that the log's
    first line says the named point was reached. Returns the finished process."""
    p = subprocess.run(
        cmd, env=fault_env(point, log, env), capture_output=True, text=True, timeout=timeout
    )
    assert p.returncode == -signal.SIGKILL, p.stderr
    text = Path(log).read_text() if Path(log).exists() else ""
    assert text.startswith(reached(point)), (point, text)  # the named point was reached
    return p
