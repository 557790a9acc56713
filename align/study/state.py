"""A study's state: DIR/study.json, each unit's key, definition, state, seconds and error,
written whole (a temporary file renamed) so that a kill leaves the last complete state."""

from __future__ import annotations

import json
import os

STATE_FILE = "study.json"
DONE, FAILED, RUNNING, BLOCKED = "done", "failed", "running", "blocked"


def read_state(root: str) -> dict:
    """DIR/study.json as a dict ({} when there is none)."""
    path = os.path.join(root, STATE_FILE)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_state(root: str, state: dict) -> None:
    """`state` into DIR/study.json, whole or not at all."""
    path = os.path.join(root, STATE_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def is_study(root: str) -> bool:
    return os.path.isfile(os.path.join(root, STATE_FILE))


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
    return lines
