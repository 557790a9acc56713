"""The neighbour and rank measures of the sampled rows written from their peers' definitions
with numpy and scipy alone (never importing align), for the tests of their intervals:
platonic-rep's `mutual_knn` and `cknna` (metrics.py: unit rows, each row's k nearest by
cosine with the row itself left out, Song et al.'s unbiased HSIC of the masked kernels) and
rsatoolbox's RSA (the Spearman correlation of the upper triangles of two correlation-distance
RDMs). The tie rule align documents is written in: cosines and correlation distances are
computed once per distinct row and copied, so exact copies tie exactly (two copies at
distance 0), and tied neighbours come in increasing row index (a stable descending sort)."""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import pdist, squareform
from scipy.stats import spearmanr


def cosines(x: np.ndarray) -> np.ndarray:
    """(n, n) cosines of the rows of x, of the distinct unit rows then copied."""
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    distinct, copy = np.unique(u, axis=0, return_inverse=True)
    copy = np.ravel(copy)
    return (distinct @ distinct.T)[np.ix_(copy, copy)]


def neighbours(x: np.ndarray, k: int) -> np.ndarray:
    """(n, k): each row's k rows of largest cosine, itself left out, ties to the lower index."""
    s = cosines(x)
    np.fill_diagonal(s, -np.inf)
    return np.argsort(-s, axis=1, kind="stable")[:, :k]


def masks(x: np.ndarray, k: int) -> np.ndarray:
    """(n, n) 0/1: row r's k nearest rows."""
    out = np.zeros((len(x), len(x)))
    out[np.arange(len(x))[:, None], neighbours(x, k)] = 1.0
    return out


def mutual_knn(x: np.ndarray, y: np.ndarray, k: int) -> float:
    """platonic-rep's mutual_knn: the mean over rows of |N_x(r) ∩ N_y(r)| / k."""
    return float(((masks(x, k) * masks(y, k)).sum(axis=1) / k).mean())


def hsic_unbiased(K: np.ndarray, L: np.ndarray) -> float:
    """Song et al. (2012), eq. 5, as platonic-rep writes it (its 1e-6 left out)."""
    m = len(K)
    Kt, Lt = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    t = (Kt * Lt.T).sum() + Kt.sum() * Lt.sum() / ((m - 1) * (m - 2))
    t -= 2 * (Kt @ Lt).sum() / (m - 2)
    return float(t / (m * (m - 3)))


def cknna(x: np.ndarray, y: np.ndarray, k: int) -> float:
    """platonic-rep's cknna(unbiased=True): HSIC_u(A∘K, A∘L) / sqrt(HSIC_u(A_x∘K, A_x∘K)
    HSIC_u(A_y∘L, A_y∘L)), A = A_x∘A_y the shared neighbours."""
    K, L = cosines(x), cosines(y)
    ax, ay = masks(x, k), masks(y, k)
    both = ax * ay
    return hsic_unbiased(both * K, both * L) / np.sqrt(
        hsic_unbiased(ax * K, ax * K) * hsic_unbiased(ay * L, ay * L)
    )


def rdm(x: np.ndarray) -> np.ndarray:
    """(n, n) correlation distances 1 − corr(x_a, x_b), exact copies at 0."""
    d = squareform(pdist(x, "correlation"))
    c = x - x.mean(1, keepdims=True)
    c = c / np.linalg.norm(c, axis=1, keepdims=True)
    d[(c[:, None, :] == c[None, :, :]).all(-1)] = 0.0
    return d


def rsa(x: np.ndarray, y: np.ndarray) -> float:
    """rsatoolbox's Spearman correlation of the two RDMs' upper triangles."""
    a, b = np.triu_indices(len(x), 1)
    return float(spearmanr(rdm(x)[a, b], rdm(y)[a, b])[0])


def jackknife_t(value: float, left_out, bounds=(-np.inf, np.inf), level: float = 0.95) -> tuple:
    """The delete-a-group jackknife t interval written from Efron & Tibshirani (1993, ch. 11):
    se² = (G − 1)/G Σ (θ_(g) − θ̄)², value ± t_{(1 + level)/2, G − 1} se (scipy.stats.t),
    clipped to bounds; NaN with fewer than 3 groups (docs/methods.md: at G = 2 the t quantile
    is 12.7)."""
    from scipy import stats

    v = np.asarray(left_out, np.float64)
    G = len(v)
    if G < 3:
        return (np.nan, np.nan)
    se = np.sqrt((G - 1) / G * np.sum((v - v.mean()) ** 2))
    half = stats.t.ppf((1 + level) / 2, G - 1) * se
    return tuple(float(e) for e in np.clip([value - half, value + half], *bounds))


K = 4  # the neighbours the tests use
MEASURES = {
    "mknn": lambda x, y: mutual_knn(x, y, K),
    "cknna": lambda x, y: cknna(x, y, K),
    "rsa": rsa,
}
RANGES = {"mknn": (0.0, 1.0), "cknna": (-np.inf, np.inf), "rsa": (-1.0, 1.0)}
