"""A study's state: DIR/study.json, each unit's key, definition, state, seconds and error,
written whole (a temporary file renamed) so that a kill leaves the last complete state.

A folder is a study's only when its study.json carries align's marker (`"align": {"schema":
"study", ...}`), as a result store is align's only when its `attrs["align"]` says so: the
state is written, marker first, before any unit writes into DIR, and read and checked before
DIR is written or anything in it removed. A study.json that is not UTF-8 JSON, or one
without the marker (a file of the user's own), is one line naming it, and nothing in DIR is
changed.
"""

from __future__ import annotations

import json
import os

from align import textfiles
from align.errors import InputError
from align.version import __version__

STATE_FILE = "study.json"
DONE, FAILED, RUNNING, BLOCKED = "done", "failed", "running", "blocked"
SCHEMA = "study"
VERSION = 1


def marker() -> dict:
    """What study.json's `align` key holds: the schema, its version and align's version."""
    return {"schema": SCHEMA, "version": VERSION, "align_version": __version__}


def read_state(root: str) -> dict:
    """DIR/study.json as a dict ({} when there is none), or a one-line InputError naming the
    file when it cannot be read as a study's state or lacks align's marker."""
    path = os.path.join(root, STATE_FILE)
    if not os.path.lexists(path):
        return {}
    if os.path.islink(path) or not os.path.isfile(path):
        raise InputError(f"{path} is not a file align wrote: {root} is not a study; {_elsewhere()}")
    text = textfiles.read(path, "study state")
    try:
        state = json.loads(text)
    except ValueError as e:
        raise InputError(
            f"study state {path} is not JSON ({e}): it is damaged or not align's; "
            f"{_elsewhere()}, or restore the file"
        ) from None
    found = state.get("align") if isinstance(state, dict) else None
    if not isinstance(found, dict) or found.get("schema") != SCHEMA:
        raise InputError(
            f"{path} was not written by `align study` (no align study marker): {root} is not a "
            f"study; {_elsewhere()}"
        )
    return state


def _elsewhere() -> str:
    return "give the study a new or empty folder (align changes nothing in this one)"


def write_state(root: str, state: dict) -> None:
    """`state`, with align's marker, into DIR/study.json, whole or not at all."""
    path = os.path.join(root, STATE_FILE)
    tmp = path + ".tmp"
    state["align"] = marker()
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def is_study(root: str) -> bool:
    """Whether `root` holds a study.json (`read_state` says whether it is align's)."""
    return os.path.isfile(os.path.join(root, STATE_FILE))
