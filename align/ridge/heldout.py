"""Held-out error sums of one chunk of rows once the maps are known, their sums, and the
scores they give (docs/methods.md, The fit): relative_error, norm_error, r2."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from align.ridge.backend import CPU, Backend

EPS = 1e-12  # guards ‖y‖ in relative_error (docs/methods.md, The fit)
HELDOUT_BLOCK_VALUES = (
    1 << 20
)  # predictions per row block of `heldout_sums` on numpy (8 MB: stays in cache)


def heldout_sums(
    xs: dict,
    ys: dict,
    maps: dict,
    backend: Backend = CPU,
    eps: float = EPS,
    rows_per_block: int | None = None,
    docs: np.ndarray | None = None,
) -> dict:
    """Error sums of one chunk of held-out rows, for every pair in `maps`.

    With e = (x − μ_x) W − (y − μ_y) (= x W + c − y, computed about the training means to
    keep precision):

        pair[(i, j)] = [Σ ‖e‖/max(‖y‖, eps), Σ ‖e‖, Σ ‖e‖²]
        target[j]    = [n, Σ ‖y‖, Σ ‖y − μ_y‖²] and centred[j] = Σ (y − μ_y)  (d_T,)

    where μ_y is the first map's training mean of target j (the centre of the r2 sums).

    The predictions of one source boundary for all its targets are one product
    x (W_1 | W_2 | …); on the host (numpy, or torch on "cpu") it is taken `rows_per_block`
    rows at a time, so that the errors are formed and reduced while they are still in cache; on
    a GPU the chunk is taken whole (one launch per product).

    Parameters
    ----------
    xs : dict of int to array of shape (n_tokens, d_source)
        xs[i]: the held-out source rows at boundary i only (numpy, or tensors on a torch
        backend's device).
    ys : dict of int to array of shape (n_tokens, d_target)
        ys[j]: the held-out target rows at boundary j.
    maps : dict of (int, int) to SolvedMap
        {(i, j): a `SolvedMap` with its W, x_mean and y_mean}.
    backend : Backend, optional
        Where the products run.
    eps : float, optional
        Floor of ‖y‖ in the relative error.
    rows_per_block : int, optional
        Rows per product on the host (default: HELDOUT_BLOCK_VALUES predictions).
    docs : array of shape (n_tokens,), optional
        int, each row's held-out document index: the same sums per document too.

    Returns
    -------
    dict
        {"pair": {(i, j): (3,)}, "target": {j: (3,)}, "centred": {j: (d_target,)}}, and with
        `docs` "doc" = {"ids": (k,) the documents present, sorted; "pair": {(i, j): (k, 3)},
        "target": {j: (k, 3)}, "centred": {j: (k, d_target)}}, so that a bootstrap over
        documents needs no row.
    """
    put = backend.put
    centre: dict = {}
    by_source: dict = {}
    for (i, j), m in maps.items():
        centre.setdefault(j, m.y_mean)
        by_source.setdefault(i, []).append(j)
    plans = {}
    for i, js in by_source.items():
        x_mean = maps[(i, js[0])].x_mean
        W = [maps[(i, j)].W for j in js]
        # a map about other means than the first of its source / target: shift its error
        offsets = [
            (maps[(i, j)].y_mean - centre[j]) - (maps[(i, j)].x_mean - x_mean) @ maps[(i, j)].W
            for j in js
        ]
        offset = np.concatenate(offsets)
        plans[i] = (
            put(x_mean),
            put(np.concatenate(W, axis=1)),
            tuple(js),
            put(offset) if np.any(offset) else None,
        )
    centres = {j: put(c) for j, c in centre.items()}
    n = len(ys[next(iter(ys))]) if ys else 0
    width = max((p[1].shape[1] for p in plans.values()), default=1)
    step = (
        (rows_per_block or max(64, HELDOUT_BLOCK_VALUES // width)) if backend.on_cpu else max(n, 1)
    )
    pair = {k: np.zeros(3) for k in maps}
    target = {j: np.zeros(3) for j in ys}
    centred = {j: np.zeros(len(centre[j]) if j in centre else ys[j].shape[1]) for j in ys}
    seg = _Segments(docs) if docs is not None else None
    per_doc = (
        {
            "ids": seg.ids if seg else None,
            "pair": {k: np.zeros((seg.k, 3)) for k in maps},
            "target": {j: np.zeros((seg.k, 3)) for j in ys},
            "centred": {j: np.zeros((seg.k, len(centred[j]))) for j in ys},
        }
        if seg
        else None
    )
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
                per_doc["target"][j] += part.sums(
                    stack([ynorm[j] * 0 + 1, ynorm[j], yc2], 1), backend
                )
                per_doc["centred"][j] += part.sums(yc[j], backend)
        cats: dict = {}  # per list of targets: their centred rows side by side, and their norms
        for i, (x_mean, W_all, js, offset) in plans.items():
            if js not in cats:
                cats[js] = (
                    _side_by_side([yc[j] for j in js], backend),
                    _side_by_side([ynorm[j][:, None] for j in js], backend),
                )
            Ycat, Yn = cats[js]
            E = (put(xs[i][r0:r1]) - x_mean) @ W_all  # (rows, Σ d_T) predictions about the means
            E -= Ycat  # the errors of every target at once
            if offset is not None:
                E += offset
            e2 = backend.blocknorm2(E, len(js))  # (rows, targets)
            en = e2**0.5
            ratio = en / backend.maximum(Yn, eps)
            sums = (
                backend.get(backend.sum0(ratio)),
                backend.get(backend.sum0(en)),
                backend.get(backend.sum0(e2)),
            )
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
            out = t.zeros(
                (self.k,) + tuple(values.shape[1:]), dtype=t.float64, device=values.device
            )
            out.index_add_(0, t.from_numpy(self.slot).to(values.device), values.to(t.float64))
            return backend.get(out)
        values = np.asarray(values, dtype=np.float64)
        out = np.zeros((self.k,) + values.shape[1:])
        np.add.at(out, self.where, np.add.reduceat(values, self.starts, axis=0))
        return out


def add_heldout(a: dict, b: dict) -> dict:
    """The sum of two `heldout_sums` results (per-document sums matched by document).

    Parameters
    ----------
    a, b : dict
        `heldout_sums` results over the same pairs.

    Returns
    -------
    dict
        Their sum, of the same form.
    """
    out = {k: {key: a[k][key] + b[k][key] for key in a[k]} for k in ("pair", "target", "centred")}
    if "doc" in a or "doc" in b:
        out["doc"] = _add_per_doc(a.get("doc"), b.get("doc"))
    if "fractions" in a:  # --convergence: the fractions' maps' sums, added alike
        out["fractions"] = {
            f: add_heldout(a["fractions"][f], b["fractions"][f]) for f in a["fractions"]
        }
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


class Scores(NamedTuple):
    """One pair's held-out scores (`scores`).

    Attributes
    ----------
    relative_error : float
        (1/N) Σ ‖e_n‖/max(‖y_n‖, ε).
    norm_error : float
        Σ ‖e_n‖ / Σ ‖y_n‖ (NaN when Σ ‖y_n‖ = 0).
    r2 : float
        1 − Σ ‖e_n‖² / Σ ‖y_n − ȳ‖² (NaN when the target has no variance).
    """

    relative_error: float  # (1/N) Σ ‖e_n‖/max(‖y_n‖, ε)
    norm_error: float  # Σ ‖e_n‖ / Σ ‖y_n‖ (NaN when Σ ‖y_n‖ = 0)
    r2: float  # 1 − Σ ‖e_n‖² / Σ ‖y_n − ȳ‖² (NaN when the target has no variance)


def scores(pair_sums: np.ndarray, target_sums: np.ndarray, centred: np.ndarray) -> Scores:
    """The held-out scores of one pair from its sums (docs/methods.md, The fit).

        relative_error = (1/N) Σ ‖e_n‖/max(‖y_n‖, ε)      norm_error = Σ ‖e_n‖ / Σ ‖y_n‖
        r2 = 1 − Σ ‖e_n‖² / Σ ‖y_n − ȳ‖²,  Σ ‖y − ȳ‖² = Σ ‖y − μ‖² − ‖Σ (y − μ)‖² / N

    Parameters
    ----------
    pair_sums : array of shape (3,)
        [Σ ‖e‖/max(‖y‖, ε), Σ ‖e‖, Σ ‖e‖²] (`heldout_sums`' "pair").
    target_sums : array of shape (3,)
        [N, Σ ‖y‖, Σ ‖y − μ‖²] (its "target").
    centred : array of shape (d_target,)
        Σ (y − μ) (its "centred").

    Returns
    -------
    Scores
        relative_error, norm_error, r2.
    """
    ratio, e1, e2 = pair_sums
    N, y1, yc2 = target_sums
    ss_tot = yc2 - float(centred @ centred) / N
    return Scores(
        ratio / N, e1 / y1 if y1 > 0 else math.nan, 1.0 - e2 / ss_tot if ss_tot > 0 else math.nan
    )
