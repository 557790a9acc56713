"""References of the similarity measures, from rows, written from the papers and the peers'
code (never imports align): platonic-rep's `metrics.py` (`hsic_unbiased`, `cka` with
`unbiased=True`) for debiased CKA, netrep's `LinearMetric(alpha=1)` (centre, rotate by the
SVD of XᵀY, angular distance) for Procrustes, Kornblith et al. 2019 for CKA and R²_CCA,
Raghu et al. 2017 for SVCCA (PCA to 99% of the variance, then CCA)."""

from __future__ import annotations

import numpy as np
from scipy.linalg import orthogonal_procrustes, sqrtm

CCA_RIDGE = 1e-6  # as docs/methods.md states: ε·tr(C)/d on each covariance's diagonal


def cka(X, Y) -> float:
    """Kornblith et al. 2019, linear CKA of centred rows, via HSIC with H = I − 11ᵀ/n."""
    n = len(X)
    H = np.eye(n) - 1.0 / n
    K, L = X @ X.T, Y @ Y.T

    def hsic(A, B):
        return np.trace(A @ H @ B @ H)

    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


def cka_features(X, Y) -> float:
    """Linear CKA in feature space (Kornblith et al. 2019, Eq. 4 with centred columns):
    ‖YᵀX‖²_F / (‖XᵀX‖_F ‖YᵀY‖_F), for loops over many resamples (no n × n kernel)."""
    X, Y = X - X.mean(0), Y - Y.mean(0)
    return np.linalg.norm(Y.T @ X) ** 2 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y))


def _hsic_unbiased(K, L) -> float:
    """Song et al. 2012 Eq. 5, written as platonic-rep's `hsic_unbiased`."""
    m = len(K)
    Kt, Lt = K.copy(), L.copy()
    np.fill_diagonal(Kt, 0)
    np.fill_diagonal(Lt, 0)
    v = (
        np.sum(Kt * Lt.T)
        + np.sum(Kt) * np.sum(Lt) / ((m - 1) * (m - 2))
        - 2 * np.sum(Kt @ Lt) / (m - 2)
    )
    return v / (m * (m - 3))


def cka_debiased(X, Y) -> float:
    """platonic-rep's unbiased_cka with linear kernels of the rows as given, without its
    1e-6 in the denominator."""
    K, L = X @ X.T, Y @ Y.T
    return _hsic_unbiased(K, L) / np.sqrt(_hsic_unbiased(K, K) * _hsic_unbiased(L, L))


def procrustes(X, Y) -> float:
    """netrep LinearMetric(alpha=1, center_columns=True, zero_pad=True).fit_score: the
    narrower side zero-padded, columns centred, the rotations from the SVD of XᵀY, and the
    angular distance of the rotated matrices."""
    d = max(X.shape[1], Y.shape[1])
    X = np.pad(X, ((0, 0), (0, d - X.shape[1])))
    Y = np.pad(Y, ((0, 0), (0, d - Y.shape[1])))
    X, Y = X - X.mean(0), Y - Y.mean(0)
    U, _, Vt = np.linalg.svd(X.T @ Y)
    A, B = X @ U, Y @ Vt.T
    corr = np.sum(A * B) / (np.linalg.norm(A) * np.linalg.norm(B))
    return float(np.arccos(np.clip(corr, -1.0, 1.0)))


def procrustes_heldout(X_train, Y_train, X_test, Y_test) -> float:
    """The held-out Procrustes error as docs/methods.md defines it: both sides zero-padded to
    the wider width; the rotation R from scipy's `orthogonal_procrustes` of the training
    rows, each side centred by its training mean; the held-out rows centred by their own
    means and scaled to unit Frobenius norm; ‖Ŷ − X̂R‖_F."""
    d = max(X_train.shape[1], Y_train.shape[1])

    def pad(A):
        return np.pad(A, ((0, 0), (0, d - A.shape[1])))

    A, B = pad(X_train), pad(Y_train)
    R, _ = orthogonal_procrustes(A - A.mean(0), B - B.mean(0))
    Xc, Yc = pad(X_test) - pad(X_test).mean(0), pad(Y_test) - pad(Y_test).mean(0)
    return float(np.linalg.norm(Yc / np.linalg.norm(Yc) - (Xc / np.linalg.norm(Xc)) @ R))


def cca(X, Y) -> float:
    """Mean squared canonical correlation: the eigenvalues of Cxx⁻¹Cxy Cyy⁻¹Cyx (covariances
    ridged by ε tr(C)/d), summed, over min(d_S, d_T)."""
    X, Y = X - X.mean(0), Y - Y.mean(0)
    Cxx, Cyy, Cxy = X.T @ X, Y.T @ Y, X.T @ Y
    Cxx = Cxx + CCA_RIDGE * np.trace(Cxx) / len(Cxx) * np.eye(len(Cxx))
    Cyy = Cyy + CCA_RIDGE * np.trace(Cyy) / len(Cyy) * np.eye(len(Cyy))
    M = np.linalg.solve(Cxx, Cxy) @ np.linalg.solve(Cyy, Cxy.T)
    return float(np.trace(M).real / min(len(Cxx), len(Cyy)))


def _pca(X, share=0.99):
    """Centred rows projected on the fewest principal directions holding `share` of the variance."""
    X = X - X.mean(0)
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    var = s**2
    k = int(np.argmax(np.cumsum(var) >= share * var.sum())) + 1
    return X @ Vt[:k].T


def svcca(X, Y) -> float:
    """Raghu et al. 2017: PCA of each side to 99% of its variance, then the mean canonical
    correlation (the singular values of Cxx^(−1/2) Cxy Cyy^(−1/2)) over min(k_x, k_y)."""
    A, B = _pca(X), _pca(Y)
    Cxx, Cyy, Cxy = A.T @ A, B.T @ B, A.T @ B
    M = np.linalg.inv(sqrtm(Cxx)).real @ Cxy @ np.linalg.inv(sqrtm(Cyy)).real
    return float(np.linalg.svd(M, compute_uv=False)[: min(A.shape[1], B.shape[1])].mean())


MEASURES = {
    "cka": cka,
    "cka-debiased": cka_debiased,
    "procrustes": procrustes,
    "cca": cca,
    "svcca": svcca,
}


# Each streamed measure's range (docs/methods.md, Intervals): where its interval is clipped.
RANGES = {
    "cka": (0.0, 1.0),
    "cka-debiased": (-1.0, 1.0),
    "procrustes": (0.0, np.pi / 2),
    "procrustes-heldout": (0.0, 2.0),
    "cca": (0.0, 1.0),
    "svcca": (0.0, 1.0),
}


def jackknife_interval(value, left_out, bounds=None, level=0.95):
    """The delete-a-group jackknife interval as Efron & Tibshirani (1993, ch. 11) and Kott
    (2001) write it: with G groups and θ_(g) the statistic without group g,
    se = sqrt((G − 1)/G · Σ_g (θ_(g) − θ̄)²), θ̄ = Σ_g θ_(g)/G, and the interval
    θ̂ ± t_{(1 + level)/2, G − 1} · se, cut to `bounds`."""
    from scipy.stats import t

    G = len(left_out)
    mean = sum(left_out) / G
    se = np.sqrt((G - 1) / G * sum((v - mean) ** 2 for v in left_out))
    q = t.ppf(0.5 + level / 2, G - 1)
    low, high = value - q * se, value + q * se
    if bounds is not None:
        low, high = min(max(low, bounds[0]), bounds[1]), min(max(high, bounds[0]), bounds[1])
    return low, high


def permutations(docs, count, seed):
    """The K re-pairings of the sampled rows as docs/methods.md and
    `calibration.draw_permutations` document them: with 8 or more documents, draw k lays the
    target's rows out document by document in the order default_rng(seed).permutation(n)
    (the documents in increasing id, each document's rows in row order), row r of the source
    paired with row perm[k, r] of the target; with fewer, default_rng(seed).permutation(M)
    per draw."""
    docs = np.asarray(docs)
    rng = np.random.default_rng(seed)
    ids = sorted(set(docs.tolist()))
    if len(ids) < 8:
        return np.array([rng.permutation(len(docs)) for _ in range(count)])
    runs = [[r for r in range(len(docs)) if docs[r] == d] for d in ids]
    grouped = [r for run in runs for r in run]  # the source's rows, document by document
    out = np.empty((count, len(docs)), dtype=np.int64)
    for k in range(count):
        laid = [r for s in rng.permutation(len(ids)) for r in runs[s]]
        out[k, grouped] = laid
    return out


def procrustes_heldout_null(X_train, Y_train, X_rows, Y_rows, perms):
    """(value, null (K,)): procrustes_heldout with the training rotation on the sampled rows,
    and on the rows with the target's re-paired by each permutation (row r of X_rows with
    row perm[r] of Y_rows)."""
    value = procrustes_heldout(X_train, Y_train, X_rows, Y_rows)
    null = [procrustes_heldout(X_train, Y_train, X_rows, Y_rows[p]) for p in perms]
    return value, np.array(null)


def calibration(observed, null, direction, ideal, alpha=0.05):
    """The calibration of a grid of scores as arXiv 2602.14486's Algorithms 1 and 2 and
    docs/methods.md state it, on the "higher is closer" scale (a distance negated): null mean
    and std (ddof 0), τ the ⌈(1 − α)(K + 1)⌉-th smallest of the score and its nulls,
    calibrated clip((s − τ)/(s_max − τ), 0, 1) (0 unless s > τ), p = (1 + #{s_k ≥ s})/(K + 1),
    p_family = (1 + #{max over the grid of s_k ≥ s})/(K + 1). observed (S, T), null (K, S, T)."""
    import math

    sign = 1.0 if direction == "similarity" else -1.0
    s, sn = sign * np.asarray(observed, float), sign * np.asarray(null, float)
    K = len(sn)
    out = {k: np.empty(s.shape) for k in ("null_mean", "null_std", "calibrated", "p")}
    out["p_family"] = np.empty(s.shape)
    best = sn.reshape(K, -1).max(axis=1)
    for a in range(s.shape[0]):
        for b in range(s.shape[1]):
            v, draws = s[a, b], sn[:, a, b]
            out["null_mean"][a, b] = sign * draws.mean()
            out["null_std"][a, b] = draws.std()
            tau = sorted([v, *draws])[math.ceil((1 - alpha) * (K + 1)) - 1]
            top = sign * ideal
            cal = 0.0 if v <= tau else (1.0 if top <= tau else (v - tau) / (top - tau))
            out["calibrated"][a, b] = min(max(cal, 0.0), 1.0)
            out["p"][a, b] = (1 + np.sum(draws >= v)) / (K + 1)
            out["p_family"][a, b] = (1 + np.sum(best >= v)) / (K + 1)
    return out
