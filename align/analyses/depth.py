"""Effective depth (docs/methods.md, Effective depth, [P2]) from the contribution and lens curves.

With L layers and ratio = (ED + 1) / L:

- cosine:  c_l = mean of cos(a_l, h_l), cos(m_l, h_l + a_l), cos(h_{l+1} − h_l, h_l)
           (token means); ED = the LAST l in 0..L−2 with c_l < 0 ≤ c_{l+1}.
- kl:      ED = the FIRST l in 0..L−2 with KL_l < 0.5 · max_{b<L} KL_b.
- overlap: ED = the FIRST l in 0..L−2 with overlap_l > 0.3.

The lens rules read boundaries 0..L−1 of the token-weighted averages. When a rule finds no
such l, ED is NaN and the reason says why.

Each rule's threshold (0 for the cosine, 0.5 of the maximum for the KL, 0.3 for the overlap:
[P2]'s) is also varied over THRESHOLDS, and the result keeps ED at each (the sensitivity curve,
`sensitivity_<rule>` over dim `threshold_<rule>`) beside the default.

Intervals: a prompt bootstrap (scheme in `align.stats.bootstrap`) over the per-prompt sums
the contributions and lens results keep. With rng = numpy.random.default_rng(seed):
idx_c = rng.integers(0, n_c, size=(resamples, n_c)) over the contributions' prompts, then
idx_l = idx_c when the lens result ran on the same prompts (the same `prompts_hash`), else
idx_l = rng.integers(0, n_l, size=(resamples, n_l)). Resample b recomputes the cosine curve
(token means of the three cosines over prompts idx_c[b]) and the token-weighted KL and overlap
curves (prompts idx_l[b]), then every rule at every threshold. `effective_depth_low`,
`effective_depth_high` are the 2.5 and 97.5 percentiles over the resamples where the rule is
defined; `defined_fraction` says in how many it is. The per-prompt sums are copied into the
depth result, so `align compare` can resample two depth results jointly.
"""

from __future__ import annotations

import numpy as np

from align.errors import InputError, NonFiniteError
from align.stats import bootstrap

RULES = ("cosine", "kl", "overlap")
KL_FRACTION = 0.5
OVERLAP_THRESHOLD = 0.3
DEFAULT_THRESHOLDS = {"cosine": 0.0, "kl": KL_FRACTION, "overlap": OVERLAP_THRESHOLD}
# The sensitivity curves: the cosine's crossing level, the KL's fraction of its maximum, the
# overlap's level; each grid holds the default.
THRESHOLDS = {
    "cosine": np.round(np.arange(-0.2, 0.2001, 0.05), 2),
    "kl": np.round(np.arange(0.1, 0.9001, 0.1), 2),
    "overlap": np.round(np.arange(0.1, 0.9001, 0.1), 2),
}


def _last(hits: np.ndarray) -> np.ndarray:
    """Index of the last True along the last axis, NaN where none."""
    k = hits.shape[-1] - 1 - np.argmax(hits[..., ::-1], -1)
    return np.where(hits.any(-1), k, np.nan)


def _first(hits: np.ndarray) -> np.ndarray:
    return np.where(hits.any(-1), np.argmax(hits, -1), np.nan)


def rule_depths(rule: str, curve, threshold: float | None = None) -> np.ndarray:
    """ED of `rule` on curves (..., L) (mean cosines per layer, or token-weighted KL or
    overlap at boundaries 0..L−1), at `threshold` (default: [P2]'s): (...,) layers, NaN where
    the rule finds no l in 0..L−2.

    cosine: the last l with c_l < τ ≤ c_{l+1}; kl: the first l with KL_l < τ · max_b KL_b;
    overlap: the first l with overlap_l > τ."""
    c = np.asarray(curve, np.float64)
    t = DEFAULT_THRESHOLDS[rule] if threshold is None else float(threshold)
    if rule == "cosine":
        return _last((c[..., :-1] < t) & (c[..., 1:] >= t))
    if rule == "kl":
        finite = np.isfinite(c).any(-1, keepdims=True)
        top = np.nanmax(np.where(finite, c, 0.0), -1, keepdims=True)
        return _first((c[..., :-1] < t * np.where(finite, top, np.nan)))
    if rule == "overlap":
        return _first(c[..., :-1] > t)
    raise InputError(f"rule {rule!r} is not one of {', '.join(RULES)}")


def cosine_depth(c) -> tuple[float, str]:
    """(ED, reason) of the cosine rule on c: (L,) mean cosines per layer."""
    c = np.asarray(c, np.float64)
    ed = float(rule_depths("cosine", c))
    if np.isfinite(ed):
        return ed, ""
    return (
        np.nan,
        f"the mean cosine never crosses from negative to non-negative between layers 0 and {len(c) - 1}",
    )


def kl_depth(kl) -> tuple[float, str]:
    """(ED, reason) of the KL rule on kl: (L,) token-weighted KL at boundaries 0..L−1."""
    kl = np.asarray(kl, np.float64)
    ed = float(rule_depths("kl", kl))
    if np.isfinite(ed):
        return ed, ""
    top = np.nanmax(kl) if np.isfinite(kl).any() else np.nan
    return (
        np.nan,
        f"no boundary in 0..{len(kl) - 2} has KL below {KL_FRACTION} x its maximum ({top:.4g})",
    )


def overlap_depth(overlap) -> tuple[float, str]:
    """(ED, reason) of the overlap rule on overlap: (L,) token-weighted top-5 overlap at 0..L−1."""
    ov = np.asarray(overlap, np.float64)
    ed = float(rule_depths("overlap", ov))
    if np.isfinite(ed):
        return ed, ""
    return np.nan, f"no boundary in 0..{len(ov) - 2} has top-5 overlap above {OVERLAP_THRESHOLD}"


def sensitivity(curves: dict) -> dict:
    """ED of each rule at each of its THRESHOLDS: {rule: (..., n_thresholds)} from curves
    {rule: (..., L)} (the cosine's mean cosines, the KL and overlap at boundaries 0..L−1)."""
    return {r: np.stack([rule_depths(r, curves[r], t) for t in THRESHOLDS[r]], -1) for r in RULES}


def effective_depth(cos_attn, cos_mlp, cos_layer, kl, overlap) -> dict:
    """Effective depth by the three rules.

    Parameters
    ----------
    cos_attn, cos_mlp, cos_layer : array of shape (n_layers,)
        Token-mean cosines per layer.
    kl, overlap : array of shape (n_boundaries,) or (n_layers,)
        Token-weighted lens curves over boundaries (only 0..L−1 are read).

    Returns
    -------
    dict
        {"effective_depth": (3,), "ratio": (3,), "reasons": {rule: str}, "n_layers": L,
        "sensitivity": {rule: (n_thresholds,)}} in RULES order; NaN where undefined.

    Raises
    ------
    InputError
        Lens curves over other than L or L + 1 boundaries.
    """
    cos = np.stack([np.asarray(x, np.float64) for x in (cos_attn, cos_mlp, cos_layer)])
    L = cos.shape[1]
    kl, overlap = np.asarray(kl, np.float64), np.asarray(overlap, np.float64)
    if len(kl) not in (L, L + 1) or len(overlap) not in (L, L + 1):
        raise InputError(
            f"effective depth needs lens curves over {L + 1} boundaries for {L} layers: got {len(kl)} and {len(overlap)}"
        )
    found = {
        "cosine": cosine_depth(cos.mean(0)),
        "kl": kl_depth(kl[:L]),
        "overlap": overlap_depth(overlap[:L]),
    }
    ed = np.array([found[r][0] for r in RULES])
    curves = {"cosine": cos.mean(0), "kl": kl[:L], "overlap": overlap[:L]}
    return {
        "effective_depth": ed,
        "ratio": (ed + 1) / L,
        "reasons": {r: found[r][1] for r in RULES},
        "n_layers": L,
        "sensitivity": sensitivity(curves),
    }


def depth_replicates(per_prompt: dict, idx_c: np.ndarray, idx_l: np.ndarray) -> dict:
    """Resampled effective depths: {"effective_depth": (resamples, 3 rules), "sensitivity":
    {rule: (resamples, n_thresholds)}} from per-prompt sums {"cos_sum": (n_c, 3 parts, L),
    "token_count": (n_c,), "kl_sum", "overlap_sum": (n_l, L+1), "lens_token_count": (n_l,)}
    and resample indices idx_c (resamples, n_c), idx_l (resamples, n_l)."""
    cos = bootstrap.resampled_token_means(
        per_prompt["cos_sum"], per_prompt["token_count"], idx_c
    ).mean(1)
    L = cos.shape[-1]
    curves = {"cosine": cos}
    for name in ("kl", "overlap"):
        curves[name] = bootstrap.resampled_token_means(
            per_prompt[f"{name}_sum"][:, :L], per_prompt["lens_token_count"], idx_l
        )
    ed = np.stack([rule_depths(r, curves[r]) for r in RULES], -1)
    return {"effective_depth": ed, "sensitivity": sensitivity(curves)}


def resample_indices(
    per_prompt: dict, rng: np.random.Generator, resamples: int
) -> tuple[np.ndarray, np.ndarray]:
    """(idx_c, idx_l) as the module docstring draws them: idx_l is idx_c when the lens ran on
    the contributions' prompts (per_prompt["same_prompts"])."""
    idx_c = bootstrap.draw(rng, len(per_prompt["token_count"]), resamples)
    if per_prompt["same_prompts"]:
        return idx_c, idx_c
    return idx_c, bootstrap.draw(rng, len(per_prompt["lens_token_count"]), resamples)


def per_prompt_sums(contrib, lens) -> dict | None:
    """The per-prompt sums a depth bootstrap reads from a contributions and a lens result, or
    None when either lacks them (results made before they were stored)."""
    if (
        "cos_sum" not in contrib
        or "token_count" not in contrib
        or "kl_sum" not in lens
        or "token_count" not in lens
    ):
        return None
    hc, hl = contrib.attrs.get("prompts_hash"), lens.attrs.get("prompts_hash")
    return {
        "cos_sum": contrib["cos_sum"]
        .transpose("prompt", "part", "layer")
        .values.astype(np.float64),
        "token_count": contrib["token_count"].values.astype(np.int64),
        "kl_sum": lens["kl_sum"].transpose("prompt", "boundary").values.astype(np.float64),
        "overlap_sum": lens["overlap_sum"]
        .transpose("prompt", "boundary")
        .values.astype(np.float64),
        "lens_token_count": lens["token_count"].values.astype(np.int64),
        "same_prompts": bool(hc and hc == hl),
        "prompts_hash": hc,
        "lens_prompts_hash": hl,
    }


def intervals(res: dict, per_prompt: dict, resampling: bootstrap.Resampling) -> dict:
    """The depth bootstrap (module docstring): low, high and defined fraction per rule, and
    low, high of each sensitivity curve, added to a copy of `res`."""
    rng = np.random.default_rng(resampling.seed)
    idx_c, idx_l = resample_indices(per_prompt, rng, resampling.resamples)
    reps = depth_replicates(per_prompt, idx_c, idx_l)
    low, high = bootstrap.percentile_interval(reps["effective_depth"])
    n = {
        "contributions": len(per_prompt["token_count"]),
        "lens": len(per_prompt["lens_token_count"]),
    }
    out = {
        **res,
        "effective_depth_low": low,
        "effective_depth_high": high,
        "defined_fraction": bootstrap.defined_fraction(reps["effective_depth"]),
        "sensitivity_low": {},
        "sensitivity_high": {},
        "per_prompt": per_prompt,
        "bootstrap": bootstrap.record(n, resampling, joint=per_prompt["same_prompts"]),
    }
    for r in RULES:
        out["sensitivity_low"][r], out["sensitivity_high"][r] = bootstrap.percentile_interval(
            reps["sensitivity"][r]
        )
    return out


def _name(ds, what: str) -> str:
    return str(ds.encoding.get("source") or f"the {what} result")


def _cell(da, idx) -> str:
    """ "part=mlp, layer=1, agg=mean": the index along each dim, then the selected scalars."""
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
            f"non-finite), where effective depth needs a number: it was computed from NaN/inf activations; {rerun}"
        )


def depth_from_results(contrib, lens, resampling: bootstrap.Resampling = bootstrap.DEFAULT) -> dict:
    """Effective depth from a "contributions" and a "lens" result.

    Also its sensitivity to each rule's threshold and, when both results hold per-prompt sums,
    the prompt-bootstrap intervals drawn by `resampling`.

    Parameters
    ----------
    contrib : xarray.Dataset
        A "contributions" result.
    lens : xarray.Dataset
        A "lens" result of the same model.
    resampling : Resampling, optional
        How the intervals are drawn (default: 1,000 resamples from seed 0).

    Returns
    -------
    dict
        As `effective_depth`, with the intervals where both results hold per-prompt sums.

    Raises
    ------
    NonFiniteError
        Every number the rules read must be finite: a NaN or inf in the contributions' mean
        cosines, or in the lens curves at a boundary the lens measured, is refused naming the
        result, the variable and the index (a model with a NaN weight, never "no crossing").
    InputError
        NaN at a boundary the lens did not measure (a store without it) is refused as missing;
        results of two models with different layer counts are refused.
    """
    Lc, Ll = int(contrib.sizes["layer"]), int(lens.sizes["boundary"]) - 1
    if Lc != Ll:
        raise InputError(
            f"the contributions result has {Lc} layers but the lens result has {Ll}: give results of the same model"
        )
    cm = contrib["cos"].sel(agg="mean")
    _refuse_nonfinite(
        contrib,
        "contributions",
        "cos",
        cm.transpose("part", "layer"),
        "run `align contrib` again on a model or store without NaN",
    )
    measured = lens.attrs.get("boundaries_measured")
    rerun = "run `align lens` again on a model or store without NaN"
    for var in ("kl", "overlap"):
        curve = lens[var].sel(weighting="token").isel(boundary=slice(0, Ll))
        v, b = curve.values, curve["boundary"].values
        if measured is None:  # a result from before lens results listed what they measured
            if np.isinf(v).any():
                _refuse_nonfinite(lens, "lens", var, curve, rerun, bad=np.isinf(v))
            if np.isnan(v).any():
                raise InputError(
                    f"{_name(lens, 'lens')}: {var} is NaN at boundaries {b[np.isnan(v)].tolist()}: the lens "
                    f"either did not measure them or computed NaN there; effective depth reads boundaries "
                    f"0..{Ll - 1}: run `align lens` again on every boundary"
                )
            continue
        # NaN means "not measured" only where the result says the boundary was not measured.
        missing = np.isnan(v) & ~np.isin(b, measured)
        _refuse_nonfinite(lens, "lens", var, curve, rerun, bad=~np.isfinite(v) & ~missing)
        if missing.any():
            raise InputError(
                f"{_name(lens, 'lens')} did not measure boundaries {b[missing].tolist()} ({var} is NaN there), "
                f"and effective depth reads boundaries 0..{Ll - 1}: run `align lens` on every boundary"
            )
    kl = lens["kl"].sel(weighting="token").values
    ov = lens["overlap"].sel(weighting="token").values
    res = effective_depth(
        cm.sel(part="attn").values, cm.sel(part="mlp").values, cm.sel(part="layer").values, kl, ov
    )
    pp = per_prompt_sums(contrib, lens)
    if pp is None:
        return res
    return intervals(res, pp, resampling)


NO_INTERVALS = (
    "none: the contributions or lens result holds no per-prompt sums (made before they were stored): "
    "rerun `align contrib` and `align lens`"
)


def to_dataset(res: dict, attrs: dict):
    """The "depth" result Dataset: effective_depth, ratio (rule); sensitivity_<rule>
    (threshold_<rule>); with intervals, their _low/_high, defined_fraction (rule), and the
    per-prompt sums the bootstrap read (dims prompt, lens_prompt)."""
    import xarray as xr

    data = {
        "effective_depth": (("rule",), res["effective_depth"]),
        "ratio": (("rule",), res["ratio"]),
    }
    coords = {"rule": list(RULES)}
    L = res["n_layers"]
    boot = "effective_depth_low" in res
    for r in RULES:
        coords[f"threshold_{r}"] = THRESHOLDS[r]
        data[f"sensitivity_{r}"] = ((f"threshold_{r}",), res["sensitivity"][r])
        if boot:
            data[f"sensitivity_{r}_low"] = ((f"threshold_{r}",), res["sensitivity_low"][r])
            data[f"sensitivity_{r}_high"] = ((f"threshold_{r}",), res["sensitivity_high"][r])
    extra = {"intervals": NO_INTERVALS}
    if boot:
        pp = res["per_prompt"]
        data.update(
            {
                "effective_depth_low": (("rule",), res["effective_depth_low"]),
                "effective_depth_high": (("rule",), res["effective_depth_high"]),
                "ratio_low": (("rule",), (res["effective_depth_low"] + 1) / L),
                "ratio_high": (("rule",), (res["effective_depth_high"] + 1) / L),
                "defined_fraction": (("rule",), res["defined_fraction"]),
                "cos_sum": (("prompt", "part", "layer"), pp["cos_sum"]),
                "token_count": (("prompt",), pp["token_count"]),
                "kl_sum": (("lens_prompt", "boundary"), pp["kl_sum"]),
                "overlap_sum": (("lens_prompt", "boundary"), pp["overlap_sum"]),
                "lens_token_count": (("lens_prompt",), pp["lens_token_count"]),
            }
        )
        coords.update(
            {
                "part": ["attn", "mlp", "layer"],
                "layer": np.arange(L),
                "boundary": np.arange(pp["kl_sum"].shape[1]),
            }
        )
        extra = {
            "intervals": "prompt bootstrap: effective_depth_low, effective_depth_high (percentiles over the "
            "resamples where the rule is defined; defined_fraction says in how many)",
            "bootstrap": res["bootstrap"],
        }
        extra.update({k: pp[k] for k in ("prompts_hash", "lens_prompts_hash") if pp.get(k)})
    ds = xr.Dataset(data, coords=coords)
    ds.attrs = {
        **attrs,
        "reasons": res["reasons"],
        "n_layers": L,
        "thresholds": {r: float(t) for r, t in DEFAULT_THRESHOLDS.items()},
        **extra,
    }
    return ds
