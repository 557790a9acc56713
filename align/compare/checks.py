"""What `align compare` refuses to read, and what it reads but does not show.

Every number compare reads must be a number: a NaN or ±inf in an alignment result's matrix or
per-document sums, a depth result's per-prompt sums, or a lens result's curves where it
measured is refused in one line naming the result, the array and the cell, before anything is
printed or written. NaN stands only where a result says what it means (a depth rule that is
undefined, a boundary the lens did not measure). Stored intervals drawn from fewer than
`bootstrap.MIN_RESAMPLES` resamples (results made before that floor) are not shown.
"""

from __future__ import annotations

import numpy as np

from align.errors import NonFiniteError
from align.stats import bootstrap

CELL_NAMES = {
    "source_boundary": "source boundary",
    "target_boundary": "target boundary",
    "heldout_doc": "held-out document",
    "lens_prompt": "lens prompt",
}


def refuse_nonfinite(path: str, var: str, da, rerun: str, nan_ok=None) -> None:
    """NonFiniteError naming the result, the array `var` (DataArray da) and its first NaN/±inf
    cell by coordinate ("relative_error is NaN at source boundary 2, target boundary 3"); NaN
    may stand only where `nan_ok` (a boolean mask of da's shape) says it means "undefined"
    or "not measured". What compare reads must be numbers: a table, a figure or a paired
    difference computed around a lost value would look complete."""
    v = np.asarray(da.values, np.float64)
    bad = ~np.isfinite(v)
    if nan_ok is not None:
        bad &= ~(np.isnan(v) & nan_ok)
    if not bad.any():
        return
    first = np.argwhere(bad)[0]
    cell = ", ".join(
        f"{CELL_NAMES.get(d, d)} {da[d].values[k].item() if d in da.coords else k}"
        for d, k in zip(da.dims, first)
    )
    x = v[tuple(first)]
    found = "NaN" if np.isnan(x) else ("inf" if x > 0 else "-inf")
    raise NonFiniteError(
        f"{path}: {var} is {found} at {cell} ({int(bad.sum())} of {v.size} values non-finite): align compare "
        f"reads no number computed from it; {rerun}"
    )


def withheld_stored(ds) -> str | None:
    """Why a result's stored intervals are not shown: drawn from fewer than MIN_RESAMPLES
    resamples (a result made before that floor), else None."""
    boot = ds.attrs.get("bootstrap") or (ds.attrs.get("summary") or {}).get("bootstrap") or {}
    n = boot.get("resamples_defined", boot.get("resamples"))
    if n is None or int(n) >= bootstrap.MIN_RESAMPLES:
        return None
    return (
        f"its intervals are not shown: they come from {int(n)} resamples, fewer than the {bootstrap.MIN_RESAMPLES} "
        "an interval needs (make the result again with the default `bootstrap`)"
    )


def depth_intervals(label: str, ds, rules) -> tuple[np.ndarray, np.ndarray, list]:
    """A depth result's stored interval per rule (low, high), NaN where it holds none or where
    it was drawn from fewer than MIN_RESAMPLES resamples (in all, or where the rule is
    defined), and the notes that say so."""
    nan = np.full(len(rules), np.nan)
    if "effective_depth_low" not in ds:
        return (
            nan,
            nan,
            [
                f"{label}: no intervals ({ds.attrs.get('intervals', 'the result holds no bootstrap')})"
            ],
        )
    few = withheld_stored(ds)
    if few:
        return nan, nan, [f"{label}: {few}"]
    lo = np.asarray(ds["effective_depth_low"].values, np.float64).copy()
    hi = np.asarray(ds["effective_depth_high"].values, np.float64).copy()
    if "defined_fraction" not in ds:
        return lo, hi, []
    B = int((ds.attrs.get("bootstrap") or {}).get("resamples", 0))
    ed = np.asarray(ds["effective_depth"].values, np.float64)
    notes = []
    for k, (r, f) in enumerate(zip(rules, ds["defined_fraction"].values)):
        n = int(round(float(f) * B))
        if n < bootstrap.MIN_RESAMPLES:
            lo[k] = hi[k] = np.nan
        if np.isfinite(ed[k]) and f < 1:
            notes.append(
                f"{label}: the {r} rule is undefined in {B - n} of {B} resamples; "
                + (
                    "its interval is over the others"
                    if n >= bootstrap.MIN_RESAMPLES
                    else f"no interval: {n} defined resamples are fewer than the {bootstrap.MIN_RESAMPLES} an interval needs"
                )
            )
    return lo, hi, notes


def check_depth(path: str, ds) -> None:
    """A depth result's numbers compare reads: its effective depths (NaN: undefined, with a
    reason; never ±inf) and the per-prompt sums of its paired differences (boundaries
    0..L−1 of the lens sums, those the rules read)."""
    rerun = "run `align depth` again from contributions and lens results without NaN"
    for var in ("effective_depth", "effective_depth_low", "effective_depth_high"):
        if var in ds:
            refuse_nonfinite(path, var, ds[var], rerun, nan_ok=np.ones(ds[var].shape, bool))
    L = int(ds.attrs.get("n_layers", ds.sizes.get("layer", 0)))
    for var in ("cos_sum", "token_count", "kl_sum", "overlap_sum", "lens_token_count"):
        if var in ds:
            da = ds[var]
            refuse_nonfinite(
                path, var, da.isel(boundary=slice(0, L)) if "boundary" in da.dims else da, rerun
            )


def check_lens(path: str, ds) -> None:
    """A lens result's curves and per-prompt sums are numbers wherever it measured (NaN only at
    boundaries outside attrs["boundaries_measured"]; a result that does not list them may
    hold NaN anywhere, shown as "not measured"), its token counts everywhere."""
    measured = ds.attrs.get("boundaries_measured")
    rerun = "run `align lens` again on a model or store without NaN"
    for var in ("kl", "overlap", "kl_sum", "overlap_sum"):
        if var in ds:
            da = ds[var]
            gap = (
                ~np.isin(da["boundary"].values, measured)
                if measured is not None
                else np.ones(da.sizes["boundary"], bool)
            )
            nan_ok = np.broadcast_to(gap, da.transpose(..., "boundary").shape)
            refuse_nonfinite(path, var, da.transpose(..., "boundary"), rerun, nan_ok=nan_ok)
    if "token_count" in ds:
        refuse_nonfinite(path, "token_count", ds["token_count"], rerun)


def check_alignment(path: str, ds) -> None:
    """An alignment result's matrix and the per-document sums of its paired differences are
    numbers in every cell (`align plot` withholds the summary of a matrix with NaN; compare
    refuses it, naming the cell)."""
    rerun = "fit again from stores without NaN (`align fit`)"
    for var in ("relative_error", "doc_ratio_sum", "doc_n_tokens"):
        if var in ds:
            refuse_nonfinite(path, var, ds[var], rerun)
