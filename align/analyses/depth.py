"""Effective depth (METHODS.md §5, [P2]) from the contribution and lens curves.

With L layers and ratio = (ED + 1) / L:

- cosine:  c_l = mean of cos(a_l, h_l), cos(m_l, h_l + a_l), cos(h_{l+1} − h_l, h_l)
           (token means); ED = the LAST l in 0..L−2 with c_l < 0 ≤ c_{l+1}.
- kl:      ED = the FIRST l in 0..L−2 with KL_l < 0.5 · max_{b<L} KL_b.
- overlap: ED = the FIRST l in 0..L−2 with overlap_l > 0.3.

The lens rules read boundaries 0..L−1 of the token-weighted averages. When a rule finds no
such l, ED is NaN and the reason says why.
"""

from __future__ import annotations

import numpy as np

from align.errors import InputError, NonFiniteError

RULES = ("cosine", "kl", "overlap")
KL_FRACTION = 0.5
OVERLAP_THRESHOLD = 0.3


def cosine_depth(c) -> tuple[float, str]:
    """(ED, reason) of the cosine rule on c: (L,) mean cosines per layer."""
    c = np.asarray(c, np.float64)
    L = len(c)
    hits = [l for l in range(L - 1) if c[l] < 0 <= c[l + 1]]
    if hits:
        return float(hits[-1]), ""
    return np.nan, f"the mean cosine never crosses from negative to non-negative between layers 0 and {L - 1}"


def kl_depth(kl) -> tuple[float, str]:
    """(ED, reason) of the KL rule on kl: (L,) token-weighted KL at boundaries 0..L−1."""
    kl = np.asarray(kl, np.float64)
    L = len(kl)
    top = np.nanmax(kl) if np.isfinite(kl).any() else np.nan
    hits = [l for l in range(L - 1) if kl[l] < KL_FRACTION * top]
    if hits:
        return float(hits[0]), ""
    return np.nan, f"no boundary in 0..{L - 2} has KL below {KL_FRACTION} x its maximum ({top:.4g})"


def overlap_depth(overlap) -> tuple[float, str]:
    """(ED, reason) of the overlap rule on overlap: (L,) token-weighted top-5 overlap at 0..L−1."""
    ov = np.asarray(overlap, np.float64)
    L = len(ov)
    hits = [l for l in range(L - 1) if ov[l] > OVERLAP_THRESHOLD]
    if hits:
        return float(hits[0]), ""
    return np.nan, f"no boundary in 0..{L - 2} has top-5 overlap above {OVERLAP_THRESHOLD}"


def effective_depth(cos_attn, cos_mlp, cos_layer, kl, overlap) -> dict:
    """Effective depth by the three rules.

    cos_attn, cos_mlp, cos_layer: (L,) token-mean cosines per layer; kl, overlap: (L+1,) or
    (L,) token-weighted lens curves over boundaries (only 0..L−1 are read).
    Returns {"effective_depth": (3,), "ratio": (3,), "reasons": {rule: str}, "n_layers": L}
    in RULES order; NaN where undefined."""
    cos = np.stack([np.asarray(x, np.float64) for x in (cos_attn, cos_mlp, cos_layer)])
    L = cos.shape[1]
    kl, overlap = np.asarray(kl, np.float64), np.asarray(overlap, np.float64)
    if len(kl) not in (L, L + 1) or len(overlap) not in (L, L + 1):
        raise InputError(f"effective depth needs lens curves over {L + 1} boundaries for {L} layers: got {len(kl)} and {len(overlap)}")
    found = {
        "cosine": cosine_depth(cos.mean(0)),
        "kl": kl_depth(kl[:L]),
        "overlap": overlap_depth(overlap[:L]),
    }
    ed = np.array([found[r][0] for r in RULES])
    return {"effective_depth": ed, "ratio": (ed + 1) / L, "reasons": {r: found[r][1] for r in RULES}, "n_layers": L}


def _name(ds, what: str) -> str:
    return str(ds.encoding.get("source") or f"the {what} result")


def _cell(da, idx) -> str:
    """"part=mlp, layer=1, agg=mean": the index along each dim, then the selected scalars."""
    dims = [f"{d}={da[d].values[i].item() if d in da.coords else i}" for d, i in zip(da.dims, idx)]
    return ", ".join(dims + [f"{c}={da[c].item()}" for c in da.coords if da[c].ndim == 0])


def _value(x) -> str:
    return "NaN" if np.isnan(x) else ("inf" if x > 0 else "-inf") if np.isinf(x) else repr(float(x))


def _refuse_nonfinite(ds, what: str, var: str, da, rerun: str, bad=None) -> None:
    """NonFiniteError naming the result, the variable and the first index of `da` that is
    non-finite (or flagged in `bad`)."""
    bad = np.argwhere(~np.isfinite(da.values) if bad is None else bad)
    if len(bad):
        raise NonFiniteError(
            f"{_name(ds, what)}: {var}[{_cell(da, bad[0])}] is {_value(da.values[tuple(bad[0])])} ({len(bad)} of {da.size} values "
            f"non-finite), where effective depth needs a number: it was computed from NaN/inf activations; {rerun}")


def depth_from_results(contrib, lens) -> dict:
    """Effective depth from a "contributions" and a "lens" result (xarray Datasets).

    Every number the rules read must be finite: a NaN or inf in the contributions' mean
    cosines, or in the lens curves at a boundary the lens measured, is refused naming the
    result, the variable and the index (a model with a NaN weight, never "no crossing"). NaN
    at a boundary the lens did not measure (a store without it) is refused as missing."""
    Lc, Ll = int(contrib.sizes["layer"]), int(lens.sizes["boundary"]) - 1
    if Lc != Ll:
        raise InputError(f"the contributions result has {Lc} layers but the lens result has {Ll}: give results of the same model")
    cm = contrib["cos"].sel(agg="mean")
    _refuse_nonfinite(contrib, "contributions", "cos", cm.transpose("part", "layer"),
                      "run `align contrib` again on a model or store without NaN")
    measured = lens.attrs.get("boundaries_measured")
    rerun = "run `align lens` again on a model or store without NaN"
    for var in ("kl", "overlap"):
        curve = lens[var].sel(weighting="token").isel(boundary=slice(0, Ll))
        v, b = curve.values, curve["boundary"].values
        if measured is None:  # a result from before lens results listed what they measured
            if np.isinf(v).any():
                _refuse_nonfinite(lens, "lens", var, curve, rerun, bad=np.isinf(v))
            if np.isnan(v).any():
                raise InputError(f"{_name(lens, 'lens')}: {var} is NaN at boundaries {b[np.isnan(v)].tolist()}: the lens "
                                 f"either did not measure them or computed NaN there; effective depth reads boundaries "
                                 f"0..{Ll - 1}: run `align lens` again on every boundary")
            continue
        # NaN means "not measured" only where the result says the boundary was not measured.
        missing = np.isnan(v) & ~np.isin(b, measured)
        _refuse_nonfinite(lens, "lens", var, curve, rerun, bad=~np.isfinite(v) & ~missing)
        if missing.any():
            raise InputError(f"{_name(lens, 'lens')} did not measure boundaries {b[missing].tolist()} ({var} is NaN there), "
                             f"and effective depth reads boundaries 0..{Ll - 1}: run `align lens` on every boundary")
    kl = lens["kl"].sel(weighting="token").values
    ov = lens["overlap"].sel(weighting="token").values
    return effective_depth(cm.sel(part="attn").values, cm.sel(part="mlp").values, cm.sel(part="layer").values, kl, ov)


def to_dataset(res: dict, attrs: dict):
    """The "depth" result Dataset: dim rule."""
    import xarray as xr

    ds = xr.Dataset(
        {"effective_depth": (("rule",), res["effective_depth"]), "ratio": (("rule",), res["ratio"])},
        coords={"rule": list(RULES)},
    )
    ds.attrs = {**attrs, "reasons": res["reasons"], "n_layers": res["n_layers"]}
    return ds
