"""The ridge solve (docs/methods.md, The fit): one eigendecomposition of the centred XᵀX per
source boundary and part, every α of the grid scored on the validation part from statistics
alone, α chosen per pair (ties to the larger), and the refit on all training tokens. A map
predicts y = x W + c with W (d_source, d_target)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align.errors import InputError, NonFiniteError
from align.ridge.backend import CPU, Backend
from align.ridge.statistics import FIT, N_PARTS, VAL, Statistics
from align.threads import side_by_side

TIE_RTOL = 1e-12  # validation errors this close (relatively) are a tie, won by the larger α
DEFAULT_ALPHAS = tuple(10.0**k for k in range(-6, 2))  # α_rel grid 1e-6 … 1e1 by decades
AUTO_LIMITS = (1e-12, 1e6)  # how far `--alphas auto` may extend the grid, by decades, in α_rel
# An end of the grid is extended only when it beats its neighbour by more than this fraction of
# the validation part's total sum of squares (the tie band of `choose_alpha`): below it, the
# closed-form SSE is rounding, and chasing it would walk the grid to a limit on noise.
AUTO_FLOOR = TIE_RTOL


def moments(n: float, s, ss):
    """Mean and centred scatter from sums: μ = s/n, C = ss − n μμᵀ.

    Parameters
    ----------
    n : float
        The rows summed.
    s : array of shape (d,)
        Σ x.
    ss : array of shape (d, d)
        Σ x xᵀ.

    Returns
    -------
    mu : array of shape (d,)
        The mean.
    C : array of shape (d, d)
        The centred scatter.
    """
    mu = s / n
    return mu, ss - n * (mu[:, None] * mu[None, :])


def about(n: float, s_a, s_b, ab, mu_a, mu_b):
    """Σ (a − μ_a)(b − μ_b)ᵀ from sums over n rows: ab − s_a μ_bᵀ − μ_a s_bᵀ + n μ_a μ_bᵀ.

    With μ the same part's means this is the centred cross product. numpy or torch.

    Parameters
    ----------
    n : float
        The rows summed.
    s_a : array of shape (d_a,)
        Σ a.
    s_b : array of shape (d_b,)
        Σ b.
    ab : array of shape (d_a, d_b)
        Σ a bᵀ.
    mu_a : array of shape (d_a,)
        The centre of a.
    mu_b : array of shape (d_b,)
        The centre of b.

    Returns
    -------
    array of shape (d_a, d_b)
        The cross product about (μ_a, μ_b).
    """
    out = ab - s_a[:, None] * mu_b[None, :]
    out -= (
        mu_a[:, None] * (s_b - n * mu_b)[None, :]
    )  # in place: at (d_S, nJ·d_T) each temporary is a page-faulting ~10 MB
    return out


def eigen(C, backend: Backend = CPU):
    """C = Q diag(λ) Qᵀ for a symmetric PSD C; λ clipped at 0 (rounding).

    Parameters
    ----------
    C : array of shape (d, d)
        Symmetric positive semi-definite.
    backend : Backend, optional
        Where it is computed.

    Returns
    -------
    lam : array of shape (d,)
        The eigenvalues λ, ≥ 0.
    Q : array of shape (d, d)
        The eigenvectors, as columns.
    """
    lam, Q = backend.eigh(C)
    return backend.maximum(lam, 0.0), Q


def absolute_alpha(alpha_rel: float, C) -> float:
    """α = α_rel · trace(C) / d: the relative grid in units of the mean eigenvalue.

    Parameters
    ----------
    alpha_rel : float
        α_rel.
    C : array of shape (d_source, d_source)
        The source's centred scatter.

    Returns
    -------
    float
        The absolute α.
    """
    return float(alpha_rel) * float(C.diagonal().sum()) / C.shape[0]


def validation_sse(lam, Q, B, Vxx, Vxy, Vyy: float, alphas, M=None):
    """Σ‖x W_α + c − y‖² over the validation rows, for every absolute α, without predictions.

    W_α = Q diag(1/(λ+α)) Qᵀ B is fitted on the fit part (B = its centred XᵀY); Vxx, Vxy, Vyy
    are the validation sums about the FIT means, so the error is (x − μ_x) W − (y − μ_y). With
    P = QᵀB, M = QᵀVxxQ, R = QᵀVxy and d = 1/(λ+α):

        SSE(α) = dᵀ (M ∘ PPᵀ) d − 2 dᵀ rowsum(P ∘ R) + Vyy

    numpy or torch arrays.

    Parameters
    ----------
    lam : array of shape (d_source,)
        The fit part's eigenvalues λ.
    Q : array of shape (d_source, d_source)
        Its eigenvectors.
    B : array of shape (d_source, d_target)
        The fit part's centred XᵀY.
    Vxx : array of shape (d_source, d_source)
        The validation part's scatter of x about the fit mean.
    Vxy : array of shape (d_source, d_target)
        Its cross product of x and y.
    Vyy : float
        Its sum of squares of y.
    alphas : array of shape (n_alpha,)
        Absolute α.
    M : array of shape (d_source, d_source), optional
        QᵀVxxQ; it depends on the source boundary only: pass it to compute it once for every
        target.

    Returns
    -------
    array of shape (n_alpha,)
        SSE(α), of the same kind as the inputs.
    """
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
    """Index of the α with the least validation error, ties won by the largest α.

    Errors within rtol · max(|least|, total) of the least are a tie. The closed-form SSE is a
    difference of terms of the size of `total`, so differences below rtol · Vyy are rounding,
    not evidence (a perfect map's curve is all rounding).

    Parameters
    ----------
    sse : array of shape (n_alpha,)
        Validation errors over an increasing α grid; must be finite (a NaN would win no
        comparison: `solve_block` refuses it first).
    rtol : float, optional
        The relative tie tolerance.
    total : float, optional
        The validation part's sum of squares about the fit mean (Vyy).

    Returns
    -------
    int
        The chosen α's index.

    Raises
    ------
    NonFiniteError
        A non-finite error in `sse`.
    """
    if not np.all(np.isfinite(sse)):
        raise NonFiniteError(
            f"validation errors {sse.tolist()} are not all finite: no α can be chosen among them"
        )
    best = float(np.min(sse))
    tied = np.flatnonzero(sse <= best + rtol * max(abs(best), abs(float(total))))
    return int(tied[-1])


def ridge_map(lam, Q, B, alpha: float):
    """W = (C + αI)⁻¹ B = Q diag(1/(λ+α)) Qᵀ B.

    Parameters
    ----------
    lam : array of shape (d_source,)
        The eigenvalues λ of C.
    Q : array of shape (d_source, d_source)
        Its eigenvectors.
    B : array of shape (d_source, d_target)
        The centred XᵀY.
    alpha : float
        The absolute α.

    Returns
    -------
    array of shape (d_source, d_target)
        W.
    """
    return Q @ ((Q.T @ B) / (lam + alpha)[:, None])


@dataclass(frozen=True)
class SolvedMap:
    """One pair's map y = x W + c and how its α was chosen, as `solve_block` returns it.

    numpy; means and c in raw units. A caller that has taken the held-out sums may hand on the
    α choice alone: x_mean and y_mean None, and W and c None unless it keeps the maps.

    Parameters
    ----------
    W : array of shape (d_source, d_target) or None
        (C_t + αI)⁻¹ B_t, C_t the training scatter, B_t its centred XᵀY.
    x_mean : array of shape (d_source,) or None
        Mean of x over the training rows (fit + validation).
    y_mean : array of shape (d_target,) or None
        Mean of y over the training rows.
    c : array of shape (d_target,) or None
        y_mean − x_mean W.
    alpha_rel : float
        The chosen α_rel (units of the mean eigenvalue trace(C)/d_source).
    alpha : float
        The refit's absolute α = α_rel · trace(C_t)/d_source.
    val_sse : array of shape (n_alpha,)
        Validation SSE of the fit part's map per α_rel of val_alphas (NaN: one α).
    val_alphas : array of shape (n_alpha,)
        The increasing α_rel grid val_sse follows.
    rotation : array of shape (d_source, d_target) or None
        U Vᵀ of B_t = U Σ Vᵀ: the training rows' Procrustes rotation (`procrustes-heldout`);
        None unless that measure is asked for.
    """

    W: (
        np.ndarray | None
    )  # (d_S, d_T): (C_t + αI)⁻¹ B_t, C_t the training scatter, B_t its centred XᵀY
    x_mean: np.ndarray | None  # (d_S,): mean of x over the training rows (fit + validation)
    y_mean: np.ndarray | None  # (d_T,): mean of y over the training rows
    c: np.ndarray | None  # (d_T,): y_mean − x_mean W
    alpha_rel: float  # the chosen α_rel (units of the mean eigenvalue trace(C)/d_S)
    alpha: float  # the refit's absolute α = α_rel · trace(C_t)/d_S
    val_sse: (
        np.ndarray
    )  # (n_alpha,): validation SSE of the fit part's map per α_rel of val_alphas (NaN: one α)
    val_alphas: np.ndarray  # (n_alpha,): the increasing α_rel grid val_sse follows
    rotation: np.ndarray | None = (
        None  # (d_S, d_T): U Vᵀ of B_t = U Σ Vᵀ, the training rows' Procrustes rotation (procrustes-heldout)
    )


@dataclass
class Factor:
    """What the solve needs of one source boundary, whatever the target.

    numpy; the λ_f/Q_f/alphas_f/M fields are None with a single α (nothing to choose).

    Parameters
    ----------
    mu_f : array of shape (d_source,)
        The fit part's mean μ_f.
    lam_f : array of shape (d_source,) or None
        Its eigenvalues λ_f.
    Q_f : array of shape (d_source, d_source) or None
        Its eigenvectors Q_f.
    alphas_f : array of shape (n_alpha,) or None
        The absolute α grid.
    M : array of shape (d_source, d_source) or None
        Q_fᵀ Vxx Q_f (Vxx: the validation scatter about μ_f).
    mu_t : array of shape (d_source,)
        The training mean μ_t.
    lam_t : array of shape (d_source,)
        The training scatter's eigenvalues λ_t.
    Q_t : array of shape (d_source, d_source)
        Its eigenvectors Q_t.
    trace_t : float
        Its trace.
    """

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
    """The `Factor` of source boundary i from a block's reduced statistics.

    Two eigendecompositions (fit part; fit + validation) and one QᵀVxxQ, on the backend.

    Parameters
    ----------
    stats : Statistics
        A block's reduced statistics.
    i : int
        The source boundary.
    alphas_rel : sequence of float
        The relative α grid.
    backend : Backend, optional
        Where it is computed.

    Returns
    -------
    Factor
        What the solve needs of boundary i, whatever the target.
    """
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
    return Factor(
        backend.get(mu_f),
        lam_f,
        Q_f,
        a_f,
        M,
        backend.get(mu_t),
        backend.get(lam_t),
        backend.get(Q_t),
        float(C_t.diagonal().sum()),
    )


def solve_block(
    stats: Statistics,
    alphas_rel,
    x_shift: dict,
    y_shift: dict,
    backend: Backend = CPU,
    factors: dict | None = None,
    extend: bool = False,
    threads: int = 1,
) -> dict:
    """Choose α and fit W, c for every (i, j) of a block's reduced statistics (numpy).

    Per source boundary i, one `Factor` (`source_factor`: the fit part's and the training
    scatter's eigendecompositions, and QᵀVxxQ) serves every target j and every α: α is scored
    by the validation part's squared error (`validation_sse`), the chosen α_rel is refitted on
    fit + validation. The products run on `backend` (torch on a GPU); the results are numpy.

    Parameters
    ----------
    stats : Statistics
        The block's reduced statistics.
    alphas_rel : sequence of float
        The relative α grid, increasing.
    x_shift : dict of int to array of shape (d_source,)
        The shift the source rows were summed about, per boundary.
    y_shift : dict of int to array of shape (d_target,)
        The shift of the target rows.
    backend : Backend, optional
        Where the products run.
    factors : dict of int to Factor, optional
        {i: Factor}, read and filled: a caller solving several blocks of the same source
        boundaries decomposes each once.
    extend : bool, optional
        `--alphas auto`: while some target of source boundary i chooses the smallest (largest)
        α_rel of the grid, the grid of boundary i gains the next decade below (above), within
        AUTO_LIMITS, and every target is scored on it again from the same factors (the added α
        cost no eigendecomposition); a chosen α at a limit stays there.
    threads : int, optional
        Above 1, solves that many source boundaries side by side in threads (numpy's BLAS and
        LAPACK release the GIL; the caller limits BLAS to one thread each): each source
        boundary's numbers are computed as they would be alone, so the result is the same
        whatever the count.

    Returns
    -------
    dict of (int, int) to SolvedMap
        {(i, j): SolvedMap}, means and c in raw (unshifted) units.

    Raises
    ------
    InputError
        An α_rel that gives a non-finite validation error or an unusable absolute α, or a source
        boundary constant over the training tokens.
    NonFiniteError
        Training statistics or a map that are not finite.
    """
    alphas_rel = np.asarray(sorted(alphas_rel), dtype=np.float64)
    factors = {} if factors is None else factors
    _require_finite_statistics(stats)

    def one(i):
        f = factors[i] if i in factors else source_factor(stats, i, alphas_rel, backend)
        return f, _solve_source(stats, i, f, alphas_rel, x_shift[i], y_shift, backend, extend)

    solved = side_by_side(one, stats.source, threads)
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
    high = any(
        k == last and v[last - 1] - v[last] > AUTO_FLOOR * t
        for k, v, t in zip(chosen, sses, totals)
    )
    return low, high


def _solve_source(
    stats: Statistics,
    i,
    f: Factor,
    alphas_rel,
    x_shift,
    y_shift: dict,
    backend: Backend,
    extend: bool = False,
) -> dict:
    """Every target of source boundary i: α by validation error, then the refit (one product
    Q_tᵀ B_t and one Q_t (…) for all targets at once)."""
    a, dS, dT = stats.source.index(i), stats.d_source, stats.d_target
    n = stats.n
    n_f, n_v = float(n[FIT]), float(n[VAL])
    put = backend.put
    sx = put(stats.sx[:, a])
    sy = put(stats.sy.reshape(N_PARTS, -1))  # (P, nJ·d_T)
    xy = put(stats.xy[:, a * dS : (a + 1) * dS])  # (P, d_S, nJ·d_T)
    mu_f, mu_t = put(f.mu_f), put(f.mu_t)
    nu_f, nu_t = sy[FIT] / n_f, (sy[FIT] + sy[VAL]) / (n_f + n_v)
    targets = stats.target
    chosen, sses = [], []
    if f.Q_f is not None:
        Q_f = put(f.Q_f)
        P = Q_f.T @ about(n_f, sx[FIT], sy[FIT], xy[FIT], mu_f, nu_f)
        R = Q_f.T @ about(n_v, sx[VAL], sy[VAL], xy[VAL], mu_f, nu_f)
        # Σ ‖y − ν_f‖² over the validation rows, per target: Σ‖y‖² − 2 ν_f·Σy + n ‖ν_f‖²
        Vyy = backend.get(
            put(stats.yy[VAL])
            - 2.0 * (nu_f * sy[VAL]).reshape(-1, dT).sum(1)
            + n_v * (nu_f * nu_f).reshape(-1, dT).sum(1)
        )
        lam_f, M = put(f.lam_f), put(f.M)
        scale = float(f.alphas_f[0]) / float(alphas_rel[0])  # trace(C_f)/d_S: α = α_rel · scale

        def scored(rel: np.ndarray, given: slice) -> list:
            a_f = put(rel * scale)
            out = []
            for b, j in enumerate(targets):
                cols = slice(b * dT, (b + 1) * dT)
                with np.errstate(over="ignore", invalid="ignore"):
                    sse = np.asarray(
                        backend.get(_sse(lam_f, P[:, cols], M, R[:, cols], float(Vyy[b]), a_f)),
                        dtype=np.float64,
                    )
                if not np.all(
                    np.isfinite(sse[given])
                ):  # only the given grid must score: an added decade may not
                    k = given.start + int(np.flatnonzero(~np.isfinite(sse[given]))[0])
                    raise InputError(
                        f"`alphas` {rel[k]:g} gives a non-finite validation error for source boundary {i} -> "
                        f"target boundary {j} (absolute α {rel[k] * scale:.3g} against eigenvalues down to "
                        f"{f.lam_f.min():.3g} overflows float64): choose α_rel values nearer 1"
                    )
                out.append(sse)
            return out

        below, above = _decades(alphas_rel, scale) if extend and len(alphas_rel) > 1 else ([], [])
        # every decade the grid may grow to is scored at once (one product more per α, no more
        # M ∘ PPᵀ); the grid then grows from the given one decade by decade, as far as a target's
        # choice at an end asks, and only what it reached is kept
        full = np.array(below[::-1] + list(alphas_rel) + above)
        lo, hi = len(below), len(below) + len(alphas_rel)
        curves = scored(full, slice(lo, hi))
        ok = np.all(
            np.isfinite(np.stack(curves)), axis=0
        )  # an added decade whose error overflows ends the range there
        first, last = lo, hi
        while first > 0 and ok[first - 1]:
            first -= 1
        while last < len(full) and ok[last]:
            last += 1
        full, curves, lo, hi = (
            full[first:last],
            [v[first:last] for v in curves],
            lo - first,
            hi - first,
        )
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
        _require_usable_alphas(alphas_rel[k : k + 1], np.array([alpha]), i)
    Q_t, lam_t = put(f.Q_t), put(f.lam_t)
    PT = Q_t.T @ about(
        n_f + n_v, sx[FIT] + sx[VAL], sy[FIT] + sy[VAL], xy[FIT] + xy[VAL], mu_t, nu_t
    )
    scale = put(np.concatenate([np.full(dT, alpha) for alpha in alphas]))  # α of each column's pair
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        W_all = backend.get(Q_t @ (PT / (lam_t[:, None] + scale[None, :])))
    x_mean = f.mu_t + x_shift
    nu_t = backend.get(nu_t)
    out = {}
    for b, j in enumerate(targets):
        k, W = chosen[b], W_all[:, b * dT : (b + 1) * dT]
        if not np.all(np.isfinite(W)):
            raise NonFiniteError(
                f"the map from source boundary {i} to target boundary {j} is not finite with α_rel "
                f"{alphas_rel[k]:g} (absolute α {alphas[b]:.3g}): choose α_rel values nearer 1"
            )
        y_mean = nu_t[b * dT : (b + 1) * dT] + y_shift[j]
        out[(i, j)] = SolvedMap(
            W=np.ascontiguousarray(W),
            x_mean=x_mean,
            y_mean=y_mean,
            c=y_mean - x_mean @ W,
            alpha_rel=float(alphas_rel[k]),
            alpha=alphas[b],
            val_sse=sses[b],
            val_alphas=alphas_rel,
        )
    return out


def _require_finite_statistics(stats: Statistics) -> None:
    """Sums over NaN or ±inf rows are NaN or ±inf: refuse them naming the boundary (the
    store refuses such rows on read; this guards the solve against any other source)."""
    for key, side in (
        ("sx", "source"),
        ("xx", "source"),
        ("sy", "target"),
        ("yy", "target"),
        ("xy", "pair"),
    ):
        if np.all(np.isfinite(getattr(stats, key))):
            continue
        for k, v in stats.view(key).items():
            if not np.all(np.isfinite(v)):
                what = (
                    f"source boundary {k[0]} -> target boundary {k[1]}"
                    if side == "pair"
                    else f"{side} boundary {k}"
                )
                raise NonFiniteError(
                    f"the training statistics of {what} are not finite: its activations hold NaN or "
                    "±inf, or overflow float64; nothing was fitted"
                )


def _require_usable_alphas(alphas_rel: np.ndarray, alphas: np.ndarray, i) -> None:
    """Absolute α = α_rel · trace(C)/d must be finite, positive and with a finite 1/α."""
    alphas = np.asarray(alphas, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore"):
        bad = ~(np.isfinite(alphas) & (alphas > 0) & np.isfinite(1.0 / alphas))
    if np.any(bad):
        k = int(np.flatnonzero(bad)[0])
        if alphas[k] == 0 and alphas_rel[k] > 0:  # trace(C) = 0
            raise InputError(
                f"source boundary {i} is constant over the training tokens (trace of its scatter is 0): "
                "no map can be fitted from it; choose other `source_boundaries`"
            )
        raise InputError(
            f"`alphas` {alphas_rel[k]:g}: the absolute penalty α_rel · trace(XcᵀXc)/d_source of source "
            f"boundary {i} is {alphas[k]:.3g}, not a usable float64 (finite, positive, finite 1/α): "
            "choose α_rel values nearer 1"
        )
