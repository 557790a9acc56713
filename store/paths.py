"""Where a store lives: a local path (a plain path or a file:// URL) or a remote URL."""

from __future__ import annotations


def local_path(path: str) -> str | None:
    """The local file-system path of `path` (a plain path or a file:// URL), or None for a
    remote URL (s3://, gs://, memory://, ...)."""
    path = str(path)
    if path.startswith("file://"):
        return path[len("file://") :] or "/"
    return None if "://" in path else path


def is_local(path: str) -> bool:
    """Whether `path` is on the local file system (a plain path or a file:// URL)."""
    return "://" not in str(path) or str(path).startswith("file://")
