"""After the statistics, whatever their source: per-pair scores from the held-out sums, the
alignment Dataset with its summary and provenance, the room it needs, and writing it."""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from align import __version__, ridge
from align import store as st
from align.errors import DiskSpaceError, NonFiniteError, OutputRefused
from align.fitting.budget import RESULT_MARGIN, human_bytes, result_bytes
from align.fitting.split import Split

SCORES = ("relative_error", "norm_error", "r2", "alpha", "alpha_rel")
ROUTES = ("store", "live")


@dataclass
class Side:
    """One model of a fit as its result records it: `provenance` (a store's, or a model's
    for the live route), `path` (the store, or the model's name or folder), its number of
    blocks L (boundaries 0..L) and width."""

    provenance: dict
    path: str | None
    n_layers: int
    d_model: int

    @classmethod
    def of_store(cls, store) -> "Side":
        return cls(store.provenance, store.path, store.n_layers, store.d_model)

    @property
    def model(self):
        return self.provenance.get("model")


def pair_results(fitted: dict, heldout: dict) -> dict:
    """{(i, j): α, α_rel, val_sse (and W, c when kept) of the solve, with relative_error,
    norm_error and r2 from the held-out sums (`ridge.heldout_sums`, reduced)}."""
    return {(i, j): {**f, **ridge.scores(heldout["pair"][(i, j)], heldout["target"][j], heldout["centred"][j])}
            for (i, j), f in fitted.items()}


def alignment_dataset(results: dict, src_layers, tgt_layers, source: Side, target: Side, split: Split,
                      options: dict, route: str = "store", save_maps: bool = False):
    """The alignment result (`schema: alignment`) as an xarray Dataset: the five scores over
    (source_layer, target_layer), `heldout_doc`, W and c with `save_maps`, and attributes
    summary, split, options, both sides' provenance and `route` ("store" or "live").
    Refuses (NonFiniteError) a non-finite score before anything is summarised."""
    import xarray as xr

    if route not in ROUTES:
        raise ValueError(f"route {route!r} is not one of {ROUTES}")
    L_S, L_T = source.n_layers, target.n_layers
    shape = (len(src_layers), len(tgt_layers))
    arrays = {name: np.full(shape, np.nan) for name in SCORES}
    for a, i in enumerate(src_layers):
        for b, j in enumerate(tgt_layers):
            for name in arrays:
                arrays[name][a, b] = results[(i, j)][name]
    refuse_non_finite(arrays, src_layers, tgt_layers)
    dims = ("source_layer", "target_layer")
    data = {name: (dims, v) for name, v in arrays.items()}
    data["heldout_doc"] = (("heldout_doc",), np.asarray(split.test_docs, dtype=np.int64))
    if save_maps:
        data["W"] = (dims + ("d_source", "d_target"),
                     np.stack([np.stack([results[(i, j)]["W"] for j in tgt_layers]) for i in src_layers]))
        data["c"] = (dims + ("d_target",), np.stack([np.stack([results[(i, j)]["c"] for j in tgt_layers]) for i in src_layers]))
    coords = {
        "source_layer": ("source_layer", np.asarray(src_layers, dtype=np.int64)),
        "target_layer": ("target_layer", np.asarray(tgt_layers, dtype=np.int64)),
        "source_depth": ("source_layer", np.asarray(src_layers, dtype=np.float64) / L_S),
        "target_depth": ("target_layer", np.asarray(tgt_layers, dtype=np.float64) / L_T),
    }
    attrs = {
        "summary": ridge.summary(arrays["relative_error"], src_layers, tgt_layers, L_S, L_T),
        "route": route, "source": source.provenance, "target": target.provenance,
        "source_model": source.model, "target_model": target.model, "source_path": source.path, "target_path": target.path,
        "n_layers_source": L_S, "n_layers_target": L_T, "options": options, "split": split.record(),
        "align_version": __version__,
    }
    ds = xr.Dataset(data, coords=coords, attrs=jsonable(attrs))
    ds["relative_error"].attrs["description"] = "mean over held-out tokens of ||x W + c - y|| / max(||y||, 1e-12)"
    ds["norm_error"].attrs["description"] = "sum of ||x W + c - y|| over sum of ||y|| (held-out tokens)"
    ds["r2"].attrs["description"] = "1 - sum ||e||^2 / sum ||y - mean(y)||^2 (held-out; variance-weighted)"
    ds["alpha"].attrs["description"] = "absolute ridge penalty of the final fit: alpha_rel * trace(XcT Xc) / d_source"
    ds["alpha_rel"].attrs["description"] = "ridge penalty in units of the mean eigenvalue, chosen on validation documents"
    return ds


def refuse_non_finite(arrays: dict, src_layers, tgt_layers) -> None:
    """No result holds, and no summary is computed over, a non-finite score: raise
    NonFiniteError naming the pairs (source boundary, target boundary) and the scores.
    arrays: {score name: (len(src_layers), len(tgt_layers))}."""
    bad = {}
    for name, v in arrays.items():
        for a, b in zip(*np.nonzero(~np.isfinite(v))):
            bad.setdefault((src_layers[a], tgt_layers[b]), []).append(f"{name} {v[a, b]}")
    if bad:
        shown = "; ".join(f"source {i} -> target {j}: {', '.join(what)}" for (i, j), what in list(bad.items())[:4])
        more = f" (and {len(bad) - 4} more pairs)" if len(bad) > 4 else ""
        targets = sorted({j for _, j in bad})
        raise NonFiniteError(
            f"{len(bad)} layer pair(s) have non-finite held-out scores ({shown}{more}): the held-out activations of "
            f"target boundary {', '.join(map(str, targets))} have no variance or overflow float64, so no map can be "
            "scored there; nothing was written (fit other --target-layers, or re-extract the stores)")


def jsonable(obj):
    """`obj` with numpy scalars as Python numbers, tuples as lists, keys as strings and
    non-finite floats as None: what a Zarr attribute holds."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def check_result_room(output: str, src_layers, tgt_layers, source: Side, target: Side, split: Split,
                      save_maps: bool) -> None:
    """`check_room` for the alignment result these layers, sides and split make."""
    attrs = len(json.dumps(jsonable({"source": source.provenance, "target": target.provenance, "split": split.record()})))
    check_room(output, result_bytes(len(src_layers), len(tgt_layers), source.d_model, target.d_model,
                                    len(split.test_docs), save_maps, attrs))


def check_room(output: str, sizes: dict) -> None:
    """Refuse, before any computing, a local `output` that cannot be written (no folder to
    write in, no permission: a probe file is created and removed in the folder the result
    will go to, or its nearest existing ancestor) or whose file system has less free space
    than `sizes` (`result_bytes`) × RESULT_MARGIN. Object stores give no free-space figure;
    `check_output` has already reached them."""
    lp = st.local_path(output)
    if lp is None:
        return
    folder = os.path.dirname(os.path.abspath(os.path.expanduser(lp)))
    existing = folder
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise OutputRefused(f"-o {output}: {existing} is a file, not a folder, so nothing can be written under it: "
                            "choose another -o")
    try:
        fd, probe = tempfile.mkstemp(prefix=".align-write-probe-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputRefused(f"-o {output}: cannot write in {existing} ({e.strerror or e}): "
                            "choose a folder you can write to (nothing was computed)") from None
    need = sum(sizes.values())
    free = st.free_bytes(existing)
    if need * RESULT_MARGIN > free:
        maps = f", {human_bytes(sizes['maps'])} of it the maps of --save-maps" if sizes.get("maps") else ""
        raise DiskSpaceError(
            f"-o {output}: the alignment result needs up to {human_bytes(need * RESULT_MARGIN)}{maps}, but only {human_bytes(free)} "
            f"is free in {existing}: free some space or choose another -o{' (or drop --save-maps)' if maps else ''}; "
            "nothing was computed")


def write_alignment(output: str, ds, inputs: dict, overwrite: bool = False, storage_options: dict | None = None) -> None:
    """Write the alignment Dataset to `output` through the store's result writer (a hidden
    temporary renamed into place: a killed write never opens as complete). `inputs`:
    {role: path} that -o may never replace (the stores; for the live route, model folders)."""
    st.write_result(output, ds, "alignment", overwrite=overwrite, storage_options=storage_options, inputs=inputs)
