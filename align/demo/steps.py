"""The demo's steps: timed, skipped when their result is already complete, and logged only
where a store was written or reused."""

from __future__ import annotations

import time

from align import store as st
from align.errors import StoreError


def step(report, name: str, fn, log):
    """fn(), its seconds recorded in report.timings[name]."""
    t = time.time()
    out = fn()
    report.timings[name] = round(time.time() - t, 2)
    return out


def done(path: str) -> bool:
    """A step's result is done when it opens as a complete result (a killed write leaves one
    that does not, and the step then runs again)."""
    try:
        st.open_result(path)
    except StoreError:
        return False
    return True


def quiet(log):
    """The log of align's steps, reduced to the lines that say a store was written or reused."""
    return lambda m: log(m) if "wrote" in m or "already complete" in m else None
