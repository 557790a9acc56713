"""Sufficient statistics of the fit (docs/methods.md, The fit): per-part sums of shifted rows
(n, Σx, XᵀX, Σy, Σ‖y‖², XᵀY), one chunk of tokens at a time, and their sums in a fixed tree.

Tokens are rows: X (n_tokens, d_source), Y (n_tokens, d_target). Rows are shifted by a
first-chunk mean (x − s_x, y − s_y) so that centring later cancels far less; any order of
chunks gives the same sums up to rounding, a fixed reduction tree the same bits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align.ridge.backend import CPU, Backend

FIT, VAL = 0, 1  # the two parts of the training documents whose statistics are accumulated
N_PARTS = 2


@dataclass
class Statistics:
    """Per-part sums of shifted rows (x' = x − s_x, y' = y − s_y) for a block of boundaries.

    For source boundaries `source` (each d_S wide) and target boundaries `target` (each d_T
    wide); P = N_PARTS:

        n (P,)                      rows
        sx (P, nI, d_S)             Σ x'                 xx (P, nI, d_S, d_S)   Σ x'x'ᵀ
        sy (P, nJ, d_T)             Σ y'                 yy (P, nJ)             Σ ‖y'‖²
        xy (P, nI·d_S, nJ·d_T)      Σ x'y'ᵀ of every pair, side by side: pair (i, j) is the
                                    block at rows a·d_S, columns b·d_T (a, b their places)

    `n` is numpy; the other arrays are numpy, or torch tensors while they accumulate on a
    device (`Backend`). Pickles as plain arrays (Dask ships it between tasks).

    Parameters
    ----------
    source : tuple of int
        The source boundaries, nI of them.
    target : tuple of int
        The target boundaries, nJ of them.
    n : array of shape (P,)
        Rows per part.
    sx : array of shape (P, nI, d_source)
        Σ x'.
    xx : array of shape (P, nI, d_source, d_source)
        Σ x'x'ᵀ.
    sy : array of shape (P, nJ, d_target)
        Σ y'.
    yy : array of shape (P, nJ)
        Σ ‖y'‖².
    xy : array of shape (P, nI·d_source, nJ·d_target)
        Σ x'y'ᵀ of every pair, side by side.
    """

    source: tuple
    target: tuple
    n: np.ndarray
    sx: object
    xx: object
    sy: object
    yy: object
    xy: object

    FIELDS = ("n", "sx", "xx", "sy", "yy", "xy")

    @classmethod
    def zeros(
        cls,
        source,
        target,
        d_source: int,
        d_target: int,
        backend: Backend = CPU,
        parts: int = N_PARTS,
    ) -> "Statistics":
        nI, nJ, P = len(source), len(target), parts
        return cls(
            tuple(source),
            tuple(target),
            np.zeros(P),
            backend.zeros((P, nI, d_source)),
            backend.zeros((P, nI, d_source, d_source)),
            backend.zeros((P, nJ, d_target)),
            backend.zeros((P, nJ)),
            backend.zeros((P, nI * d_source, nJ * d_target)),
        )

    @property
    def d_source(self) -> int:
        return int(self.sx.shape[2])

    @property
    def d_target(self) -> int:
        return int(self.sy.shape[2])

    def pair(self, i, j):
        """Σ x'y'ᵀ of source boundary i and target boundary j, a view.

        Parameters
        ----------
        i : int
            The source boundary.
        j : int
            The target boundary.

        Returns
        -------
        array of shape (P, d_source, d_target)
            A view of `xy`.
        """
        a, b = self.source.index(i), self.target.index(j)
        dS, dT = self.d_source, self.d_target
        return self.xy[:, a * dS : (a + 1) * dS, b * dT : (b + 1) * dT]

    def view(self, name: str) -> dict:
        """One field per boundary, or for "xy" per pair.

        Parameters
        ----------
        name : str
            One of FIELDS.

        Returns
        -------
        dict
            {i: (P, ...)}, or for "xy" {(i, j): (P, d_source, d_target)}.
        """
        if name == "xy":
            return {(i, j): self.pair(i, j) for i in self.source for j in self.target}
        keys = self.source if name in ("sx", "xx") else self.target
        return {k: getattr(self, name)[:, a] for a, k in enumerate(keys)}

    def numpy(self, backend: Backend = CPU) -> "Statistics":
        """The same sums as numpy arrays (off the device).

        Parameters
        ----------
        backend : Backend, optional
            The device they are on.

        Returns
        -------
        Statistics
            numpy sums.
        """
        return Statistics(
            self.source,
            self.target,
            np.asarray(self.n),
            *(backend.get(getattr(self, f)) for f in self.FIELDS[1:]),
        )

    def merged(self, fit_parts, val_parts) -> "Statistics":
        """Two-part statistics (FIT, VAL) whose parts are sums of these parts (numpy).

        How the fits of --convergence read their share.

        Parameters
        ----------
        fit_parts : sequence of int
            The parts summed into FIT.
        val_parts : sequence of int
            The parts summed into VAL.

        Returns
        -------
        Statistics
            Two parts.
        """

        def two(a):
            return np.stack([sum(a[k] for k in fit_parts), sum(a[k] for k in val_parts)])

        return Statistics(self.source, self.target, *(two(getattr(self, f)) for f in self.FIELDS))

    def add_(self, other: "Statistics") -> "Statistics":
        """self += other, field by field, in place; returns self.

        Parameters
        ----------
        other : Statistics
            Sums over the same boundaries.

        Returns
        -------
        Statistics
            self.
        """
        for f in self.FIELDS:
            a = getattr(self, f)
            a += getattr(other, f)
        return self

    @property
    def nbytes(self) -> int:
        return sum(int(getattr(self, f).nbytes) for f in self.FIELDS)


def chunk_statistics(
    xs: dict,
    ys: dict,
    part: np.ndarray,
    shifts: tuple[dict, dict],
    backend: Backend = CPU,
    into: Statistics | None = None,
    work: dict | None = None,
    parts: int = N_PARTS,
) -> Statistics:
    """Per-part sums (`Statistics`) of one chunk of tokens, for every source and target boundary.

    Rows are shifted, x' = x − x_shift[i] and y' = y − y_shift[j], and every product is
    float64. The rows of each part are gathered, in part order, into one float64 (rows, ΣD)
    buffer per side, so every XᵀY of a part is one product (rows, ΣD_S)ᵀ (rows, ΣD_T).

    Parameters
    ----------
    xs : dict of int to array of shape (n_tokens, d_source)
        xs[i]: source rows at boundary i (any float dtype).
    ys : dict of int to array of shape (n_tokens, d_target)
        ys[j]: target rows at boundary j.
    part : array of shape (n_tokens,)
        int, the part 0..P−1 a row adds to (FIT / VAL), anything else to skip.
    shifts : tuple of (dict, dict)
        (x_shift, y_shift), per boundary: (d_source,) and (d_target,).
    backend : Backend, optional
        Where the products run.
    into : Statistics, optional
        Sums to add into, in place (its parts count).
    work : dict, optional
        Keeps the buffers between calls: no fresh allocation per chunk.
    parts : int, optional
        P, the parts (without `into`).

    Returns
    -------
    Statistics
        `into` (on the backend), or new sums (numpy).
    """
    x_shift, y_shift = shifts
    source, target = tuple(xs), tuple(ys)
    d_s, d_t = next(iter(xs.values())).shape[1], next(iter(ys.values())).shape[1]
    P = len(into.n) if into is not None else parts
    rows = [np.flatnonzero(part == p) for p in range(P)]
    acc = into if into is not None else Statistics.zeros(source, target, d_s, d_t, backend, P)
    work = {} if work is None else work
    order = np.concatenate(rows)
    if len(order) == 0:
        return acc if into is not None else acc.numpy(backend)
    X = gather(xs, source, order, x_shift, backend, work, "x")
    Y = gather(ys, target, order, y_shift, backend, work, "y")
    at = 0
    for p, r in enumerate(rows):
        if not len(r):
            continue
        Xp, Yp = X[at : at + len(r)], Y[at : at + len(r)]
        at += len(r)
        fresh = (
            acc.n[p] == 0
        )  # this part's sums are still zeros: the products are written, not added
        acc.n[p] += len(r)
        acc.sx[p] += backend.sum0(Xp).reshape(len(source), d_s)
        for a in range(len(source)):
            Xa = Xp[:, a * d_s : (a + 1) * d_s]
            backend.add_product(acc.xx[p, a], Xa, Xa, fresh)
        acc.sy[p] += backend.sum0(Yp).reshape(len(target), d_t)
        acc.yy[p] += backend.sumsq0(Yp).reshape(len(target), d_t).sum(1)
        backend.add_product(acc.xy[p], Xp, Yp, fresh)
    return acc if into is not None else acc.numpy(backend)


def gather(
    arrays: dict,
    keys: tuple,
    order: np.ndarray,
    shifts: dict,
    backend: Backend,
    work: dict,
    name: str,
):
    """Rows `order` of every boundary, side by side and shifted: float64 (len(order), Σd) on
    the backend, landing straight in a reused buffer (`work[name]`: no fresh allocation, no
    page faults, chunk after chunk). On torch the arrays may be numpy or tensors already on
    the device (any float dtype)."""
    d = next(iter(arrays.values())).shape[1]
    m, width = len(order), d * len(keys)
    whole = m == len(next(iter(arrays.values()))) and bool(np.all(order[1:] > order[:-1]))
    buf = work.get(name)
    if buf is None or buf.shape[0] < m or buf.shape[1] != width:
        buf = work[name] = backend.empty((max(m, buf.shape[0] if buf is not None else 0), width))
    out = buf[:m]
    if backend.torch is None:
        for a, k in enumerate(keys):
            rows = arrays[k] if whole else arrays[k][order]
            np.subtract(
                rows, shifts[k], out=out[:, a * d : (a + 1) * d]
            )  # float32 − float64 → float64
        return out
    t = backend.torch
    idx = None if whole else t.from_numpy(order).to(backend.dev)
    for a, k in enumerate(keys):
        rows = arrays[k]
        rows = (
            t.from_numpy(np.ascontiguousarray(rows)) if isinstance(rows, np.ndarray) else rows
        ).to(backend.dev)
        if idx is not None:
            rows = rows.index_select(0, idx)
        # any float dtype − float64 → float64, written in place into the buffer's columns
        t.sub(
            rows,
            backend.put(np.asarray(shifts[k], dtype=np.float64)),
            out=out[:, a * d : (a + 1) * d],
        )
    return out


def add_statistics(a: Statistics, b: Statistics) -> Statistics:
    """Elementwise sum of two `Statistics` over the same boundaries (a new one).

    Parameters
    ----------
    a, b : Statistics
        Sums over the same boundaries.

    Returns
    -------
    Statistics
        a + b.
    """
    return Statistics(
        a.source, a.target, *(getattr(a, f) + getattr(b, f) for f in Statistics.FIELDS)
    )


def tree_sum(items: list, add=add_statistics):
    """Pairwise sum in a fixed tree by position: ((0+1)+(2+3))+...

    The same list gives the same bits, whoever computes it.

    Parameters
    ----------
    items : list
        What is summed, in order.
    add : callable, optional
        The sum of two items.

    Returns
    -------
    object
        The sum.
    """
    items = list(items)
    while len(items) > 1:
        items = [
            add(items[k], items[k + 1]) if k + 1 < len(items) else items[k]
            for k in range(0, len(items), 2)
        ]
    return items[0]
