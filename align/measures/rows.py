"""Similarity measures on rows sampled from the held-out documents (pure functions on arrays):
mutual nearest neighbours, CKNNA and RSA, which need rows rather than sums, and row versions
of the streamed measures (linear CKA, debiased CKA, Procrustes, CCA, SVCCA) so that every
measure gets the same null (docs/measures-rows.md).

The interface the fit calls:

    sample_rows(doc_of_row, n_sample, seed) -> (n_sample,) sorted indices of held-out rows
    row_measures(xs, ys, docs, measures, *, k, permutations, seed, resampling)
        -> {measure: {"value", "low", "high", "null_mean", "null_std", "critical",
                      "calibrated", "p", "p_family": (n_source, n_target) arrays,
                      "direction": "similarity" or "distance",
                      "null_scheme": "documents" or "rows"}}

Every measure is computed from a `Prepared` record of each boundary's rows (its centred
rows' SVD, its neighbour lists, its rank matrix), built once per boundary; a permutation of
the target's rows permutes the record (`permuted`), so the null never recomputes a
decomposition, and a bootstrap resample prepares the resampled rows afresh.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from align.errors import InputError, NonFiniteError
from align.measures import calibration
from align.measures.streamed import CCA_RIDGE, SVCCA_VARIANCE
from align.stats import bootstrap

# Each measure, its direction, and its ideal value (what a model compared with itself scores).
ROW_MEASURES = {
    "mknn": ("similarity", 1.0),
    "cknna": ("similarity", 1.0),
    "rsa": ("similarity", 1.0),
    "cka": ("similarity", 1.0),
    "cka-debiased": ("similarity", 1.0),
    "procrustes": ("distance", 0.0),
    "cca": ("similarity", 1.0),
    "svcca": ("similarity", 1.0),
}
K_NEIGHBOURS = 10  # platonic-rep's default topk
NEIGHBOURS = ("mknn", "cknna")
SPECTRAL = ("cka", "cka-debiased", "procrustes", "cca", "svcca")


def sample_rows(doc_of_row: np.ndarray, n_sample: int, seed: int) -> np.ndarray:
    """The held-out rows the row measures use: n_sample of them drawn without replacement,
    sorted, numpy.random.default_rng(seed).choice(n_rows, n_sample, replace=False).

    doc_of_row: (n_rows,) int, the document of each held-out row (only its length is read:
    every row is equally likely). n_sample: M. seed: recorded with the result."""
    n = len(np.asarray(doc_of_row))
    if isinstance(n_sample, bool) or not isinstance(n_sample, (int, np.integer)) or n_sample < 1:
        raise InputError(f"`sample_rows` {n_sample!r}: give a whole number of rows, 1 or more")
    if n_sample > n:
        raise InputError(
            f"`sample_rows` {n_sample:,}: more than the {n:,} held-out rows; give {n:,} or fewer"
        )
    return np.sort(np.random.default_rng(seed).choice(n, int(n_sample), replace=False))


@dataclass(frozen=True)
class Prepared:
    """One boundary's rows (n_rows = M), in the forms the measures read. `u` (n_rows, rank)
    and `s` (rank,) are the SVD of the centred rows (Xc = u·diag(s)·vᵀ); `a` (n_rows,) the
    centred rows' squared norms; `neighbours` (n_rows, k) each row's k nearest rows by cosine;
    `near` (n_rows, k) their cosines; `ranks` (n_rows, n_rows) the centred ranks of
    the correlation distances (0 on the diagonal and between copies of one row); `hsic_self`
    HSIC_u(K, K) of the debiased CKA, `knn_self` HSIC_u(A_x∘K, A_x∘K) of CKNNA; `width` d.
    A field the measures asked for do not need is None."""

    u: np.ndarray | None = None
    s: np.ndarray | None = None
    a: np.ndarray | None = None
    neighbours: np.ndarray | None = None
    near: np.ndarray | None = None
    ranks: np.ndarray | None = None
    hsic_self: float | None = None
    knn_self: float | None = None
    width: int = 0


def prepare(x: np.ndarray, measures, k: int = K_NEIGHBOURS, origin=None) -> Prepared:
    """The `Prepared` record of rows x (n_rows, d) for `measures`, or with `origin` of the
    rows x[origin] (a bootstrap resample, which draws a document twice): origin (n,) the row
    of x each row copies. Copies of one row are not each other's neighbours and their pair
    is left out of RSA; cosines and correlation distances are computed once per distinct row
    and copied, so copies tie exactly (and a tie goes to the lower row index)."""
    x = np.asarray(x, np.float64)
    distinct = x
    if origin is not None:
        origin = np.asarray(origin)
        x = x[origin]
    fields = {"width": x.shape[1]}
    if any(m in SPECTRAL for m in measures):
        u, s, _ = np.linalg.svd(x - x.mean(axis=0), full_matrices=False)
        fields.update(u=u, s=s, a=((u * s) ** 2).sum(axis=1))
        if "cka-debiased" in measures:
            fields["hsic_self"] = _hsic_features(u * s, u * s, fields["a"], fields["a"])
    if any(m in NEIGHBOURS for m in measures):
        unit = distinct / np.linalg.norm(distinct, axis=1, keepdims=True)
        gram = unit @ unit.T
        gram = gram if origin is None else gram[np.ix_(origin, origin)]
        fields["neighbours"] = _neighbours(gram, k, origin)
        if "cknna" in measures:
            near = np.take_along_axis(gram, fields["neighbours"], axis=1)
            rows = np.repeat(np.arange(len(gram)), k)
            cols = fields["neighbours"].ravel()
            fields["near"] = near
            fields["knn_self"] = _hsic_masked(rows, cols, near.ravel(), near.ravel(), len(gram))
    if "rsa" in measures:
        fields["ranks"] = _rank_matrix(distinct, origin)
    return Prepared(**fields)


def permuted(p: Prepared, perm: np.ndarray) -> Prepared:
    """The record of the rows x[perm] without recomputing it: row r of the result is row
    perm[r] of p; neighbour lists are relabelled (a tie keeps its original order)."""
    inverse = np.argsort(perm)
    fields = {}
    if p.u is not None:
        fields.update(u=p.u[perm], a=p.a[perm])
    if p.neighbours is not None:
        fields["neighbours"] = inverse[p.neighbours[perm]]
    if p.near is not None:
        fields["near"] = p.near[perm]
    if p.ranks is not None:
        fields["ranks"] = p.ranks[np.ix_(perm, perm)]
    return replace(p, **fields)


def _neighbours(gram: np.ndarray, k: int, origin) -> np.ndarray:
    """(n_rows, k) each row's k largest cosines, itself left out, ties to the lower row
    index: platonic-rep's compute_nearest_neighbors (fill_diagonal_(-1e8), argsort
    descending) with a stable order."""
    g = gram.copy()
    if origin is None:
        np.fill_diagonal(g, -np.inf)
    else:
        g[origin[:, None] == origin[None, :]] = -np.inf
    # a copy, so that the record does not keep argsort's whole (n_rows, n_rows) order alive
    return np.argsort(-g, axis=1, kind="stable")[:, :k].copy()


def _hsic_masked(rows, cols, kv, lv, m: int) -> float:
    """Song et al. (2012)'s unbiased HSIC of two kernels that are zero but at the entries
    (rows[e], cols[e]), where they are kv[e] and lv[e] (no entry on the diagonal), as
    platonic-rep's hsic_unbiased writes it for dense matrices (K̃, L̃: the diagonals zeroed):

        [Σ K̃∘L̃ᵀ + Σ K̃ · Σ L̃ / ((m − 1)(m − 2)) − 2 · 1ᵀK̃L̃1 / (m − 2)] / (m(m − 3))

    CKNNA's masked kernels hold at most k entries a row, so this costs O(m·k log(m·k)), not
    O(m²): Σ K̃∘L̃ᵀ pairs entry (r, n) with entry (n, r) where both exist, and 1ᵀK̃L̃1 is
    K̃'s column sums against L̃'s row sums. NaN below 4 rows, where it is undefined (a
    bootstrap resample of few distinct rows)."""
    if m < 4:
        return float("nan")
    key = rows * m + cols
    order = np.argsort(key)
    mirror = cols * m + rows
    at = np.minimum(np.searchsorted(key[order], mirror), len(key) - 1)
    hit = key[order][at] == mirror
    both = float(kv[hit] @ lv[order[at[hit]]])
    outer = 2.0 * np.bincount(cols, kv, m) @ np.bincount(rows, lv, m) / (m - 2)
    total = both + kv.sum() * lv.sum() / ((m - 1) * (m - 2)) - outer
    return float(total / (m * (m - 3)))


def _hsic_features(zx, zy, a, b) -> float:
    """The unbiased HSIC of the linear kernels of centred rows zx (n_rows, r_x), zy (n_rows,
    r_y) from sums over rows: with a, b the rows' squared norms (the kernels' diagonals) and
    Σ_r zx_r = 0 (so K̃1 = −a),

        [‖zxᵀzy‖²_F − a·b + Σa · Σb / ((m − 1)(m − 2)) − 2 a·b / (m − 2)] / (m(m − 3))

    equal to `_hsic_masked` (written out densely) of the uncentred rows' kernels (the estimator does not move
    with a shift of the rows)."""
    m = zx.shape[0]
    if (
        m < 4
    ):  # undefined (a bootstrap resample of few distinct rows): NaN, as bootstrap_values says
        return float("nan")
    cross = np.linalg.norm(zx.T @ zy) ** 2
    ab = float(a @ b)
    total = cross - ab + a.sum() * b.sum() / ((m - 1) * (m - 2)) - 2.0 * ab / (m - 2)
    return float(total / (m * (m - 3)))


def _rank_matrix(x: np.ndarray, origin) -> np.ndarray:
    """(n, n) of the rows x[origin] (x itself without origin): the ranks (ties averaged, scipy.stats.rankdata) of the correlation
    distances 1 − corr(x_a, x_b) over the pairs a < b, less their mean, symmetric, 0 on the
    diagonal and between copies of one row (rsatoolbox's calc_rdm(method="correlation")
    and compare(method="spearman"))."""
    from scipy.stats import rankdata

    c = x - x.mean(axis=1, keepdims=True)
    c = c / np.linalg.norm(c, axis=1, keepdims=True)
    rdm = 1.0 - c @ c.T
    rdm = rdm if origin is None else rdm[np.ix_(origin, origin)]
    a, b = np.triu_indices(len(rdm), 1)
    keep = np.ones(len(a), bool) if origin is None else origin[a] != origin[b]
    a, b = a[keep], b[keep]
    r = rankdata(rdm[a, b])
    out = np.zeros_like(rdm)
    out[a, b] = r - r.mean()
    return out + out.T


def _values(name: str, px: Prepared, py: Prepared, k: int) -> float:
    """One measure of one cell from the two records (same rows, same order)."""
    if name == "mknn":
        both = np.sort(np.concatenate([px.neighbours, py.neighbours], axis=1), axis=1)
        shared = (both[:, 1:] == both[:, :-1]).sum(axis=1)  # each list holds distinct rows
        return float(shared.mean() / px.neighbours.shape[1])
    if name == "cknna":
        m, k = px.neighbours.shape
        kx = np.repeat(np.arange(m), k) * m + px.neighbours.ravel()
        ky = np.repeat(np.arange(m), k) * m + py.neighbours.ravel()
        shared, ix, iy = np.intersect1d(kx, ky, assume_unique=True, return_indices=True)
        rows, cols = np.divmod(shared, m)
        cross = _hsic_masked(rows, cols, px.near.ravel()[ix], py.near.ravel()[iy], m)
        return _ratio(cross, px.knn_self * py.knn_self)
    if name == "rsa":
        return _ratio((px.ranks * py.ranks).sum(), (px.ranks**2).sum() * (py.ranks**2).sum())
    zx, zy = px.u * px.s, py.u * py.s
    if name == "cka":
        return float(np.linalg.norm(zx.T @ zy) ** 2 / (np.sum(px.s**4) * np.sum(py.s**4)) ** 0.5)
    if name == "cka-debiased":
        cross = _hsic_features(zx, zy, px.a, py.a)
        return _ratio(cross, px.hsic_self * py.hsic_self)
    if name == "procrustes":
        nuclear = np.linalg.svd(zx.T @ zy, compute_uv=False).sum()
        return float(np.arccos(np.clip(nuclear / np.sqrt(px.a.sum() * py.a.sum()), -1.0, 1.0)))
    if name == "cca":
        wx, wy = _whitening(px), _whitening(py)
        c = (wx[:, None] * (px.u.T @ py.u)) * wy[None, :]
        return float(np.sum(c * c) / min(px.width, py.width))
    ux, uy = _principal(px), _principal(py)
    return float(np.linalg.svd(ux.T @ uy, compute_uv=False).mean())  # svcca


def _ratio(numerator: float, product: float) -> float:
    """numerator / sqrt(product), NaN where the product is not positive (no variance)."""
    return float(numerator / np.sqrt(product)) if product > 0 else float("nan")


def _whitening(p: Prepared) -> np.ndarray:
    """(rank,) s / sqrt(s² + λ), λ = CCA_RIDGE·Σs²/width: the centred rows' SVD directions
    as (Cxx + λI)^(−1/2) scales them (Cxx = XcᵀXc; the directions of no variance add 0)."""
    ridge = CCA_RIDGE * np.sum(p.s**2) / p.width
    return p.s / np.sqrt(p.s**2 + ridge)


def _principal(p: Prepared) -> np.ndarray:
    """The SVD's first k directions u[:, :k] (n_rows, k): k the fewest leading ones whose
    s² reach SVCCA_VARIANCE of Σs² (Raghu et al. 2017's reduction)."""
    power = p.s**2
    k = min(int(np.searchsorted(np.cumsum(power), SVCCA_VARIANCE * power.sum())) + 1, len(power))
    return p.u[:, :k]


def _measure(name: str, x, y, k: int = K_NEIGHBOURS) -> float:
    """One measure of two arrays of rows, checked as `row_measures` checks a cell (the two
    named source and target boundary 0)."""
    _check_rows(x, y, k, (name,))
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    _check_boundary(x, "source", 0, (name,))
    _check_boundary(y, "target", 0, (name,))
    return float(observed_values({0: x}, {0: y}, (name,), k)[name][0, 0])


def mknn(x: np.ndarray, y: np.ndarray, k: int = K_NEIGHBOURS) -> float:
    """Mutual k-nearest-neighbour alignment (Huh et al. 2024, platonic-rep's mutual_knn).

        mknn = (1/M) Σ_r |N_x(r) ∩ N_y(r)| / k

    N_x(r): the k rows with the largest cosine to row r of x (unit-normalised rows, r itself
    left out, ties to the lower row index).

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.
    k : int, optional
        Neighbours, 1 ≤ k < n_rows.

    Returns
    -------
    float
        mknn, in [0, 1].
    """
    return _measure("mknn", x, y, k)


def neighbours(x: np.ndarray, k: int = K_NEIGHBOURS) -> np.ndarray:
    """N_x(r) of `mknn`: each row's neighbours by falling cosine.

    Parameters
    ----------
    x : array of shape (n_rows, d)
        The rows.
    k : int, optional
        Neighbours.

    Returns
    -------
    array of shape (n_rows, k)
        int, row indices.
    """
    _check_rows(x, x, k, ("mknn",))
    return prepare(x, ("mknn",), k).neighbours


def cknna(x: np.ndarray, y: np.ndarray, k: int = K_NEIGHBOURS) -> float:
    """CKNNA (platonic-rep's cknna, unbiased, distance-aware).

    With K, L the cosine kernels of the unit-normalised rows, A_x, A_y the 0/1 masks of each
    row's k nearest rows (as in `mknn`) and A = A_x∘A_y,

        cknna = HSIC_u(A∘K, A∘L) / sqrt(HSIC_u(A_x∘K, A_x∘K) · HSIC_u(A_y∘L, A_y∘L))

    HSIC_u: Song et al. (2012)'s unbiased estimator as platonic-rep writes it (its 1e-6 in the
    denominator left out).

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.
    k : int, optional
        Neighbours, 2 ≤ k < n_rows.

    Returns
    -------
    float
        cknna.
    """
    return _measure("cknna", x, y, k)


def rsa(x: np.ndarray, y: np.ndarray) -> float:
    """Representational similarity (Kriegeskorte et al. 2008), as rsatoolbox computes it.

    The Spearman correlation of the two representational dissimilarity matrices' upper
    triangles, each entry the correlation distance 1 − corr(x_a, x_b) of two rows (a row
    centred over its features).

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.

    Returns
    -------
    float
        rsa.
    """
    return _measure("rsa", x, y)


def cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA (Kornblith et al. 2019) on the centred rows Xc, Yc.

        cka = ‖Xcᵀ Yc‖²_F / (‖Xcᵀ Xc‖_F ‖Ycᵀ Yc‖_F)

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.

    Returns
    -------
    float
        cka, in [0, 1].
    """
    return _measure("cka", x, y)


def cka_debiased(x: np.ndarray, y: np.ndarray) -> float:
    """Debiased linear CKA (platonic-rep's unbiased_cka, its 1e-6 left out).

    HSIC_u(K, L) / sqrt(HSIC_u(K, K) HSIC_u(L, L)) with K = XXᵀ, L = YYᵀ and HSIC_u Song et
    al. (2012)'s unbiased estimator (`cknna`), computed from sums over rows.

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.
        n_rows ≥ 4.

    Returns
    -------
    float
        The debiased CKA.
    """
    return _measure("cka-debiased", x, y)


def procrustes(x: np.ndarray, y: np.ndarray) -> float:
    """Procrustes angular distance (netrep's LinearMetric(alpha=1, score_method="angular")).

    With Xc, Yc the centred rows scaled to unit Frobenius norm (the narrower side zero-padded,
    which changes nothing below),

        procrustes = arccos(max_Q ⟨Xc Q, Yc⟩) = arccos(‖Xcᵀ Yc‖_*)

    over orthogonal Q; ‖·‖_* the nuclear norm (the Procrustes similarity).

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.

    Returns
    -------
    float
        0 when y is a rotation of x, π/2 at most.
    """
    return _measure("procrustes", x, y)


def cca(x: np.ndarray, y: np.ndarray) -> float:
    """Mean squared canonical correlation (Kornblith et al. 2019's R²_CCA) of the centred rows.

    As align.measures.streamed.cca defines it from sums:

        cca = ‖(Cxx + λ_x I)^(−1/2) Cxy (Cyy + λ_y I)^(−1/2)‖²_F / min(d_source, d_target)

    Cxx = XcᵀXc, Cxy = XcᵀYc, λ = CCA_RIDGE·tr(C)/d (a singular covariance stays invertible).

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.

    Returns
    -------
    float
        cca; it nears 1 as the widths near n_rows, so read it with n_rows well above them.
    """
    return _measure("cca", x, y)


def svcca(x: np.ndarray, y: np.ndarray) -> float:
    """SVCCA (Raghu et al. 2017): canonical correlation of the leading SVD directions.

    Each side's centred rows are reduced by SVD to the fewest leading directions holding 99%
    of its variance, then the mean canonical correlation of the two reductions,
    (1/min(k_x, k_y)) Σ ρ_i.

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.

    Returns
    -------
    float
        svcca.
    """
    return _measure("svcca", x, y)


def _check_rows(x, y, k, measures, where: str = "") -> None:
    """The one-line refusals shared by every entry point: unknown measures, shapes, k."""
    bad = [m for m in measures if m not in ROW_MEASURES]
    if bad:
        raise InputError(
            f"`measures` {', '.join(map(str, bad))}: not a row measure; the row measures are "
            f"{', '.join(ROW_MEASURES)}"
        )
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise InputError(
            f"rows of shapes {x.shape} and {y.shape}{where}: give two (n_rows, width) arrays "
            "with one row per token in both"
        )
    m = x.shape[0]
    if any(n in ("mknn", "cknna") for n in measures):
        low = 2 if "cknna" in measures else 1
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not low <= k < m:
            raise InputError(
                f"`k` {k!r}: the nearest neighbours must be fewer than the {m:,} sampled rows "
                f"(a row is not its own neighbour): give {low} to {m - 1:,}"
            )
    if m < 4 and ("cka-debiased" in measures or "cknna" in measures):
        raise InputError(f"{m} sampled rows: the unbiased HSIC needs at least 4; sample more")


def _check_boundary(x: np.ndarray, side: str, b, measures) -> None:
    """Refuse rows that give no measure: non-finite values, no variance, a row of zero norm
    (no cosine) or of constant features (no correlation distance), each named."""
    if not np.isfinite(x).all():
        r = int(np.argwhere(~np.isfinite(x))[0, 0])
        raise NonFiniteError(f"{side} boundary {b}: non-finite value in sampled row {r}")
    if np.all(x == x[:1]):
        raise InputError(
            f"{side} boundary {b} has no variance over the {len(x):,} sampled rows (every row "
            "is the same): no measure is defined; leave the boundary out"
        )
    if any(n in NEIGHBOURS for n in measures) and not np.linalg.norm(x, axis=1).all():
        r = int(np.flatnonzero(np.linalg.norm(x, axis=1) == 0)[0])
        raise InputError(f"{side} boundary {b}: sampled row {r} is all zeros, so it has no cosine")
    constant = np.all(x == x[:, :1], axis=1)
    if "rsa" in measures and constant.any():
        r = int(np.flatnonzero(constant)[0])
        raise InputError(
            f"{side} boundary {b}: sampled row {r} is constant over its features, so its "
            "correlation distance is undefined"
        )


def observed_values(xs: dict, ys: dict, measures, k: int = K_NEIGHBOURS) -> dict:
    """{measure: (n_source, n_target)} on the sampled rows, in the dicts' key order; a cell
    whose measure is undefined (a denominator of 0) is refused, named."""
    px = {i: prepare(x, measures, k) for i, x in xs.items()}
    py = {j: prepare(y, measures, k) for j, y in ys.items()}
    out = _grid(px, py, measures, k)
    for name, grid in out.items():
        if not np.isfinite(grid).all():
            a, b = np.argwhere(~np.isfinite(grid))[0]
            raise InputError(
                f"source boundary {list(xs)[a]} × target boundary {list(ys)[b]}: {name} is "
                "undefined on the sampled rows (a side without variance in its denominator); "
                "sample more rows or leave the boundary out"
            )
    return out


def _grid(px: dict, py: dict, measures, k: int) -> dict:
    out = {n: np.empty((len(px), len(py))) for n in measures}
    for b, q in enumerate(py.values()):
        for a, p in enumerate(px.values()):
            for n in measures:
                out[n][a, b] = _values(n, p, q, k)
    return out


def null_values(xs: dict, ys: dict, perms: np.ndarray, measures, k: int = K_NEIGHBOURS) -> dict:
    """{measure: (K, n_source, n_target)}: each measure with the target's rows re-paired by
    each permutation (row r of the source with row perms[q, r] of the target), the same
    permutation for every target boundary. perms: (K, n_rows) from
    `calibration.draw_permutations`."""
    px = {i: prepare(x, measures, k) for i, x in xs.items()}
    py = {j: prepare(y, measures, k) for j, y in ys.items()}
    out = {n: np.empty((len(perms), len(px), len(py))) for n in measures}
    for q, perm in enumerate(perms):
        grid = _grid(px, {j: permuted(p, perm) for j, p in py.items()}, measures, k)
        for n in measures:
            out[n][q] = grid[n]
    return out


def bootstrap_values(xs: dict, ys: dict, docs, measures, k: int, resampling) -> dict:
    """{measure: (resamples, n_source, n_target)}: each measure on the rows of documents
    drawn with replacement (align.stats.bootstrap.indices over the sampled rows' documents,
    in increasing document id; a resample's rows are its documents' rows, document by
    document, a document drawn twice twice). A copy of a row is not that row's neighbour
    and their pair is out of RSA; NaN where a resample leaves a measure undefined
    (including fewer than k + 1 rows)."""
    docs = np.asarray(docs)
    ids, where = np.unique(docs, return_inverse=True)
    rows = [np.flatnonzero(where == d) for d in range(len(ids))]
    idx = bootstrap.indices(len(ids), resampling)
    out = {n: np.full((len(idx), len(xs), len(ys)), np.nan) for n in measures}
    for q, drawn in enumerate(idx):
        origin = np.concatenate([rows[d] for d in drawn])
        usable = [n for n in measures if n not in NEIGHBOURS or len(origin) > k]
        with np.errstate(invalid="ignore", divide="ignore"):
            px = {i: prepare(x, usable, k, origin) for i, x in xs.items()}
            py = {j: prepare(y, usable, k, origin) for j, y in ys.items()}
            grid = _grid(px, py, usable, k)
        for n in usable:
            out[n][q] = grid[n]
    return out


def row_measures(
    xs: dict,
    ys: dict,
    docs: np.ndarray,
    measures: tuple,
    *,
    k: int = K_NEIGHBOURS,
    permutations: int,
    seed: int,
    resampling,
) -> dict:
    """Every measure of `measures` for every (source, target) boundary pair on the M sampled
    rows, with its document-bootstrap interval and its permutation null:

        {measure: {"value", "low", "high", "null_mean", "null_std", "critical",
                   "calibrated", "p", "p_family": (n_source, n_target),
                   "direction": "similarity" | "distance",
                   "null_scheme": "documents" | "rows"}}

    value: the measure (`mknn`, `cknna`, `rsa`, `cka`, `cka_debiased`, `procrustes`, `cca`,
    `svcca`); low, high: the 2.5 and 97.5 percentiles over `bootstrap_values`
    (bootstrap.percentile_interval); the rest: calibration.summarise over `null_values`
    with calibration.draw_permutations(docs, permutations, seed).

    xs: {source boundary: (n_rows, d_source)}; ys: {target boundary: (n_rows, d_target)},
    row r of each from one token; docs: (n_rows,) int, each row's document; measures: names
    in ROW_MEASURES; k: the neighbours of mknn and cknna; permutations: K; seed: the
    permutations' seed; resampling: align.stats.bootstrap.Resampling."""
    measures = tuple(measures)
    if not xs or not ys:
        raise InputError("no boundary to measure: give at least one source and one target")
    first = next(iter(xs.values()))
    _check_rows(first, next(iter(ys.values())), k, measures)
    xs = {i: np.asarray(x, np.float64) for i, x in xs.items()}
    ys = {j: np.asarray(y, np.float64) for j, y in ys.items()}
    docs = np.asarray(docs)
    for side, grid in (("source", xs), ("target", ys)):
        for b, x in grid.items():
            _check_rows(first, x, k, measures, f" at {side} boundary {b}")
            _check_boundary(x, side, b, measures)
    if docs.shape != (len(first),):
        raise InputError(
            f"`docs` of shape {docs.shape}: give one document id per sampled row ({len(first):,})"
        )
    value = observed_values(xs, ys, measures, k)
    perms, scheme = calibration.draw_permutations(docs, permutations, seed)
    null = null_values(xs, ys, perms, measures, k)
    resampled = bootstrap_values(xs, ys, docs, measures, k, resampling)
    out = {}
    for n in measures:
        direction, ideal = ROW_MEASURES[n]
        low, high = bootstrap.percentile_interval(resampled[n])
        out[n] = {"value": value[n], "low": low, "high": high}
        out[n].update(calibration.summarise(value[n], null[n], direction, ideal))
        out[n].update(direction=direction, null_scheme=scheme)
    return out
