"""One boundary's sampled rows prepared once for the row measures (pure functions on arrays),
and every measure of a cell read from two prepared records: on the sampled rows, on the rows
re-paired by a permutation (a null draw: indices into what is prepared), and on a
document-bootstrap resample given by each row's multiplicity w (docs/measures-rows.md, The
document bootstrap).

A resample lists the sampled rows in their order, row r w_r times (a document drawn c times
gives each of its rows w_r = c; w_r = 0 leaves the row out), and every measure is the
measure of those rows, with one rule for copies: a copy of a row is the row itself, never
its neighbour, and the pair of two copies is not in RSA's dissimilarities. Nothing is
sorted or searched again for a resample:

- mknn, cknna: row r's neighbours among the resample are the rows of r's own order (its
  other rows by falling cosine, ties to the lower row index: `order`), each taken with its
  multiplicity until k are taken: row s, met after rows holding C copies, gives
  min(w_s, max(k − C, 0)) of its copies (the first copies, in the resample's order). Every
  copy of r has this list. The measures are then sums over rows weighted by w
  (`drawn`, `mknn_weighted`, `cknna_weighted`).
- rsa: the pair (r, s) of two distinct rows appears w_r·w_s times, all at one distance, so
  its average rank is read from one sort of the distances: the weight of the pairs before its
  tie group, plus (its group's weight + 1)/2 (`ranks_weighted`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from align.measures import formulas
from align.ridge.backend import CPU, Backend

# The parts of a record a rows form may read (`registry.Measure.prepares`): the centred rows'
# SVD (u, s, a), HSIC_u(K, K) of the linear kernel, the neighbour orders (order, near, unit,
# copy), HSIC_u(A_x∘K, A_x∘K) of the masked cosine kernel, RSA's ranks (ranks, by_distance,
# ties).
PARTS = ("svd", "hsic_self", "order", "knn_self", "ranks")
BLOCK = 512  # rows whose cosines are sorted at once (a BLOCK × M temporary)


def depth(k: int, m: int) -> int:
    """L, how far each row's neighbour order is kept: 4k + 8 rows (a resample leaves about a
    third of the documents out, so k drawn rows lie about 1.6k deep; a row that needs more is
    re-sorted alone), at most the m − 1 other rows."""
    return min(m - 1, 4 * k + 8)


@dataclass(frozen=True)
class Prepared:
    """One boundary's rows (n_rows = M), in the forms the measures read.

    `u` (M, rank), `s` (rank,): the SVD of the centred rows (Xc = u·diag(s)·vᵀ); `a` (M,) the
    centred rows' squared norms; `hsic_self` HSIC_u(K, K) of the debiased CKA; `width` d.
    `order` (M, L) each row's L nearest other rows by falling cosine (ties to the lower row
    index), `near` (M, L) those cosines, `unit` (D, d) the distinct unit rows and `copy` (M,)
    which one each row is (for a row whose order a resample needs beyond L), `knn_self` HSIC_u(A_x∘K, A_x∘K) of CKNNA. `ranks` (P,) the
    centred average ranks of the correlation distances of the pairs a < b (row-major upper
    triangle, P = M(M − 1)/2), `by_distance` (P,) those pairs by increasing distance (in any order within a tie: tied
    pairs share one rank, whatever the weights),
    `ties` (P,) the tie group of each pair in that order, or None where no two distances tie;
    these three on the backend that prepared them; `ranks_square` Σ ranks² (read by every
    cell of the boundary: one sum, not one a cell); `rows_by` (a, b), each (P,) int16 (int32
    past 32,767 rows), the rows of the pairs in by_distance's order (numpy only: a resample's
    pair weights w_a·w_b read in sorted order from the M weights). A field the measures asked
    for do not need is None."""

    u: np.ndarray | None = None
    s: np.ndarray | None = None
    a: np.ndarray | None = None
    hsic_self: float | None = None
    width: int = 0
    order: np.ndarray | None = None
    near: np.ndarray | None = None
    unit: np.ndarray | None = None
    copy: np.ndarray | None = None
    knn_self: float | None = None
    ranks: object = None
    ranks_square: float | None = None
    by_distance: object = None
    ties: object = None
    rows_by: tuple | None = None


def prepare(x: np.ndarray, parts, k: int, backend: Backend = CPU) -> Prepared:
    """The `Prepared` record of rows x (M, d) with the `parts` (of PARTS) the measures read
    (`registry.parts_of`): the spectral fields with numpy; the cosines and their sort, the
    correlation distances and their sort on `backend` (the fit's device)."""
    x = np.asarray(x, np.float64)
    fields = {"width": x.shape[1]}
    if "svd" in parts or "hsic_self" in parts:
        u, s, _ = np.linalg.svd(x - x.mean(axis=0), full_matrices=False)
        fields.update(u=u, s=s, a=((u * s) ** 2).sum(axis=1))
        if "hsic_self" in parts:
            fields["hsic_self"] = hsic_features(u * s, u * s, fields["a"], fields["a"])
    if "order" in parts or "knn_self" in parts:
        unit, copy = np.unique(
            x / np.linalg.norm(x, axis=1, keepdims=True), axis=0, return_inverse=True
        )
        fields.update(unit=unit, copy=np.ravel(copy))
        order, near = _orders(unit, fields["copy"], depth(k, len(x)), backend)
        fields.update(order=order, near=near)
        if "knn_self" in parts:
            rows = np.repeat(np.arange(len(x)), k)
            cols, kv = order[:, :k].ravel(), near[:, :k].ravel()
            fields["knn_self"] = hsic_masked(rows, cols, kv, kv, len(x))
    if "ranks" in parts:
        fields.update(_rank_order(x, backend))
    return Prepared(**fields)


def _orders(unit: np.ndarray, copy: np.ndarray, L: int, backend: Backend) -> tuple:
    """(order, near), each (M, L): every row's L largest cosines to the other rows, in falling
    order, ties to the lower row index (a stable sort: platonic-rep's descending argsort with
    its diagonal at −1e8, ties fixed), computed BLOCK rows at a time from the distinct unit
    rows `unit`, row r being unit[copy[r]] (so rows of one direction tie exactly)."""
    m = len(copy)
    u, c = backend.put(unit), backend.mask(copy)
    order, near = np.empty((m, L), np.int64), np.empty((m, L))
    for lo in range(0, m, BLOCK):
        hi = min(lo + BLOCK, m)
        g = (u[c[lo:hi]] @ u.T)[:, c]
        g[backend.mask(np.arange(hi - lo)), backend.mask(np.arange(lo, hi))] = -np.inf
        if backend.torch is None:
            idx, val = _largest(g, L)
        else:
            val, idx = backend.torch.sort(g, dim=1, descending=True, stable=True)
            val, idx = backend.get(val[:, :L]), backend.get(idx[:, :L])
        order[lo:hi], near[lo:hi] = idx, val
    return order, near


def _largest(g: np.ndarray, L: int) -> tuple:
    """(idx, val) (b, L): each row's L largest values of g (b, M) in falling order, ties to
    the lower column, as a stable descending sort gives them: a partition, then a sort of
    the L kept (rows where values tied with the L-th run past it are sorted whole)."""
    if L >= g.shape[1] - 1:
        idx = np.argsort(-g, axis=1, kind="stable")[:, :L]
        return idx, np.take_along_axis(g, idx, axis=1)
    idx = np.argpartition(-g, L - 1, axis=1)[:, :L]
    val = np.take_along_axis(g, idx, axis=1)
    pick = np.lexsort((idx, -val), axis=1)
    idx, val = np.take_along_axis(idx, pick, axis=1), np.take_along_axis(val, pick, axis=1)
    crowded = np.flatnonzero((g >= val[:, -1:]).sum(axis=1) > L)  # a tie at the L-th
    for r in crowded:
        idx[r] = np.argsort(-g[r], kind="stable")[:L]
        val[r] = g[r, idx[r]]
    return idx, val


def full_order(p: Prepared, r: int) -> tuple:
    """(order, near) of row r over all M − 1 other rows (`_orders` of one row: a resample
    that leaves out many of its nearest rows' documents)."""
    g = (p.unit[p.copy[r : r + 1]] @ p.unit.T)[:, p.copy]
    g[0, r] = -np.inf
    idx = np.argsort(-g[0], kind="stable")[:-1]
    return idx, g[0, idx]


def pair_rows(m: int) -> tuple:
    """(a, b): the rows of the pairs a < b in row-major upper-triangle order (int32)."""
    a, b = np.triu_indices(m, 1)
    return a.astype(np.int32), b.astype(np.int32)


def pair_index(a, b, m: int):
    """The place of pair {a, b} (a ≠ b) in the row-major upper triangle of m rows."""
    lo, hi = np.minimum(a, b).astype(np.int64), np.maximum(a, b).astype(np.int64)
    return lo * m - lo * (lo + 1) // 2 + hi - lo - 1


def _rank_order(x: np.ndarray, backend: Backend) -> dict:
    """RSA's fields: the correlation distances 1 − corr(x_a, x_b) of the pairs a < b (each
    row centred over its features, rsatoolbox's calc_rdm(method="correlation")), computed
    once per distinct centred row (two copies' distance is 0, and their distances to a third
    row tie exactly), sorted once; their centred average ranks (scipy.stats.rankdata's ties)."""
    c = x - x.mean(axis=1, keepdims=True)
    c, copy = np.unique(c / np.linalg.norm(c, axis=1, keepdims=True), axis=0, return_inverse=True)
    a, b = pair_rows(len(x))
    copy = np.ravel(copy).astype(np.int32)
    lo, hi = np.minimum(copy[a], copy[b]), np.maximum(copy[a], copy[b])  # one entry a pair
    if backend.torch is not None:
        lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    lo, hi = backend.mask(lo), backend.mask(hi)
    c = backend.put(c)
    dist = (c @ c.T)[lo, hi]
    dist *= -1.0
    dist += 1.0
    dist[lo == hi] = 0.0
    del lo, hi
    if backend.torch is None:
        # not a stable sort: the order within a tie changes no rank (a tie group's pairs share
        # its average, and their weights, whole numbers, sum exactly in any order), and
        # numpy's quicksort (SIMD) took 2.2 s for M 4,096's 8.4 M pairs, its stable sort 7.9 s
        by = np.argsort(dist).astype(np.int32)  # P < 2³¹ at any M that fits
        ordered = dist[by]
        del dist
        new = np.empty(len(ordered), bool)
        new[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
        del ordered
        ties = None if new.all() else (np.cumsum(new, dtype=np.int32) - 1)
    else:
        ordered, by = backend.torch.sort(dist, stable=True)
        new = backend.torch.ones_like(ordered, dtype=backend.torch.bool)
        new[1:] = ordered[1:] != ordered[:-1]
        ties = None if bool(new.all()) else new.long().cumsum(0) - 1
    del new
    fields = {"by_distance": by, "ties": ties}
    if backend.torch is None:
        small = np.int16 if len(x) <= np.iinfo(np.int16).max else np.int32
        fields["rows_by"] = (a[by].astype(small), b[by].astype(small))
    del a, b
    ones = backend.put(np.ones(len(by)))
    fields["ranks"] = ranks_weighted(Prepared(**fields), ones)
    fields["ranks_square"] = dot(fields["ranks"], fields["ranks"])
    return fields


def ranks_weighted(p: Prepared, omega):
    """(P,) the centred average ranks of the pairs' distances when pair q appears omega[q]
    times (omega on p's backend; 0: absent): with the pairs in increasing distance, the
    group of pairs tied with q holding weight g after weight C of smaller distances,

        rank_q = C + (g + 1)/2,  centred by (N + 1)/2,  N = Σ omega

    scipy.stats.rankdata's average ranks of the pairs written out omega times. The value of
    an absent pair is of no use."""
    om = omega[p.by_distance]
    om[p.by_distance] = _sorted_ranks(p, om)  # om's memory, now in the pairs' order
    return om


def ranks_scaled(p: Prepared, w, omega=None, out=None) -> tuple:
    """(s, Σ s²): s (P,) = sqrt(omega)·`ranks_weighted`(p, omega) in the pairs' order, omega
    the pairs' weights w_a·w_b of row multiplicities w (M,), so that a resample's Spearman
    numerator Σ ω r_x r_y is the plain dot s_x·s_y and Σ ω r² is Σ s² (sqrt(ω) is exact for
    0/1 weights: a jackknife's). The weights are read in sorted order from w through
    `rows_by` where the record keeps it (no gather of P values across the pairs), else from
    `omega` (P,) through by_distance (on the backend); Σ s² is summed in sorted order, before
    the one scatter back, into `out` (P,) where given (a row of the caller's stack).

    With 0/1 weights and no tied distances (`_ranks_kept`) the ranks are whole counts: the
    kept pairs counted in sorted order in integers, scattered back as integers (the scatter,
    a random write of every pair, is the costly pass)."""
    if p.rows_by is not None and p.ties is None and _binary(w):
        out = np.empty(len(p.by_distance)) if out is None else out
        out[p.by_distance] = _ranks_kept(p, w)  # twice the ranks, whole numbers
        out *= 0.5
        return out, dot(out, out)
    if p.rows_by is not None:
        wf = np.asarray(w, np.float64)
        om = wf[p.rows_by[0]]
        om *= wf[p.rows_by[1]]
    else:
        om = omega[p.by_distance]
    s = _sorted_ranks(p, om)
    s *= om.sqrt() if not isinstance(om, np.ndarray) else np.sqrt(om, out=om)
    total = dot(s, s)
    if out is None:
        out = np.empty(len(s)) if isinstance(s, np.ndarray) else s.new_empty(len(s))
    out[p.by_distance] = s
    return out, total


def _binary(w) -> bool:
    """Every multiplicity 0 or 1 (a jackknife's weights)."""
    w = np.asarray(w)
    return bool(((w == 0) | (w == 1)).all())


def _ranks_kept(p: Prepared, w) -> np.ndarray:
    """(P,) integers in sorted order: 2ω·(rank − (N + 1)/2) = ω·(2C − N − 1) for ω_ab =
    w_a·w_b ∈ {0, 1} and distinct distances, C the kept pairs up to and including the pair
    (`_sorted_ranks`' rank, its (ω − 1)/2 zero where ω = 1), N = Σ ω: counted in int32 (int64
    past 2³⁰ pairs), exact, and half the bytes of float64 to scatter back."""
    keep = np.asarray(w).astype(np.uint8)
    om = np.take(keep, p.rows_by[0])
    om &= np.take(keep, p.rows_by[1])
    count = np.cumsum(om, dtype=np.int32 if len(om) < 2**30 else np.int64)
    n = int(count[-1])
    count *= 2
    count -= n + 1
    count *= om
    return count


def _sorted_ranks(p: Prepared, om):
    """(P,) the centred average ranks of `ranks_weighted`, in sorted order (om: the pairs'
    weights in that order; a new array)."""
    if p.ties is None:
        rank = om.cumsum(0)
        total = float(rank[-1])
        rank -= (om - 1.0) / 2.0
    else:
        group = _bincount(p.ties, om)
        total = float(group.sum())
        rank = group.cumsum(0)
        rank -= (group - 1.0) / 2.0  # the group's average rank: its start + (g + 1)/2
        rank = rank[p.ties]
    rank -= (total + 1.0) / 2.0
    return rank


def dot(a, b) -> float:
    """Σ a·b of two vectors, numpy or torch (numpy's through einsum: OpenBLAS's threaded ddot
    took 20 ms for 10⁵ values on a busy host, einsum 0.5 ms)."""
    if isinstance(a, np.ndarray):
        return float(np.einsum("i,i->", a, b))
    return float(a @ b)


def _bincount(index, weights):
    """Σ weights per index value, numpy or torch."""
    if isinstance(weights, np.ndarray):
        return np.bincount(index, weights)
    n = int(index[-1]) + 1  # the tie groups count up along the sorted pairs
    return weights.new_zeros(n).index_add_(0, index, weights)


def permuted(p: Prepared, perm: np.ndarray, pairs=None, k: int | None = None) -> Prepared:
    """The record of the rows x[perm] without recomputing it: row r of the result is row
    perm[r] of p. Neighbour orders are relabelled and tied cosines put back in the order of
    the new row labels (the record's rule, as if prepared from x[perm]); a row whose tie at
    its k-th neighbour runs to the end of the L kept (`k`) is re-read from its whole order.
    `pairs` (P,) the pair of p each pair of the result is (`pair_index(perm[a], perm[b])`,
    computed once a permutation for every boundary); without it the ranks are left as they
    are (a null reads RSA's draws in batches: `align.measures.nulls`)."""
    inverse = np.argsort(perm)
    fields = {}
    if p.u is not None:
        fields.update(u=p.u[perm], a=p.a[perm])
    if p.order is not None:
        order, near = _retied(p, perm, inverse, k)
        fields.update(order=order, near=near, copy=p.copy[perm])
    if p.ranks is not None and pairs is not None:
        fields["ranks"] = p.ranks[pairs]  # a reordering: Σ ranks² stays the record's
    return replace(p, **fields)


def _retied(p: Prepared, perm, inverse, k) -> tuple:
    """(order, near) of `permuted`: relabelled, ties by the new labels."""
    order, near = inverse[p.order[perm]], p.near[perm]
    tied = np.flatnonzero((near[:, 1:] == near[:, :-1]).any(axis=1))
    if not len(tied):
        return order, near
    order, near = order.copy(), near.copy()
    L = order.shape[1]
    for r in tied:
        if k is not None and L < len(order) - 1 and near[r, k - 1] == near[r, L - 1]:
            full, val = full_order(p, int(perm[r]))
            new = inverse[full]
            pick = np.lexsort((new, -val))[:L]
            order[r], near[r] = new[pick], val[pick]
        else:
            pick = np.lexsort((order[r], -near[r]))
            order[r], near[r] = order[r][pick], near[r][pick]
    return order, near


def hsic_masked(rows, cols, kv, lv, m: int) -> float:
    """Song et al. (2012)'s unbiased HSIC of two kernels that are zero but at the entries
    (rows[e], cols[e]), where they are kv[e] and lv[e] (no entry on the diagonal), as
    platonic-rep's hsic_unbiased writes it for dense matrices (K̃, L̃: the diagonals zeroed):

        [Σ K̃∘L̃ᵀ + Σ K̃ · Σ L̃ / ((m − 1)(m − 2)) − 2 · 1ᵀK̃L̃1 / (m − 2)] / (m(m − 3))

    `hsic_counted` with every row once and every entry once."""
    rows, cols = np.asarray(rows), np.asarray(cols)
    mirror = _mirror(rows, cols, m)
    ones = np.ones(len(rows))
    return hsic_counted(np.ones(m), rows, cols, ones, kv, lv, mirror)


def _mirror(rows, cols, m: int) -> np.ndarray:
    """For each entry (rows[e], cols[e]) of distinct entries, the entry (cols[e], rows[e]),
    or −1."""
    key = rows.astype(np.int64) * m + cols
    if not len(key):
        return np.full(0, -1)
    if (key[1:] > key[:-1]).all():  # a cell's shared entries come in key order: no sort
        order, ordered = np.arange(len(key)), key
    else:
        order = np.argsort(key)
        ordered = key[order]
    want = cols.astype(np.int64) * m + rows
    at = np.minimum(np.searchsorted(ordered, want), len(key) - 1)
    return np.where(ordered[at] == want, order[at], -1)


def hsic_counted(w, rows, cols, counts, kv, lv, mirror) -> float:
    """The unbiased HSIC (`hsic_masked`'s formula) of two kernels over n = Σw instances, row
    r written w[r] times, whose entries are the copies of sparse entries: entry e (r = rows[e],
    s = cols[e]) stands for every copy of r against the first counts[e] copies of s (counts[e]
    ≤ w[s]), with values kv[e] (first kernel) and lv[e] (second); mirror[e] the entry (s, r)
    or −1. Counting copies,

        Σ K̃∘L̃ᵀ  = Σ_e counts[e]·counts[mirror e]·kv[e]·lv[mirror e]
        Σ K̃     = Σ_e w[r_e]·counts[e]·kv[e]       (Σ L̃ alike)
        1ᵀK̃L̃1  = Σ_s (Σ_{e: s_e = s} w[r_e]·counts[e]·kv[e]) · (Σ_{e: r_e = s} counts[e]·lv[e])

    (the column sums of K̃ over the copies of s sum to the first, every copy of s has the row
    sum of the second). NaN below 4 instances, where the estimator is undefined."""
    n = float(np.sum(w))
    if n < 4:
        return float("nan")
    m = len(w)
    has = mirror >= 0
    both = float(np.sum(counts[has] * counts[mirror[has]] * kv[has] * lv[mirror[has]]))
    weighted = w[rows] * counts * kv
    outer = dot(np.bincount(cols, weighted, m), np.bincount(rows, counts * lv, m))
    l1 = float(np.sum(w[rows] * counts * lv))
    return float(formulas.hsic_unbiased(n, both, float(weighted.sum()), l1, outer))


def hsic_features(zx, zy, a, b) -> float:
    """The unbiased HSIC of the linear kernels of centred rows zx (n_rows, r_x), zy (n_rows,
    r_y) from sums over rows: with a, b the rows' squared norms (the kernels' diagonals) and
    Σ_r zx_r = 0 (so K̃1 = −a), `formulas.hsic_unbiased` of

        tr(K̃L̃) = ‖zxᵀzy‖²_F − a·b,  1ᵀK̃1 = −Σa,  1ᵀL̃1 = −Σb,  1ᵀK̃L̃1 = a·b

    equal to `hsic_masked` (written out densely) of the uncentred rows' kernels (the estimator
    does not move with a shift of the rows). NaN below 4 rows (a bootstrap resample of few
    distinct rows)."""
    m = zx.shape[0]
    if m < 4:
        return float("nan")
    ab = float(a @ b)
    cross2 = float(np.linalg.norm(zx.T @ zy) ** 2)
    return float(formulas.hsic_unbiased(m, cross2 - ab, -a.sum(), -b.sum(), ab))
