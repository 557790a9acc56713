"""Named fault points for crash tests.

`fault_point("between_batches")` does nothing unless the environment variable
ALIGN_FAULT names that point (``NAME`` or ``NAME:K`` for the K-th time it is reached,
1-based). Then it appends the point's name to the file in ALIGN_FAULT_LOG (so a test can
check the point was reached) and kills its own process with SIGKILL: no cleanup, no
finally blocks, exactly like an OOM kill or a preemption.

``NAME:K:pause`` instead waits there until the file ALIGN_FAULT_LOG + ".go" exists (at most
120 s), so a test can act while a run holds its lock mid-way.
"""

import os
import signal
import time

_hits: dict[str, int] = {}


def fault_point(name: str) -> None:
    spec = os.environ.get("ALIGN_FAULT")
    if not spec:
        return
    target, _, rest = spec.partition(":")
    nth, _, action = rest.partition(":")
    if target != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] != int(nth or 1):
        return
    log = os.environ.get("ALIGN_FAULT_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{name}:{_hits[name]} pid={os.getpid()}\n")
            f.flush()
            os.fsync(f.fileno())
    if action == "pause":
        deadline = time.time() + 120
        while log and not os.path.exists(log + ".go") and time.time() < deadline:
            time.sleep(0.05)
        return
    os.kill(os.getpid(), signal.SIGKILL)
