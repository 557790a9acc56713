"""The temporary folder a writer keeps beside its output, and the rule for cleaning one up.

Whatever align writes at a path NAME (a result store, a figure, a table) is first made whole
in a folder beside it, `.NAME.tmp-PID-XXXXXXXX`, and then renamed into place: the new output
is `new` inside that folder, and a result it replaces is moved to `old` there until the new
one is in. The folder holds a marker, `align-temporary.json`: the holder (`lock.holder()`:
host, pid, the process's start time, boot id, as the store lock records them), the folder's
own name and its inode.

A later writer of NAME removes such a folder only when its marker proves that align made
that very folder (the name and the inode match: a marker copied into another folder does
not) and that its holder is gone (same host, and the pid is not running or runs another
process: `lock.holder_alive` is False). Before removing it, it puts `old` back at NAME if
nothing took its place. Nothing else is ever removed or moved: not a folder or file that
only looks like a temporary (`.NAME.tmp-mine`, `.NAME.old-backup`), not one whose marker
is missing, damaged or lacks a process start time, not one held by a live process, and not
one written from another host (a writer there may still be using it).

A kill in the instant between creating the folder and writing its marker leaves an empty
unmarked folder, which stays (it cannot be told from a user's).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import uuid
from dataclasses import dataclass

from align.errors import StoreError
from align.store.lock import holder, holder_alive

MARKER = "align-temporary.json"


@dataclass(frozen=True)
class Temporary:
    """A marked temporary folder beside `path`: `new` is where the output is made, `old`
    where an output it replaces waits until the new one is in place."""

    folder: str
    path: str

    @property
    def new(self) -> str:
        return os.path.join(self.folder, "new")

    @property
    def old(self) -> str:
        return os.path.join(self.folder, "old")


def write_failed(path: str, e: OSError) -> str:
    """The one line of a write that failed with `e`, naming the output `path`."""
    if e.errno == errno.ENOSPC:
        return f"no space left on the device while writing {path}: free some space or choose another `output` (nothing was written)"
    return f"cannot write {path}: {e.strerror or e} (nothing was written)"


def _prefix(base: str) -> str:
    return f".{base}.tmp-"


def _marker(folder: str, name: str) -> dict | None:
    """The holder a temporary's marker names, or None when the marker does not prove that
    align made this folder (missing, unreadable, not ours, or made for another folder)."""
    try:
        with open(os.path.join(folder, MARKER), "rb") as f:
            info = json.loads(f.read())
        inode = os.lstat(folder).st_ino
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or info.get("name") != name or info.get("inode") != inode:
        return None
    who = info.get("holder")
    if not isinstance(who, dict) or not isinstance(who.get("process_start"), (int, float)):
        return None
    return who


def _settle(t: Temporary) -> None:
    """Put `old` back at the path when nothing took its place, then remove the folder."""
    if os.path.isdir(t.old) and not os.path.islink(t.old) and not os.path.lexists(t.path):
        os.rename(t.old, t.path)
    shutil.rmtree(t.folder)


def remove_dead(path: str) -> int:
    """Clean what dead writers of `path` left beside it (see the module docstring): each
    temporary whose marker proves it align's and its holder gone. Returns how many."""
    parent, base = os.path.split(os.path.abspath(path))
    removed = 0
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return 0
    for name in names:
        folder = os.path.join(parent, name)
        if (
            not name.startswith(_prefix(base))
            or os.path.islink(folder)
            or not os.path.isdir(folder)
        ):
            continue
        who = _marker(folder, name)
        if who is None or holder_alive(who) is not False:
            continue
        try:
            _settle(Temporary(folder, os.path.join(parent, base)))
            removed += 1
        except OSError:  # another writer of the same path is cleaning it up at this moment
            pass
    return removed


def replacement(path: str) -> str | None:
    """What a reader of the local `path` should be told when a writer's temporary beside it
    holds the previous version (`old`): that `path` is being replaced (its writer runs) or
    that the replacement was interrupted (its writer is gone), where the previous version is,
    and what restores it. None when no marked temporary beside `path` holds one."""
    parent, base = os.path.split(os.path.abspath(path))
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return None
    for name in names:
        folder = os.path.join(parent, name)
        t = Temporary(folder, os.path.join(parent, base))
        if not name.startswith(_prefix(base)) or os.path.islink(folder):
            continue
        who = _marker(folder, name)
        if who is None or not os.path.isdir(t.old) or os.path.islink(t.old):
            continue
        pid = who.get("pid", "?")
        if holder_alive(who):
            return (
                f"{path} is being replaced (align pid {pid} is writing it): its previous version "
                f"is at {t.old} until the new one is in place; wait for that command to finish"
            )
        host = who.get("host", "?")
        return (
            f"{path} is not in place: its replacement was interrupted (align pid {pid} on {host} "
            f"stopped), and its previous version is intact at {t.old}; rerun the command that "
            f"wrote {path} (or any command writing it), which puts the previous version back first"
        )
    return None


@contextlib.contextmanager
def temporary(path: str, shown: str | None = None):
    """A marked temporary folder beside the local `path` (its folder created if need be),
    after removing what dead writers of `path` left; yields a Temporary. On leaving it, an
    `old` output still there goes back to `path` if nothing took its place, and the folder is
    removed. A folder that cannot be made is a StoreError naming `shown` (default `path`)."""
    path = os.path.abspath(path)
    parent, base = os.path.split(path)
    name = f"{_prefix(base)}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    folder = os.path.join(parent, name)
    try:
        os.makedirs(parent, exist_ok=True)
        remove_dead(path)
        os.mkdir(folder)
    except OSError as e:
        raise StoreError(write_failed(shown or path, e)) from None
    t = Temporary(folder, path)
    try:
        try:
            partial = os.path.join(folder, MARKER + ".partial")
            with open(partial, "w") as f:
                json.dump({"holder": holder(), "name": name, "inode": os.lstat(folder).st_ino}, f)
            os.rename(partial, os.path.join(folder, MARKER))
        except OSError as e:
            raise StoreError(write_failed(shown or path, e)) from None
        yield t
    finally:
        try:
            _settle(t)
        except (
            OSError
        ):  # `old` could not be put back: the folder stays, and the next writer restores it
            pass


@contextlib.contextmanager
def staged(path: str):
    """Write one file whole or not at all: yields a path to write it to, inside a marked
    temporary folder beside `path`; when the block ends normally that file replaces `path`
    (a rename). A write that fails (a full disk) is a StoreError naming `path`, and `path`
    is left as it was."""
    path = os.path.expanduser(str(path))
    with temporary(path) as t:
        try:
            yield t.new
            os.replace(t.new, t.path)
        except OSError as e:
            raise StoreError(write_failed(path, e)) from None
