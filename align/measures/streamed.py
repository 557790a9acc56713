"""Similarity measures of two layers from sums over rows (docs/methods.md, Similarity
measures): linear CKA, debiased CKA, orthogonal Procrustes, mean squared CCA and SVCCA of
every boundary pair, from sums one pass over the held-out rows accumulates, in groups of
held-out documents (`row_sums`); the jackknife's recomputation without a group comes from the
sums of every row and that group's own (`leave_group_out`: the fit makes one group's sums at a
time), or from the groups' sums side by side (`resampled`).

Rows: X (n, d_S) of a source boundary, Y (n, d_T) of a target boundary, paired row by row,
shifted by any fixed vector (every measure here is unchanged by a shift of either side; the
fit uses the maps' training means, so the float64 sums cancel little when centred).

The sums, per group g of rows (leading axis G everywhere):

    source i:  n, s = Σx (d_S), S = Σxxᵀ (d_S, d_S), q = Σ‖x‖²x (d_S), f = Σ‖x‖⁴
    target j:  the same of y
    pair (i, j):  xy = Σxyᵀ (d_S, d_T), p = Σ‖x‖²‖y‖², r_xy = Σ‖x‖²y (d_T), r_yx = Σ‖y‖²x (d_S)
                  with a rotation R (d_S, d_T) of the pair (procrustes-heldout):
                  qxy = ⟨R, Σxyᵀ⟩, q_sy = R Σy (d_S)
"""

from __future__ import annotations

import numpy as np

from align.errors import NonFiniteError
from align.ridge.backend import CPU, Backend
from align.ridge.statistics import gather

SIDE_FIELDS = ("n", "s", "S", "q", "f")
PAIR_FIELDS = ("xy", "p", "r_xy", "r_yx")
CCA_RIDGE = 1e-6  # ε: CCA's covariances get ε·tr(C)/d on their diagonal (docs/methods.md)
MEASURE_GROUPS = 10  # groups of held-out documents the measures' jackknife leaves out in turn
SVCCA_VARIANCE = 0.99  # SVCCA keeps the top directions holding this share of each side's variance


# -- sums ----------------------------------------------------------------------------------


def row_sums(
    xs: dict,
    ys: dict,
    shifts: tuple,
    groups: np.ndarray,
    n_groups: int,
    backend: Backend = CPU,
    rotations: dict | None = None,
) -> dict:
    """The sums of the module docstring of one chunk of rows, per group.

    xs[i] (n, d_S), ys[j] (n, d_T): paired rows (numpy, or tensors on the backend's
    device); shifts = ({i: (d_S,)}, {j: (d_T,)}) subtracted first; groups (n,) int in
    0..n_groups−1: each row's group; rotations {(i, j): (d_S, d_T)} (or None): the pairs'
    training rotations, whose qxy and q_sy are added. Returns {"source": {i: {field: (G, ...)}}, "target":
    {j: ...}, "pair": {(i, j): ...}} as float64 numpy.

    Each side's rows are gathered side by side in group order, float64 (n, ΣD)
    (`ridge.statistics.gather`, as the training statistics are), so a group's Σxyᵀ of every
    pair is one product (rows, ΣD_S)ᵀ (rows, ΣD_T), and its p, r_xy and r_yx of every pair are
    products with the (rows, L) matrices of the rows' squared norms: a pair's sums are views
    into these block arrays, not arrays of their own."""
    groups = np.asarray(groups, dtype=np.int64)
    counts = np.bincount(groups, minlength=n_groups)
    order = np.argsort(groups, kind="stable")
    source, target = tuple(xs), tuple(ys)
    X = gather(xs, source, order, shifts[0], backend, {}, "x")
    Y = gather(ys, target, order, shifts[1], backend, {}, "y")
    if backend.torch is not None and backend.on_cpu:
        # rows in host memory: the products through numpy's BLAS, ~10% faster here than
        # torch's, and XᵀX as a symmetric rank-k update (half a product)
        X, Y, backend = X.numpy(), Y.numpy(), CPU
    d_s, d_t = X.shape[1] // len(source), Y.shape[1] // len(target)
    xy = np.zeros((n_groups, X.shape[1], Y.shape[1]))
    p = np.zeros((n_groups, len(source), len(target)))
    r_xy = np.zeros((n_groups, len(source), Y.shape[1]))
    r_yx = np.zeros((n_groups, len(target), X.shape[1]))
    out = {
        "source": {i: _zeros_side(n_groups, d_s) for i in source},
        "target": {j: _zeros_side(n_groups, d_t) for j in target},
        "pair": {},
    }
    at = 0
    for g in np.flatnonzero(counts):
        Xg, Yg = X[at : at + counts[g]], Y[at : at + counts[g]]
        at += counts[g]
        x2, y2 = backend.blocknorm2(Xg, len(source)), backend.blocknorm2(Yg, len(target))
        _add_sides(out["source"], source, Xg, x2, g, backend)
        _add_sides(out["target"], target, Yg, y2, g, backend)
        _product(xy[g], Xg, Yg, d_s, d_t, backend)
        p[g] = backend.get(x2.T @ y2)
        r_xy[g] = backend.get(x2.T @ Yg)
        r_yx[g] = backend.get(y2.T @ Xg)
    for a, i in enumerate(source):
        cols = slice(a * d_s, (a + 1) * d_s)
        for b, j in enumerate(target):
            rows = slice(b * d_t, (b + 1) * d_t)
            acc = {"xy": xy[:, cols, rows], "p": p[:, a, b], "r_xy": r_xy[:, a, rows]}
            acc["r_yx"] = r_yx[:, b, cols]
            if rotations is not None and (i, j) in rotations:
                R = rotations[(i, j)]
                acc["qxy"] = np.einsum("gst,st->g", acc["xy"], R)
                acc["q_sy"] = out["target"][j]["s"] @ R.T
            out["pair"][(i, j)] = acc
    return out


def _add_sides(acc: dict, keys: tuple, rows, norms2, g: int, backend: Backend) -> None:
    """Group g's n, s, S, q, f of every boundary of one side: rows (m, L·d) side by side,
    norms2 (m, L) their squared norms per boundary."""
    d = rows.shape[1] // len(keys)
    s = backend.get(rows.sum(0)).reshape(len(keys), d)
    f = backend.get((norms2 * norms2).sum(0))
    for a, k in enumerate(keys):
        A = rows[:, a * d : (a + 1) * d]
        acc[k]["n"][g] = len(rows)
        acc[k]["s"][g] = s[a]
        acc[k]["S"][g] = backend.get(A.T @ A)
        acc[k]["q"][g] = backend.get(norms2[:, a] @ A)
        acc[k]["f"][g] = f[a]


def _product(out: np.ndarray, X, Y, d_s: int, d_t: int, backend: Backend) -> None:
    """out = XᵀY, (ΣD_S, ΣD_T) float64 numpy: through numpy's matmul straight into out, or on
    a torch device one pair at a time (a device temporary of one pair's d_S × d_T, whatever
    the block's width)."""
    if backend.torch is None:
        np.matmul(X.T, Y, out=out)
        return
    for a in range(0, X.shape[1], d_s):
        for b in range(0, Y.shape[1], d_t):
            out[a : a + d_s, b : b + d_t] = backend.get(X[:, a : a + d_s].T @ Y[:, b : b + d_t])


def _zeros_side(G: int, d: int) -> dict:
    return {
        "n": np.zeros(G),
        "s": np.zeros((G, d)),
        "S": np.zeros((G, d, d)),
        "q": np.zeros((G, d)),
        "f": np.zeros(G),
    }


def add_sums(a: dict, b: dict) -> dict:
    """a += b of two `row_sums` results over the same boundaries, in place (the sums are
    large: no third copy); returns a."""
    for key in ("source", "target", "pair"):
        for k, fields in a[key].items():
            for f, v in fields.items():
                v += b[key][k][f]
    return a


def sums_bytes(nI: int, nJ: int, d_s: int, d_t: int, n_groups: int) -> int:
    """Bytes of one `row_sums` result (float64): per group, every source's and target's
    n, s, S, q, f and every pair's xy, p, r_xy, r_yx, and qxy, q_sy (counted always: d_S + 1
    values a pair, held only with a rotation)."""
    side = nI * (d_s * d_s + 2 * d_s + 2) + nJ * (d_t * d_t + 2 * d_t + 2)
    pair = nI * nJ * (d_s * d_t + 2 * d_s + d_t + 2)
    return 8 * n_groups * (side + pair)


def weighted(sums: dict, w: np.ndarray | None = None) -> dict:
    """One side's or pair's sums ({field: (G, ...)}) summed over groups with weights w (G,)
    (None: all ones): {field: (...)}."""
    if w is None:
        return {f: v.sum(0) for f, v in sums.items()}
    return {f: np.tensordot(w, v, axes=(0, 0)) for f, v in sums.items()}


# -- measures from reduced sums --------------------------------------------------------------


def centred(side: dict) -> np.ndarray:
    """C = Σ(x − x̄)(x − x̄)ᵀ = S − s sᵀ/n of one side's reduced sums."""
    return side["S"] - np.outer(side["s"], side["s"]) / side["n"]


def cross(x: dict, y: dict, pair: dict) -> np.ndarray:
    """Σ(x − x̄)(y − ȳ)ᵀ = xy − s_x s_yᵀ/n."""
    return pair["xy"] - np.outer(x["s"], y["s"]) / x["n"]


def _cached(side: dict, key: str, make):
    """side[key], made once: a side's reduced sums serve every pair it is in, so its
    decompositions are computed once per side, not once per pair."""
    if key not in side:
        side[key] = make()
    return side[key]


def _norm(side: dict) -> float:
    return _cached(side, "_norm", lambda: float(np.linalg.norm(centred(side))))


def cka(x: dict, y: dict, pair: dict) -> float:
    """Linear CKA (Kornblith et al. 2019) on centred rows: ‖XᵀY‖²_F / (‖XᵀX‖_F ‖YᵀY‖_F)."""
    Cxy = cross(x, y, pair)
    return float(np.sum(Cxy * Cxy) / (_norm(x) * _norm(y)))


def hsic_unbiased(m: float, kl: float, k1: float, l1: float, k1l1: float) -> float:
    """Song et al. (2012) Eq. 5, the unbiased HSIC of m rows from its kernel sums:

        [tr(K̃L̃) + (1ᵀK̃1)(1ᵀL̃1)/((m−1)(m−2)) − 2/(m−2)·1ᵀK̃L̃1] / (m(m−3))

    kl = tr(K̃L̃), k1 = 1ᵀK̃1, l1 = 1ᵀL̃1, k1l1 = 1ᵀK̃L̃1 (K̃, L̃ the kernels with zero diagonal)."""
    return (kl + k1 * l1 / ((m - 1) * (m - 2)) - 2.0 * k1l1 / (m - 2)) / (m * (m - 3))


def _self_hsic(side: dict) -> float:
    """HSIC(K, K), K = XXᵀ: tr(K̃²) = ‖S‖² − Σ‖x‖⁴, 1ᵀK̃1 = ‖s‖² − tr S,
    1ᵀK̃²1 = sᵀSs − 2 q·s + Σ‖x‖⁴."""
    S, s, q, f, m = side["S"], side["s"], side["q"], side["f"], side["n"]
    k1 = float(s @ s - np.trace(S))
    return hsic_unbiased(m, float(np.sum(S * S) - f), k1, k1, float(s @ S @ s - 2 * q @ s + f))


def _hsic(side: dict) -> float:
    return _cached(side, "_hsic", lambda: _self_hsic(side))


def cka_debiased(x: dict, y: dict, pair: dict) -> float:
    """CKA with the unbiased HSIC, as platonic-rep's `metrics.py` `unbiased_cka` (linear
    kernels of the rows as given, K = XXᵀ, L = YYᵀ; no ε in the denominator):
    HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)), with

        tr(K̃L̃) = ‖Σxyᵀ‖² − Σ‖x‖²‖y‖²,  1ᵀK̃1 = ‖Σx‖² − Σ‖x‖²,
        1ᵀK̃L̃1 = Σxᵀ (Σxyᵀ) Σy − Σ‖x‖²y·Σy − Σ‖y‖²x·Σx + Σ‖x‖²‖y‖²."""
    xy, sx, sy, p = pair["xy"], x["s"], y["s"], pair["p"]
    kl = float(np.sum(xy * xy) - p)
    k1, l1 = float(sx @ sx - np.trace(x["S"])), float(sy @ sy - np.trace(y["S"]))
    k1l1 = float(sx @ xy @ sy - pair["r_xy"] @ sy - pair["r_yx"] @ sx + p)
    hkl = hsic_unbiased(x["n"], kl, k1, l1, k1l1)
    return hkl / float(np.sqrt(_hsic(x) * _hsic(y)))


def nuclear_norm(C: np.ndarray) -> float:
    """‖C‖_* = Σ σ_i = Σ sqrt(λ_i(G)), G = CCᵀ or CᵀC, whichever is smaller: one Gram and
    `eigvalsh` instead of an SVD (about half its time at the measures' widths). The Gram's
    eigenvalues carry an absolute error of order ε·λ_max, so those below
    max(G.shape)·ε·λ_max are taken as the zeros they are within round-off (an SVD would
    give them as σ ≈ ε·σ_max; a square root of a rounding error would add √ε·σ_max each)."""
    G = C @ C.T if C.shape[0] <= C.shape[1] else C.T @ C
    lam = np.linalg.eigvalsh(G)
    tol = max(G.shape) * np.finfo(np.float64).eps * max(lam[-1], 0.0)
    return float(np.sqrt(lam[lam > tol]).sum())


def procrustes(x: dict, y: dict, pair: dict) -> float:
    """The angular Procrustes distance of netrep's `LinearMetric(alpha=1)` (centred rows, the
    narrower side zero-padded, which changes no sum): arccos(‖X̂ᵀŶ‖_*), X̂ = X_c/‖X_c‖_F,
    Ŷ = Y_c/‖Y_c‖_F; ‖X̂ᵀŶ‖_* (the nuclear norm, the Procrustes similarity) clipped to [−1, 1]."""
    nuc = nuclear_norm(cross(x, y, pair))
    sim = nuc / np.sqrt(np.trace(centred(x)) * np.trace(centred(y)))
    return float(np.arccos(np.clip(sim, -1.0, 1.0)))


def rotation(C: np.ndarray) -> np.ndarray:
    """The orthogonal Procrustes rotation of a centred cross product C = XᵀY (d_S, d_T):
    U Vᵀ of C's thin SVD C = U Σ Vᵀ, the block of the zero-padded problem's rotation that
    the rows use (argmax over orthogonal R of ⟨R, C⟩; `scipy.linalg.orthogonal_procrustes`
    of the padded rows)."""
    U, _, Vt = np.linalg.svd(C, full_matrices=False)
    return U @ Vt


def procrustes_heldout(x: dict, y: dict, pair: dict) -> float:
    """The held-out Procrustes error ‖Ŷ − X̂R‖_F, a distance in [0, 2]: R the rotation fitted
    on the training rows (`rotation` of their centred XᵀY), X̂ = X_c/‖X_c‖_F and
    Ŷ = Y_c/‖Y_c‖_F the held-out rows centred by their own means and scaled to unit norm,
    the narrower side zero-padded (so ‖X̂R‖_F = 1):

        ‖Ŷ − X̂R‖²_F = 2 − 2⟨R, C_xy⟩ / sqrt(tr C_xx · tr C_yy),
        ⟨R, C_xy⟩ = qxy − s_x · q_sy / n  (the pair's sums with its rotation, `row_sums`)."""
    inner = pair["qxy"] - x["s"] @ pair["q_sy"] / x["n"]
    cos = inner / np.sqrt(np.trace(centred(x)) * np.trace(centred(y)))
    return float(np.sqrt(max(2.0 - 2.0 * cos, 0.0)))


def _spectrum(side: dict) -> tuple:
    """(λ ascending, Q) of the side's centred covariance C = Q diag(λ) Qᵀ, once per side:
    CCA's whitening (λ + ridge) and SVCCA's principal directions (the top of λ) both come
    from it, so a side is decomposed once for every pair and measure it is in."""
    return _cached(side, "_eigh", lambda: np.linalg.eigh(centred(side)))


def _rotated(x: dict, y: dict, pair: dict) -> np.ndarray:
    """Q_xᵀ C_xy Q_y (d_S, d_T), C_xy in the two sides' eigenbases, once per pair for CCA and
    SVCCA."""
    return _cached(
        pair, "_rotated", lambda: _spectrum(x)[1].T @ cross(x, y, pair) @ _spectrum(y)[1]
    )


def cca(x: dict, y: dict, pair: dict) -> float:
    """Mean squared canonical correlation (Kornblith et al. 2019's R²_CCA):
    ‖Cxx^(−1/2) Cxy Cyy^(−1/2)‖²_F / min(d_S, d_T), the covariances with CCA_RIDGE·tr(C)/d
    on their diagonal (a singular one stays invertible). In the eigenbases (C = QΛQᵀ), with
    r = CCA_RIDGE·tr(C)/d: Σ_ab (Q_xᵀ Cxy Q_y)²_ab / ((λ_x,a + r_x)(λ_y,b + r_y)), the
    Frobenius norm being unchanged by the rotations."""
    lx, ly = _spectrum(x)[0], _spectrum(y)[0]
    wx = 1.0 / np.sqrt(lx + CCA_RIDGE * np.trace(centred(x)) / len(lx))
    wy = 1.0 / np.sqrt(ly + CCA_RIDGE * np.trace(centred(y)) / len(ly))
    M = _rotated(x, y, pair) * wx[:, None] * wy[None, :]
    return float(np.sum(M * M) / min(len(lx), len(ly)))


def _principal(side: dict, share: float) -> tuple:
    """(k, λ (k,)): the fewest top eigenvalues of the side's C whose sum reaches share·tr(C),
    largest first; their eigenvectors are the last k columns of `_spectrum`'s Q, reversed."""
    lam = _spectrum(side)[0][::-1]
    k = int(np.searchsorted(np.cumsum(lam), share * lam.sum())) + 1
    k = min(k, len(lam))
    return k, lam[:k]


def svcca(x: dict, y: dict, pair: dict) -> float:
    """SVCCA (Raghu et al. 2017): each side reduced to its top principal directions holding
    SVCCA_VARIANCE of its variance (V_x, λ_x), then the mean canonical correlation of the
    reduced rows: the singular values of Λ_x^(−1/2) V_xᵀ Cxy V_y Λ_y^(−1/2), averaged over
    min(k_x, k_y) (the reduced covariances are diagonal and positive: no regularisation).
    V_xᵀ Cxy V_y is the top-k corner of `_rotated` (rows and columns reversed)."""
    kx, lx = _principal(x, SVCCA_VARIANCE)
    ky, ly = _principal(y, SVCCA_VARIANCE)
    M = _rotated(x, y, pair)[::-1, ::-1][:kx, :ky] / np.sqrt(lx)[:, None] / np.sqrt(ly)[None, :]
    return float(np.linalg.svd(M, compute_uv=False).mean())


# Each measure's range, where its interval is clipped: CKA, R²_CCA and SVCCA's mean canonical
# correlation lie in [0, 1]; the debiased CKA in [−1, 1] (the unbiased HSIC is an inner product
# of U-centred kernels, so Cauchy–Schwarz bounds the ratio); Procrustes' arccos of a
# similarity in [0, 1] in [0, π/2]; the held-out Procrustes error of unit-norm sides in [0, 2].
RANGES = {
    "cka": (0.0, 1.0),
    "cka-debiased": (-1.0, 1.0),
    "procrustes": (0.0, np.pi / 2),
    "procrustes-heldout": (0.0, 2.0),
    "cca": (0.0, 1.0),
    "svcca": (0.0, 1.0),
}


FUNCTIONS = {
    "cka": cka,
    "cka-debiased": cka_debiased,
    "procrustes": procrustes,
    "procrustes-heldout": procrustes_heldout,
    "cca": cca,
    "svcca": svcca,
}


def has_variance(side: dict) -> bool:
    """A side's reduced sums hold at least 4 rows (the debiased HSIC's m(m−3)) and a centred
    covariance of positive trace."""
    with np.errstate(all="ignore"):
        return bool(side["n"] >= 4 and np.trace(centred(side)) > 0)


def check_variance(x: dict, y: dict, where: tuple) -> None:
    """Refuse (NonFiniteError) a pair whose source or target rows have no variance (tr of
    the centred covariance ≤ 0, or fewer than 4 rows: the debiased HSIC's m(m−3)), naming
    the pair (source boundary, target boundary)."""
    i, j = where
    for side, s, b in (("source", x, i), ("target", y, j)):
        if not has_variance(s):
            raise NonFiniteError(
                f"source {i} -> target {j}: the held-out rows of {side} boundary {b} have no "
                f"variance ({int(s['n'])} rows), so no similarity measure is defined there; "
                "nothing was written (fit other boundaries, or a corpus with more held-out text)"
            )


def prepare(side: dict, names) -> dict:
    """One side's reduced sums with the decompositions the measures `names` read of it made
    (`_cached`), so that the pairs it is in, computed side by side, only read them."""
    if not has_variance(side):  # refused by its pairs (`check_variance`), never decomposed
        return side
    if "cka" in names:
        _norm(side)
    if "cka-debiased" in names:
        _hsic(side)
    if "cca" in names or "svcca" in names:
        _spectrum(side)
    return side


def pair_measures(x: dict, y: dict, pair: dict, names, where: tuple) -> dict:
    """{name: value} of the streamed measures `names` of one pair from its reduced sums
    (`weighted`), refused first without variance (`check_variance`)."""
    check_variance(x, y, where)
    return {n: FUNCTIONS[n](x, y, pair) for n in names}


def leave_group_out(total: dict, group: dict, names, each=None) -> dict:
    """{(i, j): {name: θ_(g)}}: every measure of every pair of `total` recomputed without
    the rows of one group g, the jackknife's recomputation from two one-group `row_sums`
    results: `total` of every held-out row and `group` of group g's rows alone,

        θ_(g) = f(sums(all rows) − sums(group g's rows)) = f(Σ_{h ≠ g} sums(group h)),

    the same sums as the weights 1 − e_g give over the G groups' sums (`resampled`), to
    round-off (a difference of two float64 sums, of order ε·‖sums‖), for every measure: the
    Frobenius-type (CKA, debiased CKA, procrustes-heldout) and the spectral (Procrustes'
    nuclear norm, CCA, SVCCA) alike, since the measures are recomputed from the sums
    themselves. Each side is reduced and decomposed once (`prepare`); a pair's difference
    is made when the pair is computed, so beyond the two inputs the sides and one pair's
    sums per worker are held. `each(f, items)` runs f over items ([f(x) for x in items] by
    default; the fit passes its threads). NaN where the rows left of a side have no
    variance."""
    each = each or (lambda f, items: [f(x) for x in items])

    def minus(a: dict, b: dict) -> dict:
        return {f: a[f][0] - b[f][0] for f in a}

    xr = {i: minus(s, group["source"][i]) for i, s in total["source"].items()}
    yr = {j: minus(s, group["target"][j]) for j, s in total["target"].items()}
    each(lambda side: prepare(side, names), [*xr.values(), *yr.values()])

    def one(key):
        i, j = key
        with np.errstate(all="ignore"):
            if not (has_variance(xr[i]) and has_variance(yr[j])):
                return {n: np.nan for n in names}
            pb = minus(total["pair"][key], group["pair"][key])
            return {n: FUNCTIONS[n](xr[i], yr[j], pb) for n in names}

    return dict(zip(total["pair"], each(one, list(total["pair"]))))


def resampled(sums: dict, names, w: np.ndarray) -> dict:
    """{(i, j): {name: (B,)}} every measure of every pair of `sums` (a `row_sums` result, or
    its groups' subset) on every weighting of groups: w (B, G) the weight of each group in
    each recomputation (the jackknife's: ones with a 0 at the group left out); each side
    reduced (and decomposed) once per row of w; NaN where a recomputation's rows of a side
    have no variance."""
    out = {k: {n: np.full(len(w), np.nan) for n in names} for k in sums["pair"]}
    for b, wb in enumerate(w):
        xr = {i: weighted(s, wb) for i, s in sums["source"].items()}
        yr = {j: weighted(s, wb) for j, s in sums["target"].items()}
        ok = {
            (key, k): has_variance(s)
            for key, side in (("source", xr), ("target", yr))
            for k, s in side.items()
        }
        with np.errstate(all="ignore"):
            for (i, j), pair in sums["pair"].items():
                if ok[("source", i)] and ok[("target", j)]:
                    pb = weighted(pair, wb)
                    for n in names:
                        out[(i, j)][n][b] = FUNCTIONS[n](xr[i], yr[j], pb)
    return out
