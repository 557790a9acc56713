"""Result stores (alignment, contributions, skipping, lens, depth): xarray Datasets in Zarr v3.

A result is written whole into a temporary sibling folder and renamed into place, so a killed
run never leaves a result that opens as complete; `attrs["align"]` carries the schema.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import warnings

from align.errors import StoreError
from align.faults import fault_point
from align.store import footprint
from align.store.group import read_attrs
from align.store.outputs import check_output
from align.store.paths import is_local, local_path
from align.store.temporaries import temporary, write_failed
from align.version import __version__

RESULT_SCHEMAS = (
    "alignment",
    "contributions",
    "skipping",
    "lens",
    "depth",
    "erasure",
    "igrad",
    "depthscore",
    "translators",
)
# The schema version results are written with. Version 2 calls the alignment's residual-stream
# positions boundaries (dims source_boundary/target_boundary, summary and option keys
# source_boundaries/target_boundaries); a version 1 result is read under these names.
RESULT_VERSION = 2
VERSION_1_NAMES = {"source_layer": "source_boundary", "target_layer": "target_boundary"}
VERSION_1_KEYS = {
    "source_layers": "source_boundaries",
    "target_layers": "target_boundaries",
    **VERSION_1_NAMES,
}


def write_result(
    path: str,
    ds,
    schema: str,
    overwrite: bool = False,
    storage_options: dict | None = None,
    inputs=(),
) -> str:
    """Write `ds` (an xarray.Dataset) as a result store of `schema`. Returns the path.

    `path` is checked by `check_output` (against `inputs`, the command's own input paths):
    it must be absent, an empty folder, or (with `overwrite`) a result of the same schema.
    Attributes must be JSON-serialisable. The result is written with a schema marker
    `attrs["align"]` that says it is incomplete, and marked complete last. Locally it is
    written whole inside a marked temporary folder beside `path` (align.store.temporaries);
    only then is an old result of the same schema moved into that folder, the new one renamed
    into place, marked complete, and the folder (the old result with it) deleted. (On an object store, which has no rename, it is written in place.) A run killed
    at any point leaves nothing that opens as a complete result, and a later write replaces
    what it left. A full disk is one StoreError, and leaves nothing behind.
    """
    if schema not in RESULT_SCHEMAS:
        raise ValueError(f"unknown result schema {schema!r}")
    ds = ds.copy()
    ds.attrs = {k: v for k, v in ds.attrs.items() if k != "align"}
    marker = {
        "schema": schema,
        "version": RESULT_VERSION,
        "align_version": __version__,
    }  # every result says which align wrote it
    json.dumps(ds.attrs)  # fail before writing anything
    # Written with the first metadata, so that whatever a kill leaves is known as this
    # command's own unfinished result (replaceable, never opened).
    ds.attrs["align"] = {**marker, "complete": False}
    _pin_chunks(ds)
    path = str(path)
    check_output(path, schema, inputs=inputs, overwrite=overwrite, storage_options=storage_options)
    lp = local_path(path)
    with warnings.catch_warnings(), quiet_async_errors():
        # String coordinates (part, agg, ...) use zarr's not-yet-final string dtype, and
        # consolidated metadata is not yet in the v3 spec: both expected here.
        warnings.simplefilter("ignore")
        if lp is not None:
            _write_local(os.path.expanduser(lp), path, ds, schema, marker, overwrite, inputs)
        else:
            try:
                ds.to_zarr(
                    path,
                    mode="w",
                    zarr_format=3,
                    consolidated=False,
                    storage_options=storage_options,
                )
            except OSError as e:
                raise StoreError(write_failed(path, e)) from None
            fault_point("result_before_marker")
            import zarr

            g = zarr.open_group(path, mode="r+", zarr_format=3, storage_options=storage_options)
            g.attrs["align"] = marker
    return path


def _pin_chunks(ds) -> None:
    """Give every in-memory numeric array without chosen chunks those of
    `footprint.result_chunks` (the whole array up to 64 MiB), so that what a result takes on
    disk is known before it is computed (align.fitting.planning.budget.result_bytes)."""
    for v in ds.variables.values():
        if v.ndim and "chunks" not in v.encoding and v.chunks is None and v.dtype.kind in "biuf":
            v.encoding["chunks"] = footprint.result_chunks(v.shape, v.dtype.itemsize)


def _write_local(
    lp: str, shown: str, ds, schema: str, marker: dict, overwrite: bool, inputs
) -> None:
    """Write `ds` whole inside a marked temporary folder beside `lp` (align.store.temporaries:
    what a killed writer leaves there, the next one cleans), then swap it in."""
    import zarr

    with temporary(lp, shown) as t:
        try:
            ds.to_zarr(t.new, mode="w", zarr_format=3, consolidated=True)
        except BaseException as e:
            _settle()  # writes still in flight would recreate files in the folder after it is removed
            if isinstance(e, OSError):
                raise StoreError(write_failed(shown, e)) from None
            raise
        fault_point("result_before_rename")
        # What is at the path now may have changed while the result was computed: check
        # again, and move aside only a result of this very schema.
        check_output(shown, schema, inputs=inputs, overwrite=overwrite)
        if os.path.isdir(lp) and os.listdir(lp) and read_attrs(lp)["align"]["schema"] == schema:
            os.rename(lp, t.old)
            fault_point("result_old_aside")
        elif os.path.isdir(lp):
            os.rmdir(lp)  # empty (check_output allowed it); rename onto it would do the same
        os.rename(t.new, lp)
        try:
            fault_point("result_before_marker")
            zarr.open_group(lp, mode="r+", zarr_format=3).attrs["align"] = marker
        except BaseException as e:
            # The new result never became complete: the old one goes back in its place.
            if os.path.isdir(t.old):
                os.rename(lp, t.new)
            if isinstance(e, OSError):
                raise StoreError(write_failed(shown, e)) from None
            raise
    # Leaving `temporary` removes its folder, and with it the old result (its replacement is in).


@contextlib.contextmanager
def quiet_async_errors():
    """While a result is written, an error of zarr's concurrent chunk writes reaches us once,
    as the exception of the write; but the writes still in flight then fail one by one in
    zarr's event loop, and asyncio would print each ("Task exception was never retrieved",
    "Task was destroyed but it is pending", ~200 lines on a full disk). After a failure, wait
    for zarr's loop to settle and collect the failed tasks with its exception handler
    silenced, then restore it. A write that succeeded leaves no failed task: no collection
    then (a full collection in a process holding torch took 0.3–0.45 s a write)."""
    log = logging.getLogger("asyncio")
    was = log.disabled
    log.disabled = True
    loop = old = None
    try:
        from zarr.core.sync import _get_loop

        loop = _get_loop()
        old = loop.get_exception_handler()
        loop.set_exception_handler(lambda loop, context: None)
    except Exception:  # a zarr without this internal: the logger switch still applies
        loop = None
    try:
        yield
    except BaseException:
        _settle()
        gc.collect()  # tasks that failed are reported when collected: do it while silenced
        raise
    finally:
        if loop is not None:
            loop.set_exception_handler(old)
        log.disabled = was


def _settle(timeout: float = 30.0) -> None:
    """Wait (at most `timeout` s) until no task but this one is pending on zarr's loop."""
    import asyncio
    import time

    try:
        from zarr.core.sync import _get_loop

        loop = _get_loop()
    except Exception:
        return

    async def pending() -> int:
        me = asyncio.current_task()
        return sum(1 for t in asyncio.all_tasks() if t is not me and not t.done())

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if asyncio.run_coroutine_threadsafe(pending(), loop).result(timeout) == 0:
                return
        except Exception:
            return
        time.sleep(0.02)


def open_result(path: str, schema: str | None = None, storage_options: dict | None = None):
    """Open a result store as an xarray.Dataset, checking its schema.

    Parameters
    ----------
    path : str
        The result's folder or URL.
    schema : str, optional
        The schema it must hold (None: any result schema).
    storage_options : dict, optional
        fsspec options of a remote result.

    Returns
    -------
    xarray.Dataset
        The result, a version-1 result upgraded to the current names.

    Raises
    ------
    StoreError
        Another schema than `schema`, a store that is not a result, or a result whose write was
        interrupted.
    """
    import xarray as xr

    path = local_path(str(path)) or str(path)
    attrs = read_attrs(path, storage_options)
    found = attrs["align"]["schema"]
    if schema is not None and found != schema:
        raise StoreError(f"{path} holds a result of schema {found!r}, not {schema!r}")
    if found not in RESULT_SCHEMAS:
        raise StoreError(f"{path} is an align store of schema {found!r}, not a result")
    if attrs["align"].get("complete") is False:
        raise StoreError(
            f"{path} is an unfinished {found} result (its write was interrupted): run the command that makes it again"
        )
    kwargs = {"storage_options": storage_options} if storage_options else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = xr.open_zarr(str(path), zarr_format=3, consolidated=is_local(str(path)), **kwargs)
    _check_names(path, ds, attrs["align"].get("version"))
    return upgraded(ds) if attrs["align"].get("version") == 1 else ds


def _check_names(path: str, ds, version) -> None:
    """Refuse a result whose dims are not those of the schema version its marker says (an
    edited or mislabelled marker): version 1 names the alignment's boundaries source_layer and
    target_layer, version 2 source_boundary and target_boundary."""
    names = set(ds.dims) | set(ds.variables)
    other = (
        VERSION_1_NAMES if version == RESULT_VERSION else dict.fromkeys(VERSION_1_NAMES.values())
    )
    found = sorted(n for n in other if n in names)
    if found:
        raise StoreError(
            f"{path} says schema version {version} but holds {', '.join(found)}, a name of "
            f"version {1 if version == RESULT_VERSION else RESULT_VERSION}: its marker "
            "(zarr.json attributes align.version) was edited or mislabelled; write the result "
            "again with the command that made it"
        )


def upgraded(ds):
    """A result of schema version 1 under version 2's names: the alignment's dims
    source_layer/target_layer become source_boundary/target_boundary, and the summary's and the
    options' source_layers/target_layers (and the flat null's target_layer) become
    source_boundaries/target_boundaries (target_boundary). Every value is unchanged."""
    ds = ds.rename(
        {old: new for old, new in VERSION_1_NAMES.items() if old in ds.variables or old in ds.dims}
    )
    for key in ("summary", "options"):
        if key in ds.attrs:
            ds.attrs[key] = _renamed_keys(ds.attrs[key])
    return ds


def _renamed_keys(value):
    """`value` with every dict key of VERSION_1_KEYS renamed, at any depth."""
    if isinstance(value, dict):
        return {VERSION_1_KEYS.get(k, k): _renamed_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed_keys(v) for v in value]
    return value


def open_alignment(path: str, storage_options: dict | None = None):
    """Open the alignment result at `path` as an xarray.Dataset.

    Parameters
    ----------
    path : str
        The result's folder or URL.
    storage_options : dict, optional
        fsspec options of a remote result.

    Returns
    -------
    xarray.Dataset
        Scores of dims (source_boundary, target_boundary) (see the schemas page).

    Raises
    ------
    StoreError
        A store that is not an alignment result, or one whose write was interrupted.
    """
    return open_result(path, "alignment", storage_options)
