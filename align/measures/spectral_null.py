"""The spectral measures' permutation null in one product a draw and target boundary (pure
functions on arrays): cka, cka-debiased, procrustes, cca and svcca of every cell under every
draw, from the boundaries' prepared records, without a record per draw, on the fit's device.

With Z = u·diag(s) the centred rows in their singular basis (`prepared.Prepared`: X_c =
u·diag(s)·vᵀ) and a the rows' squared norms, draw π re-pairs row a of the source with row
π(a) of the target, so a cell's B (`formulas`: C_xy in the two eigenbases) is

    B_ij(π) = Z_iᵀ · Z_j[π]

and every spectral measure is its formula of B_ij(π) and the two sides' own spectra, which do
not move with π (a draw reorders the target's rows; its centring and singular values stay).
The sources' Z are laid side by side once, Z_S = [Z_1 | … | Z_I] (M × Σr_i), so a draw and
target boundary is one product Z_Sᵀ · Z_j[π] ((Σr_i) × r_j) cut into the cells' B. What a
measure reads of B is computed where B is (numpy on the host, torch on the fit's GPU): its
rows' sums of squares (cka, cka-debiased), its rows' sums of squares weighted by CCA's
whitening (cca), and the singular values that procrustes and svcca need, taken for the cells
of one shape at once (a stack); only those vectors come back to the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align.measures import formulas
from align.measures import prepared as P
from align.ridge.backend import CPU, Backend

SPECTRAL = ("cka", "cka-debiased", "procrustes", "cca", "svcca")
GRAM_TOL = 1e-11  # the Gram's bound on a block's Σσ, relative to Σσ, under which it is used


def spectral_null(px: list, py: list, perms: np.ndarray, names, backend: Backend = CPU) -> dict:
    """{name: (K, n_source, n_target)} for each of `names` (of SPECTRAL) under each draw of
    perms (K, M) (row a of the source with row perms[q, a] of the target), from the records'
    u, s, a (px: the source boundaries' `Prepared`, py: the target's; `prepared.prepare`'s
    "svd" part, and "hsic_self" for cka-debiased), the products and decompositions on
    `backend`. Each cell equals `cells.<name>` of the source's record and the target's
    permuted one (`prepared.permuted`), to rounding."""
    perms = np.asarray(perms)
    names = [n for n in SPECTRAL if n in names]
    out = {n: np.empty((len(perms), len(px), len(py))) for n in names}
    if not names:
        return out
    zs = backend.put(np.concatenate([p.u * p.s for p in px], axis=1))  # (M, Σr_i)
    cuts = np.cumsum([0] + [len(p.s) for p in px])
    a_x = np.stack([p.a for p in px])  # (n_source, M)
    side_x = [_side(p) for p in px]
    whiten_x = np.concatenate([sx["whiten"] for sx in side_x]) ** 2
    squares = bool({"cka", "cka-debiased"} & set(names))
    frobenius = squares or "cca" in names
    for j, q in enumerate(py):
        uy, sy, side_y = backend.put(q.u), backend.put(q.s), _side(q)
        whiten_y = backend.put(side_y["whiten"] ** 2)
        for d, perm in enumerate(perms):
            B = zs.T @ uy[backend.mask(perm)]
            B *= sy  # Z_j[π] = u_j[π]·diag(s_j): no permuted copy of Z_j
            squared = B * B if frobenius else None  # B∘B once, for every sum that reads it
            draw = Draw(
                B,
                cuts,
                len(perm),
                backend,
                squares=_by_source(backend.get(squared.sum(1)), cuts) if squares else None,
                ab=a_x @ q.a[perm] if "cka-debiased" in names else None,
                whitened=(
                    _by_source(backend.get(squared @ whiten_y) * whiten_x, cuts)
                    if "cca" in names
                    else None
                ),
            )
            for n in names:
                out[n][d, :, j] = _cells(n, draw, side_x, side_y)
    return out


@dataclass
class Draw:
    """One draw's B for one target boundary: B ((Σr_i) × r_j, on the backend; source i's rows
    are cuts[i]:cuts[i + 1]), its m rows, and what the measures read of it on the host, each
    (n_source,) or None where no measure asked: ‖B_i‖²_F (`squares`), the debiased CKA's
    a·b[π] (`ab`), ‖B_i‖²_F under CCA's whitening (`whitened`)."""

    B: object
    cuts: np.ndarray
    m: int
    backend: Backend
    squares: np.ndarray | None = None
    ab: np.ndarray | None = None
    whitened: np.ndarray | None = None

    def block(self, i: int, rows: int | None = None, cols: int | None = None):
        """Source i's B_i, or its top rows × cols corner."""
        top = self.cuts[i + 1] if rows is None else self.cuts[i] + rows
        return self.B[self.cuts[i] : top, :cols]


def _by_source(rows, cuts: np.ndarray) -> np.ndarray:
    """(n_source,) sums of a (Σr_i,) vector over each source's rows of B."""
    return np.add.reduceat(rows, cuts[:-1])


def _side(p: P.Prepared) -> dict:
    """What a side's formulas read of its record, computed once: λ = s², ‖C‖_F, tr C (= Σa),
    the debiased CKA's HSIC_u(K, K), CCA's whitening 1/sqrt(λ + ρ) (`formulas.cca`), SVCCA's
    kept directions, the width."""
    lam = p.s**2
    return {
        "lam": lam,
        "norm": np.sum(lam**2) ** 0.5,
        "trace": p.a.sum(),
        "self": p.hsic_self,
        "whiten": formulas.cca_whitening(lam, p.width),
        "kept": formulas.principal(lam) if len(lam) else 0,
        "width": p.width,
    }


def _cells(name: str, draw: Draw, side_x: list, side_y: dict) -> np.ndarray:
    """Measure `name` of every source's cell with one (permuted) target, from the draw."""
    if name == "cka":
        return np.array(
            [
                formulas.cka(v, sx["norm"], side_y["norm"])
                for v, sx in zip(draw.squares, side_x, strict=True)
            ]
        )
    if name == "cka-debiased":
        if draw.m < 4:
            return np.full(len(side_x), np.nan)
        out = np.empty(len(side_x))
        for i, sx in enumerate(side_x):
            cross = formulas.hsic_unbiased(
                draw.m,
                draw.squares[i] - draw.ab[i],
                -sx["trace"],
                -side_y["trace"],
                draw.ab[i],
            )
            out[i] = formulas.cka_debiased(cross, sx["self"], side_y["self"])
        return out
    if name == "procrustes":
        nuclear = _singular_sums([draw.block(i) for i in range(len(side_x))], draw.backend)
        return np.array(
            [
                formulas.procrustes(v, sx["trace"], side_y["trace"])
                for v, sx in zip(nuclear, side_x, strict=True)
            ]
        )
    if name == "cca":
        return draw.whitened / np.array([min(sx["width"], side_y["width"]) for sx in side_x])
    ky = side_y["kept"]
    over_y = draw.backend.put(1.0 / np.sqrt(side_y["lam"][:ky]))
    reduced = [
        draw.block(i, sx["kept"], ky)
        * draw.backend.put(1.0 / np.sqrt(sx["lam"][: sx["kept"]]))[:, None]
        * over_y[None, :]
        for i, sx in enumerate(side_x)
    ]
    return _singular_sums(reduced, draw.backend) / np.array([min(R.shape) for R in reduced])


def _singular_sums(blocks: list, backend: Backend = CPU) -> np.ndarray:
    """Σ of the singular values of each block (on `backend`), the blocks of one shape stacked
    into one call: the square roots of the eigenvalues of B·Bᵀ (the narrower side's Gram, a
    symmetric eigenproblem: 3× faster than the SVD at 256 × 384) where `gram_bound` of them is
    below GRAM_TOL·Σσ; an SVD for the others (blocks with singular values near √ε·σ_max or
    below, which the Gram cannot resolve)."""
    xp = np if backend.torch is None else backend.torch
    out = np.empty(len(blocks))
    shapes = {}
    for i, B in enumerate(blocks):
        shapes.setdefault(tuple(B.shape), []).append(i)
    for shape, idx in shapes.items():
        stack = xp.stack([blocks[i] for i in idx])
        if shape[0] > shape[1]:
            stack = stack.mT
        lam = backend.get(xp.linalg.eigvalsh(stack @ stack.mT))  # ascending
        sums = np.sqrt(np.maximum(lam, 0.0)).sum(axis=1)
        ill = np.flatnonzero(~(gram_bound(lam) <= GRAM_TOL * sums))
        if len(ill):
            sums[ill] = backend.get(xp.linalg.svdvals(stack[backend.mask(ill)])).sum(axis=1)
        out[idx] = sums
    return out


def gram_bound(lam: np.ndarray) -> np.ndarray:
    """(n,): for each row of lam (n, r), the ascending eigenvalues of a block's Gram B·Bᵀ in
    float64, a bound on |Σ sqrt(λ̂_i) − Σ σ_i| where each computed eigenvalue is within
    δ = ε·λ_max of the exact one (the error of a symmetric eigensolver on the rounded Gram):
    |sqrt(λ̂) − σ| = |λ̂ − σ²| / (sqrt(λ̂) + σ) ≤ min(δ / sqrt(λ̂), √δ) for each i. A σ below
    √ε·σ_max adds √δ = 1.5e-8·σ_max to the bound, one of 10⁻⁴·σ_max 2.2e-12·σ_max: only an
    SVD resolves the first."""
    delta = np.finfo(np.float64).eps * np.maximum(lam[:, -1:], 0.0)
    root = np.sqrt(np.maximum(lam, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        each = np.where(root > 0, delta / root, np.inf)
    return np.minimum(each, np.sqrt(delta)).sum(axis=1)
