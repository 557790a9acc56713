"""What `-o` may name: the one check every writing command runs before it computes anything.

A command never deletes or changes anything but its own result. So an existing path is used
only when it is absent, an empty folder, or (with --overwrite) a result of the same kind; and
never when it is one of the command's inputs, lies inside one, or holds one. A refusal is one
line (OutputRefused) naming the path and what to do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from align.errors import OutputRefused, StoreError
from align.store.group import read_attrs
from align.store.paths import local_path

# What each schema's replacement is called in messages.
KINDS = {
    "activations": "activation store",
    "alignment": "alignment result",
    "contributions": "contributions result",
    "skipping": "skipping result",
    "lens": "lens result",
    "depth": "depth result",
    "erasure": "erasure result",
    "igrad": "igrad result",
    "depthscore": "depthscore result",
    "translators": "translators result",
}


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def free_bytes(path: str) -> int:
    """Free bytes on the local file system that holds (or would hold) `path`: the nearest
    existing folder above it is asked. ALIGN_FREE_DISK_BYTES replaces the figure (tests
    simulate a full disk with it)."""
    import shutil

    override = os.environ.get("ALIGN_FREE_DISK_BYTES")
    if override is not None:
        return int(override)
    probe = os.path.abspath(os.path.expanduser(local_path(path) or path))
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    return shutil.disk_usage(probe).free


def block_bytes(path: str) -> int:
    """The block size of the local file system that holds (or would hold) `path`: what every
    file written there is rounded up to."""
    probe = os.path.abspath(os.path.expanduser(local_path(path) or path))
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    try:
        return os.statvfs(probe).f_frsize or 4096
    except (OSError, AttributeError):
        return 4096


def used_bytes(path: str) -> int:
    """Bytes the files and folders under the local `path` take on disk (allocated blocks, as
    `du` counts them; hard links once); 0 when nothing is there."""
    root = os.path.expanduser(local_path(path) or path)
    seen, total = set(), 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [dirpath, *(os.path.join(dirpath, f) for f in filenames)]:
            try:
                st = os.lstat(name)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def check_protocol(path: str, option: str = "`output`") -> None:
    """Refuse, in one line, a URL whose protocol fsspec does not know or cannot load."""
    path = str(path)
    if local_path(path) is not None:
        return
    import fsspec

    protocol = path.split("://", 1)[0]
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise OutputRefused(
            f"{option} {path}: unknown storage protocol {protocol!r}: give a local path, or a URL such as "
            "s3://bucket/name.zarr, gs://..., file:///abs/path"
        ) from None
    except ImportError as e:
        raise OutputRefused(
            f"{option} {path}: protocol {protocol!r} needs a package that is not installed ({e}): "
            "install it, or give a local path"
        ) from None


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def _inside(child: str, parent: str) -> bool:
    """child == parent or child lies below parent (both resolved, or both URLs)."""
    parent = parent.rstrip("/") or "/"
    return child == parent or child.startswith(parent if parent.endswith("/") else parent + "/")


def _normalised_inputs(inputs) -> list[tuple[str, str]]:
    """(label, resolved path or URL) for each input that names something: local inputs that
    do not exist (a hub id such as Qwen/Qwen2.5-1.5B) cannot be harmed and are skipped."""
    items = inputs.items() if isinstance(inputs, Mapping) else ((None, p) for p in inputs)
    out = []
    for label, p in items:
        if p is None:
            continue
        p = str(p)
        lp = local_path(p)
        if lp is None:
            out.append((label or p, p.rstrip("/")))
        elif os.path.lexists(os.path.expanduser(lp)):
            out.append((label or p, _real(lp)))
    return out


def _schema_at(path: str, storage_options=None) -> tuple[str | None, bool]:
    """(align schema of the store at `path` or None when it is not an align store, whether it
    is a result whose write was interrupted: marked `complete: false`)."""
    try:
        marker = read_attrs(path, storage_options)["align"]
        return marker["schema"], marker.get("complete") is False
    except (StoreError, KeyError, TypeError):
        return None, False


def check_output(
    path: str,
    schema: str,
    *,
    inputs=(),
    overwrite: bool = False,
    storage_options: dict | None = None,
) -> None:
    """Refuse an output path a command of result kind `schema` must not write, before any work.

    `inputs`: the command's input paths or URLs (a sequence, or a mapping label -> path);
    the output may be none of them, lie inside none, and hold none (resolved real paths).
    Allowed: a path that does not exist, an empty folder, a result of the same `schema` when
    `overwrite` is set, and one whose write was interrupted (marked incomplete) always. For schema "activations" an existing activation store is
    allowed whatever `overwrite` says (extraction resumes it or refuses it by its options).
    Everything else (the current folder, a file, a folder holding other files, another kind
    of store) raises OutputRefused, one line naming the path and what to do.
    """
    if schema not in KINDS:
        raise ValueError(f"unknown schema {schema!r}")
    path = str(path)
    kind = KINDS[schema]
    check_protocol(path)
    lp = local_path(path)
    remote = lp is None
    target = path.rstrip("/") if remote else _real(lp)
    for label, inp in _normalised_inputs(inputs):
        if (inp == target or _inside(target, inp) or _inside(inp, target)) and (
            remote == (local_path(inp) is None)
        ):
            how = "is" if inp == target else ("lies inside" if _inside(target, inp) else "holds")
            raise OutputRefused(
                f"`output` {path} {how} this command's input {label}: write the {kind} elsewhere (choose another `output`)"
            )
    if remote:
        _check_remote(path, schema, kind, overwrite, storage_options)
        return
    cwd = _real(os.getcwd())
    if _inside(cwd, target):
        raise OutputRefused(
            f"`output` {path} is the current folder{'' if cwd == target else ' or holds it'}: "
            f"give a new path for the {kind}, e.g. `output` {schema}.zarr"
        )
    shown = os.path.expanduser(lp)
    if os.path.islink(shown):
        raise OutputRefused(
            f"`output` {path} is a symbolic link: give the path of a new or empty folder instead"
        )
    if not os.path.lexists(shown):
        ancestor = os.path.dirname(os.path.abspath(shown))
        while not os.path.lexists(ancestor):
            ancestor = os.path.dirname(ancestor)
        if not os.path.isdir(ancestor):
            raise OutputRefused(
                f"`output` {path}: {ancestor} is a file, not a folder: choose another `output`"
            )
        return
    if not os.path.isdir(shown):
        raise OutputRefused(
            f"`output` {path} is an existing file, not {_a(kind)}: choose another `output` "
            "(align replaces nothing but its own results)"
        )
    # An extraction's lock file is its own (the lock decides); for a result it is a file.
    entries = [e for e in os.listdir(shown) if not (schema == "activations" and e == "align.lock")]
    if not entries:
        return
    found, unfinished = _schema_at(shown)
    if found is None:
        raise OutputRefused(
            f"`output` {path} is a folder holding other files ({len(entries)} entries): not an align store, "
            f"not {_a(kind)}; choose a new or empty folder"
        )
    if found != schema:
        raise OutputRefused(
            f"`output` {path} holds an align store of schema {found!r} ({_a(KINDS.get(found, 'store'))}), "
            f"not {_a(kind)}: choose another `output` (`overwrite` replaces only {_a(kind)})"
        )
    if schema != "activations" and not overwrite and not unfinished:
        raise OutputRefused(
            f"`output` {path} already holds {_a(kind)}: pass `overwrite` to replace it, or choose another `output`"
        )


def _check_remote(path, schema, kind, overwrite, storage_options):
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
        present = fs.exists(root.rstrip("/") + "/zarr.json")
        # A lock object alone is what a writer of this very output left (its lock decides).
        other = (
            not present
            and fs.exists(root)
            and any(
                p.rstrip("/").rsplit("/", 1)[-1] != "align.lock" for p in fs.ls(root, detail=False)
            )
        )
    except Exception as e:  # unreachable endpoint, bad credentials: one line naming the URL
        raise OutputRefused(
            f"`output` {path} cannot be checked: {type(e).__name__}: {' '.join(str(e).split())[:200]}"
        ) from None
    if other:
        raise OutputRefused(
            f"`output` {path} holds other objects (not {_a(kind)}): choose a new prefix"
        )
    if not present:
        return
    found, unfinished = _schema_at(path, storage_options)
    if found != schema:
        what = (
            f"an align store of schema {found!r}"
            if found
            else "a Zarr group that is not an align store"
        )
        raise OutputRefused(
            f"`output` {path} holds {what}, not {_a(kind)}: choose another `output` (`overwrite` replaces only {_a(kind)})"
        )
    if schema != "activations" and not overwrite and not unfinished:
        raise OutputRefused(
            f"`output` {path} already holds {_a(kind)}: pass `overwrite` to replace it, or choose another `output`"
        )


def check_file_output(path: str, suffix, *, inputs=()) -> None:
    """Refuse a single-file output (a figure) unless it ends in `suffix` (one, or a tuple of
    the suffixes allowed) and is absent or an existing regular file; never one of `inputs`,
    inside one, or a folder."""
    path = str(path)
    allowed = (suffix,) if isinstance(suffix, str) else tuple(suffix)
    suffix = " or ".join(allowed)
    lp = local_path(path)
    if lp is None:
        raise OutputRefused(f"`output` {path}: give a local file path ending in {suffix}")
    if not lp.lower().endswith(allowed):
        raise OutputRefused(f"`output` {path} does not end in {suffix}: give a {suffix} file path")
    target = _real(lp)
    for label, inp in _normalised_inputs(inputs):
        if inp == target or _inside(target, inp) or _inside(inp, target):
            raise OutputRefused(
                f"`output` {path} is (or lies inside) this command's input {label}: choose another `output`"
            )
    shown = os.path.expanduser(lp)
    if os.path.isdir(shown):
        raise OutputRefused(f"`output` {path} is a folder: give a {suffix} file path")
    if os.path.lexists(shown) and not os.path.isfile(shown):
        raise OutputRefused(
            f"`output` {path} exists and is not a regular file: choose another `output`"
        )
