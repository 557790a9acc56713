"""RSA's permutation null in batches of draws (pure functions on arrays): every draw of every
cell from the boundaries' centred ranks, without a record per draw.

With r_x, r_y the centred ranks of the pairs a < b (`prepared.Prepared.ranks`), draw π
re-pairs row a of the source with row π(a) of the target, so its cell is

    rsa_π = Σ_{a<b} r_x[a, b] · r_y[π(a), π(b)] / sqrt(Σ r_x² · Σ r_y²)

(Σ r_y² does not move with π: the draw reorders the pairs). The same sum with the source's
rows moved by π⁻¹ instead, Σ_{c<d} r_x[π⁻¹(c), π⁻¹(d)] · r_y[c, d], lets the side with fewer
boundaries be the one gathered. That side's ranks are laid out once as square M × M matrices
(R[a, b] = R[b, a] = r[a, b], a zero diagonal), so a draw's pairs read R at π(a)·M + π(b):
row by row of the upper triangle, each read lands in one row of R (a document's rows are
consecutive in a documents draw: long runs of neighbouring reads), where the condensed
vector's place of {π(a), π(b)} jumps across it. The pairs are cut into CHUNK-sized pieces;
per piece and batch of BATCH draws the places are computed once for every gathered
boundary, and the gathered ranks (batch × piece) meet the other side's ranks (piece ×
boundaries) in one matrix product, which reads the other side once a batch, not once a
draw and cell. The squares are float32 where that holds the ranks exactly (multiples of ½
below 2²³: M ≤ 5,793): a gather is bound by the random reads, and half the bytes read is
about a third less time; the gathered ranks are widened back to float64 for the product,
so every sum is the float64 one.
"""

from __future__ import annotations

import numpy as np

from align.measures import prepared as P
from align.ridge.backend import CPU, Backend

CHUNK = 1 << 16  # pairs a piece: a piece's gathered ranks and places stay in the cache
BATCH = 8  # draws a matrix product: the other side's ranks read once per 8 draws


def rsa_null(px: list, py: list, perms: np.ndarray, backend: Backend = CPU) -> np.ndarray:
    """(K, n_source, n_target): rsa of every cell under each of the K draws perms (K, M) (row
    a of the source with row perms[q, a] of the target), from the records' `ranks` and
    `ranks_square` (px: the source boundaries' records, py: the target's; ranks on
    `backend`)."""
    perms = np.asarray(perms)
    if len(px) <= len(py):  # gather the side with fewer boundaries, its rows moved by π⁻¹
        moved, fixed, swap = px, py, False
        perms = np.argsort(perms, axis=1)
    else:
        moved, fixed, swap = py, px, True
    dots = _moved_dots(moved, fixed, perms, backend)  # (K, n_moved, n_fixed)
    if swap:
        dots = dots.transpose(0, 2, 1)
    sx = np.array([p.ranks_square for p in px])
    sy = np.array([p.ranks_square for p in py])
    product = sx[:, None] * sy[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = dots / np.sqrt(product)
    out[:, ~(product > 0)] = np.nan  # `formulas.ratio`: no variance, no value
    return out


def _moved_dots(moved: list, fixed: list, perms: np.ndarray, backend: Backend) -> np.ndarray:
    """(K, n_moved, n_fixed): Σ_{a<b} R_i[π(a), π(b)] · r_j[a, b] for every draw π of perms
    (K, M), every `moved` record i (its ranks as a square, `square`) and `fixed` record j."""
    m = perms.shape[1]
    a, b = (backend.mask(v.astype(np.int64)) for v in P.pair_rows(m))  # a·M + b past 2³¹
    squares = [_narrowed(square(p.ranks, a, b, m), m) for p in moved]
    out = np.zeros((len(perms), len(moved), len(fixed)))
    n_pairs = m * (m - 1) // 2
    chunk = piece_of(n_pairs)
    for d0 in range(0, len(perms), BATCH):
        batch = backend.mask(np.ascontiguousarray(perms[d0 : d0 + BATCH], np.int64))
        rowbase = batch * m  # π(a)·M, the start of row π(a) of R
        acc = 0.0
        for q0 in range(0, n_pairs, chunk):
            q1 = min(q0 + chunk, n_pairs)
            ac, bc = a[q0:q1], b[q0:q1]
            places = rowbase[:, ac] + batch[:, bc]  # (batch, piece)
            other = _stack([p.ranks[q0:q1] for p in fixed])  # (n_fixed, piece)
            gathered = [_widened(R[places]) for R in squares]  # (batch, piece) each
            acc = acc + _stack([g @ other.T for g in gathered])  # (n_moved, batch, n_fixed)
        out[d0 : d0 + BATCH] = _host(acc).transpose(1, 0, 2)
    return out


def piece_of(n_pairs: int) -> int:
    """The pairs of a piece: CHUNK, or fewer where the pairs are few (a batch's places and
    gathered ranks then hold about half the pairs' count, not BATCH times it)."""
    return max(1, min(CHUNK, -(-n_pairs // BATCH)))


def square(ranks, a, b, m: int):
    """The (M·M,) flat square of condensed ranks (P,): R[a·M + b] = R[b·M + a] = ranks[pair
    (a, b)], 0 on the diagonal; a, b the pairs' rows (`prepared.pair_rows`), on ranks'
    backend."""
    if isinstance(ranks, np.ndarray):
        out = np.zeros(m * m)
    else:
        out = ranks.new_zeros(m * m)
    out[a * m + b] = ranks
    out[b * m + a] = ranks
    return out


def exact_in_float32(m: int) -> bool:
    """The centred ranks of M rows' pairs are exact in float32: they are multiples of ½ (an
    average rank of tied pairs is one) of magnitude below P/2, P = M(M − 1)/2, so 2·|r| < P <
    2²⁴ holds them in float32's 24-bit significand (M ≤ 5,793)."""
    return m * (m - 1) // 2 < 1 << 24


def _narrowed(R, m: int):
    """The square R in float32 where that holds its ranks exactly (`exact_in_float32`): half
    the bytes a gather reads at random, the same values."""
    if not exact_in_float32(m):
        return R
    return R.astype(np.float32) if isinstance(R, np.ndarray) else R.float()


def _widened(g):
    """Gathered ranks back in float64 (unchanged values) for the product's sums."""
    return g.astype(np.float64, copy=False) if isinstance(g, np.ndarray) else g.double()


def _stack(arrays: list):
    if isinstance(arrays[0], np.ndarray):
        return np.stack(arrays)
    import torch

    return torch.stack(arrays)


def _host(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else x.detach().cpu().numpy()
