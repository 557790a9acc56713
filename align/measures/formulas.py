"""Each spectral measure's formula, written once, from the few quantities both of its forms
compute (pure functions on arrays): the sums form (`streamed`, from a side's sums over the
held-out rows) and the rows form (`cells`, from the SVD of the sampled rows). A form says
how it gets the quantities; the measure is the function here (docs/methods.md, Similarity
measures).

Symbols, as the papers write them (X_c, Y_c the centred rows of a source and a target
boundary, paired row by row, m rows):

    C_xx = X_cᵀX_c, C_yy = Y_cᵀY_c, C_xy = X_cᵀY_c   the centred second moments
    λ_x (r_x,), λ_y (r_y,)   the eigenvalues of C_xx, C_yy, largest first (r ≤ d: the zero ones
                             may be left out; their eigenvectors add nothing to B)
    B (r_x, r_y)             C_xy in the two eigenbases, Q_xᵀ C_xy Q_y, in the order of λ
    K̃, L̃                    the linear kernels XXᵀ, YYᵀ with their diagonals zeroed
    d_S, d_T                 the two widths
    ε, ρ = ε·tr C/d          CCA's ridge
    k_x, k_y                 SVCCA's kept directions, the fewest holding 99% of the variance
"""

from __future__ import annotations

import numpy as np

CCA_RIDGE = 1e-6  # ε: CCA's covariances get ε·tr(C)/d on their diagonal (docs/methods.md)
SVCCA_VARIANCE = 0.99  # SVCCA keeps the top directions holding this share of each side's variance


def ratio(numerator: float, product: float) -> float:
    """numerator / sqrt(product), NaN where the product is not positive (no variance)."""
    return float(numerator / np.sqrt(product)) if product > 0 else float("nan")


def cka(cross2: float, norm_x: float, norm_y: float) -> float:
    """Linear CKA (Kornblith et al. 2019): ‖C_xy‖²_F / (‖C_xx‖_F ‖C_yy‖_F).

    Parameters
    ----------
    cross2 : float
        ‖C_xy‖²_F.
    norm_x, norm_y : float
        ‖C_xx‖_F, ‖C_yy‖_F.

    Returns
    -------
    float
        CKA, in [0, 1].
    """
    return float(cross2 / (norm_x * norm_y))


def hsic_unbiased(m: float, kl: float, k1: float, l1: float, k1l1: float) -> float:
    """Song et al. (2012) Eq. 5, the unbiased HSIC of m rows from its kernel sums:

        [tr(K̃L̃) + (1ᵀK̃1)(1ᵀL̃1)/((m−1)(m−2)) − 2/(m−2)·1ᵀK̃L̃1] / (m(m−3))

    Parameters
    ----------
    m : float
        The rows (instances), 4 or more.
    kl, k1, l1, k1l1 : float
        tr(K̃L̃), 1ᵀK̃1, 1ᵀL̃1, 1ᵀK̃L̃1.

    Returns
    -------
    float
        HSIC_u(K, L).
    """
    return (kl + k1 * l1 / ((m - 1) * (m - 2)) - 2.0 * k1l1 / (m - 2)) / (m * (m - 3))


def cka_debiased(cross: float, self_x: float, self_y: float) -> float:
    """Debiased CKA (platonic-rep's `unbiased_cka`, its 1e-6 left out):
    HSIC_u(K, L) / sqrt(HSIC_u(K, K) · HSIC_u(L, L)).

    Parameters
    ----------
    cross : float
        HSIC_u(K, L) (`hsic_unbiased`).
    self_x, self_y : float
        HSIC_u(K, K), HSIC_u(L, L).

    Returns
    -------
    float
        The debiased CKA; NaN where the product of the two is not positive.
    """
    return ratio(cross, self_x * self_y)


def procrustes(nuclear: float, trace_x: float, trace_y: float) -> float:
    """The angular Procrustes distance (netrep's `LinearMetric(alpha=1)`):
    arccos(‖C_xy‖_* / sqrt(tr C_xx · tr C_yy)), the similarity clipped to [−1, 1].

    Parameters
    ----------
    nuclear : float
        ‖C_xy‖_*, the nuclear norm (the sum of B's singular values).
    trace_x, trace_y : float
        tr C_xx, tr C_yy.

    Returns
    -------
    float
        In [0, π/2].
    """
    return float(np.arccos(np.clip(nuclear / np.sqrt(trace_x * trace_y), -1.0, 1.0)))


def cca(B: np.ndarray, lam_x: np.ndarray, lam_y: np.ndarray, d_s: int, d_t: int) -> float:
    """Mean squared canonical correlation (Kornblith et al. 2019's R²_CCA) with ridged
    covariances, C + ε·tr(C)/d·I (ε = CCA_RIDGE: a singular one stays invertible):

        ‖C_xx^(−1/2) C_xy C_yy^(−1/2)‖²_F / min(d_S, d_T)
        = Σ_ab B²_ab / ((λ_x,a + ρ_x)(λ_y,b + ρ_y)) / min(d_S, d_T),  ρ = ε·Σλ/d

    (the Frobenius norm is unchanged by the eigenbases' rotations).

    Parameters
    ----------
    B : array of shape (r_x, r_y)
        C_xy in the eigenbases, in the order of lam_x and lam_y.
    lam_x, lam_y : array of shape (r_x,), (r_y,)
        The eigenvalues (every nonzero one).
    d_s, d_t : int
        The widths.

    Returns
    -------
    float
        R²_CCA.
    """
    whitened = B * cca_whitening(lam_x, d_s)[:, None] * cca_whitening(lam_y, d_t)[None, :]
    return float(np.sum(whitened * whitened) / min(d_s, d_t))


def cca_whitening(lam: np.ndarray, d: int) -> np.ndarray:
    """CCA's whitening of one side in its eigenbasis, 1/sqrt(λ + ρ), ρ = ε·Σλ/d (`cca`).

    Parameters
    ----------
    lam : array of shape (r,)
        The side's eigenvalues.
    d : int
        Its width.

    Returns
    -------
    array of shape (r,)
        The weights of B's rows (a source) or columns (a target).
    """
    return 1.0 / np.sqrt(lam + CCA_RIDGE * np.sum(lam) / d)


def principal(lam: np.ndarray) -> int:
    """k, SVCCA's reduction (Raghu et al. 2017): the fewest top eigenvalues whose sum reaches
    SVCCA_VARIANCE of Σλ.

    Parameters
    ----------
    lam : array of shape (r,)
        The eigenvalues, largest first.

    Returns
    -------
    int
        k, 1 ≤ k ≤ r.
    """
    k = int(np.searchsorted(np.cumsum(lam), SVCCA_VARIANCE * lam.sum())) + 1
    return min(k, len(lam))


def svcca(B: np.ndarray, lam_x: np.ndarray, lam_y: np.ndarray) -> float:
    """SVCCA (Raghu et al. 2017): each side reduced to its top k principal directions
    (`principal`), then the mean canonical correlation of the reduced rows, the mean
    singular value of Λ_x^(−1/2) B_k Λ_y^(−1/2) (B_k the top k_x × k_y corner of B; the
    reduced covariances are diagonal and positive: no regularisation).

    Parameters
    ----------
    B : array of shape (r_x, r_y), or its top corner (at least k_x, k_y)
        C_xy in the eigenbases, largest first.
    lam_x, lam_y : array of shape (r_x,), (r_y,)
        The eigenvalues, largest first.

    Returns
    -------
    float
        SVCCA.
    """
    kx, ky = principal(lam_x), principal(lam_y)
    reduced = B[:kx, :ky] / np.sqrt(lam_x[:kx])[:, None] / np.sqrt(lam_y[:ky])[None, :]
    return float(np.linalg.svd(reduced, compute_uv=False).mean())
