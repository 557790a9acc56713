"""The permutation null of a similarity measure and its calibration (pure functions on
arrays), after Gröger, Wen and Brbić, "Revisiting the Platonic Representation Hypothesis: An
Aristotelian View" (arXiv 2602.14486): Algorithm 1 (one score against its null) and
Algorithm 2 (the best of a grid of layer pairs against the null of that best), as their
package `calibrated_similarity` (`calibration.py`: `calibrate`, `calibrate_layers`)
computes them.

The null re-pairs the target's rows with the source's: one permutation π of the M sampled
rows per null draw, the same π for every target boundary (so the grid's maximum has a null
of its own), K draws from a recorded seed (`draw_permutations`). For each cell (i, j) with
observed score s and null scores s_1..s_K, on the measure's "higher is closer" scale
(a distance d is read as s = −d, its ideal 0 as s_max = 0):

    null_mean = mean_k s_k,  null_std = std_k s_k (ddof 0)
    τ = the ⌈(1 − α)(K + 1)⌉-th smallest of {s, s_1, ..., s_K}        (α = 0.05)
    calibrated = clip((s − τ) / (s_max − τ), 0, 1)
    p = (1 + #{k: s_k ≥ s}) / (K + 1)
    p_family = (1 + #{k: max_(i', j') s_k(i', j') ≥ s}) / (K + 1)

`calibrated` is 0 wherever the score does not beat the null's (1 − α) critical value, and
reaches 1 only at the measure's ideal; `p_family` is the single-step max-statistic
correction for reading the best of the nI × nJ cells (the paper's depth confound).
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np

from align.errors import InputError

ALPHA = 0.05  # the level of the critical value τ that a calibrated score must beat
# Below this many documents the rows are permuted one by one: n documents have n! orders,
# and at 8 (40,320 orders) K draws of a few hundred rarely repeat one; fewer documents would
# repeat orders and leave the null too coarse to read a p-value from.
MIN_DOCUMENTS = 8
DOCUMENTS, ROWS = "documents", "rows"  # the two schemes `draw_permutations` records


def check_permutations(count) -> int:
    """A permutation count as an int.

    Parameters
    ----------
    count : int
        K.

    Returns
    -------
    int
        `count`.

    Raises
    ------
    InputError
        A count below 1, in one line.
    """
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or int(count) < 1:
        raise InputError(
            f"`permutations` {count!r}: give a whole number of null permutations, 1 or more "
            "(19 or more for a p-value that can reach 0.05)"
        )
    return int(count)


def draw_permutations(docs: np.ndarray, count: int, seed: int) -> tuple[np.ndarray, str]:
    """K permutations of the M sampled rows, each re-pairing the target's rows across documents.

    With n ≥ MIN_DOCUMENTS documents, draw k takes an order σ_k of the documents
    (numpy.random.default_rng(seed).permutation(n), one after another) and lays the target's
    rows out document by document in σ_k's order, each document's rows together and in their
    own order; the source's rows stay in document order. Row r of the source is paired with row
    perm[k, r] of the target. Documents of equal row counts are swapped whole; unequal ones
    shift the pairing within a document's run (a source document meets one target document or
    two neighbouring ones). With fewer documents every row is permuted alone
    (default_rng(seed).permutation(M) per draw).

    Parameters
    ----------
    docs : array of shape (n_rows,)
        int, the document of each sampled row.
    count : int
        K.
    seed : int
        The recorded seed.

    Returns
    -------
    perm : array of shape (K, n_rows)
        int64.
    scheme : str
        "documents" or "rows".
    """
    docs = np.asarray(docs)
    count = check_permutations(count)
    rng = np.random.default_rng(seed)
    m = len(docs)
    order = np.argsort(docs, kind="stable")  # rows grouped by document, in row order
    _, first, sizes = np.unique(docs[order], return_index=True, return_counts=True)
    out = np.empty((count, m), dtype=np.int64)
    if len(first) < MIN_DOCUMENTS:
        for k in range(count):
            out[k] = rng.permutation(m)
        return out, ROWS
    runs = [order[f : f + s] for f, s in zip(first, sizes, strict=True)]
    for k in range(count):
        sigma = rng.permutation(len(runs))
        out[k, order] = np.concatenate([runs[s] for s in sigma])
    return out, DOCUMENTS


def critical_value(observed: np.ndarray, null: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """τ per cell: the ⌈(1 − alpha)(K + 1)⌉-th smallest of the observed score and its K nulls.

    The paper's Algorithm 1; both on the "higher is closer" scale.

    Parameters
    ----------
    observed : array of shape (...)
        The observed scores.
    null : array of shape (K, ...)
        The null scores.
    alpha : float, optional
        The test's level.

    Returns
    -------
    array of shape (...)
        τ.
    """
    k = null.shape[0]
    pooled = np.sort(np.concatenate([observed[None], null]), axis=0)
    rank = min(max(math.ceil((1 - alpha) * (k + 1)) - 1, 0), k)
    return pooled[rank]


def calibrated_score(observed, tau, ideal) -> np.ndarray:
    """clip((s − τ) / (s_max − τ), 0, 1) per cell.

    0 where s does not beat τ, 1 at the ideal s_max (1 where τ already reaches the ideal and s
    does too). All on the "higher is closer" scale.

    Parameters
    ----------
    observed : array of shape (...)
        The observed scores s.
    tau : array of shape (...)
        The critical values τ (`critical_value`).
    ideal : float
        s_max.

    Returns
    -------
    array of shape (...)
        The calibrated scores.
    """
    observed, tau = np.asarray(observed, np.float64), np.asarray(tau, np.float64)
    room = ideal - tau
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(room > 0, (observed - tau) / np.where(room > 0, room, 1.0), 1.0)
    return np.clip(np.where(observed > tau, score, 0.0), 0.0, 1.0)


class Calibration(NamedTuple):
    """The null's summary of a grid of scores (`summarise`), every field an array of shape
    (n_source_boundaries, n_target_boundaries), on the measure's own scale: the null's mean
    and spread (ddof 0), the critical value τ, the calibrated score, the p-value of each cell
    and its family-wise p-value over the grid (the module docstring's formulas)."""

    null_mean: np.ndarray
    null_std: np.ndarray
    critical: np.ndarray
    calibrated: np.ndarray
    p: np.ndarray
    p_family: np.ndarray


def summarise(observed: np.ndarray, null: np.ndarray, direction: str, ideal: float) -> Calibration:
    """The null's summary of a grid of scores, as the module docstring defines it.

    Parameters
    ----------
    observed : array of shape (n_source_boundaries, n_target_boundaries)
        The measure on the sampled rows.
    null : array of shape (K, n_source_boundaries, n_target_boundaries)
        The measure on the re-paired rows (NaN where a draw left it undefined: such a draw
        counts as not reaching the observed score, and its cells are left out of the null's
        mean and spread).
    direction : str
        "similarity" or "distance".
    ideal : float
        The measure's best value (1 for a similarity of at most 1, 0 for a distance).

    Returns
    -------
    Calibration
        Each field of shape (n_source_boundaries, n_target_boundaries).
    """
    sign = 1.0 if direction == "similarity" else -1.0
    s, s_null = sign * np.asarray(observed, np.float64), sign * np.asarray(null, np.float64)
    k = s_null.shape[0]
    filled = np.where(np.isfinite(s_null), s_null, -np.inf)
    tau = critical_value(s, filled)
    best = filled.reshape(k, -1).max(axis=1)  # (K,): each draw's best cell
    defined = np.where(np.isfinite(s_null), s_null, np.nan)
    with warnings.catch_warnings():  # a cell no draw defines has a NaN mean, said by NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, spread = np.nanmean(defined, axis=0), np.nanstd(defined, axis=0)
    return Calibration(
        null_mean=sign * mean,
        null_std=spread,
        critical=sign * tau,
        calibrated=calibrated_score(s, tau, sign * ideal),
        p=(1.0 + (filled >= s[None]).sum(axis=0)) / (k + 1.0),
        p_family=(1.0 + (best[:, None, None] >= s[None]).sum(axis=0)) / (k + 1.0),
    )
