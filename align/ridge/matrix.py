"""The summary statistics of an error matrix (docs/methods.md, The fit): the argmin path, its
rank correlation with depth, the mean depth gap, the soft depths."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from align.errors import NonFiniteError


@dataclass(frozen=True)
class Summary:
    """The summary statistics of an error matrix over boundaries ≥ 1 (`summary`).

    Depths are i/L_S of a source boundary i and j/L_T of a target boundary j.

    Parameters
    ----------
    source_boundaries : list of int
        The source boundaries i ≥ 1 summarised, in the matrix's order.
    target_boundaries : list of int
        The target boundaries j ≥ 1 summarised.
    argmin_path : list of int
        j*(i) = argmin_j err[i, j] per source boundary i ≥ 1 (first on exact ties).
    spearman : float or None
        Rank correlation of j*(i) with i/L_S; None when undefined.
    spearman_note : str
        What `spearman` is, or why it is undefined.
    mean_depth_gap : float or None
        Mean over i of |j*(i)/L_T − i/L_S|; None without boundaries ≥ 1.
    soft_depth : list of float
        Σ_j w_ij j/L_T per source boundary i ≥ 1, w_ij ∝ exp(−err_ij/τ).
    soft_depth_spread : float or None
        max − min of soft_depth.
    """

    source_boundaries: list  # the source boundaries i ≥ 1 summarised, in the matrix's order
    target_boundaries: list  # the target boundaries j ≥ 1 summarised
    argmin_path: list  # j*(i) = argmin_j err[i, j] per source boundary i ≥ 1 (first on exact ties)
    spearman: float | None  # rank correlation of j*(i) with i/L_S; None when undefined
    spearman_note: str  # what `spearman` is, or why it is undefined
    mean_depth_gap: float | None  # mean over i of |j*(i)/L_T − i/L_S|; None without boundaries ≥ 1
    soft_depth: list  # Σ_j w_ij j/L_T per source boundary i ≥ 1, w_ij ∝ exp(−err_ij/τ)
    soft_depth_spread: float | None  # max − min of soft_depth

    def to_attrs(self) -> dict:
        """The summary as the alignment result's attrs["summary"] begins (JSON-ready, this order).

        Returns
        -------
        dict
            Its fields, in this order.
        """
        return {
            "source_boundaries": list(self.source_boundaries),
            "target_boundaries": list(self.target_boundaries),
            "argmin_path": list(self.argmin_path),
            "spearman": self.spearman,
            "spearman_note": self.spearman_note,
            "mean_depth_gap": self.mean_depth_gap,
            "soft_depth": list(self.soft_depth),
            "soft_depth_spread": self.soft_depth_spread,
        }


def summary(
    err: np.ndarray, source_boundaries, target_boundaries, n_source: int, n_target: int
) -> Summary:
    """The summary statistics (`Summary`) of an error matrix over boundaries ≥ 1.

    See docs/methods.md, The fit. Depths are i/L_S and j/L_T. argmin_path: j*(i) = argmin_j
    err[i, j] per source boundary i ≥ 1 (first on exact ties); spearman: rank correlation of
    j*(i) with i/L_S (None when undefined: constant path or fewer than two boundaries);
    mean_depth_gap: mean |j*/L_T − i/L_S|; soft_depth: Σ_j w_ij j/L_T with
    w_ij ∝ exp(−err_ij/τ), τ = (row max − row min)/10 (uniform weights when the row is flat);
    soft_depth_spread: max − min of the soft depths.

    Parameters
    ----------
    err : array of shape (n_source_boundaries, n_target_boundaries)
        The error matrix.
    source_boundaries : sequence of int
        The boundaries of its rows.
    target_boundaries : sequence of int
        The boundaries of its columns.
    n_source : int
        L_S, the source's blocks.
    n_target : int
        L_T, the target's blocks.

    Returns
    -------
    Summary
        argmin_path, spearman, mean_depth_gap, soft_depth, soft_depth_spread.

    Raises
    ------
    NonFiniteError
        A non-finite error anywhere in `err`, naming its pairs: nothing is summarised around it.
    """
    bad = np.argwhere(~np.isfinite(err))
    if len(bad):
        pairs = ", ".join(
            f"({source_boundaries[a]}, {target_boundaries[b]})" for a, b in bad[:4]
        ) + (" ..." if len(bad) > 4 else "")
        raise NonFiniteError(
            f"{len(bad)} error(s) of the matrix are not finite, at (source, target) boundaries {pairs}: "
            "no summary is computed over them"
        )
    src = [k for k, i in enumerate(source_boundaries) if i >= 1]
    tgt = [k for k, j in enumerate(target_boundaries) if j >= 1]
    kept = [int(source_boundaries[k]) for k in src], [int(target_boundaries[k]) for k in tgt]
    if not src or not tgt:
        return Summary(*kept, [], None, "undefined: no boundary >= 1 on one side", None, [], None)
    tdepth = np.array([target_boundaries[k] / n_target for k in tgt])
    sdepth = np.array([source_boundaries[k] / n_source for k in src])
    sub = err[np.ix_(src, tgt)]
    jstar = [int(target_boundaries[tgt[int(np.argmin(row))]]) for row in sub]
    soft = []
    for row in sub:
        tau = (row.max() - row.min()) / 10.0
        w = np.exp(-(row - row.min()) / tau) if tau > 0 else np.ones_like(row)
        soft.append(float((w / w.sum()) @ tdepth))
    rho = None
    if len(src) < 2:
        note = "undefined: fewer than two source boundaries >= 1"
    elif len(set(jstar)) == 1:
        note = "undefined: the argmin path is constant"
    else:
        rho = spearman(sdepth, jstar)
        note = "Spearman rank correlation of j*(i) with i/L_S over source boundaries >= 1"
    return Summary(
        *kept,
        jstar,
        rho,
        note,
        float(np.mean(np.abs(np.array(jstar) / n_target - sdepth))),
        soft,
        float(max(soft) - min(soft)),
    )


def spearman(a, b) -> float:
    """Spearman's rank correlation of two sequences.

    Pearson's correlation of their average ranks (tied values share the mean of their ranks).

    Parameters
    ----------
    a, b : array of shape (n,)
        The two sequences.

    Returns
    -------
    float
        The correlation; NaN when either is constant.
    """
    ra, rb = _average_ranks(a), _average_ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = math.sqrt(float(ra @ ra) * float(rb @ rb))
    return float(ra @ rb) / denom if denom > 0 else math.nan


def _average_ranks(v) -> np.ndarray:
    """Ranks 1..n of v (n,), ties given the mean of the ranks they span."""
    v = np.asarray(v, dtype=np.float64)
    order = np.argsort(v, kind="mergesort")
    sv = v[order]
    starts = np.r_[0, np.flatnonzero(sv[1:] != sv[:-1]) + 1]
    ends = np.r_[starts[1:], len(v)]
    ranks = np.empty(len(v))
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e + 1) / 2.0  # mean of ranks s+1 .. e
    return ranks
