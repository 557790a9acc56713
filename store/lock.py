"""A write lock per store: one writer at a time.

The lock is a file `align.lock` inside the store folder, created with O_CREAT|O_EXCL (atomic
on a local file system) and holding the holder's host, pid, start time, the process's own
start time as the kernel reports it and the machine's boot id. A second writer is refused at
once with a message naming the holder. A lock whose holder is provably gone is stale: it is
reported and removed, so re-running a killed command resumes it. Provably gone, on the same
host: the machine has booted since (another boot id), or no process has the pid, or the
process that has it started at another time than the holder did (a pid reused, as after a
container restart where every run is pid 1 again), or it is this very process, which does not
hold the lock yet. A lock held from another host, or one written without a process start time,
cannot be checked from here: `--break-lock` removes it.

Object stores (s3://, gs://) have no atomic create-if-absent through fsspec: there align writes
the same lock object after checking that none exists, which leaves a window of one round trip
in which two writers can both believe they hold it (see docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager

from align import messages
from align.errors import StoreLocked

LOCK_NAME = "align.lock"


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


START_TOLERANCE = 1.0  # seconds: a process's start time as read back differs by clock-tick rounding


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _process_start(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), or None if there is no such process."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.Error:  # exists, but cannot be inspected: treat as started when recorded
        return float("nan")


def holder() -> dict:
    """This process as a holder: host, pid, start time (local, for messages), the process's
    start time as the kernel reports it and the machine's boot id. The store lock records it,
    and so does every temporary a writer leaves beside its result (align.store.temporaries)."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "process_start": _process_start(os.getpid()),
        "boot_id": _boot_id(),
    }


def holder_alive(info: dict) -> bool | None:
    """Whether the process a `holder()` record names is still running: True or False when
    that can be told (same host, and the record has the process start time), None otherwise.
    Gone: the machine booted since, no process has the pid, or the one that has it started at
    another time (the pid was reused)."""
    if info.get("host") != socket.gethostname():
        return None
    boot = _boot_id()
    if info.get("boot_id") and boot and info["boot_id"] != boot:
        return False  # the machine booted since the record was written: its holder is gone
    try:
        pid = int(info.get("pid", -1))
    except (TypeError, ValueError, OverflowError):
        return False
    if pid <= 0:
        return False
    started = _process_start(pid)
    if started is None:
        return False
    recorded = info.get("process_start")
    if not isinstance(recorded, (int, float)):
        return None  # a lock without the holder's start time: the pid alone proves nothing
    if started != started:  # NaN: the process exists but cannot be inspected
        return True
    return abs(started - recorded) <= START_TOLERANCE


def _alive(info: dict) -> bool | None:
    """Whether the lock's holder is still running (`holder_alive`); a lock naming this very
    process on this host is stale: this process is only now taking it, so the pid was reused."""
    try:
        own = info.get("host") == socket.gethostname() and int(info.get("pid", -1)) == os.getpid()
    except (TypeError, ValueError, OverflowError):
        own = False
    return False if own else holder_alive(info)


def _describe(info: dict) -> str:
    return f"host {info.get('host', '?')}, pid {info.get('pid', '?')}, started {info.get('started', '?')}"


@contextmanager
def write_lock(path: str, break_lock: bool = False, storage_options: dict | None = None):
    """Hold the store's write lock for the duration of the block."""
    if _is_local(path):
        local = path[len("file://") :] if path.startswith("file://") else path
        os.makedirs(local, exist_ok=True)
        lock = os.path.join(local, LOCK_NAME)
        _acquire_local(lock, path, break_lock)
        try:
            yield
        finally:
            try:
                with open(lock) as f:
                    if json.load(f).get("pid") == os.getpid():
                        os.unlink(lock)
            except (OSError, ValueError):
                pass
    else:
        import fsspec

        fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
        lock = root.rstrip("/") + "/" + LOCK_NAME
        if fs.exists(lock):
            info = _read(fs.cat_file(lock))
            alive = _alive(info)
            if alive is True or (alive is None and not break_lock):
                raise StoreLocked(
                    f"store {path} is locked by another writer ({_describe(info)}): wait for it to finish"
                    + ("" if alive else ", or pass `break_lock` if that run is dead")
                )
            if alive is False:
                messages.say(
                    f"align: removing the stale lock of a run that is no longer running ({_describe(info)})"
                )
        fs.pipe_file(lock, json.dumps(holder()).encode())
        try:
            yield
        finally:
            try:
                fs.rm(lock)
            except OSError:
                pass


def _read(raw: bytes) -> dict:
    try:
        info = json.loads(raw)
        return info if isinstance(info, dict) else {}
    except ValueError:
        return {}


def _acquire_local(lock: str, path: str, break_lock: bool) -> None:
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                with open(lock, "rb") as f:
                    info = _read(f.read())
            except OSError:
                info = {}
            alive = _alive(info)
            # A holder on this host that is provably not running (see the module docstring) is
            # dead: its lock is stale and is broken without asking (so re-running a killed
            # command resumes it). A holder that cannot be checked (another host, or a lock
            # without a process start time): only --break-lock removes its lock.
            if alive is False or (break_lock and alive is None):
                if alive is False:
                    messages.say(
                        f"align: removing the stale lock of a run that is no longer running ({_describe(info)})"
                    )
                os.unlink(lock)
                continue
            raise StoreLocked(
                f"store {path} is being written by another process ({_describe(info)}): wait for it to finish"
                + ("" if alive else ", or pass `break_lock` if that run is dead")
            ) from None
        with os.fdopen(fd, "w") as f:
            json.dump(holder(), f)
        return
    raise StoreLocked(f"store {path}: could not take the write lock")
