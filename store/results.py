"""Result stores (alignment, contributions, skipping, lens, depth): xarray Datasets in Zarr v3.

A result is written whole into a temporary sibling folder and renamed into place, so a killed
run never leaves a result that opens as complete; `attrs["align"]` carries the schema.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
import warnings

from align.errors import StoreError
from align.faults import fault_point
from align.store.activations import exists, is_local, read_attrs

RESULT_SCHEMAS = ("alignment", "contributions", "skipping", "lens", "depth")


def _has_marker(path: str, storage_options=None) -> bool:
    try:
        return read_attrs(path, storage_options)["align"]["schema"] in RESULT_SCHEMAS
    except StoreError:
        return False


def _remove_dead_temporaries(parent: str, base: str) -> None:
    """Temporary folders of killed writers of the same result (`.NAME.tmp-PID-XXXX`)."""
    prefix = f".{base}.tmp-"
    for name in os.listdir(parent):
        if not name.startswith(prefix):
            continue
        try:
            pid = int(name[len(prefix):].split("-")[0])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        except PermissionError:
            pass


def write_result(path: str, ds, schema: str, overwrite: bool = False, storage_options: dict | None = None) -> str:
    """Write `ds` (an xarray.Dataset) as a result store of `schema`. Returns the path.

    Attributes must be JSON-serialisable. The schema marker `attrs["align"]`, without which
    no result opens, is written LAST: locally the data goes to a temporary sibling folder
    that is renamed into place, then the marker is added; on an object store the marker is
    added after every array. A run killed at any point leaves nothing that opens as a
    complete result, and a later write replaces what it left.
    """
    if schema not in RESULT_SCHEMAS:
        raise ValueError(f"unknown result schema {schema!r}")
    ds = ds.copy()
    ds.attrs = {k: v for k, v in ds.attrs.items() if k != "align"}
    marker = {"schema": schema, "version": 1}
    json.dumps(ds.attrs)  # fail before writing anything
    path = str(path)
    if not overwrite and exists(path, storage_options) and _has_marker(path, storage_options):
        raise StoreError(f"{path} already exists: choose another -o, or pass --overwrite")
    with warnings.catch_warnings():
        # String coordinates (part, agg, ...) use zarr's not-yet-final string dtype, and
        # consolidated metadata is not yet in the v3 spec: both expected here.
        warnings.simplefilter("ignore")
        if is_local(path):
            parent, base = os.path.split(os.path.abspath(path))
            os.makedirs(parent, exist_ok=True)
            _remove_dead_temporaries(parent, base)
            tmp = os.path.join(parent, f".{base}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
            try:
                ds.to_zarr(tmp, mode="w", zarr_format=3, consolidated=True)
                fault_point("result_before_rename")
                if os.path.exists(path):
                    shutil.rmtree(path)
                os.rename(tmp, path)
            finally:
                if os.path.exists(tmp):
                    shutil.rmtree(tmp, ignore_errors=True)
            fault_point("result_before_marker")
        else:
            ds.to_zarr(path, mode="w", zarr_format=3, consolidated=False, storage_options=storage_options)
            fault_point("result_before_marker")
        import zarr

        g = zarr.open_group(path, mode="r+", zarr_format=3, storage_options=storage_options if not is_local(path) else None)
        g.attrs["align"] = marker
    return path


def open_result(path: str, schema: str | None = None, storage_options: dict | None = None):
    """Open a result store as an xarray.Dataset, checking its schema."""
    import xarray as xr

    attrs = read_attrs(str(path), storage_options)
    found = attrs["align"]["schema"]
    if schema is not None and found != schema:
        raise StoreError(f"{path} holds a result of schema {found!r}, not {schema!r}")
    if found not in RESULT_SCHEMAS:
        raise StoreError(f"{path} is an align store of schema {found!r}, not a result")
    kwargs = {"storage_options": storage_options} if storage_options else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.open_zarr(str(path), zarr_format=3, consolidated=is_local(str(path)), **kwargs)


def open_alignment(path: str, storage_options: dict | None = None):
    """The alignment result at `path` as an xarray.Dataset."""
    return open_result(path, "alignment", storage_options)
