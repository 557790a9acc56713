"""Every row measure of a cell (a source and a target boundary) read from two prepared records
(`align.measures.prepared`), pure: each measure's rows form (`mknn` ... `svcca`, each
`f(px, py, k) -> float`, the `rows` of its `registry.Measure`) on the sampled rows or on rows
re-paired by a null draw's permutation, `grid` of them over every cell, and
`weighted_grid` on the rows written w_r times (a document-bootstrap resample, a jackknife's
rows left), without a new sort or neighbour search (docs/measures-rows.md). The spectral measures' formulas are
`formulas`', shared with the sums form (`streamed`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from align.measures import formulas
from align.measures import prepared as P
from align.ridge.backend import CPU, Backend


def mknn(px: P.Prepared, py: P.Prepared, k: int) -> float:
    """mknn of a cell (`rows.mknn`): the mean share of a row's k neighbours both lists hold."""
    both = np.sort(np.concatenate([px.order[:, :k], py.order[:, :k]], axis=1), axis=1)
    shared = (both[:, 1:] == both[:, :-1]).sum(axis=1)  # each list holds distinct rows
    return float(shared.mean() / k)


def cknna(px: P.Prepared, py: P.Prepared, k: int) -> float:
    """CKNNA of a cell (`rows.cknna`): the unbiased HSIC of the kernels masked by the shared
    neighbours, over the records' own (`P.Prepared.knn_self`)."""
    m = len(px.order)
    kx = np.repeat(np.arange(m), k) * m + px.order[:, :k].ravel()
    ky = np.repeat(np.arange(m), k) * m + py.order[:, :k].ravel()
    shared, ix, iy = np.intersect1d(kx, ky, assume_unique=True, return_indices=True)
    rows, cols = np.divmod(shared, m)
    near_x, near_y = px.near[:, :k].ravel()[ix], py.near[:, :k].ravel()[iy]
    cross = P.hsic_masked(rows, cols, near_x, near_y, m)
    return formulas.ratio(cross, px.knn_self * py.knn_self)


def rsa(px: P.Prepared, py: P.Prepared, k: int) -> float:
    """RSA of a cell (`rows.rsa`): the correlation of the centred ranks (k unused)."""
    return formulas.ratio(P.dot(px.ranks, py.ranks), px.ranks_square * py.ranks_square)


# The spectral measures' rows forms give `formulas` what the sums form gives it, from each
# side's SVD X_c = u·diag(s)·vᵀ: λ = s², C_xx's eigenvectors v, so C_xy in the eigenbases is
# B = (u·s)ᵀ(u·s) of the two sides, ‖C_xx‖_F = sqrt(Σs⁴), tr C_xx = Σs² (= Σ‖x_c‖²).


def cka(px: P.Prepared, py: P.Prepared, k: int) -> float:
    """Linear CKA of a cell (`formulas.cka`; k unused)."""
    cross2 = np.linalg.norm((px.u * px.s).T @ (py.u * py.s)) ** 2
    return formulas.cka(cross2, np.sum(px.s**4) ** 0.5, np.sum(py.s**4) ** 0.5)


def cka_debiased(px: P.Prepared, py: P.Prepared, k: int) -> float:
    """Debiased CKA of a cell (`formulas.cka_debiased`; k unused)."""
    cross = P.hsic_features(px.u * px.s, py.u * py.s, px.a, py.a)
    return formulas.cka_debiased(cross, px.hsic_self, py.hsic_self)


def procrustes(px: P.Prepared, py: P.Prepared, k: int) -> float:
    """Procrustes' angular distance of a cell (`formulas.procrustes`; k unused): ‖C_xy‖_* the
    sum of B's singular values."""
    nuclear = np.linalg.svd((px.u * px.s).T @ (py.u * py.s), compute_uv=False).sum()
    return formulas.procrustes(nuclear, px.a.sum(), py.a.sum())


def cca(px: P.Prepared, py: P.Prepared, k: int) -> float:
    """R²_CCA of a cell (`formulas.cca`; k unused)."""
    B = (px.u * px.s).T @ (py.u * py.s)
    return formulas.cca(B, px.s**2, py.s**2, px.width, py.width)


def svcca(px: P.Prepared, py: P.Prepared, k: int) -> float:
    """SVCCA of a cell (`formulas.svcca`; k unused): B of the top directions alone."""
    kx, ky = formulas.principal(px.s**2), formulas.principal(py.s**2)
    B = (px.u[:, :kx] * px.s[:kx]).T @ (py.u[:, :ky] * py.s[:ky])
    return formulas.svcca(B, px.s**2, py.s**2)


def grid(px: dict, py: dict, forms: dict, k: int) -> dict:
    """{measure: (n_source, n_target)} of every pair of records: forms {measure: its rows
    form, f(px, py, k) -> float} (`registry.Measure.rows`)."""
    out = {n: np.empty((len(px), len(py))) for n in forms}
    for b, q in enumerate(py.values()):
        for a, p in enumerate(px.values()):
            for n, f in forms.items():
                out[n][a, b] = f(p, q, k)
    return out


# ---- a recomputation by multiplicities ----------------------------------------------------------

# How a measure's recomputation under weights reads the prepared records (a measure's
# `registry.Measure.reweighted`): its neighbour lists (`neighbour_cell`), or RSA's ranks under
# the pairs' weights (`_rsa_grid`); a measure with neither is recomputed on the rows.
BY_NEIGHBOURS, BY_RANKS = "neighbours", "ranks"
TARGETS = 4  # target boundaries a product of RSA's scaled ranks, held beside the sources'


@dataclass(frozen=True)
class Drawn:
    """One boundary's neighbour lists under a resample, as sparse entries: entry e stands for
    every copy of row rows[e] having the first counts[e] copies of row cols[e] among its k
    neighbours, at cosine near[e]; mirror[e] the entry (cols[e], rows[e]) or −1; keys[e] =
    rows[e]·M + cols[e]; knn_self HSIC_u(A_x∘K, A_x∘K) over the resample (None unless asked)."""

    rows: np.ndarray
    cols: np.ndarray
    counts: np.ndarray
    near: np.ndarray
    mirror: np.ndarray
    keys: np.ndarray
    knn_self: float | None


def drawn(p: P.Prepared, w: np.ndarray, k: int, slot: np.ndarray, cknna: bool) -> Drawn | None:
    """The `Drawn` lists of record p under multiplicities w (M,) int: each drawn row r (w_r >
    0) walks its order (`P.Prepared.order`, then `P.full_order` where the L kept run out) and
    takes min(w_s, max(k − C, 0)) copies of each row s, C the copies taken before s. None
    where a drawn row has fewer than k other rows' copies (n − w_r < k): the measure is
    undefined there. `slot` (M·M,) int32 zeros, a scratch returned zeroed."""
    m, n = len(w), int(w.sum())
    r = np.flatnonzero(w)
    if n - int(w[r].max()) < k:
        return None
    wo = w[p.order[r]]
    cum = np.cumsum(wo, axis=1)
    take = np.minimum(wo, np.maximum(k - (cum - wo), 0))
    keep = take > 0
    short = cum[:, -1] < k  # the L kept are not enough: the row's whole order
    keep[short] = False
    parts = [(np.repeat(r, keep.sum(1)), p.order[r][keep], take[keep], p.near[r][keep])]
    for row in r[short]:
        order, near = P.full_order(p, int(row))
        wf = w[order]
        t = np.minimum(wf, np.maximum(k - (np.cumsum(wf) - wf), 0))
        on = t > 0
        parts.append((np.full(int(on.sum()), row), order[on], t[on], near[on]))
    rows, cols, counts, near = (np.concatenate(f) for f in zip(*parts, strict=True))
    keys = rows.astype(np.int64) * m + cols
    slot[keys] = np.arange(1, len(keys) + 1)
    mirror = slot[cols.astype(np.int64) * m + rows] - 1
    slot[keys] = 0
    self_ = P.hsic_counted(w, rows, cols, counts, near, near, mirror) if cknna else None
    return Drawn(rows, cols, counts, near, mirror, keys, self_)


def neighbour_cell(dx: Drawn, dy: Drawn, w: np.ndarray, k: int, slot, measures) -> dict:
    """mknn and cknna of a cell under multiplicities w, with dx's entries already written in
    `slot` (slot[dx.keys] = 1..E). An instance's shared neighbours are, per row s, the
    min(counts_x, counts_y) first copies of s both lists hold:

        mknn  = Σ_e w[r_e]·min(counts_x, counts_y)[e] / (k·n)
        cknna = HSIC_u(A∘K, A∘L) / sqrt(knn_self_x · knn_self_y)   (`P.hsic_counted`)"""
    n = float(w.sum())
    ex = slot[dy.keys] - 1
    ey = np.flatnonzero(ex >= 0)
    ex = ex[ey]
    shared = np.minimum(dx.counts[ex], dy.counts[ey])
    rows = dy.rows[ey]
    out = {}
    if "mknn" in measures:
        out["mknn"] = float(np.sum(w[rows] * shared) / (k * n))
    if "cknna" in measures:
        place = np.full(len(dx.keys), -1)
        place[ex] = np.arange(len(ex))
        mx = dx.mirror[ex]  # (s, r) in x's lists; shared when y's hold it too
        mirror = np.where(mx >= 0, place[np.maximum(mx, 0)], -1)
        cross = P.hsic_counted(w, rows, dy.cols[ey], shared, dx.near[ex], dy.near[ey], mirror)
        out["cknna"] = formulas.ratio(cross, dx.knn_self * dy.knn_self)
    return out


def weighted_grid(px: dict, py: dict, forms: dict, k: int, w: np.ndarray, scratch) -> dict:
    """{measure: (n_source, n_target)} on the sampled rows written w_r times, multiplicities
    w (M,) int (a bootstrap resample's, or a jackknife's 0/1; NaN where undefined), from the
    records of the sampled rows. forms: {measure: BY_NEIGHBOURS or BY_RANKS}, how each is read
    (`registry.reweighted`); `scratch`: a `Scratch` of the call."""
    out = {n: np.full((len(px), len(py)), np.nan) for n in forms}
    near = [n for n, f in forms.items() if f == BY_NEIGHBOURS]
    if near:
        _neighbour_grid(px, py, near, k, w, scratch, out)
    for n in (n for n, f in forms.items() if f == BY_RANKS):
        _rsa_grid(px, py, w, scratch, out[n])
    return out


@dataclass
class Scratch:
    """What the recomputations under weights share (a bootstrap's resamples, a jackknife's
    groups left out): the slot of neighbour entries (M·M int32 zeros),
    the pairs' rows on the backend, the backend, the pairs' count P and RSA's stacks of
    scaled ranks (`_scaled`: n_source × P and TARGETS × P, made once for every weights)."""

    slot: np.ndarray | None
    pairs: tuple | None
    backend: Backend = CPU
    n_pairs: int = 0
    stacks: dict = field(default_factory=dict)

    @classmethod
    def of(cls, m: int, forms: dict, backend: Backend = CPU) -> "Scratch":
        """The scratch of `weighted_grid`'s calls on M rows for `forms` (its argument)."""
        near = BY_NEIGHBOURS in forms.values()
        slot = np.zeros(m * m, np.int32) if near else None
        pairs = None
        if BY_RANKS in forms.values():
            a, b = P.pair_rows(m)
            if backend.torch is not None:
                a, b = a.astype(np.int64), b.astype(np.int64)
            pairs = (backend.mask(a), backend.mask(b))
        return cls(slot, pairs, backend, m * (m - 1) // 2)


def _neighbour_grid(px, py, measures, k, w, scratch, out) -> None:
    cknna = "cknna" in measures
    lists_y = [drawn(q, w, k, scratch.slot, cknna) for q in py.values()]
    for a, p in enumerate(px.values()):
        dx = drawn(p, w, k, scratch.slot, cknna)
        if dx is None:
            return
        scratch.slot[dx.keys] = np.arange(1, len(dx.keys) + 1)
        for b, dy in enumerate(lists_y):
            for n, v in neighbour_cell(dx, dy, w, k, scratch.slot, measures).items():
                out[n][a, b] = v
        scratch.slot[dx.keys] = 0


def _rsa_grid(px, py, w, scratch, out) -> None:
    """Spearman = Σ ω r_x r_y / sqrt(Σ ω r_x² · Σ ω r_y²) over the pairs of distinct rows,
    ω_ab = w_a·w_b, r the centred average ranks under ω (`P.ranks_weighted`), read as the
    dot of sqrt(ω)·r of the two sides (`P.ranks_scaled`: one re-ranking a boundary): every
    source boundary's scaled ranks stacked (n_source × P), the targets' TARGETS at a time,
    and every cell's numerator one entry of their matrix product (each vector read once,
    not once a cell)."""
    backend = scratch.backend
    omega = None
    if any(p.rows_by is None for p in (*px.values(), *py.values())):
        wd = backend.put(w)
        a, b = scratch.pairs
        omega = wd[a] * wd[b]
    sx, tx = _scaled(list(px.values()), w, omega, scratch, "source")
    targets = list(py.values())
    for j0 in range(0, len(targets), TARGETS):
        sy, ty = _scaled(targets[j0 : j0 + TARGETS], w, omega, scratch, "target")
        dots = _host(sx @ sy.T)
        for i, s in enumerate(tx):
            for j, t in enumerate(ty):
                out[i, j0 + j] = formulas.ratio(float(dots[i, j]), s * t)


def _scaled(records: list, w, omega, scratch, side: str) -> tuple:
    """(stack (n × P), [Σ s²]): `P.ranks_scaled` of the n records written into the first n
    rows of the scratch's stack of `side` (made on the first call, kept for the next
    weights)."""
    stack = scratch.stacks.get(side)
    if stack is None or stack.shape[0] < len(records):
        rows = len(records)
        stack = scratch.backend.empty((rows, scratch.n_pairs))
        scratch.stacks[side] = stack
    totals = [P.ranks_scaled(p, w, omega, stack[i])[1] for i, p in enumerate(records)]
    return stack[: len(records)], totals


def _host(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else x.detach().cpu().numpy()
