"""Ridge maps between residual streams from sufficient statistics (docs/methods.md, The fit).

Pure math on arrays: no file, no model, no Dask. Tokens are rows: X (n_tokens, d_source),
Y (n_tokens, d_target); a map predicts y = x W + c with W (d_source, d_target).

The flow, all in float64:

1. `chunk_statistics` turns one chunk of tokens into per-part sums (n, Σx, XᵀX, Σy, Σ‖y‖²,
   XᵀY) of SHIFTED rows (x − s_x, y − s_y, with s a first-chunk mean: centring later then
   cancels far less); `add_statistics` adds two of them (any order of chunks gives the same
   sums up to rounding; a fixed reduction tree gives the same bits).
2. `solve_block` does one eigendecomposition of the centred XᵀX per source boundary and part,
   scores every α of the grid on the validation part from statistics alone, picks α per pair
   (ties to the larger), and refits on all training tokens.
3. `heldout_sums` accumulates the held-out error sums of one chunk once W is known;
   `scores` turns them into relative_error, norm_error and r2; `summary` reads the matrix.

A `Backend` does the chunk products on numpy (CPU) or torch (e.g. CUDA) with one code path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from align.errors import InputError, NonFiniteError

FIT, VAL = 0, 1  # the two parts of the training documents whose statistics are accumulated
N_PARTS = 2
EPS = 1e-12  # guards ‖y‖ in relative_error (docs/methods.md, The fit)
TIE_RTOL = 1e-12  # validation errors this close (relatively) are a tie, won by the larger α
DEFAULT_ALPHAS = tuple(10.0 ** k for k in range(-6, 2))  # α_rel grid 1e-6 … 1e1 by decades
AUTO_LIMITS = (1e-12, 1e6)  # how far `--alphas auto` may extend the grid, by decades, in α_rel
# An end of the grid is extended only when it beats its neighbour by more than this fraction of
# the validation part's total sum of squares (the tie band of `choose_alpha`): below it, the
# closed-form SSE is rounding, and chasing it would walk the grid to a limit on noise.
AUTO_FLOOR = TIE_RTOL


class Backend:
    """Where the products and solves run: "cpu" (numpy) or a torch device such as "cuda"
    (use_torch=True runs torch on "cpu" too: the GPU's code path, testable without one).

    Arrays enter as numpy (any float dtype) through `put` and leave as numpy through `get`;
    in between they live on the device, in float64.
    """

    def __init__(self, device: str = "cpu", use_torch: bool | None = None):
        self.device = device
        self.torch = None
        if use_torch or (use_torch is None and device != "cpu"):
            import torch

            self.torch = torch
            self.dev = torch.device(device)

    def put(self, a):
        """numpy (any float dtype) -> float64 array on the device."""
        if self.torch is None:
            return np.asarray(a, dtype=np.float64)
        if isinstance(a, self.torch.Tensor):
            return a.to(self.dev, self.torch.float64)
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.dev).to(self.torch.float64)

    def get(self, a) -> np.ndarray:
        if self.torch is None:
            return a
        return a.detach().cpu().numpy()

    def zeros(self, shape):
        if self.torch is None:
            return np.zeros(shape)
        return self.torch.zeros(shape, dtype=self.torch.float64, device=self.dev)

    def empty(self, shape):
        """float64 of `shape`, uninitialised."""
        if self.torch is None:
            return np.empty(shape)
        return self.torch.empty(shape, dtype=self.torch.float64, device=self.dev)

    def mask(self, m: np.ndarray):
        if self.torch is None:
            return m
        return self.torch.from_numpy(np.ascontiguousarray(m)).to(self.dev)

    def sum0(self, a):
        return a.sum(0)

    @property
    def on_cpu(self) -> bool:
        """The arrays live in host memory (numpy, or torch on "cpu")."""
        return self.torch is None or self.dev.type == "cpu"

    def _squares(self, spec: str, a):
        """einsum(spec, a, a) through numpy on the host (no temporary of a's size: on the CPU
        twice as fast as torch's product-then-sum), None on a GPU."""
        if not self.on_cpu:
            return None
        if self.torch is None:
            return np.einsum(spec, a, a)
        v = a.numpy()
        return self.torch.from_numpy(np.einsum(spec, v, v))

    def sumsq0(self, a):
        """Σ_n a[n, k]² per column of (n, d) -> (d,)."""
        out = self._squares("nd,nd->d", a)
        return out if out is not None else (a * a).sum(0)

    def rownorm(self, a):
        """‖row‖₂ of (n, d) -> (n,)."""
        if self.torch is None:
            return np.sqrt(np.einsum("nd,nd->n", a, a))
        return self.torch.linalg.vector_norm(a, dim=1)

    def blocknorm2(self, a, n_blocks: int):
        """‖row block‖² of (n, n_blocks·d), each row cut into n_blocks blocks of d -> (n, n_blocks)."""
        v = a.reshape(a.shape[0], n_blocks, -1)
        out = self._squares("rjd,rjd->rj", v)
        return out if out is not None else (v * v).sum(2)

    def maximum(self, a, floor: float):
        if self.torch is None:
            return np.maximum(a, floor)
        return self.torch.clamp(a, min=floor)

    def eigh(self, C):
        """C = Q diag(λ) Qᵀ for a symmetric C (d, d): (λ ascending, Q)."""
        if self.torch is None:
            return np.linalg.eigh(C)
        return self.torch.linalg.eigh(C)

    def add_product(self, acc, A, B, fresh: bool = False) -> None:
        """acc += Aᵀ B in place: acc (p, q), A (n, p), B (n, q), all float64 on the device,
        with no temporary of acc's size (at (ΣD_S, ΣD_T) that is ~100 MB a product).

        On numpy: `fresh` (acc still holds zeros) writes the product straight into acc
        through numpy's matmul; otherwise BLAS dgemm with β = 1 on C-contiguous operands.
        numpy's matmul releases the GIL and scipy's dgemm does not (two threads took twice as
        long as one), so the first product of every task, all of a small fit's, runs in
        parallel in the threads of one process."""
        if self.torch is not None:
            acc.addmm_(A.T, B)
            return
        if not len(A):
            return
        if fresh and acc.flags.c_contiguous:
            np.matmul(A.T, B, out=acc)
            return
        if acc.flags.c_contiguous and A.flags.c_contiguous and B.flags.c_contiguous:
            # in Fortran order acc is accᵀ (q, p): accᵀ += Bᵀ A, with Bᵀ and Aᵀ Fortran views
            out = _dgemm()(1.0, B.T, A.T, beta=1.0, c=acc.T, trans_b=1, overwrite_c=1)
            if not np.shares_memory(out, acc):
                acc[...] = out.T
            return
        acc += A.T @ B


def _dgemm():
    from scipy.linalg.blas import dgemm

    return dgemm




CPU = Backend("cpu")


# -- 1. sufficient statistics -------------------------------------------------------------

@dataclass
class Statistics:
    """Per-part sums of shifted rows (x' = x − s_x, y' = y − s_y) for source boundaries
    `source` (each d_S wide) and target boundaries `target` (each d_T wide); P = N_PARTS:

        n (P,)                      rows
        sx (P, nI, d_S)             Σ x'                 xx (P, nI, d_S, d_S)   Σ x'x'ᵀ
        sy (P, nJ, d_T)             Σ y'                 yy (P, nJ)             Σ ‖y'‖²
        xy (P, nI·d_S, nJ·d_T)      Σ x'y'ᵀ of every pair, side by side: pair (i, j) is the
                                    block at rows a·d_S, columns b·d_T (a, b their places)

    `n` is numpy; the other arrays are numpy, or torch tensors while they accumulate on a
    device (`Backend`). Pickles as plain arrays (Dask ships it between tasks)."""

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
    def zeros(cls, source, target, d_source: int, d_target: int, backend: Backend = CPU,
              parts: int = N_PARTS) -> "Statistics":
        nI, nJ, P = len(source), len(target), parts
        return cls(tuple(source), tuple(target), np.zeros(P), backend.zeros((P, nI, d_source)),
                   backend.zeros((P, nI, d_source, d_source)), backend.zeros((P, nJ, d_target)),
                   backend.zeros((P, nJ)), backend.zeros((P, nI * d_source, nJ * d_target)))

    @property
    def d_source(self) -> int:
        return int(self.sx.shape[2])

    @property
    def d_target(self) -> int:
        return int(self.sy.shape[2])

    def pair(self, i, j):
        """Σ x'y'ᵀ of source boundary i and target boundary j: (P, d_S, d_T), a view."""
        a, b = self.source.index(i), self.target.index(j)
        dS, dT = self.d_source, self.d_target
        return self.xy[:, a * dS:(a + 1) * dS, b * dT:(b + 1) * dT]

    def view(self, name: str) -> dict:
        """One field per boundary ({i: (P, ...)}) or, for "xy", per pair ({(i, j): (P, d_S, d_T)})."""
        if name == "xy":
            return {(i, j): self.pair(i, j) for i in self.source for j in self.target}
        keys = self.source if name in ("sx", "xx") else self.target
        return {k: getattr(self, name)[:, a] for a, k in enumerate(keys)}

    def numpy(self, backend: Backend = CPU) -> "Statistics":
        """The same sums as numpy arrays (off the device)."""
        return Statistics(self.source, self.target, np.asarray(self.n),
                          *(backend.get(getattr(self, f)) for f in self.FIELDS[1:]))

    def merged(self, fit_parts, val_parts) -> "Statistics":
        """Two-part statistics (FIT, VAL) whose parts are the sums of `fit_parts` and of
        `val_parts` of these (numpy): how the fits of --convergence read their share."""
        def two(a):
            return np.stack([sum(a[k] for k in fit_parts), sum(a[k] for k in val_parts)])
        return Statistics(self.source, self.target, *(two(getattr(self, f)) for f in self.FIELDS))

    def add_(self, other: "Statistics") -> "Statistics":
        """self += other, field by field, in place; returns self."""
        for f in self.FIELDS:
            a = getattr(self, f)
            a += getattr(other, f)
        return self

    @property
    def nbytes(self) -> int:
        return sum(int(getattr(self, f).nbytes) for f in self.FIELDS)


def chunk_statistics(xs: dict, ys: dict, part: np.ndarray, x_shift: dict, y_shift: dict,
                     backend: Backend = CPU, into: Statistics | None = None, work: dict | None = None,
                     parts: int = N_PARTS) -> Statistics:
    """Per-part sums (`Statistics`) of one chunk of tokens, for every source and target
    boundary given.

    xs[i]: (n, d_S) source rows at boundary i (any float dtype); ys[j]: (n, d_T) target rows
    at boundary j; part: (n,) int, the part 0..P−1 a row adds to (FIT / VAL; `parts` of them,
    or those of `into`), anything else to skip. Rows are
    shifted, x' = x − x_shift[i] and y' = y − y_shift[j], and every product is float64.

    The rows of each part are gathered, in part order, into one float64 (rows, ΣD) buffer per
    side (`work` keeps the buffers between calls: no fresh allocation per chunk), so every XᵀY
    of a part is one product (rows, ΣD_S)ᵀ (rows, ΣD_T), added in place into `into` (which
    is returned, on the backend) or into new sums (returned as numpy)."""
    source, target = tuple(xs), tuple(ys)
    d_s, d_t = next(iter(xs.values())).shape[1], next(iter(ys.values())).shape[1]
    P = len(into.n) if into is not None else parts
    rows = [np.flatnonzero(part == p) for p in range(P)]
    acc = into if into is not None else Statistics.zeros(source, target, d_s, d_t, backend, P)
    work = {} if work is None else work
    order = np.concatenate(rows)
    if len(order) == 0:
        return acc if into is not None else acc.numpy(backend)
    X = _gather(xs, source, order, x_shift, backend, work, "x")
    Y = _gather(ys, target, order, y_shift, backend, work, "y")
    at = 0
    for p, r in enumerate(rows):
        if not len(r):
            continue
        Xp, Yp = X[at:at + len(r)], Y[at:at + len(r)]
        at += len(r)
        fresh = acc.n[p] == 0  # this part's sums are still zeros: the products are written, not added
        acc.n[p] += len(r)
        acc.sx[p] += backend.sum0(Xp).reshape(len(source), d_s)
        for a in range(len(source)):
            Xa = Xp[:, a * d_s:(a + 1) * d_s]
            backend.add_product(acc.xx[p, a], Xa, Xa, fresh)
        acc.sy[p] += backend.sum0(Yp).reshape(len(target), d_t)
        acc.yy[p] += backend.sumsq0(Yp).reshape(len(target), d_t).sum(1)
        backend.add_product(acc.xy[p], Xp, Yp, fresh)
    return acc if into is not None else acc.numpy(backend)


def _gather(arrays: dict, keys: tuple, order: np.ndarray, shifts: dict, backend: Backend, work: dict, name: str):
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
            np.subtract(rows, shifts[k], out=out[:, a * d:(a + 1) * d])  # float32 − float64 → float64
        return out
    t = backend.torch
    idx = None if whole else t.from_numpy(order).to(backend.dev)
    for a, k in enumerate(keys):
        rows = arrays[k]
        rows = (t.from_numpy(np.ascontiguousarray(rows)) if isinstance(rows, np.ndarray) else rows).to(backend.dev)
        if idx is not None:
            rows = rows.index_select(0, idx)
        # any float dtype − float64 → float64, written in place into the buffer's columns
        t.sub(rows, backend.put(np.asarray(shifts[k], dtype=np.float64)), out=out[:, a * d:(a + 1) * d])
    return out


def add_statistics(a: Statistics, b: Statistics) -> Statistics:
    """Elementwise sum of two `Statistics` over the same boundaries (a new one)."""
    return Statistics(a.source, a.target, *(getattr(a, f) + getattr(b, f) for f in Statistics.FIELDS))


def tree_sum(items: list, add=add_statistics):
    """Pairwise sum in a fixed tree by position: ((0+1)+(2+3))+... The same list gives the
    same bits, whoever computes it."""
    items = list(items)
    while len(items) > 1:
        items = [add(items[k], items[k + 1]) if k + 1 < len(items) else items[k] for k in range(0, len(items), 2)]
    return items[0]


# -- 2. solves ----------------------------------------------------------------------------

def moments(n: float, s, ss):
    """Mean and centred scatter from sums: μ = s/n, C = ss − n μμᵀ. s (d,), ss (d, d)."""
    mu = s / n
    return mu, ss - n * (mu[:, None] * mu[None, :])


def about(n: float, s_a, s_b, ab, mu_a, mu_b):
    """Σ (a − μ_a)(b − μ_b)ᵀ from sums over n rows: ab − s_a μ_bᵀ − μ_a s_bᵀ + n μ_a μ_bᵀ.
    With μ the same part's means this is the centred cross product. numpy or torch."""
    out = ab - s_a[:, None] * mu_b[None, :]
    out -= mu_a[:, None] * (s_b - n * mu_b)[None, :]  # in place: at (d_S, nJ·d_T) each temporary is a page-faulting ~10 MB
    return out


def eigen(C, backend: Backend = CPU):
    """C = Q diag(λ) Qᵀ for a symmetric PSD C (d, d); λ clipped at 0 (rounding)."""
    lam, Q = backend.eigh(C)
    return backend.maximum(lam, 0.0), Q


def absolute_alpha(alpha_rel: float, C) -> float:
    """α = α_rel · trace(C) / d: the relative grid in units of the mean eigenvalue."""
    return float(alpha_rel) * float(C.diagonal().sum()) / C.shape[0]


def validation_sse(lam, Q, B, Vxx, Vxy, Vyy: float, alphas, M=None):
    """Σ‖x W_α + c − y‖² over the validation rows, for every absolute α, without predictions.

    W_α = Q diag(1/(λ+α)) Qᵀ B is fitted on the fit part (B = its centred XᵀY, (d_S, d_T));
    Vxx (d_S, d_S), Vxy (d_S, d_T), Vyy are the validation sums about the FIT means, so the
    error is (x − μ_x) W − (y − μ_y). With P = QᵀB, M = QᵀVxxQ, R = QᵀVxy and d = 1/(λ+α):

        SSE(α) = dᵀ (M ∘ PPᵀ) d − 2 dᵀ rowsum(P ∘ R) + Vyy

    M depends on the source boundary only: pass it (`M`) to compute it once for every target.
    numpy or torch arrays; returns (n_alpha,) of the same kind."""
    if M is None:
        M = Q.T @ Vxx @ Q
    return _sse(lam, Q.T @ B, M, Q.T @ Vxy, Vyy, alphas)


def _sse(lam, P, M, R, Vyy: float, alphas):
    """`validation_sse` from P = QᵀB, M = QᵀVxxQ and R = QᵀVxy, every α at once."""
    H = M * (P @ P.T)
    r = (P * R).sum(1)
    D = 1.0 / (lam[None, :] + alphas[:, None])  # (n_alpha, d_S)
    return ((D @ H) * D).sum(1) - 2.0 * (D @ r) + Vyy


def choose_alpha(sse: np.ndarray, rtol: float = TIE_RTOL, total: float = 0.0) -> int:
    """Index of the α with the least validation error; errors within rtol · max(|least|,
    total) of the least are a tie, won by the largest α. `total`: the validation part's sum
    of squares about the fit mean (Vyy): the closed-form SSE is a difference of terms of that
    size, so differences below rtol · Vyy are rounding, not evidence (a perfect map's curve is
    all rounding). `sse` follows an increasing α grid and must be finite (a NaN would win no
    comparison: `solve_block` refuses it first)."""
    if not np.all(np.isfinite(sse)):
        raise NonFiniteError(f"validation errors {sse.tolist()} are not all finite: no α can be chosen among them")
    best = float(np.min(sse))
    tied = np.flatnonzero(sse <= best + rtol * max(abs(best), abs(float(total))))
    return int(tied[-1])


def ridge_map(lam, Q, B, alpha: float):
    """W = (C + αI)⁻¹ B = Q diag(1/(λ+α)) Qᵀ B, (d_S, d_T)."""
    return Q @ ((Q.T @ B) / (lam + alpha)[:, None])


@dataclass
class Factor:
    """What the solve needs of one source boundary, whatever the target: the fit part's
    mean μ_f, eigenbasis (λ_f, Q_f), absolute α grid and M = Q_fᵀ Vxx Q_f (Vxx: the
    validation scatter about μ_f), and the training mean μ_t and eigenbasis (λ_t, Q_t).
    numpy; the λ_f/Q_f/alphas_f/M fields are None with a single α (nothing to choose)."""

    mu_f: np.ndarray
    lam_f: np.ndarray | None
    Q_f: np.ndarray | None
    alphas_f: np.ndarray | None
    M: np.ndarray | None
    mu_t: np.ndarray
    lam_t: np.ndarray
    Q_t: np.ndarray
    trace_t: float


def source_factor(stats: Statistics, i, alphas_rel, backend: Backend = CPU) -> Factor:
    """The `Factor` of source boundary i from a block's reduced statistics: two
    eigendecompositions (fit part; fit + validation) and one QᵀVxxQ, on the backend."""
    a = stats.source.index(i)
    n = stats.n
    alphas_rel = np.asarray(sorted(alphas_rel), dtype=np.float64)
    sx, xx = backend.put(stats.sx[:, a]), backend.put(stats.xx[:, a])
    mu_f, C_f = moments(n[FIT], sx[FIT], xx[FIT])
    mu_t, C_t = moments(n[FIT] + n[VAL], sx[FIT] + sx[VAL], xx[FIT] + xx[VAL])
    lam_f = Q_f = a_f = M = None
    if len(alphas_rel) > 1:
        lam_f, Q_f = eigen(C_f, backend)
        a_f = alphas_rel * (float(C_f.diagonal().sum()) / C_f.shape[0])
        _require_usable_alphas(alphas_rel, a_f, i)
        Vxx = about(n[VAL], sx[VAL], sx[VAL], xx[VAL], mu_f, mu_f)
        M = backend.get(Q_f.T @ Vxx @ Q_f)
        lam_f, Q_f = backend.get(lam_f), backend.get(Q_f)
    lam_t, Q_t = eigen(C_t, backend)
    return Factor(backend.get(mu_f), lam_f, Q_f, a_f, M, backend.get(mu_t), backend.get(lam_t), backend.get(Q_t),
                  float(C_t.diagonal().sum()))


def solve_block(stats: Statistics, alphas_rel, x_shift: dict, y_shift: dict, backend: Backend = CPU,
                factors: dict | None = None, extend: bool = False, threads: int = 1) -> dict:
    """Choose α and fit W, c for every (i, j) of a block's reduced statistics (numpy).

    Per source boundary i, one `Factor` (`source_factor`: the fit part's and the training
    scatter's eigendecompositions, and QᵀVxxQ) serves every target j and every α: α is
    scored by the validation part's squared error (`validation_sse`), the chosen α_rel is
    refitted on fit + validation. `factors` ({i: Factor}) is read and filled: a caller
    solving several blocks of the same source boundaries decomposes each once. The products
    run on `backend` (torch on a GPU); the results are numpy.

    `extend` (`--alphas auto`): while some target of source boundary i chooses the smallest
    (largest) α_rel of the grid, the grid of boundary i gains the next decade below (above),
    within AUTO_LIMITS, and every target is scored on it again from the same factors (the
    added α cost no eigendecomposition); a chosen α at a limit stays there.
    Returns {(i, j): {"W" (d_S, d_T), "x_mean" (d_S,), "y_mean" (d_T,), "c" (d_T,),
    "alpha_rel", "alpha", "val_sse" (n_alpha,), "val_alphas" (n_alpha,): the grid val_sse
    follows}} with means and c in raw (unshifted) units.

    `threads` > 1 solves that many source boundaries side by side in threads (numpy's BLAS
    and LAPACK release the GIL; the caller limits BLAS to one thread each): each source
    boundary's numbers are computed as they would be alone, so the result is the same
    whatever the count."""
    alphas_rel = np.asarray(sorted(alphas_rel), dtype=np.float64)
    factors = {} if factors is None else factors
    _require_finite_statistics(stats)

    def one(i):
        f = factors[i] if i in factors else source_factor(stats, i, alphas_rel, backend)
        return f, _solve_source(stats, i, f, alphas_rel, x_shift[i], y_shift, backend, extend)

    if threads > 1 and len(stats.source) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(threads, len(stats.source))) as pool:
            solved = list(pool.map(one, stats.source))
    else:
        solved = [one(i) for i in stats.source]
    out = {}
    for i, (f, maps) in zip(stats.source, solved):
        factors[i] = f
        out.update(maps)
    return out


def _decades(grid: np.ndarray, scale: float) -> tuple[list, list]:
    """The α_rel `--alphas auto` may add to `grid` (increasing), nearest first: below, each a
    tenth of the one before down to AUTO_LIMITS[0]; above, ten times up to AUTO_LIMITS[1];
    each giving a usable absolute α (α_rel · scale finite, positive, with a finite
    reciprocal), and stopping at the first that does not."""
    def usable(a):
        with np.errstate(over="ignore", divide="ignore"):
            return bool(np.isfinite(a * scale) and a * scale > 0 and np.isfinite(1 / (a * scale)))

    below, above = [], []
    a = float(grid[0])
    while a / 10 >= AUTO_LIMITS[0] * (1 - 1e-9) and usable(a / 10):
        a = a / 10
        below.append(a)
    a = float(grid[-1])
    while a * 10 <= AUTO_LIMITS[1] * (1 + 1e-9) and usable(a * 10):
        a = a * 10
        above.append(a)
    return below, above


def _extend_window(chosen: list, sses: list, totals) -> tuple[bool, bool]:
    """Whether the grid grows below / above: some target chose its smallest (largest) α and
    beats the next one by more than AUTO_FLOOR × its validation sum of squares (`totals`)."""
    last = len(sses[0]) - 1
    low = any(k == 0 and v[1] - v[0] > AUTO_FLOOR * t for k, v, t in zip(chosen, sses, totals))
    high = any(k == last and v[last - 1] - v[last] > AUTO_FLOOR * t for k, v, t in zip(chosen, sses, totals))
    return low, high


def _solve_source(stats: Statistics, i, f: Factor, alphas_rel, x_shift, y_shift: dict, backend: Backend,
                  extend: bool = False) -> dict:
    """Every target of source boundary i: α by validation error, then the refit (one product
    Q_tᵀ B_t and one Q_t (…) for all targets at once)."""
    a, dS, dT = stats.source.index(i), stats.d_source, stats.d_target
    n = stats.n
    n_f, n_v = float(n[FIT]), float(n[VAL])
    put = backend.put
    sx = put(stats.sx[:, a])
    sy = put(stats.sy.reshape(N_PARTS, -1))  # (P, nJ·d_T)
    xy = put(stats.xy[:, a * dS:(a + 1) * dS])  # (P, d_S, nJ·d_T)
    mu_f, mu_t = put(f.mu_f), put(f.mu_t)
    nu_f, nu_t = sy[FIT] / n_f, (sy[FIT] + sy[VAL]) / (n_f + n_v)
    targets = stats.target
    chosen, sses = [], []
    if f.Q_f is not None:
        Q_f = put(f.Q_f)
        P = Q_f.T @ about(n_f, sx[FIT], sy[FIT], xy[FIT], mu_f, nu_f)
        R = Q_f.T @ about(n_v, sx[VAL], sy[VAL], xy[VAL], mu_f, nu_f)
        # Σ ‖y − ν_f‖² over the validation rows, per target: Σ‖y‖² − 2 ν_f·Σy + n ‖ν_f‖²
        Vyy = backend.get(put(stats.yy[VAL]) - 2.0 * (nu_f * sy[VAL]).reshape(-1, dT).sum(1)
                          + n_v * (nu_f * nu_f).reshape(-1, dT).sum(1))
        lam_f, M = put(f.lam_f), put(f.M)
        scale = float(f.alphas_f[0]) / float(alphas_rel[0])  # trace(C_f)/d_S: α = α_rel · scale

        def scored(rel: np.ndarray, given: slice) -> list:
            a_f = put(rel * scale)
            out = []
            for b, j in enumerate(targets):
                cols = slice(b * dT, (b + 1) * dT)
                with np.errstate(over="ignore", invalid="ignore"):
                    sse = np.asarray(backend.get(_sse(lam_f, P[:, cols], M, R[:, cols], float(Vyy[b]), a_f)), dtype=np.float64)
                if not np.all(np.isfinite(sse[given])):  # only the given grid must score: an added decade may not
                    k = given.start + int(np.flatnonzero(~np.isfinite(sse[given]))[0])
                    raise InputError(
                        f"--alphas {rel[k]:g} gives a non-finite validation error for source boundary {i} -> "
                        f"target boundary {j} (absolute α {rel[k] * scale:.3g} against eigenvalues down to "
                        f"{f.lam_f.min():.3g} overflows float64): choose α_rel values nearer 1")
                out.append(sse)
            return out

        below, above = _decades(alphas_rel, scale) if extend and len(alphas_rel) > 1 else ([], [])
        # every decade the grid may grow to is scored at once (one product more per α, no more
        # M ∘ PPᵀ); the grid then grows from the given one decade by decade, as far as a target's
        # choice at an end asks, and only what it reached is kept
        full = np.array(below[::-1] + list(alphas_rel) + above)
        lo, hi = len(below), len(below) + len(alphas_rel)
        curves = scored(full, slice(lo, hi))
        ok = np.all(np.isfinite(np.stack(curves)), axis=0)  # an added decade whose error overflows ends the range there
        first, last = lo, hi
        while first > 0 and ok[first - 1]:
            first -= 1
        while last < len(full) and ok[last]:
            last += 1
        full, curves, lo, hi = full[first:last], [v[first:last] for v in curves], lo - first, hi - first
        while True:
            sses = [v[lo:hi] for v in curves]
            chosen = [choose_alpha(v, total=t) for v, t in zip(sses, Vyy)]
            low, high = _extend_window(chosen, sses, Vyy) if len(full) > 1 else (False, False)
            low, high = low and lo > 0, high and hi < len(full)
            if not (low or high):
                break
            lo, hi = lo - low, hi + high
        alphas_rel = full[lo:hi]
    else:
        chosen, sses = [0] * len(targets), [np.full(1, np.nan)] * len(targets)
    alphas = [float(alphas_rel[k]) * f.trace_t / dS for k in chosen]
    for k, alpha in zip(chosen, alphas):
        _require_usable_alphas(alphas_rel[k:k + 1], np.array([alpha]), i)
    Q_t, lam_t = put(f.Q_t), put(f.lam_t)
    PT = Q_t.T @ about(n_f + n_v, sx[FIT] + sx[VAL], sy[FIT] + sy[VAL], xy[FIT] + xy[VAL], mu_t, nu_t)
    scale = put(np.concatenate([np.full(dT, alpha) for alpha in alphas]))  # α of each column's pair
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        W_all = backend.get(Q_t @ (PT / (lam_t[:, None] + scale[None, :])))
    x_mean = f.mu_t + x_shift
    nu_t = backend.get(nu_t)
    out = {}
    for b, j in enumerate(targets):
        k, W = chosen[b], W_all[:, b * dT:(b + 1) * dT]
        if not np.all(np.isfinite(W)):
            raise NonFiniteError(f"the map from source boundary {i} to target boundary {j} is not finite with α_rel "
                                 f"{alphas_rel[k]:g} (absolute α {alphas[b]:.3g}): choose α_rel values nearer 1")
        y_mean = nu_t[b * dT:(b + 1) * dT] + y_shift[j]
        out[(i, j)] = {"W": np.ascontiguousarray(W), "x_mean": x_mean, "y_mean": y_mean, "c": y_mean - x_mean @ W,
                       "alpha_rel": float(alphas_rel[k]), "alpha": alphas[b], "val_sse": sses[b],
                       "val_alphas": alphas_rel}
    return out


def _require_finite_statistics(stats: Statistics) -> None:
    """Sums over NaN or ±inf rows are NaN or ±inf: refuse them naming the boundary (the
    store refuses such rows on read; this guards the solve against any other source)."""
    for key, side in (("sx", "source"), ("xx", "source"), ("sy", "target"), ("yy", "target"), ("xy", "pair")):
        if np.all(np.isfinite(getattr(stats, key))):
            continue
        for k, v in stats.view(key).items():
            if not np.all(np.isfinite(v)):
                what = f"source boundary {k[0]} -> target boundary {k[1]}" if side == "pair" else f"{side} boundary {k}"
                raise NonFiniteError(f"the training statistics of {what} are not finite: its activations hold NaN or "
                                     "±inf, or overflow float64; nothing was fitted")


def _require_usable_alphas(alphas_rel: np.ndarray, alphas: np.ndarray, i) -> None:
    """Absolute α = α_rel · trace(C)/d must be finite, positive and with a finite 1/α."""
    alphas = np.asarray(alphas, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore"):
        bad = ~(np.isfinite(alphas) & (alphas > 0) & np.isfinite(1.0 / alphas))
    if np.any(bad):
        k = int(np.flatnonzero(bad)[0])
        if alphas[k] == 0 and alphas_rel[k] > 0:  # trace(C) = 0
            raise InputError(f"source boundary {i} is constant over the training tokens (trace of its scatter is 0): "
                             "no map can be fitted from it; choose other --source-boundaries")
        raise InputError(f"--alphas {alphas_rel[k]:g}: the absolute penalty α_rel · trace(XcᵀXc)/d_source of source "
                         f"boundary {i} is {alphas[k]:.3g}, not a usable float64 (finite, positive, finite 1/α): "
                         "choose α_rel values nearer 1")


# -- 3. held-out scores -------------------------------------------------------------------

HELDOUT_BLOCK_VALUES = 1 << 20  # predictions per row block of `heldout_sums` on numpy (8 MB: stays in cache)


def heldout_sums(xs: dict, ys: dict, maps: dict, backend: Backend = CPU, eps: float = EPS,
                 rows_per_block: int | None = None, docs: np.ndarray | None = None) -> dict:
    """Error sums of one chunk of held-out rows, for every pair in `maps`.

    xs[i] (n, d_S), ys[j] (n, d_T): the held-out rows only (numpy, or tensors on a torch
    backend's device). With e = (x − μ_x) W − (y − μ_y) (= x W + c − y, computed about the
    training means to keep precision):

        pair[(i, j)] = [Σ ‖e‖/max(‖y‖, eps), Σ ‖e‖, Σ ‖e‖²]
        target[j]    = [n, Σ ‖y‖, Σ ‖y − μ_y‖²] and centred[j] = Σ (y − μ_y)  (d_T,)

    where μ_y is the first map's training mean of target j (the centre of the r2 sums). With
    `docs` ((n,) int: each row's held-out document index), the same sums per document too:
    "doc" = {"ids": (k,) the documents present, sorted; "pair": {(i, j): (k, 3)}, "target":
    {j: (k, 3)}, "centred": {j: (k, d_T)}}, so that a bootstrap over documents needs no row.

    The predictions of one source boundary for all its targets are one product
    x (W_1 | W_2 | …); on the host (numpy, or torch on "cpu") it is taken `rows_per_block`
    rows at a time (default: HELDOUT_BLOCK_VALUES predictions), so that the errors are formed
    and reduced while they are still in cache; on a GPU the chunk is taken whole (one launch
    per product)."""
    put = backend.put
    centre: dict = {}
    by_source: dict = {}
    for (i, j), m in maps.items():
        centre.setdefault(j, m["y_mean"])
        by_source.setdefault(i, []).append(j)
    plans = {}
    for i, js in by_source.items():
        x_mean = maps[(i, js[0])]["x_mean"]
        W = [maps[(i, j)]["W"] for j in js]
        # a map about other means than the first of its source / target: shift its error
        offsets = [(maps[(i, j)]["y_mean"] - centre[j]) - (maps[(i, j)]["x_mean"] - x_mean) @ maps[(i, j)]["W"] for j in js]
        offset = np.concatenate(offsets)
        plans[i] = (put(x_mean), put(np.concatenate(W, axis=1)), tuple(js), put(offset) if np.any(offset) else None)
    centres = {j: put(c) for j, c in centre.items()}
    n = len(ys[next(iter(ys))]) if ys else 0
    width = max((p[1].shape[1] for p in plans.values()), default=1)
    step = (rows_per_block or max(64, HELDOUT_BLOCK_VALUES // width)) if backend.on_cpu else max(n, 1)
    pair = {k: np.zeros(3) for k in maps}
    target = {j: np.zeros(3) for j in ys}
    centred = {j: np.zeros(len(centre[j]) if j in centre else ys[j].shape[1]) for j in ys}
    seg = _Segments(docs) if docs is not None else None
    per_doc = ({"ids": seg.ids if seg else None, "pair": {k: np.zeros((seg.k, 3)) for k in maps},
                "target": {j: np.zeros((seg.k, 3)) for j in ys}, "centred": {j: np.zeros((seg.k, len(centred[j]))) for j in ys}}
               if seg else None)
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        part = seg.part(r0, r1) if seg else None
        yc, ynorm = {}, {}
        for j, y in ys.items():
            yr = put(y[r0:r1])
            ynorm[j] = backend.rownorm(yr)
            yc[j] = yr - centres[j]  # a new array: the caller's rows stay as they were
            yc2 = backend.rownorm(yc[j]) ** 2 if part else None
            target[j] += [r1 - r0, float(ynorm[j].sum()), float((yc[j] * yc[j]).sum())]
            centred[j] = centred[j] + backend.get(backend.sum0(yc[j]))
            if part:
                stack = backend.torch.stack if backend.torch is not None else np.stack
                per_doc["target"][j] += part.sums(stack([ynorm[j] * 0 + 1, ynorm[j], yc2], 1), backend)
                per_doc["centred"][j] += part.sums(yc[j], backend)
        cats: dict = {}  # per list of targets: their centred rows side by side, and their norms
        for i, (x_mean, W_all, js, offset) in plans.items():
            if js not in cats:
                cats[js] = (_side_by_side([yc[j] for j in js], backend), _side_by_side([ynorm[j][:, None] for j in js], backend))
            Ycat, Yn = cats[js]
            E = (put(xs[i][r0:r1]) - x_mean) @ W_all  # (rows, Σ d_T) predictions about the means
            E -= Ycat  # the errors of every target at once
            if offset is not None:
                E += offset
            e2 = backend.blocknorm2(E, len(js))  # (rows, targets)
            en = e2 ** 0.5
            ratio = en / backend.maximum(Yn, eps)
            sums = backend.get(backend.sum0(ratio)), backend.get(backend.sum0(en)), backend.get(backend.sum0(e2))
            for b, j in enumerate(js):
                pair[(i, j)] += [float(sums[0][b]), float(sums[1][b]), float(sums[2][b])]
            if part:
                stack = backend.torch.stack if backend.torch is not None else np.stack
                by_doc = part.sums(stack([ratio, en, e2], 2), backend)  # (k, targets, 3)
                for b, j in enumerate(js):
                    per_doc["pair"][(i, j)] += by_doc[:, b]
    out = {"pair": pair, "target": target, "centred": centred}
    if per_doc is not None:
        out["doc"] = per_doc
    return out


def _side_by_side(arrays: list, backend: Backend):
    """(rows, Σ widths) of (rows, width) arrays, numpy or torch."""
    if backend.torch is None:
        return np.concatenate(arrays, axis=1)
    return backend.torch.cat(arrays, dim=1)


class _Segments:
    """Rows grouped by document index: `ids` (k,) the documents present (sorted), and for
    a row range, `sums(values)` → (k, ...) the sums of `values` (rows, ...) per document
    (runs of equal ids are reduced with one np.add.reduceat)."""

    def __init__(self, docs: np.ndarray):
        self.docs = np.asarray(docs, dtype=np.int64)
        self.ids, self.slot = np.unique(self.docs, return_inverse=True)
        self.k = len(self.ids)

    def part(self, r0: int, r1: int) -> "_Range | None":
        return _Range(self.slot[r0:r1], self.k) if r1 > r0 else None


class _Range:
    def __init__(self, slot: np.ndarray, k: int):
        self.k = k
        self.slot = slot
        self.starts = np.r_[0, np.flatnonzero(slot[1:] != slot[:-1]) + 1]
        self.where = slot[self.starts]

    def sums(self, values, backend: Backend = CPU) -> np.ndarray:
        """(k, ...) numpy: per document, the sum of values (rows, ...), numpy or a tensor on
        the backend's device (reduced there: only (k, ...) crosses to the host)."""
        if backend.torch is not None and isinstance(values, backend.torch.Tensor):
            t = backend.torch
            out = t.zeros((self.k,) + tuple(values.shape[1:]), dtype=t.float64, device=values.device)
            out.index_add_(0, t.from_numpy(self.slot).to(values.device), values.to(t.float64))
            return backend.get(out)
        values = np.asarray(values, dtype=np.float64)
        out = np.zeros((self.k,) + values.shape[1:])
        np.add.at(out, self.where, np.add.reduceat(values, self.starts, axis=0))
        return out


def add_heldout(a: dict, b: dict) -> dict:
    """The sum of two `heldout_sums` results (per-document sums matched by document)."""
    out = {k: {key: a[k][key] + b[k][key] for key in a[k]} for k in ("pair", "target", "centred")}
    if "doc" in a or "doc" in b:
        out["doc"] = _add_per_doc(a.get("doc"), b.get("doc"))
    if "fractions" in a:  # --convergence: the fractions' maps' sums, added alike
        out["fractions"] = {f: add_heldout(a["fractions"][f], b["fractions"][f]) for f in a["fractions"]}
    return out


def _add_per_doc(a: dict | None, b: dict | None) -> dict:
    if a is None or b is None:
        return a if b is None else b
    ids = np.union1d(a["ids"], b["ids"])
    ia, ib = np.searchsorted(ids, a["ids"]), np.searchsorted(ids, b["ids"])
    out = {"ids": ids}
    for key in ("pair", "target", "centred"):
        out[key] = {}
        for k, va in a[key].items():
            v = np.zeros((len(ids),) + va.shape[1:])
            v[ia] += va
            v[ib] += b[key][k]
            out[key][k] = v
    return out


def scores(pair_sums: np.ndarray, target_sums: np.ndarray, centred: np.ndarray) -> dict:
    """relative_error, norm_error, r2 of one pair from its held-out sums (docs/methods.md, The fit):

        relative_error = (1/N) Σ ‖e_n‖/max(‖y_n‖, ε)      norm_error = Σ ‖e_n‖ / Σ ‖y_n‖
        r2 = 1 − Σ ‖e_n‖² / Σ ‖y_n − ȳ‖²,  Σ ‖y − ȳ‖² = Σ ‖y − μ‖² − ‖Σ (y − μ)‖² / N
    """
    ratio, e1, e2 = pair_sums
    N, y1, yc2 = target_sums
    ss_tot = yc2 - float(centred @ centred) / N
    return {"relative_error": ratio / N, "norm_error": e1 / y1 if y1 > 0 else math.nan,
            "r2": 1.0 - e2 / ss_tot if ss_tot > 0 else math.nan}


# -- 4. reading the matrix ----------------------------------------------------------------

def summary(err: np.ndarray, source_boundaries, target_boundaries, n_source: int, n_target: int) -> dict:
    """The summary statistics of an error matrix err (len(source_boundaries), len(target_boundaries))
    over boundaries ≥ 1 (docs/methods.md, The fit). Depths are i/L_S and j/L_T.

    argmin_path: j*(i) = argmin_j err[i, j] per source boundary i ≥ 1 (first on exact ties);
    spearman: rank correlation of j*(i) with i/L_S (None when undefined: constant path or
    fewer than two boundaries); mean_depth_gap: mean |j*/L_T − i/L_S|; soft_depth:
    Σ_j w_ij j/L_T with w_ij ∝ exp(−err_ij/τ), τ = (row max − row min)/10 (uniform weights
    when the row is flat); soft_depth_spread: max − min of the soft depths. A non-finite
    error anywhere in `err` raises NonFiniteError naming its pairs: nothing is summarised
    around it."""
    bad = np.argwhere(~np.isfinite(err))
    if len(bad):
        pairs = ", ".join(f"({source_boundaries[a]}, {target_boundaries[b]})" for a, b in bad[:4]) + (" ..." if len(bad) > 4 else "")
        raise NonFiniteError(f"{len(bad)} error(s) of the matrix are not finite, at (source, target) boundaries {pairs}: "
                             "no summary is computed over them")
    src = [k for k, i in enumerate(source_boundaries) if i >= 1]
    tgt = [k for k, j in enumerate(target_boundaries) if j >= 1]
    out = {"source_boundaries": [int(source_boundaries[k]) for k in src], "target_boundaries": [int(target_boundaries[k]) for k in tgt],
           "argmin_path": [], "spearman": None, "spearman_note": "", "mean_depth_gap": None, "soft_depth": [],
           "soft_depth_spread": None}
    if not src or not tgt:
        out["spearman_note"] = "undefined: no boundary >= 1 on one side"
        return out
    tdepth = np.array([target_boundaries[k] / n_target for k in tgt])
    sdepth = np.array([source_boundaries[k] / n_source for k in src])
    sub = err[np.ix_(src, tgt)]
    jstar = [int(target_boundaries[tgt[int(np.argmin(row))]]) for row in sub]
    soft = []
    for row in sub:
        tau = (row.max() - row.min()) / 10.0
        w = np.exp(-(row - row.min()) / tau) if tau > 0 else np.ones_like(row)
        soft.append(float((w / w.sum()) @ tdepth))
    out["argmin_path"] = jstar
    out["mean_depth_gap"] = float(np.mean(np.abs(np.array(jstar) / n_target - sdepth)))
    out["soft_depth"] = soft
    out["soft_depth_spread"] = float(max(soft) - min(soft))
    if len(src) < 2:
        out["spearman_note"] = "undefined: fewer than two source boundaries >= 1"
    elif len(set(jstar)) == 1:
        out["spearman_note"] = "undefined: the argmin path is constant"
    else:
        out["spearman"] = spearman(sdepth, jstar)
        out["spearman_note"] = "Spearman rank correlation of j*(i) with i/L_S over source boundaries >= 1"
    return out


def spearman(a, b) -> float:
    """Spearman's rank correlation of two (n,) sequences: Pearson's correlation of their
    average ranks (tied values share the mean of their ranks); NaN when either is constant."""
    ra, rb = _average_ranks(a), _average_ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = math.sqrt(float(ra @ ra) * float(rb @ rb))
    return float(ra @ rb) / denom if denom > 0 else math.nan


def _average_ranks(v) -> np.ndarray:
    """Ranks 1..n of v (n,), ties given the mean of the ranks they span."""
    v = np.asarray(v, dtype=np.float64)
    order = np.argsort(v, kind="mergesort")
    sv = v[order]
    starts = np.r_[0, np.flatnonzero(sv[1:] != sv[:-1]) + 1]
    ends = np.r_[starts[1:], len(v)]
    ranks = np.empty(len(v))
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e + 1) / 2.0  # mean of ranks s+1 .. e
    return ranks
