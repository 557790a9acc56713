"""The group every align store is: its `align` marker and attributes read and checked, the
Zarr configuration, existence on local disk or a remote file system, and the files a killed
write leaves behind."""

from __future__ import annotations

import os

from align.errors import StoreError
from align.store.paths import is_local, local_path
from align.store.temporaries import replacement
from align.version import __version__

# The schema versions this release reads (`attrs["align"]["version"]`), of activation stores and
# of results (version 1 named the alignment's boundary dims source_layer/target_layer, renamed
# when read: align.store.results); any other is refused by read_attrs, naming the version and
# the align that wrote it.
READABLE_VERSIONS = {"activations": (1,), "result": (1, 2)}


def configure_zarr() -> None:
    """Every chunk is written, even one equal to the fill value, so that a missing chunk file
    always means damage (checked on read) rather than "all zeros"."""
    import zarr

    zarr.config.set({"array.write_empty_chunks": True})


def open_group(path: str, mode: str, storage_options: dict | None = None):
    """The Zarr v3 group at `path` (a local path, a file:// URL or a remote URL), opened in `mode`."""
    import zarr

    configure_zarr()
    path = local_path(str(path)) or path
    kwargs = {"storage_options": storage_options} if storage_options and not is_local(path) else {}
    return zarr.open_group(str(path), mode=mode, zarr_format=3, **kwargs)


def exists(path: str, storage_options: dict | None = None) -> bool:
    if is_local(path):
        return os.path.exists(os.path.join(local_path(str(path)), "zarr.json"))
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(str(path), **(storage_options or {}))
        return fs.exists(root.rstrip("/") + "/zarr.json")
    except Exception as e:  # an unreachable endpoint, refused credentials, an unknown protocol
        raise StoreError(
            f"{path} cannot be reached: {type(e).__name__}: {' '.join(str(e).split())[:200]}"
        ) from None


def read_attrs(path: str, storage_options: dict | None = None) -> dict:
    """The group attributes of any align store, or a StoreError saying why not."""
    if not exists(path, storage_options):
        told = replacement(local_path(str(path))) if is_local(path) else None
        if told is not None:
            raise StoreError(told)
        raise StoreError(
            f"{path} is not a store: it has no zarr.json (make it with `align extract` or `align fit`)"
        )
    try:
        g = open_group(path, "r", storage_options)
    except Exception as e:  # zarr raises many types for a damaged group
        raise StoreError(
            f"{path} cannot be opened as a Zarr v3 group: {type(e).__name__}: {e}"
        ) from None
    attrs = g.attrs.asdict()
    if not isinstance(attrs.get("align"), dict) or "schema" not in attrs["align"]:
        raise StoreError(
            f"{path} is a Zarr group but not an align store (no align.schema attribute)"
        )
    marker = attrs["align"]
    readable = READABLE_VERSIONS["activations" if marker["schema"] == "activations" else "result"]
    if marker.get("version") not in readable:
        raise StoreError(
            f"{path} is an align {marker['schema']} store of schema version {marker.get('version')!r}, written by align "
            f"{marker.get('align_version', attrs.get('align_version', 'unknown'))}; align {__version__} reads version "
            f"{', '.join(map(str, readable))}: open it with the align release that wrote it"
        )
    return attrs


def clean_partial_writes(path: str) -> int:
    """Remove the temporary files a killed write left behind (zarr writes `*.partial` and
    renames it into place). Returns how many were removed."""
    if not is_local(path):
        return 0
    removed = 0
    for root, _, files in os.walk(str(path)):
        for f in files:
            if f.endswith(".partial"):
                os.unlink(os.path.join(root, f))
                removed += 1
    return removed


def remove_contents(
    path: str, keep: tuple[str, ...] = (), storage_options: dict | None = None
) -> None:
    """Remove every entry of the store at `path` but those named in `keep` (its lock file). The
    caller has checked that `path` is its own kind of align store and holds its write lock."""
    if is_local(path):
        import shutil

        root = os.path.expanduser(local_path(path))
        for entry in os.listdir(root):
            if entry in keep:
                continue
            full = os.path.join(root, entry)
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full)
            else:
                os.unlink(full)
        return
    import fsspec

    fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
    for entry in fs.ls(root, detail=False):
        if entry.rstrip("/").rsplit("/", 1)[-1] not in keep:
            fs.rm(entry, recursive=True)
