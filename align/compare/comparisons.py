"""Loaded results → a `Comparison` of their kind (depth, lens, alignment): each result's
numbers with the intervals it holds, and the paired differences of results on the same
prompts (both resampled with the same indices, `align.stats.bootstrap`; for depth,
`depth.resample_indices` from rng = numpy.random.default_rng(seed))."""

from __future__ import annotations

import os

import numpy as np

from align import store as st
from align.analyses import depth, lens
from align.compare import checks, measures
from align.compare.series import Comparison, Series
from align.errors import InputError
from align.fitting.results import uncertainty
from align.names import labelled
from align.stats import bootstrap
from align.store.outputs import KINDS as NAMES

KINDS = ("depth", "lens", "alignment")
WEIGHTINGS = lens.WEIGHTINGS
ALIGNMENT_STATS = {
    "Spearman": "spearman",
    "mean depth gap": "mean_depth_gap",
    "soft-depth spread": "soft_depth_spread",
    "slope": "slope",
}


def _label(path: str) -> str:
    base = os.path.basename(str(path).rstrip("/\\"))
    root, ext = os.path.splitext(base)
    return root if ext == ".zarr" else base


def load(paths) -> tuple[str, list]:
    """(kind, [(label, path, Dataset)]) of result paths that must all be of one kind among
    KINDS; anything else is refused in one line naming the path."""
    paths = [str(p) for p in paths]
    if len(paths) < 1:
        raise InputError("give at least one RESULT (depth, lens or alignment) to compare")
    items, kind = [], None
    for p in paths:
        found = st.read_attrs(p)["align"]["schema"]
        if found not in KINDS:
            raise InputError(
                f"{p} is {NAMES.get(found, found + ' store')}: align compare reads depth, lens and alignment "
                f"results"
            )
        if kind is not None and found != kind:
            raise InputError(
                f"{p} is a {found} result but {paths[0]} is a {kind} result: compare results of one kind"
            )
        kind = found
        items.append([_label(p), p, st.open_result(p, found)])
    labels = [it[0] for it in items]
    if len(set(labels)) < len(labels):
        for it in items:
            it[0] = it[1]
    return kind, [tuple(it) for it in items]


def _scalar(v) -> np.ndarray:
    return np.asarray(v, np.float64)


def _pairs(items):
    """(i, j) for every two results, i < j, in the order given."""
    return [(i, j) for i in range(len(items)) for j in range(i + 1, len(items))]


# -- depth ---------------------------------------------------------------------------------


def _depth_prompts(ds) -> dict | None:
    """The per-prompt sums a depth result holds (as `depth.per_prompt_sums` gives them)."""
    need = ("cos_sum", "token_count", "kl_sum", "overlap_sum", "lens_token_count")
    if any(v not in ds for v in need):
        return None
    hc, hl = ds.attrs.get("prompts_hash"), ds.attrs.get("lens_prompts_hash")
    return {
        "cos_sum": ds["cos_sum"].transpose("prompt", "part", "layer").values.astype(np.float64),
        "token_count": ds["token_count"].values,
        "kl_sum": ds["kl_sum"].values.astype(np.float64),
        "overlap_sum": ds["overlap_sum"].values.astype(np.float64),
        "lens_token_count": ds["lens_token_count"].values,
        "same_prompts": bool(hc and hc == hl),
        "prompts_hash": hc,
        "lens_prompts_hash": hl,
    }


def _pair_refusal(a, b, keys) -> str | None:
    """Why results a and b (label, path, ds) have no paired difference, or None."""
    for key in keys:
        ha, hb = a[2].attrs.get(key), b[2].attrs.get(key)
        if not ha or not hb:
            missing = a if not ha else b
            return f"no paired difference of {b[0]} and {a[0]}: {missing[1]} records no prompt identity ({key})"
        if ha != hb:
            return f"no paired difference of {b[0]} and {a[0]}: they ran on different prompts ({key} differs)"
    return None


def compare_depth(items, resampling: bootstrap.Resampling) -> Comparison:
    """Effective depth per rule (layers and (ED + 1) / L) of each depth result, with
    intervals, and the paired differences of results on the same prompts."""
    rules = list(depth.RULES)
    cols = rules + [f"{r} ratio" for r in rules]
    cmp = Comparison("depth", ["result", "model", "layers", "prompts"], cols)
    for label, path, ds in items:
        checks.check_depth(path, ds)
        L = int(ds.attrs.get("n_layers", ds.sizes.get("layer", 0)))
        ed, ratio = _scalar(ds["effective_depth"].values), _scalar(ds["ratio"].values)
        lo, hi, notes = checks.depth_intervals(label, ds, rules)
        n = (ds.attrs.get("bootstrap") or {}).get("n")
        prompts = (
            ""
            if not isinstance(n, dict)
            else (
                str(n["contributions"])
                if n["contributions"] == n["lens"]
                else f"{n['contributions']}/{n['lens']}"
            )
        )
        s = Series(
            label,
            {
                "result": label,
                "model": labelled(ds.attrs),
                "layers": L,
                "prompts": prompts,
            },
            {},
            {},
            {},
        )
        for k, r in enumerate(rules):
            s.value[r], s.low[r], s.high[r] = ed[k], lo[k], hi[k]
            s.value[f"{r} ratio"], s.low[f"{r} ratio"], s.high[f"{r} ratio"] = (
                ratio[k],
                (lo[k] + 1) / L,
                (hi[k] + 1) / L,
            )
        cmp.series.append(s)
        cmp.notes += notes
    for i, j in _pairs(items):
        a, b = items[i], items[j]
        why = _pair_refusal(a, b, ("prompts_hash", "lens_prompts_hash"))
        pa, pb = _depth_prompts(a[2]), _depth_prompts(b[2])
        if why is None and (pa is None or pb is None):
            why = f"no paired difference of {b[0]} and {a[0]}: {(a if pa is None else b)[1]} holds no per-prompt sums"
        if why:
            cmp.notes.append(why)
            continue
        cmp.series.append(_depth_difference(a, b, pa, pb, resampling, cmp.notes))
    return cmp


def _depth_difference(a, b, pa, pb, resampling, notes: list) -> Series:
    """b − a in ED (layers) and in (ED + 1) / L, resampling both with the same indices; a
    column whose difference is defined in too few resamples gets no interval and a note."""
    rng = np.random.default_rng(resampling.seed)
    idx_c, idx_l = depth.resample_indices(pa, rng, resampling.resamples)
    ra = depth.depth_replicates(pa, idx_c, idx_l)["effective_depth"]
    rb = depth.depth_replicates(pb, idx_c, idx_l)["effective_depth"]
    La, Lb = int(a[2].attrs["n_layers"]), int(b[2].attrs["n_layers"])
    ea, eb = _scalar(a[2]["effective_depth"].values), _scalar(b[2]["effective_depth"].values)
    s = Series(
        f"{b[0]} − {a[0]}",
        {
            "result": f"{b[0]} − {a[0]} (paired)",
            "model": "",
            "layers": "",
            "prompts": str(len(pa["token_count"])),
        },
        {},
        {},
        {},
        difference=True,
    )
    for k, r in enumerate(depth.RULES):
        for col, da, db, ya, yb in (
            (r, ea[k], eb[k], ra[:, k], rb[:, k]),
            (
                f"{r} ratio",
                (ea[k] + 1) / La,
                (eb[k] + 1) / Lb,
                (ra[:, k] + 1) / La,
                (rb[:, k] + 1) / Lb,
            ),
        ):
            lo, hi = bootstrap.percentile_interval(yb - ya)
            s.value[col], s.low[col], s.high[col] = db - da, float(lo), float(hi)
            why = bootstrap.withheld(yb - ya, col) if np.isfinite(db - da) and col == r else None
            if why:
                notes.append(f"{s.label}: {why}")
    return s


# -- lens ----------------------------------------------------------------------------------


def _lens_prompts(ds) -> dict | None:
    if any(v not in ds for v in ("kl_sum", "overlap_sum", "token_count")):
        return None
    return {k: ds[k].values for k in ("kl_sum", "overlap_sum", "token_count")}


def compare_lens(items, weighting: str, resampling: bootstrap.Resampling) -> Comparison:
    """KL and top-5 overlap at each boundary (`weighting`: token or prompt) of each lens
    result with intervals, and the paired differences of results on the same prompts with
    the same number of boundaries."""
    if weighting not in WEIGHTINGS:
        raise InputError(f"`weighting` {weighting!r} is not one of {', '.join(WEIGHTINGS)}")
    cmp = Comparison(
        "lens", ["result", "model", "boundary", "b/L"], ["KL", "overlap"], missing="not measured"
    )
    for label, path, ds in items:
        checks.check_lens(path, ds)
        b = ds["boundary"].values
        L = int(ds.attrs.get("n_layers", len(b) - 1))
        s = Series(
            label,
            {"result": label, "model": labelled(ds.attrs)},
            {},
            {},
            {},
            boundary=b,
            relative=b / L,
        )
        few = checks.withheld_stored(ds)
        for col, var in (("KL", "kl"), ("overlap", "overlap")):
            s.value[col] = _scalar(ds[var].sel(weighting=weighting).values)
            has = f"{var}_low" in ds and not few
            s.low[col] = (
                _scalar(ds[f"{var}_low"].sel(weighting=weighting).values)
                if has
                else np.full(len(b), np.nan)
            )
            s.high[col] = (
                _scalar(ds[f"{var}_high"].sel(weighting=weighting).values)
                if has
                else np.full(len(b), np.nan)
            )
        if "kl_low" not in ds:
            cmp.notes.append(
                f"{label}: no intervals ({ds.attrs.get('intervals', 'the result holds no bootstrap')})"
            )
        elif few:
            cmp.notes.append(f"{label}: {few}")
        cmp.series.append(s)
    for i, j in _pairs(items):
        a, b = items[i], items[j]
        why = _pair_refusal(a, b, ("prompts_hash",))
        pa, pb = _lens_prompts(a[2]), _lens_prompts(b[2])
        if why is None and (pa is None or pb is None):
            why = f"no paired difference of {b[0]} and {a[0]}: {(a if pa is None else b)[1]} holds no per-prompt sums"
        if why is None and a[2].sizes["boundary"] != b[2].sizes["boundary"]:
            why = (
                f"no paired difference of {b[0]} and {a[0]}: their curves have {a[2].sizes['boundary']} and "
                f"{b[2].sizes['boundary']} boundaries (the table and figure put them side by side by b/L)"
            )
        if why:
            cmp.notes.append(why)
            continue
        idx = bootstrap.indices(len(pa["token_count"]), resampling)
        ra, rb = lens.curve_replicates(pa, idx), lens.curve_replicates(pb, idx)
        w = WEIGHTINGS.index(weighting)
        sa, sb = cmp.series[i], cmp.series[j]
        s = Series(
            f"{b[0]} − {a[0]}",
            {"result": f"{b[0]} − {a[0]} (paired)", "model": ""},
            {},
            {},
            {},
            difference=True,
            boundary=sa.boundary,
            relative=sa.relative,
        )
        for col, var in (("KL", "kl"), ("overlap", "overlap")):
            s.value[col] = sb.value[col] - sa.value[col]
            s.low[col], s.high[col] = bootstrap.percentile_interval(rb[var][:, w] - ra[var][:, w])
        cmp.series.append(s)
    return cmp


# -- alignment -----------------------------------------------------------------------------


def _stat_interval(ds, key: str) -> tuple[float, float]:
    """The interval of summary statistic `key` where the result holds one (summary keys
    `<key>_low`/`<key>_high` or `<key>_interval`, or variables `<key>_low`/`<key>_high`),
    else NaN."""
    s = ds.attrs.get("summary") or {}
    if f"{key}_low" in s and f"{key}_high" in s:
        return _float(s[f"{key}_low"]), _float(s[f"{key}_high"])
    if isinstance(s.get(f"{key}_interval"), (list, tuple)) and len(s[f"{key}_interval"]) == 2:
        return _float(s[f"{key}_interval"][0]), _float(s[f"{key}_interval"][1])
    if f"{key}_low" in ds and f"{key}_high" in ds and ds[f"{key}_low"].ndim == 0:
        return _float(ds[f"{key}_low"].values), _float(ds[f"{key}_high"].values)
    return np.nan, np.nan


def _float(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return np.nan


def compare_alignment(items, resampling: bootstrap.Resampling | None = None) -> Comparison:
    """The summary statistics (docs/methods.md, The fit) of each alignment result: argmin path,
    Spearman, mean depth gap, soft-depth spread, slope, with intervals where the result holds
    them; and for two results on the same held-out documents (the same `heldout_doc`, both
    with per-document sums), the paired difference of each statistic, both matrices'
    relative_error resampled with the same document indices (`_alignment_difference`)."""
    cmp = Comparison(
        "alignment",
        ["result", "source", "target", "L_S", "L_T", "argmin path"],
        list(ALIGNMENT_STATS),
    )
    without = []
    for label, path, ds in items:
        checks.check_alignment(path, ds)
        summ = ds.attrs.get("summary") or {}
        s = Series(
            label,
            {
                "result": label,
                "source": labelled(ds.attrs, "source"),
                "target": labelled(ds.attrs, "target"),
                "L_S": ds.attrs.get("n_layers_source", ""),
                "L_T": ds.attrs.get("n_layers_target", ""),
                "argmin path": " ".join(str(j) for j in summ.get("argmin_path", [])),
            },
            {},
            {},
            {},
        )
        s.path = {
            "source_boundaries": summ.get("source_boundaries", []),
            "argmin_path": summ.get("argmin_path", []),
            "soft_depth": summ.get("soft_depth", []),
            "n_source": ds.attrs.get("n_layers_source"),
            "n_target": ds.attrs.get("n_layers_target"),
        }
        few = checks.withheld_stored(ds)
        for col, key in ALIGNMENT_STATS.items():
            s.value[col] = _float(summ.get(key))
            s.low[col], s.high[col] = _stat_interval(ds, key) if not few else (np.nan, np.nan)
        if few:
            cmp.notes.append(f"{label}: {few}")
        elif all(np.isnan(s.low[c]) for c in ALIGNMENT_STATS):
            without.append(label)
        if summ.get("spearman") is None and summ.get("spearman_note"):
            cmp.notes.append(f"{label}: Spearman {summ['spearman_note']}")
        cmp.series.append(s)
    if without:
        cmp.notes.append(
            f"no intervals for {', '.join(without)}: the alignment result holds no bootstrap of its summary"
        )
    for i, j in _pairs(items):
        a, b = items[i], items[j]
        why = _alignment_pair_refusal(a, b)
        if why:
            cmp.notes.append(why)
            continue
        cmp.series.append(
            _alignment_difference(a, b, resampling or bootstrap.Resampling(), cmp.notes)
        )
    return cmp


def _alignment_pair_refusal(a, b) -> str | None:
    """Why alignment results a and b (label, path, ds) have no paired difference, or None."""
    for x in (a, b):
        if "doc_ratio_sum" not in x[2] or "doc_n_tokens" not in x[2]:
            return f"no paired difference of {b[0]} and {a[0]}: {x[1]} holds no per-document sums (fit with `bootstrap`)"
    if a[2]["heldout_doc"].values.tolist() != b[2]["heldout_doc"].values.tolist():
        return f"no paired difference of {b[0]} and {a[0]}: they were scored on different held-out documents"
    return None


def _alignment_statistics(ds, idx: np.ndarray) -> dict:
    """Per resample (documents idx (B, K)): mean depth gap, slope, Spearman and soft-depth
    spread of the resampled relative_error matrix (`fitting.results.uncertainty`)."""
    K = idx.shape[1]
    w = bootstrap.multiplicity(idx, K)
    ratio = (
        ds["doc_ratio_sum"]
        .transpose("heldout_doc", "source_boundary", "target_boundary")
        .values.astype(np.float64)
    )
    n = ds["doc_n_tokens"].values.astype(np.float64)
    err = (w @ ratio.reshape(K, -1)).reshape((len(idx),) + ratio.shape[1:]) / (w @ n)[:, None, None]
    src, tgt = ds["source_boundary"].values, ds["target_boundary"].values
    rows, cols = np.flatnonzero(src >= 1), np.flatnonzero(tgt >= 1)
    Ls, Lt = int(ds.attrs["n_layers_source"]), int(ds.attrs["n_layers_target"])
    sdepth = src[rows] / Ls
    sub = err[:, rows][:, :, cols]
    jstar = tgt[cols][np.argmin(sub, axis=2)]
    return uncertainty.resampled_statistics(jstar, sub, sdepth, tgt[cols] / Lt, Lt)


def _alignment_difference(a, b, resampling: bootstrap.Resampling, notes: list) -> Series:
    """b − a of each summary statistic, both resampled with the same held-out documents; a
    statistic whose difference is defined in too few resamples gets no interval and a note."""
    K = a[2].sizes["heldout_doc"]
    idx = bootstrap.indices(K, resampling)
    ra, rb = _alignment_statistics(a[2], idx), _alignment_statistics(b[2], idx)
    sa, sb = a[2].attrs.get("summary") or {}, b[2].attrs.get("summary") or {}
    s = Series(
        f"{b[0]} − {a[0]}",
        {
            "result": f"{b[0]} − {a[0]} (paired)",
            "source": "",
            "target": "",
            "L_S": "",
            "L_T": "",
            "argmin path": "",
        },
        {},
        {},
        {},
        difference=True,
    )
    for col, key in ALIGNMENT_STATS.items():
        lo, hi = bootstrap.percentile_interval(rb[key] - ra[key])
        s.value[col] = _float(sb.get(key)) - _float(sa.get(key))
        s.low[col], s.high[col] = float(lo), float(hi)
        why = bootstrap.withheld(rb[key] - ra[key], col) if np.isfinite(s.value[col]) else None
        if why:
            notes.append(f"{s.label}: {why}")
    return s


# -- the command ---------------------------------------------------------------------------


def build(
    kind: str,
    items,
    weighting: str = "token",
    resampling: bootstrap.Resampling | None = None,
    measure: str | None = None,
) -> Comparison:
    """The Comparison of loaded results (`load`); alignment results on `measure` (a measure
    of `align fit --measures` they hold, `align.compare.measures`; None or "ridge": the
    held-out error matrix)."""
    resampling = resampling or bootstrap.Resampling()
    if measure is not None:
        measures.check_measure(measure, kind, items)
        if measure != "ridge":
            return measures.compare_measure(items, measure)
    if kind == "depth":
        return compare_depth(items, resampling)
    if kind == "lens":
        return compare_lens(items, weighting, resampling)
    return compare_alignment(items, resampling)
