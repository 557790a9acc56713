"""Ridge maps between residual streams from sufficient statistics (METHODS.md §1).

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

import numpy as np

from align.errors import InputError, NonFiniteError

FIT, VAL = 0, 1  # the two parts of the training documents whose statistics are accumulated
N_PARTS = 2
EPS = 1e-12  # guards ‖y‖ in relative_error (METHODS.md §1)
TIE_RTOL = 1e-12  # validation errors this close (relatively) are a tie, won by the larger α
DEFAULT_ALPHAS = tuple(10.0 ** k for k in range(-6, 2))  # α_rel grid 1e-6 … 1e1 by decades


class Backend:
    """Where the chunk products run: "cpu" (numpy) or a torch device such as "cuda"
    (use_torch=True runs torch on "cpu" too: the GPU's code path, testable without one).

    Inputs and outputs are numpy arrays; only the products run on the device, in float64.
    """

    def __init__(self, device: str = "cpu", use_torch: bool | None = None):
        self.device = device
        self.torch = None
        if use_torch or (use_torch is None and device != "cpu"):
            import torch

            self.torch = torch
            self.dev = torch.device(device)

    def put(self, a: np.ndarray):
        """numpy (any float dtype) -> float64 array on the device."""
        if self.torch is None:
            return np.asarray(a, dtype=np.float64)
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.dev).to(self.torch.float64)

    def get(self, a) -> np.ndarray:
        if self.torch is None:
            return a
        return a.detach().cpu().numpy()

    def mask(self, m: np.ndarray):
        if self.torch is None:
            return m
        return self.torch.from_numpy(np.ascontiguousarray(m)).to(self.dev)

    def sum0(self, a):
        return a.sum(0)

    def rownorm(self, a):
        """‖row‖₂ of (n, d) -> (n,)."""
        if self.torch is None:
            return np.sqrt(np.einsum("nd,nd->n", a, a))
        return self.torch.linalg.vector_norm(a, dim=1)

    def maximum(self, a, floor: float):
        if self.torch is None:
            return np.maximum(a, floor)
        return self.torch.clamp(a, min=floor)


CPU = Backend("cpu")


# -- 1. sufficient statistics -------------------------------------------------------------

def chunk_statistics(xs: dict, ys: dict, part: np.ndarray, x_shift: dict, y_shift: dict,
                     backend: Backend = CPU) -> dict:
    """Per-part sums of one chunk of tokens, for every source and target boundary given.

    xs[i]: (n, d_S) source rows at boundary i; ys[j]: (n, d_T) target rows at boundary j;
    part: (n,) int, FIT / VAL for rows to use, anything else to skip. Rows are shifted,
    x' = x − x_shift[i] and y' = y − y_shift[j], and the products are float64:

        n[p], sx[i][p] = Σ x', xx[i][p] = Σ x'x'ᵀ, sy[j][p] = Σ y', yy[j][p] = Σ ‖y'‖²,
        xy[(i, j)][p] = Σ x' y'ᵀ   (p = FIT, VAL; shapes (P,), (P, d_S), (P, d_S, d_S), ...)

    Every XᵀY of a part is one product of the side-by-side boundaries, (n, ΣD_S)ᵀ (n, ΣD_T):
    one large product runs closer to the machine's matmul rate than one per pair.
    Returns a dict of those (numpy float64), keyed as written."""
    rows = [np.flatnonzero(part == p) for p in range(N_PARTS)]
    out = {"n": np.array([len(r) for r in rows], dtype=np.float64), "sx": {}, "xx": {}, "sy": {}, "yy": {}, "xy": {}}
    xcols, xparts = _side_by_side(xs, x_shift, rows, backend)
    ycols, yparts = _side_by_side(ys, y_shift, rows, backend)
    for i, c in xcols.items():
        out["sx"][i] = np.stack([backend.get(backend.sum0(x[:, c])) for x in xparts])
        out["xx"][i] = np.stack([backend.get(x[:, c].T @ x[:, c]) for x in xparts])
    for j, c in ycols.items():
        out["sy"][j] = np.stack([backend.get(backend.sum0(y[:, c])) for y in yparts])
        out["yy"][j] = np.array([float((y[:, c] * y[:, c]).sum()) for y in yparts])
    xy = [backend.get(x.T @ y) for x, y in zip(xparts, yparts)]  # (ΣD_S, ΣD_T) per part
    for i, ci in xcols.items():
        for j, cj in ycols.items():
            out["xy"][(i, j)] = np.stack([p[ci, cj] for p in xy])
    return out


def _side_by_side(arrays: dict, shifts: dict, rows, backend: Backend):
    """float32 (n, d) per boundary -> ({boundary: column slice}, [float64 (n_p, Σd) of the
    shifted rows, per part]) on the backend."""
    cols, at = {}, 0
    for k, a in arrays.items():
        cols[k] = slice(at, at + a.shape[1])
        at += a.shape[1]
    n = len(next(iter(arrays.values())))
    if backend.torch is None:
        full = np.empty((n, at))
        for k, a in arrays.items():
            np.subtract(a, shifts[k], out=full[:, cols[k]])  # float32 − float64 → float64, in place
    else:
        full = backend.torch.cat([backend.put(a) - backend.put(shifts[k]) for k, a in arrays.items()], dim=1)
    return cols, [full[backend.mask(r)] if len(r) != n else full for r in rows]


def add_statistics(a: dict, b: dict) -> dict:
    """Elementwise sum of two `chunk_statistics` results over the same boundaries."""
    out = {"n": a["n"] + b["n"]}
    for key in ("sx", "xx", "sy", "yy", "xy"):
        out[key] = {k: a[key][k] + b[key][k] for k in a[key]}
    return out


def tree_sum(items: list, add=add_statistics):
    """Pairwise sum in a fixed tree by position: ((0+1)+(2+3))+... The same list gives the
    same bits, whoever computes it."""
    items = list(items)
    while len(items) > 1:
        items = [add(items[k], items[k + 1]) if k + 1 < len(items) else items[k] for k in range(0, len(items), 2)]
    return items[0]


# -- 2. solves ----------------------------------------------------------------------------

def moments(n: float, s: np.ndarray, ss: np.ndarray):
    """Mean and centred scatter from sums: μ = s/n, C = ss − n μμᵀ. s (d,), ss (d, d)."""
    mu = s / n
    return mu, ss - n * np.outer(mu, mu)


def about(n: float, s_a, s_b, ab, mu_a, mu_b):
    """Σ (a − μ_a)(b − μ_b)ᵀ from sums over n rows: ab − s_a μ_bᵀ − μ_a s_bᵀ + n μ_a μ_bᵀ.
    With μ the same part's means this is the centred cross product."""
    return ab - np.outer(s_a, mu_b) - np.outer(mu_a, s_b) + n * np.outer(mu_a, mu_b)


def eigen(C: np.ndarray):
    """C = Q diag(λ) Qᵀ for a symmetric PSD C (d, d); λ clipped at 0 (rounding)."""
    lam, Q = np.linalg.eigh(C)
    return np.maximum(lam, 0.0), Q


def absolute_alpha(alpha_rel: float, C: np.ndarray) -> float:
    """α = α_rel · trace(C) / d: the relative grid in units of the mean eigenvalue."""
    return float(alpha_rel) * float(np.trace(C)) / C.shape[0]


def validation_sse(lam, Q, B, Vxx, Vxy, Vyy: float, alphas) -> np.ndarray:
    """Σ‖x W_α + c − y‖² over the validation rows, for every absolute α, without predictions.

    W_α = Q diag(1/(λ+α)) Qᵀ B is fitted on the fit part (B = its centred XᵀY, (d_S, d_T));
    Vxx (d_S, d_S), Vxy (d_S, d_T), Vyy are the validation sums about the FIT means, so the
    error is (x − μ_x) W − (y − μ_y). With P = QᵀB, M = QᵀVxxQ, R = QᵀVxy and d = 1/(λ+α):

        SSE(α) = dᵀ (M ∘ PPᵀ) d − 2 dᵀ rowsum(P ∘ R) + Vyy

    Returns (n_alpha,)."""
    P = Q.T @ B
    H = (Q.T @ Vxx @ Q) * (P @ P.T)
    r = (P * (Q.T @ Vxy)).sum(1)
    out = np.empty(len(alphas))
    for k, a in enumerate(alphas):
        d = 1.0 / (lam + a)
        out[k] = d @ H @ d - 2.0 * (d @ r) + Vyy
    return out


def choose_alpha(sse: np.ndarray, rtol: float = TIE_RTOL) -> int:
    """Index of the α with the least validation error; errors within `rtol` (relative) of
    the least are a tie, won by the largest α. `sse` follows an increasing α grid and must
    be finite (a NaN would win no comparison: `solve_block` refuses it first)."""
    if not np.all(np.isfinite(sse)):
        raise NonFiniteError(f"validation errors {sse.tolist()} are not all finite: no α can be chosen among them")
    best = float(np.min(sse))
    tied = np.flatnonzero(sse <= best + rtol * abs(best))
    return int(tied[-1])


def ridge_map(lam, Q, B, alpha: float) -> np.ndarray:
    """W = (C + αI)⁻¹ B = Q diag(1/(λ+α)) Qᵀ B, (d_S, d_T)."""
    return Q @ ((Q.T @ B) / (lam + alpha)[:, None])


def solve_block(stats: dict, alphas_rel, x_shift: dict, y_shift: dict, maps_only: bool = False) -> dict:
    """Choose α and fit W, c for every (i, j) of a block's reduced statistics.

    Per source boundary i: the fit part's centred XᵀX is decomposed once; every target j and
    every α reuse it to score α by the validation part's squared error (`validation_sse`).
    The chosen α_rel is then refitted on fit + validation (one more decomposition per i).
    Returns {(i, j): {"W" (d_S, d_T), "x_mean" (d_S,), "y_mean" (d_T,), "c" (d_T,),
    "alpha_rel", "alpha", "val_sse" (n_alpha,)}} with means and c in raw (unshifted) units."""
    alphas_rel = np.asarray(sorted(alphas_rel), dtype=np.float64)
    n = stats["n"]
    select = len(alphas_rel) > 1
    _require_finite_statistics(stats)
    out = {}
    for i in stats["sx"]:
        sx, xx = stats["sx"][i], stats["xx"][i]
        mu_f, C_f = moments(n[FIT], sx[FIT], xx[FIT])
        mu_t, C_t = moments(n[FIT] + n[VAL], sx[FIT] + sx[VAL], xx[FIT] + xx[VAL])
        if select:
            lam_f, Q_f = eigen(C_f)
            a_f = alphas_rel * (np.trace(C_f) / C_f.shape[0])
            _require_usable_alphas(alphas_rel, a_f, i)
            Vxx = about(n[VAL], sx[VAL], sx[VAL], xx[VAL], mu_f, mu_f)
        lam_t, Q_t = eigen(C_t)
        for j in stats["sy"]:
            sy, yy, xy = stats["sy"][j], stats["yy"][j], stats["xy"][(i, j)]
            nu_f = sy[FIT] / n[FIT]
            nu_t = (sy[FIT] + sy[VAL]) / (n[FIT] + n[VAL])
            if select:
                B_f = about(n[FIT], sx[FIT], sy[FIT], xy[FIT], mu_f, nu_f)
                Vxy = about(n[VAL], sx[VAL], sy[VAL], xy[VAL], mu_f, nu_f)
                Vyy = float(yy[VAL] - 2.0 * nu_f @ sy[VAL] + n[VAL] * nu_f @ nu_f)
                with np.errstate(over="ignore", invalid="ignore"):
                    sse = validation_sse(lam_f, Q_f, B_f, Vxx, Vxy, Vyy, a_f)
                if not np.all(np.isfinite(sse)):
                    k = int(np.flatnonzero(~np.isfinite(sse))[0])
                    raise InputError(
                        f"--alphas {alphas_rel[k]:g} gives a non-finite validation error for source boundary {i} -> "
                        f"target boundary {j} (absolute α {a_f[k]:.3g} against eigenvalues down to {lam_f.min():.3g} "
                        "overflows float64): choose α_rel values nearer 1")
                k = choose_alpha(sse)
            else:
                sse, k = np.full(1, np.nan), 0
            B_t = about(n[FIT] + n[VAL], sx[FIT] + sx[VAL], sy[FIT] + sy[VAL], xy[FIT] + xy[VAL], mu_t, nu_t)
            alpha = absolute_alpha(alphas_rel[k], C_t)
            _require_usable_alphas(alphas_rel[k:k + 1], np.array([alpha]), i)
            with np.errstate(over="ignore", invalid="ignore"):
                W = ridge_map(lam_t, Q_t, B_t, alpha)
            if not np.all(np.isfinite(W)):
                raise NonFiniteError(f"the map from source boundary {i} to target boundary {j} is not finite with α_rel "
                                     f"{alphas_rel[k]:g} (absolute α {alpha:.3g}): choose α_rel values nearer 1")
            x_mean, y_mean = mu_t + x_shift[i], nu_t + y_shift[j]
            out[(i, j)] = {"W": W, "x_mean": x_mean, "y_mean": y_mean, "c": y_mean - x_mean @ W,
                           "alpha_rel": float(alphas_rel[k]), "alpha": alpha, "val_sse": sse}
    return out


def _require_finite_statistics(stats: dict) -> None:
    """Sums over NaN or ±inf rows are NaN or ±inf: refuse them naming the boundary (the
    store refuses such rows on read; this guards the solve against any other source)."""
    for key, side in (("sx", "source"), ("xx", "source"), ("sy", "target"), ("yy", "target"), ("xy", "pair")):
        for k, v in stats[key].items():
            if not np.all(np.isfinite(v)):
                what = f"source boundary {k[0]} -> target boundary {k[1]}" if side == "pair" else f"{side} boundary {k}"
                raise NonFiniteError(f"the training statistics of {what} are not finite: its activations hold NaN or "
                                     "±inf, or overflow float64; nothing was fitted")


def _require_usable_alphas(alphas_rel: np.ndarray, alphas: np.ndarray, i) -> None:
    """Absolute α = α_rel · trace(C)/d must be finite, positive and with a finite 1/α."""
    with np.errstate(divide="ignore", over="ignore"):
        bad = ~(np.isfinite(alphas) & (alphas > 0) & np.isfinite(1.0 / alphas))
    if np.any(bad):
        k = int(np.flatnonzero(bad)[0])
        if alphas[k] == 0 and alphas_rel[k] > 0:  # trace(C) = 0
            raise InputError(f"source boundary {i} is constant over the training tokens (trace of its scatter is 0): "
                             "no map can be fitted from it; choose other --source-layers")
        raise InputError(f"--alphas {alphas_rel[k]:g}: the absolute penalty α_rel · trace(XcᵀXc)/d_source of source "
                         f"boundary {i} is {alphas[k]:.3g}, not a usable float64 (finite, positive, finite 1/α): "
                         "choose α_rel values nearer 1")


# -- 3. held-out scores -------------------------------------------------------------------

def heldout_sums(xs: dict, ys: dict, maps: dict, backend: Backend = CPU, eps: float = EPS) -> dict:
    """Error sums of one chunk of held-out rows, for every pair in `maps`.

    xs[i] (n, d_S), ys[j] (n, d_T): the held-out rows only. With e = (x − μ_x) W − (y − μ_y)
    (= x W + c − y, computed about the training means to keep precision):

        pair[(i, j)] = [Σ ‖e‖/max(‖y‖, eps), Σ ‖e‖, Σ ‖e‖²]
        target[j]    = [n, Σ ‖y‖, Σ ‖y − μ_y‖²] and centred[j] = Σ (y − μ_y)  (d_T,)

    where μ_y is the first map's training mean of target j (the centre of the r2 sums). The
    predictions of one source boundary for all its targets are one product x (W_1 | W_2 | …)."""
    out = {"pair": {}, "target": {}, "centred": {}}
    yc, ynorm, centre = {}, {}, {}
    by_source: dict = {}
    for (i, j), m in maps.items():
        centre.setdefault(j, m["y_mean"])
        by_source.setdefault(i, []).append(j)
    for j, y in ys.items():
        yc[j] = backend.put(y)
        ynorm[j] = backend.maximum(backend.rownorm(yc[j]), 0.0)
        yc[j] -= backend.put(centre[j])
        out["target"][j] = np.array([len(y), float(ynorm[j].sum()), float((yc[j] * yc[j]).sum())])
        out["centred"][j] = backend.get(backend.sum0(yc[j]))
    for i, js in by_source.items():
        x_mean = maps[(i, js[0])]["x_mean"]
        xc = backend.put(xs[i]) - backend.put(x_mean)
        W = [maps[(i, j)]["W"] for j in js]
        E = xc @ backend.put(np.concatenate(W, axis=1))  # (n, Σ d_T) predictions about the means
        at = 0
        for j, w in zip(js, W):
            m = maps[(i, j)]
            e = E[:, at:at + w.shape[1]]
            at += w.shape[1]
            e -= yc[j]
            # a map about other means than the first of its source / target: shift its error
            offset = (m["y_mean"] - centre[j]) - (m["x_mean"] - x_mean) @ m["W"]
            if np.any(offset):
                e += backend.put(offset)
            en = backend.rownorm(e)
            out["pair"][(i, j)] = np.array([float((en / backend.maximum(ynorm[j], eps)).sum()), float(en.sum()),
                                            float((en * en).sum())])
    return out


def add_heldout(a: dict, b: dict) -> dict:
    """Elementwise sum of two `heldout_sums` results."""
    return {k: {key: a[k][key] + b[k][key] for key in a[k]} for k in a}


def scores(pair_sums: np.ndarray, target_sums: np.ndarray, centred: np.ndarray) -> dict:
    """relative_error, norm_error, r2 of one pair from its held-out sums (METHODS.md §1):

        relative_error = (1/N) Σ ‖e_n‖/max(‖y_n‖, ε)      norm_error = Σ ‖e_n‖ / Σ ‖y_n‖
        r2 = 1 − Σ ‖e_n‖² / Σ ‖y_n − ȳ‖²,  Σ ‖y − ȳ‖² = Σ ‖y − μ‖² − ‖Σ (y − μ)‖² / N
    """
    ratio, e1, e2 = pair_sums
    N, y1, yc2 = target_sums
    ss_tot = yc2 - float(centred @ centred) / N
    return {"relative_error": ratio / N, "norm_error": e1 / y1 if y1 > 0 else math.nan,
            "r2": 1.0 - e2 / ss_tot if ss_tot > 0 else math.nan}


# -- 4. reading the matrix ----------------------------------------------------------------

def summary(err: np.ndarray, source_layers, target_layers, n_source: int, n_target: int) -> dict:
    """The summary statistics of an error matrix err (len(source_layers), len(target_layers))
    over boundaries ≥ 1 (METHODS.md §1). Depths are i/L_S and j/L_T.

    argmin_path: j*(i) = argmin_j err[i, j] per source boundary i ≥ 1 (first on exact ties);
    spearman: rank correlation of j*(i) with i/L_S (None when undefined: constant path or
    fewer than two boundaries); mean_depth_gap: mean |j*/L_T − i/L_S|; soft_depth:
    Σ_j w_ij j/L_T with w_ij ∝ exp(−err_ij/τ), τ = (row max − row min)/10 (uniform weights
    when the row is flat); soft_depth_spread: max − min of the soft depths. A non-finite
    error anywhere in `err` raises NonFiniteError naming its pairs: nothing is summarised
    around it."""
    from scipy.stats import spearmanr

    bad = np.argwhere(~np.isfinite(err))
    if len(bad):
        pairs = ", ".join(f"({source_layers[a]}, {target_layers[b]})" for a, b in bad[:4]) + (" ..." if len(bad) > 4 else "")
        raise NonFiniteError(f"{len(bad)} error(s) of the matrix are not finite, at (source, target) boundaries {pairs}: "
                             "no summary is computed over them")
    src = [k for k, i in enumerate(source_layers) if i >= 1]
    tgt = [k for k, j in enumerate(target_layers) if j >= 1]
    out = {"source_layers": [int(source_layers[k]) for k in src], "target_layers": [int(target_layers[k]) for k in tgt],
           "argmin_path": [], "spearman": None, "spearman_note": "", "mean_depth_gap": None, "soft_depth": [],
           "soft_depth_spread": None}
    if not src or not tgt:
        out["spearman_note"] = "undefined: no boundary >= 1 on one side"
        return out
    tdepth = np.array([target_layers[k] / n_target for k in tgt])
    sdepth = np.array([source_layers[k] / n_source for k in src])
    sub = err[np.ix_(src, tgt)]
    jstar = [int(target_layers[tgt[int(np.argmin(row))]]) for row in sub]
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
        out["spearman"] = float(spearmanr(sdepth, jstar).statistic)
        out["spearman_note"] = "Spearman rank correlation of j*(i) with i/L_S over source boundaries >= 1"
    return out
