"""A study's folder as `align info DIR` prints it: each unit's state, then the replicates'
verdicts where the study has them."""

from __future__ import annotations

from align.study.replicates import info_lines
from align.study.state import DONE, FAILED, read_state


def describe(root: str) -> list:
    """One line per unit of the study in `root`: its state and seconds, or its error."""
    state = read_state(root)
    entries = state.get("units", {})
    lines = [f"{root}: study {state.get('name', '?')} ({state.get('study', '?')})"]
    for name in state.get("order", []):
        e = entries.get(name, {})
        s = e.get("state", "pending")
        extra = f" {e['seconds']:.1f} s" if s == DONE and "seconds" in e else ""
        if s == FAILED:
            extra = f": {e.get('error', '')}"
        lines.append(f"  {s:<8} {name}{extra}")
    return lines + info_lines(root, state)
