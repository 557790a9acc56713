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
from align.store.activations import is_local, read_attrs

RESULT_SCHEMAS = ("alignment", "contributions", "skipping", "lens", "depth")


def write_result(path: str, ds, schema: str, overwrite: bool = False, storage_options: dict | None = None) -> str:
    """Write `ds` (an xarray.Dataset) as a result store of `schema`.

    Attributes must be JSON-serialisable; `ds.attrs["align"]` is set to the schema. Returns
    the path.
    """
    if schema not in RESULT_SCHEMAS:
        raise ValueError(f"unknown result schema {schema!r}")
    ds = ds.copy()
    ds.attrs = {**ds.attrs, "align": {"schema": schema, "version": 1}}
    json.dumps(ds.attrs)  # fail before writing anything
    path = str(path)
    if is_local(path):
        if os.path.exists(path):
            if not overwrite:
                raise StoreError(f"{path} already exists: choose another -o, or pass --overwrite")
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex[:8]}")
        try:
            with warnings.catch_warnings():
                # String coordinates (part, agg, ...) use zarr's not-yet-final string dtype,
                # and consolidated metadata is not yet in the v3 spec: both expected here.
                warnings.simplefilter("ignore")
                ds.to_zarr(tmp, mode="w", zarr_format=3, consolidated=True)
            fault_point("result_before_rename")
            if os.path.exists(path):
                shutil.rmtree(path)
            os.rename(tmp, path)
        finally:
            if os.path.exists(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
    else:
        # No atomic rename on object stores: write everything but the schema marker, then
        # add the marker last; a result without it is refused on open.
        import zarr

        marker = ds.attrs.pop("align")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds.to_zarr(path, mode="w", zarr_format=3, consolidated=False, storage_options=storage_options)
        fault_point("result_before_rename")
        g = zarr.open_group(path, mode="r+", zarr_format=3, storage_options=storage_options)
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
