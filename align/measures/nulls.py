"""RSA's permutation null in batches of draws (pure functions on arrays): every draw of every
cell from the boundaries' centred ranks, without a record per draw.

With r_x, r_y the centred ranks of the pairs a < b (`prepared.Prepared.ranks`), draw π
re-pairs row a of the source with row π(a) of the target, so its cell is

    rsa_π = Σ_{a<b} r_x[a, b] · r_y[π(a), π(b)] / sqrt(Σ r_x² · Σ r_y²)

(Σ r_y² does not move with π: the draw reorders the pairs). The same sum with the source's
rows moved by π⁻¹ instead, Σ_{c<d} r_x[π⁻¹(c), π⁻¹(d)] · r_y[c, d], lets the side with fewer
boundaries be the one gathered. That side's ranks are laid out once as square M × M matrices
R (R[a, b] = R[b, a] = r[a, b], a zero diagonal), all of them side by side, so a draw's pairs
read every square at one set of places.

The pairs are taken in blocks of B rows a0 ≤ a < a1, each a rectangle of the columns
a0 < b < M (`rows_of`: B·M about CHUNK): a draw's rectangle of a square is
R[π(a), π(b)] over it, read at the places π(a)·M + π(b) (a broadcast sum, no gather of
places), and the fixed side's ranks are laid out over the same rectangle with zeros where
b ≤ a (the pairs of the block's rows among themselves that are not pairs a < b), once a
block for every draw. Per block and batch of BATCH draws, the gathered rectangles of every
moved boundary (n_moved·batch × B·W) meet the fixed side's (B·W × n_fixed) in one matrix
product: the fixed side is read once a batch, and the product runs at the full rate of the
BLAS, not one draw and boundary at a time.
"""

from __future__ import annotations

import numpy as np

from align.measures import prepared as P
from align.ridge.backend import CPU, Backend

CHUNK = 1 << 15  # pairs a block (B·M): a batch's places and gathered ranks stay small
BATCH = 8  # draws a matrix product: the fixed side's rectangle read once per 8 draws


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
    (K, M), every `moved` record i (its ranks as a square, `square`) and `fixed` record j,
    block of rows by block (`rows_of`)."""
    k, m = perms.shape
    a, b = (backend.mask(v.astype(np.int64)) for v in P.pair_rows(m))  # a·M + b past 2³¹
    squares = _stack([square(p.ranks, a, b, m) for p in moved])  # (n_moved, M·M)
    del a, b
    pd = backend.mask(np.ascontiguousarray(perms, np.int64))
    acc = backend.zeros((len(moved), k, len(fixed)))
    rows = rows_of(m)
    for a0 in range(0, m - 1, rows):
        a1 = min(a0 + rows, m - 1)  # row M − 1 heads no pair
        other = fixed_block(fixed, a0, a1, m, backend)  # (n_fixed, B·W)
        for d0 in range(0, k, BATCH):
            batch = pd[d0 : d0 + BATCH]
            places = (batch[:, a0:a1, None] * m + batch[:, None, a0 + 1 :]).reshape(len(batch), -1)
            got = _take(squares, places)  # (n_moved·batch, B·W), moved-major
            dots = got @ other.T  # one product for every moved boundary and draw of the batch
            acc[:, d0 : d0 + BATCH] += dots.reshape(len(moved), len(batch), len(fixed))
    return _host(acc).transpose(1, 0, 2)


def rows_of(m: int) -> int:
    """B, the rows of a block: about CHUNK pairs (B·M), or P/BATCH where the pairs are few (a
    batch's places and gathered ranks then hold about the pairs' count, not BATCH times it),
    at least 1; a block's zeros below the diagonal add B/M to the pairs read."""
    pairs = m * (m - 1) // 2
    return max(1, min(CHUNK, -(-pairs // BATCH)) // m)


def fixed_block(fixed: list, a0: int, a1: int, m: int, backend: Backend):
    """(n_fixed, B·W): the fixed side's ranks over the rectangle of rows a0 ≤ a < a1 and
    columns a0 < b < M (W = M − a0 − 1), row-major, 0 where b ≤ a. The block's pairs a < b are
    the condensed ranks from row a0's first pair to row a1's, in the rectangle's row-major order
    the cells on and above its shifted diagonal (column index ≥ row index within the block)."""
    w = m - a0 - 1
    upper = np.arange(w)[None, :] >= np.arange(a1 - a0)[:, None]
    lo = int(P.pair_index(a0, a0 + 1, m))
    hi = int(P.pair_index(a1, a1 + 1, m)) if a1 < m - 1 else m * (m - 1) // 2
    out = backend.zeros((len(fixed), upper.size))
    out[:, backend.mask(upper.ravel())] = _stack([p.ranks[lo:hi] for p in fixed])
    return out


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


def _take(squares, places):
    """(n_moved·batch, n): squares (n_moved, M·M) read at places (batch, n), row i·batch + d
    square i at draw d's places."""
    flat = places.reshape(-1)
    if isinstance(squares, np.ndarray):
        got = np.take(squares, flat, axis=1)
    else:
        got = squares.index_select(1, flat)
    return got.reshape(squares.shape[0] * places.shape[0], places.shape[1])


def _stack(arrays: list):
    if isinstance(arrays[0], np.ndarray):
        return np.stack(arrays)
    import torch

    return torch.stack(arrays)


def _host(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else x.detach().cpu().numpy()
