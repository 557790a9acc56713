"""Similarity measures of two layers from sums over rows (docs/methods.md, Similarity
measures): linear CKA, debiased CKA, orthogonal Procrustes, mean squared CCA and SVCCA of
every boundary pair, from sums one pass over the held-out rows accumulates, in groups of
held-out documents (`row_sums`); the jackknife's recomputation without a group comes from the
sums of every row and that group's own (`leave_group_out`: the fit makes one group's sums at a
time), or from the groups' sums side by side (`resampled`). Each measure's formula is
`formulas`'; here are the quantities it reads, from the sums.

Rows: X (n, d_S) of a source boundary, Y (n, d_T) of a target boundary, paired row by row,
shifted by any fixed vector (every measure here is unchanged by a shift of either side; the
fit uses the maps' training means, so the float64 sums cancel little when centred).

The sums, per group g of rows (leading axis G everywhere; `SideSums`, `PairSums`, `Sums`):

    source i:  n, s = Σx (d_S), S = Σxxᵀ (d_S, d_S), q = Σ‖x‖²x (d_S), f = Σ‖x‖⁴
    target j:  the same of y
    pair (i, j):  xy = Σxyᵀ (d_S, d_T), p = Σ‖x‖²‖y‖², r_xy = Σ‖x‖²y (d_T), r_yx = Σ‖y‖²x (d_S)
                  with a rotation R (d_S, d_T) of the pair (procrustes-heldout):
                  qxy = ⟨R, Σxyᵀ⟩, q_sy = R Σy (d_S)

Summed over groups, a side's sums give C = S − s sᵀ/n, the centred covariance (C_xx, C_yy;
C_xy = xy − s_x s_yᵀ/n of a pair), and what the measures derive from it (tr C, ‖C‖_F, its
unbiased HSIC, its eigendecomposition C = Q diag(λ) Qᵀ) is kept beside them, made once for
every pair the side is in (`Side`, `Pair`). R is a pair's training rotation, B = Q_xᵀ C_xy Q_y
(`formulas`), G the groups, g one of them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from align.errors import NonFiniteError
from align.measures import formulas
from align.ridge.backend import CPU, Backend
from align.ridge.statistics import gather

MEASURE_GROUPS = 10  # groups of held-out documents the measures' jackknife leaves out in turn


# -- the sums --------------------------------------------------------------------------------


class _Fields:
    """Arithmetic over every array field of a sums record (a field that is None stays None)."""

    def map(self, f):
        """The record with f(array) in place of each array field."""
        return type(self)(
            **{
                k.name: None if (v := getattr(self, k.name)) is None else f(v)
                for k in dataclasses.fields(self)
            }
        )

    def add_(self, other) -> None:
        """self += other, field by field, in place."""
        for k in dataclasses.fields(self):
            v = getattr(self, k.name)
            if v is not None:
                v += getattr(other, k.name)

    def minus(self, other):
        """self − other of two one-group records, reduced ((G, ...) -> (...))."""
        return self.map_with(other, lambda a, b: a[0] - b[0])

    def map_with(self, other, f):
        """The record with f(a, b) of each field of self and other."""
        return type(self)(
            **{
                k.name: None
                if (a := getattr(self, k.name)) is None
                else f(a, getattr(other, k.name))
                for k in dataclasses.fields(self)
            }
        )

    def weighted(self, w: np.ndarray | None = None):
        """The record summed over groups with weights w (G,) (None: all ones): every field
        (G, ...) -> (...)."""
        if w is None:
            return self.map(lambda v: v.sum(0))
        return self.map(lambda v: np.tensordot(w, v, axes=(0, 0)))


@dataclass
class SideSums(_Fields):
    """One boundary's sums of its rows x (width d), per group (leading axis G) or reduced
    over groups (no leading axis)."""

    n: np.ndarray  # (G,) rows
    s: np.ndarray  # (G, d) Σx
    S: np.ndarray  # (G, d, d) Σxxᵀ
    q: np.ndarray  # (G, d) Σ‖x‖²x
    f: np.ndarray  # (G,) Σ‖x‖⁴

    @classmethod
    def zeros(cls, G: int, d: int) -> "SideSums":
        """G groups of no rows, width d."""
        return cls(
            np.zeros(G), np.zeros((G, d)), np.zeros((G, d, d)), np.zeros((G, d)), np.zeros(G)
        )


@dataclass
class PairSums(_Fields):
    """One boundary pair's cross sums, per group (leading axis G) or reduced; qxy and q_sy
    only with the pair's rotation R (d_S, d_T) (procrustes-heldout), else None."""

    xy: np.ndarray  # (G, d_S, d_T) Σxyᵀ
    p: np.ndarray  # (G,) Σ‖x‖²‖y‖²
    r_xy: np.ndarray  # (G, d_T) Σ‖x‖²y
    r_yx: np.ndarray  # (G, d_S) Σ‖y‖²x
    qxy: np.ndarray | None = None  # (G,) ⟨R, Σxyᵀ⟩
    q_sy: np.ndarray | None = None  # (G, d_S) R Σy


class Sums(NamedTuple):
    """A `row_sums` result: every source's and target's `SideSums` and every pair's
    `PairSums`, per group."""

    source: dict  # {source boundary i: SideSums}
    target: dict  # {target boundary j: SideSums}
    pair: dict  # {(i, j): PairSums}

    def groups(self, keep: np.ndarray) -> "Sums":
        """The sums of the groups `keep` (int indices) alone."""

        def pick(side: dict) -> dict:
            return {k: v.map(lambda a: a[keep]) for k, v in side.items()}

        return Sums(pick(self.source), pick(self.target), pick(self.pair))

    def rows_per_group(self) -> np.ndarray:
        """(G,) the rows of each group (every side holds the same rows)."""
        return next(iter(self.target.values())).n


class HeldSums(NamedTuple):
    """The streamed measures' part of a block's held-out sums: the measures asked for, the
    sums of every held-out row, and, where the fit recomputed each group's jackknife value in
    a pass of its own, those recomputations ({(i, j): {name: θ_(g)}} per group holding
    rows, in group order; None otherwise)."""

    names: tuple
    sums: Sums
    left_out: list | None = None
    groups: list | None = None  # the groups g of `left_out`, in its order


def row_sums(
    xs: dict,
    ys: dict,
    shifts: tuple,
    groups: np.ndarray,
    n_groups: int,
    backend: Backend = CPU,
    rotations: dict | None = None,
) -> Sums:
    """The sums of the module docstring of one chunk of rows, per group.

    xs[i] (n, d_S), ys[j] (n, d_T): paired rows (numpy, or tensors on the backend's
    device); shifts = ({i: (d_S,)}, {j: (d_T,)}) subtracted first; groups (n,) int in
    0..n_groups−1: each row's group; rotations {(i, j): (d_S, d_T)} (or None): the pairs'
    training rotations, whose qxy and q_sy are added. Returns the `Sums` as float64 numpy.

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
    out = Sums(
        {i: SideSums.zeros(n_groups, d_s) for i in source},
        {j: SideSums.zeros(n_groups, d_t) for j in target},
        {},
    )
    at = 0
    for g in np.flatnonzero(counts):
        Xg, Yg = X[at : at + counts[g]], Y[at : at + counts[g]]
        at += counts[g]
        x2, y2 = backend.blocknorm2(Xg, len(source)), backend.blocknorm2(Yg, len(target))
        _add_sides(out.source, source, Xg, x2, g, backend)
        _add_sides(out.target, target, Yg, y2, g, backend)
        _product(xy[g], Xg, Yg, d_s, d_t, backend)
        p[g] = backend.get(x2.T @ y2)
        r_xy[g] = backend.get(x2.T @ Yg)
        r_yx[g] = backend.get(y2.T @ Xg)
    for a, i in enumerate(source):
        cols = slice(a * d_s, (a + 1) * d_s)
        for b, j in enumerate(target):
            rows = slice(b * d_t, (b + 1) * d_t)
            acc = PairSums(xy[:, cols, rows], p[:, a, b], r_xy[:, a, rows], r_yx[:, b, cols])
            if rotations is not None and (i, j) in rotations:
                R = rotations[(i, j)]
                acc.qxy = np.einsum("gst,st->g", acc.xy, R)
                acc.q_sy = out.target[j].s @ R.T
            out.pair[(i, j)] = acc
    return out


def _add_sides(acc: dict, keys: tuple, rows, norms2, g: int, backend: Backend) -> None:
    """Group g's n, s, S, q, f of every boundary of one side: rows (m, L·d) side by side,
    norms2 (m, L) their squared norms per boundary."""
    d = rows.shape[1] // len(keys)
    s = backend.get(rows.sum(0)).reshape(len(keys), d)
    f = backend.get((norms2 * norms2).sum(0))
    for a, k in enumerate(keys):
        A = rows[:, a * d : (a + 1) * d]
        acc[k].n[g] = len(rows)
        acc[k].s[g] = s[a]
        acc[k].S[g] = backend.get(A.T @ A)
        acc[k].q[g] = backend.get(norms2[:, a] @ A)
        acc[k].f[g] = f[a]


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


def add_sums(a: Sums, b: Sums) -> Sums:
    """a += b of two `row_sums` results over the same boundaries, in place (the sums are
    large: no third copy); returns a."""
    for mine, theirs in zip(a, b, strict=True):
        for k, fields in mine.items():
            fields.add_(theirs[k])
    return a


def sums_bytes(nI: int, nJ: int, d_s: int, d_t: int, n_groups: int) -> int:
    """Bytes of one `row_sums` result (float64): per group, every source's and target's
    n, s, S, q, f and every pair's xy, p, r_xy, r_yx, and qxy, q_sy (counted always: d_S + 1
    values a pair, held only with a rotation)."""
    side = nI * (d_s * d_s + 2 * d_s + 2) + nJ * (d_t * d_t + 2 * d_t + 2)
    pair = nI * nJ * (d_s * d_t + 2 * d_s + d_t + 2)
    return 8 * n_groups * (side + pair)


# -- what the measures read of the reduced sums ----------------------------------------------


def centred(side: SideSums) -> np.ndarray:
    """C = Σ(x − x̄)(x − x̄)ᵀ = S − s sᵀ/n (d, d) of one side's reduced sums."""
    return side.S - np.outer(side.s, side.s) / side.n


class Side:
    """One side's reduced sums (`SideSums` without the group axis) and, beside them, what the
    measures derive from them, each made once on first use for every pair the side is in:
    tr C, ‖C‖_F, HSIC_u(K, K) and C's eigendecomposition (C = `centred`)."""

    def __init__(self, sums: SideSums):
        self.sums = sums

    @cached_property
    def trace(self) -> float:
        """tr C."""
        return float(np.trace(centred(self.sums)))

    @cached_property
    def norm(self) -> float:
        """‖C‖_F."""
        return float(np.linalg.norm(centred(self.sums)))

    @cached_property
    def hsic_self(self) -> float:
        """HSIC_u(K, K), K = XXᵀ: tr(K̃²) = ‖S‖² − Σ‖x‖⁴, 1ᵀK̃1 = ‖s‖² − tr S,
        1ᵀK̃²1 = sᵀSs − 2 q·s + Σ‖x‖⁴."""
        n, s, S, q, f = self.sums.n, self.sums.s, self.sums.S, self.sums.q, self.sums.f
        k1 = float(s @ s - np.trace(S))
        kl, k1l1 = float(np.sum(S * S) - f), float(s @ S @ s - 2 * q @ s + f)
        return formulas.hsic_unbiased(n, kl, k1, k1, k1l1)

    @cached_property
    def spectrum(self) -> tuple:
        """(λ (d,) ascending, Q (d, d)): C = Q diag(λ) Qᵀ; CCA's whitening and SVCCA's
        principal directions both come from it."""
        return np.linalg.eigh(centred(self.sums))

    @property
    def has_variance(self) -> bool:
        """At least 4 rows (the debiased HSIC's m(m−3)) and a C of positive trace."""
        with np.errstate(all="ignore"):
            return bool(self.sums.n >= 4 and self.trace > 0)


class Pair:
    """A pair's reduced sums (`PairSums` without the group axis) beside its two `Side`s, and
    what its measures share, made once: C_xy and C_xy in the sides' eigenbases."""

    def __init__(self, x: Side, y: Side, sums: PairSums):
        self.x, self.y, self.sums = x, y, sums

    @cached_property
    def cross(self) -> np.ndarray:
        """C_xy = Σ(x − x̄)(y − ȳ)ᵀ = xy − s_x s_yᵀ/n (d_S, d_T)."""
        return self.sums.xy - np.outer(self.x.sums.s, self.y.sums.s) / self.x.sums.n

    @cached_property
    def rotated(self) -> np.ndarray:
        """B = Q_xᵀ C_xy Q_y (d_S, d_T), in the order of the spectra (ascending)."""
        return self.x.spectrum[1].T @ self.cross @ self.y.spectrum[1]


def cka(pair: Pair) -> float:
    """Linear CKA (`formulas.cka`) from the sums: ‖C_xy‖²_F, ‖C_xx‖_F, ‖C_yy‖_F."""
    return formulas.cka(float(np.sum(pair.cross * pair.cross)), pair.x.norm, pair.y.norm)


def cka_debiased(pair: Pair) -> float:
    """Debiased CKA (`formulas.cka_debiased`) from the sums, K = XXᵀ, L = YYᵀ of the rows as
    given (the unbiased HSIC does not move with a shift of the rows):

        tr(K̃L̃) = ‖Σxyᵀ‖² − Σ‖x‖²‖y‖²,  1ᵀK̃1 = ‖Σx‖² − Σ‖x‖²,
        1ᵀK̃L̃1 = Σxᵀ (Σxyᵀ) Σy − Σ‖x‖²y·Σy − Σ‖y‖²x·Σx + Σ‖x‖²‖y‖²."""
    x, y, s = pair.x.sums, pair.y.sums, pair.sums
    kl = float(np.sum(s.xy * s.xy) - s.p)
    k1, l1 = float(x.s @ x.s - np.trace(x.S)), float(y.s @ y.s - np.trace(y.S))
    k1l1 = float(x.s @ s.xy @ y.s - s.r_xy @ y.s - s.r_yx @ x.s + s.p)
    cross = formulas.hsic_unbiased(x.n, kl, k1, l1, k1l1)
    return formulas.cka_debiased(cross, pair.x.hsic_self, pair.y.hsic_self)


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


def procrustes(pair: Pair) -> float:
    """The angular Procrustes distance (`formulas.procrustes`) from the sums: ‖C_xy‖_*
    (`nuclear_norm`), tr C_xx, tr C_yy (centred rows, the narrower side zero-padded, which
    changes no sum)."""
    return formulas.procrustes(nuclear_norm(pair.cross), pair.x.trace, pair.y.trace)


def rotation(C: np.ndarray) -> np.ndarray:
    """The orthogonal Procrustes rotation of a centred cross product C = XᵀY (d_S, d_T):
    U Vᵀ of C's thin SVD C = U Σ Vᵀ, the block of the zero-padded problem's rotation that
    the rows use (argmax over orthogonal R of ⟨R, C⟩; `scipy.linalg.orthogonal_procrustes`
    of the padded rows)."""
    U, _, Vt = np.linalg.svd(C, full_matrices=False)
    return U @ Vt


def procrustes_heldout(pair: Pair) -> float:
    """The held-out Procrustes error ‖Ŷ − X̂R‖_F, a distance in [0, 2]: R the rotation fitted
    on the training rows (`rotation` of their centred XᵀY), X̂ = X_c/‖X_c‖_F and
    Ŷ = Y_c/‖Y_c‖_F the held-out rows centred by their own means and scaled to unit norm,
    the narrower side zero-padded (so ‖X̂R‖_F = 1):

        ‖Ŷ − X̂R‖²_F = 2 − 2⟨R, C_xy⟩ / sqrt(tr C_xx · tr C_yy),
        ⟨R, C_xy⟩ = qxy − s_x · q_sy / n  (the pair's sums with its rotation, `row_sums`)."""
    x = pair.x.sums
    inner = pair.sums.qxy - x.s @ pair.sums.q_sy / x.n
    cos = inner / np.sqrt(pair.x.trace * pair.y.trace)
    return float(np.sqrt(max(2.0 - 2.0 * cos, 0.0)))


def cca(pair: Pair) -> float:
    """R²_CCA (`formulas.cca`) from the sums: B = Q_xᵀ C_xy Q_y and the sides' eigenvalues
    (all d of each, ascending)."""
    lx, ly = pair.x.spectrum[0], pair.y.spectrum[0]
    return formulas.cca(pair.rotated, lx, ly, len(lx), len(ly))


def svcca(pair: Pair) -> float:
    """SVCCA (`formulas.svcca`) from the sums: the spectra and B, largest first (the top
    directions are the last columns of the eigendecompositions, reversed)."""
    lx, ly = pair.x.spectrum[0][::-1], pair.y.spectrum[0][::-1]
    return formulas.svcca(pair.rotated[::-1, ::-1], lx, ly)


def check_variance(x: Side, y: Side, where: tuple) -> None:
    """Refuse (NonFiniteError) a pair whose source or target rows have no variance (tr of
    the centred covariance ≤ 0, or fewer than 4 rows: the debiased HSIC's m(m−3)), naming
    the pair (source boundary, target boundary)."""
    i, j = where
    for side, s, b in (("source", x, i), ("target", y, j)):
        if not s.has_variance:
            raise NonFiniteError(
                f"source {i} -> target {j}: the held-out rows of {side} boundary {b} have no "
                f"variance ({int(s.sums.n)} rows), so no similarity measure is defined there; "
                "nothing was written (fit other boundaries, or a corpus with more held-out text)"
            )
