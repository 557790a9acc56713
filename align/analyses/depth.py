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

from align.errors import InputError

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


def depth_from_results(contrib, lens) -> dict:
    """Effective depth from a "contributions" and a "lens" result (xarray Datasets)."""
    Lc, Ll = int(contrib.sizes["layer"]), int(lens.sizes["boundary"]) - 1
    if Lc != Ll:
        raise InputError(f"the contributions result has {Lc} layers but the lens result has {Ll}: give results of the same model")
    cm = contrib["cos"].sel(agg="mean")
    kl = lens["kl"].sel(weighting="token").values
    ov = lens["overlap"].sel(weighting="token").values
    if np.isnan(kl[:Ll]).any() or np.isnan(ov[:Ll]).any():
        raise InputError("the lens result lacks some boundaries 0..L-1 (NaN): run `align lens` on every boundary")
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
