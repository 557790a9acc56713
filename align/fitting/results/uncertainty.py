"""The document bootstrap of an alignment result: held-out documents resampled with
replacement, every score and summary statistic recomputed from per-document sums, without a
pass over tokens. Pure numpy.

The scheme, exactly: with K held-out documents (in the result's `heldout_doc` order),

    idx = numpy.random.default_rng(seed).integers(0, K, size=(resamples, K))

and resample b counts document d as often as idx[b] holds it (w_bd, `bootstrap.multiplicity`).
Per pair, from the per-document sums of `ridge.heldout_sums` (ratio = Σ‖e‖/max(‖y‖, ε),
e1 = Σ‖e‖, e2 = Σ‖e‖², n, y1 = Σ‖y‖, yc2 = Σ‖y − μ‖², c = Σ(y − μ) ∈ R^d_T, μ the map's
training mean of the target):

    relative_error_b = Σ_d w_bd ratio_d / Σ_d w_bd n_d
    norm_error_b     = Σ_d w_bd e1_d / Σ_d w_bd y1_d
    r2_b             = 1 − Σ_d w_bd e2_d / (Σ_d w_bd yc2_d − ‖Σ_d w_bd c_d‖² / Σ_d w_bd n_d)

which are the point formulas of docs/methods.md, The fit on the resampled documents (a document drawn
twice counts twice). A 95% interval is the 2.5 and 97.5 percentiles of the resampled values
(numpy.nanpercentile, linear); resamples where a value is undefined (no token drawn) are left
out, and a value defined in fewer than `bootstrap.MIN_RESAMPLES` (100) gets NaN, as do p_best
and the path's probability when fewer resamples define the whole matrix. The summary
(`ridge.summary`) is recomputed on every resampled relative_error matrix: p_best[i, j] = the
fraction of resamples whose argmin over target boundaries ≥ 1 of row i is j (first on ties,
as the point path); the path's probability = the fraction of resamples whose whole argmin
path equals the point estimate's.
"""

from __future__ import annotations

import numpy as np

from align.ridge.matrix import Summary, spearman
from align.stats import bootstrap
from align.stats.bootstrap import Resampling

LEVEL = 0.95
STATS = (
    "spearman",
    "mean_depth_gap",
    "soft_depth_spread",
    "slope",
)  # summary statistics given intervals


def weights(n_docs: int, resampling: Resampling) -> np.ndarray:
    """(resamples, n_docs) float64 multiplicities of the documented scheme."""
    return bootstrap.multiplicity(bootstrap.indices(n_docs, resampling), n_docs)


def dense(per_doc: dict, n_docs: int) -> dict:
    """`ridge.heldout_sums(..., docs=...)["doc"]` (documents present only) as arrays over all
    n_docs held-out documents: {"pair": {(i, j): (K, 3)}, "target": {j: (K, 3)},
    "centred": {j: (K, d_T)}} (zeros for a document without a scored token)."""
    ids = np.asarray(per_doc["ids"], dtype=np.int64)
    out = {}
    for key in ("pair", "target", "centred"):
        out[key] = {}
        for k, v in per_doc[key].items():
            full = np.zeros((n_docs,) + v.shape[1:])
            full[ids] = v
            out[key][k] = full
    return out


def centred_square(centred: np.ndarray, w: np.ndarray) -> np.ndarray:
    """‖Σ_d w_bd c_d‖² per resample: centred (K, d_T), w (B, K) -> (B,)."""
    q = w @ centred
    return np.einsum("bd,bd->b", q, q)


def resampled_scores(
    doc_pair: np.ndarray, doc_target: np.ndarray, cc: np.ndarray, w: np.ndarray
) -> dict:
    """Scores of every pair in every resample.

    doc_pair (K, S, T, 3): per document Σ ratio, Σ‖e‖, Σ‖e‖²; doc_target (K, T, 3): n, Σ‖y‖,
    Σ‖y − μ‖²; cc (B, T): ‖Σ_d w_bd c_d‖² (`centred_square`); w (B, K).
    Returns {"relative_error", "norm_error", "r2"}: (B, S, T), NaN where undefined."""
    K, S, T, _ = doc_pair.shape
    p = (w @ doc_pair.reshape(K, -1)).reshape(-1, S, T, 3)
    t = (w @ doc_target.reshape(K, -1)).reshape(-1, 1, T, 3)
    n, y1, yc2 = t[..., 0], t[..., 1], t[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        ss_tot = yc2 - cc[:, None, :] / n
        rel = np.where(n > 0, p[..., 0] / n, np.nan)
        norm = np.where(y1 > 0, p[..., 1] / y1, np.nan)
        r2 = np.where(ss_tot > 0, 1.0 - p[..., 2] / ss_tot, np.nan)
    return {"relative_error": rel, "norm_error": norm, "r2": r2}


def interval(values: np.ndarray) -> tuple:
    """The 2.5 and 97.5 percentiles over axis 0, NaN resamples left out (`bootstrap.percentile_interval`)."""
    return bootstrap.percentile_interval(values, LEVEL)


def path_statistics(jstar: np.ndarray, sdepth: np.ndarray, n_target: int) -> dict:
    """Per path (rows of jstar (B, nS), target boundaries chosen for source depths sdepth
    (nS,)): mean |j/L_T − i/L_S| and the least-squares slope of j/L_T on i/L_S (NaN with
    fewer than two source boundaries)."""
    t = np.asarray(jstar, dtype=np.float64) / n_target
    gap = np.abs(t - sdepth[None, :]).mean(axis=1)
    sc = sdepth - sdepth.mean()
    var = float(sc @ sc)
    slope = (t - t.mean(axis=1, keepdims=True)) @ sc / var if var > 0 else np.full(len(t), np.nan)
    return {"mean_depth_gap": gap, "slope": slope}


def summarise(
    err_b: np.ndarray,
    point: Summary,
    src_boundaries,
    tgt_boundaries,
    n_source: int,
    n_target: int,
    resampling: Resampling,
    err: np.ndarray,
) -> tuple[np.ndarray, dict]:
    """p_best (len(src_boundaries), len(tgt_boundaries)) and the summary's bootstrap fields.

    err_b (B, S, T): resampled relative_error; point: `ridge.summary` of the point matrix
    `err` (S, T). Fields: slope (point), `<stat>_low` / `<stat>_high` for STATS,
    argmin_path_probability, soft_depth_pbest (Σ_j p_best[i, j] j/L_T per source boundary
    ≥ 1) and its spread, and the two nulls computed from the same matrix: a path flat at
    the column of least mean error (over rows ≥ 1), and paths drawn uniformly among target
    boundaries ≥ 1 (resamples of them from the same seed, after the documents' draws):
    their mean depth gap and slope, and the fraction of resamples in which the observed
    statistic is no better than the null's (`*_vs_*`)."""
    src = [k for k, i in enumerate(src_boundaries) if i >= 1]
    tgt = [k for k, j in enumerate(tgt_boundaries) if j >= 1]
    p_best = np.full(err.shape, np.nan)
    fields: dict = {
        "bootstrap": {
            "unit": "held-out document",
            "resamples": int(resampling.resamples),
            "seed": int(resampling.seed),
            "level": LEVEL,
            "scheme": bootstrap.SCHEME.format(size="n_heldout_docs"),
            "min_defined": bootstrap.MIN_RESAMPLES,
            "undefined": bootstrap.UNDEFINED,
        }
    }
    if not tgt:
        return p_best, fields
    tgt_ids = np.asarray([tgt_boundaries[k] for k in tgt])
    valid = np.all(np.isfinite(err_b[:, :, tgt]), axis=(1, 2))
    n_valid = int(valid.sum())
    fields["bootstrap"]["resamples_defined"] = n_valid
    enough = n_valid >= bootstrap.MIN_RESAMPLES
    if enough:
        eb = err_b[valid][:, :, tgt]  # (B', S, T')
        choice = np.argmin(eb, axis=2)  # (B', S) first on ties, as the point path
        for a in range(err.shape[0]):
            p_best[a, tgt] = np.bincount(choice[:, a], minlength=len(tgt)) / len(eb)
    else:  # p_best, the path's probability and every summary interval stay NaN
        fields["bootstrap"]["note"] = (
            f"no p_best, path probability or summary interval: the matrix is defined in "
            f"{n_valid:,} of {len(valid):,} resamples (one that drew no scored token leaves "
            f"it undefined), fewer than the {bootstrap.MIN_RESAMPLES} they need"
        )
    if not src:
        return p_best, fields
    sdepth = np.array([src_boundaries[k] / n_source for k in src])
    tdepth = tgt_ids / n_target
    point_path = np.asarray(point.argmin_path)
    fields["slope"] = float(path_statistics(point_path[None, :], sdepth, n_target)["slope"][0])
    if not enough:
        fields.update({f"{key}_{end}": float("nan") for key in STATS for end in ("low", "high")})
        return p_best, fields
    jstar_b = tgt_ids[choice[:, src]]  # (B', nS)
    fields["argmin_path_probability"] = float(
        np.mean(np.all(jstar_b == point_path[None, :], axis=1))
    )
    per = resampled_statistics(jstar_b, eb[:, src], sdepth, tdepth, n_target)
    for key in STATS:
        lo, hi = interval(per[key])
        fields[f"{key}_low"], fields[f"{key}_high"] = float(lo), float(hi)
        why = bootstrap.withheld(per[key], key)
        if why:
            fields[f"{key}_interval_note"] = why
    soft = p_best[np.ix_(src, tgt)] @ tdepth
    fields["soft_depth_pbest"] = soft.tolist()
    fields["soft_depth_pbest_spread"] = float(soft.max() - soft.min())
    fields["nulls"] = _nulls(err, src, tgt, tgt_ids, sdepth, n_target, per, resampling, len(src))
    return p_best, fields


def resampled_statistics(
    jstar: np.ndarray, rows: np.ndarray, sdepth: np.ndarray, tdepth: np.ndarray, n_target: int
) -> dict:
    """STATS of every resample: jstar (B, nS) the argmin paths, rows (B, nS, T') the resampled
    relative_error over source and target boundaries ≥ 1, sdepth (nS,) and tdepth (T') their
    depths. Spearman is NaN for a constant path."""
    out = path_statistics(jstar, sdepth, n_target)
    out["spearman"] = np.array(
        [spearman(sdepth, p) if len(set(p.tolist())) > 1 else np.nan for p in jstar]
    )
    out["soft_depth_spread"] = _soft_spread(rows, tdepth)
    return out


def _soft_spread(eb: np.ndarray, tdepth: np.ndarray) -> np.ndarray:
    """max − min over source rows of the soft target depth of `ridge.summary` (τ = a tenth of
    the row's range), for every resample: eb (B, nS, T') -> (B,)."""
    lo = eb.min(axis=2, keepdims=True)
    tau = (eb.max(axis=2, keepdims=True) - lo) / 10.0
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(tau > 0, np.exp(-(eb - lo) / np.where(tau > 0, tau, 1.0)), 1.0)
    soft = (w / w.sum(axis=2, keepdims=True)) @ tdepth
    return soft.max(axis=1) - soft.min(axis=1)


def fraction_no_smaller(x: np.ndarray, y: np.ndarray) -> float:
    """The fraction of the len(x)·len(y) pairs (a, b) with x[a] >= y[b] (a NaN on either side
    counts as not), as mean(x[:, None] >= y[None, :]) gives it, in O(len(x) + len(y)) memory:
    y sorted once, each x[a] counts the y at or below it by binary search. The count is an
    integer, so the fraction is that of the quadratic form exactly."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    ys = np.sort(y[~np.isnan(y)])
    below = np.searchsorted(ys, x, side="right")  # y[b] <= x[a]: x[a] >= y[b]
    count = int(below[~np.isnan(x)].sum())
    return float(np.float64(count) / (len(x) * len(y)))


def _nulls(
    err, src, tgt, tgt_ids, sdepth, n_target, per, resampling: Resampling, n_rows: int
) -> dict:
    """The flat and the uniform null of the path statistics (see `summarise`)."""
    flat_j = int(tgt_ids[int(np.argmin(err[np.ix_(src, tgt)].mean(axis=0)))])
    flat = path_statistics(np.full((1, n_rows), flat_j), sdepth, n_target)
    rng = np.random.default_rng(
        [int(resampling.seed), 1]
    )  # its own stream: the documents' draws stay as documented
    uniform_paths = tgt_ids[rng.integers(0, len(tgt_ids), size=(int(resampling.resamples), n_rows))]
    uni = path_statistics(uniform_paths, sdepth, n_target)
    gap_flat = float(flat["mean_depth_gap"][0])
    u_lo, u_hi = interval(uni["mean_depth_gap"])
    s_lo, s_hi = interval(uni["slope"])
    gaps = per["mean_depth_gap"]
    return {
        "flat": {
            "target_boundary": flat_j,
            "mean_depth_gap": gap_flat,
            "slope": 0.0,
            "mean_depth_gap_vs_flat": float(np.mean(gaps >= gap_flat)),
        },
        "uniform": {
            "mean_depth_gap": float(np.mean(uni["mean_depth_gap"])),
            "mean_depth_gap_low": float(u_lo),
            "mean_depth_gap_high": float(u_hi),
            "slope_low": float(s_lo),
            "slope_high": float(s_hi),
            "mean_depth_gap_vs_uniform": fraction_no_smaller(gaps, uni["mean_depth_gap"]),
        },
        "note": (
            "flat: every source boundary >= 1 mapped to the target boundary of least mean error; uniform: "
            "paths drawn uniformly among target boundaries >= 1, default_rng([seed, 1]); *_vs_*: the fraction of "
            "(resample, null) comparisons in which the observed mean depth gap is no smaller than the null's"
        ),
    }
