"""A map saved by `align fit --save-maps`, applied to new activations: ŷ = x W + c.

The result holds W (source_boundary, target_boundary, d_source, d_target) and c
(source_boundary, target_boundary, d_target) in float64 (docs/schemas.md); c = μ_y − μ_x W folds
the training means in, so x is given as read from a store (not centred).
"""

from __future__ import annotations

import numpy as np

from align.errors import InputError, NonFiniteError
from align.store import open_alignment


def apply_map(result, x, source_boundary: int, target_boundary: int) -> np.ndarray:
    """Apply a map saved with `save_maps` to new source activations: x W + c, in float64.

    Parameters
    ----------
    result : str or xarray.Dataset
        An alignment result's path, or its Dataset from `align.open_alignment`, fitted with
        `save_maps`.
    x : array of shape (..., d_source)
        Activations of the source model at `source_boundary` (any float dtype; computed in
        float64).
    source_boundary : int
        The map's source boundary.
    target_boundary : int
        The map's target boundary.

    Returns
    -------
    array of shape (..., d_target)
        The target activations predicted, float64.

    Raises
    ------
    AlignError
        A result without maps, a boundary the result does not hold, a width other than
        d_source or a non-finite value in `x`.
    """
    ds = result
    if isinstance(result, str):
        ds = open_alignment(result)
    if "W" not in ds or "c" not in ds:
        raise InputError(
            "`result` holds no maps (W and c): fit it again with `save_maps` to apply its maps"
        )
    pair = {}
    for dim, value in (("source_boundary", source_boundary), ("target_boundary", target_boundary)):
        held = [int(b) for b in ds[dim].values]
        if int(value) not in held:
            raise InputError(
                f"`{dim}` {value} is not in the result: it holds {dim} {held}; give one of them"
            )
        pair[dim] = int(value)
    W = np.asarray(ds["W"].sel(pair).values, dtype=np.float64)
    c = np.asarray(ds["c"].sel(pair).values, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0 or x.shape[-1] != W.shape[0]:
        raise InputError(
            f"`x` of shape {x.shape}: the map from source boundary {pair['source_boundary']} "
            f"takes (..., {W.shape[0]}) activations (d_source {W.shape[0]}); give the source "
            "model's activations at that boundary"
        )
    bad = ~np.isfinite(x)
    if bad.any():
        first = np.unravel_index(int(np.argmax(bad)), x.shape)
        raise NonFiniteError(
            f"`x` holds {int(bad.sum())} non-finite values (the first at index {tuple(map(int, first))}): "
            "a map is applied to finite activations only"
        )
    return x @ W + c
