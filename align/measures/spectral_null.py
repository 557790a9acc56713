"""The spectral measures' permutation null in one product a draw and target boundary (pure
functions on arrays): cka, cka-debiased, procrustes, cca and svcca of every cell under every
draw, from the boundaries' prepared records, without a record per draw.

With Z = u·diag(s) the centred rows in their singular basis (`prepared.Prepared`: X_c =
u·diag(s)·vᵀ) and a the rows' squared norms, draw π re-pairs row a of the source with row
π(a) of the target, so a cell's B (`formulas`: C_xy in the two eigenbases) is

    B_ij(π) = Z_iᵀ · Z_j[π]

and every spectral measure is its formula of B_ij(π) and the two sides' own spectra, which do
not move with π (a draw reorders the target's rows; its centring and singular values stay).
The sources' Z are laid side by side once, Z_S = [Z_1 | … | Z_I] (M × Σr_i), so a draw and
target boundary is one product Z_Sᵀ · Z_j[π] ((Σr_i) × r_j) cut into the cells' B; the
debiased CKA's a·b[π] of every source is one product too, and the singular values that
procrustes and svcca need are taken for the cells of one shape at once (a stack).
"""

from __future__ import annotations

import numpy as np

from align.measures import formulas
from align.measures import prepared as P

SPECTRAL = ("cka", "cka-debiased", "procrustes", "cca", "svcca")
WELL = 1e-6  # λ_min/λ_max of B·Bᵀ above which its eigenvalues give the singular values


def spectral_null(px: list, py: list, perms: np.ndarray, names) -> dict:
    """{name: (K, n_source, n_target)} for each of `names` (of SPECTRAL) under each draw of
    perms (K, M) (row a of the source with row perms[q, a] of the target), from the records'
    u, s, a (px: the source boundaries' `Prepared`, py: the target's; `prepared.prepare`'s
    "svd" part, and "hsic_self" for cka-debiased). Each cell equals `cells.<name>` of the
    source's record and the target's permuted one (`prepared.permuted`), to rounding."""
    perms = np.asarray(perms)
    names = [n for n in SPECTRAL if n in names]
    out = {n: np.empty((len(perms), len(px), len(py))) for n in names}
    if not names:
        return out
    zs = np.concatenate([p.u * p.s for p in px], axis=1)  # (M, Σr_i)
    cuts = np.cumsum([0] + [len(p.s) for p in px])
    a_x = np.stack([p.a for p in px])  # (n_source, M)
    side_x = [_side(p) for p in px]
    for j, q in enumerate(py):
        zy, side_y = q.u * q.s, _side(q)
        for d, perm in enumerate(perms):
            B = zs.T @ zy[perm]
            blocks = [B[cuts[i] : cuts[i + 1]] for i in range(len(px))]
            ab = a_x @ q.a[perm] if "cka-debiased" in names else None
            for n in names:
                out[n][d, :, j] = _cells(n, blocks, side_x, side_y, ab, len(perm))
    return out


def _side(p: P.Prepared) -> dict:
    """What a side's formulas read of its record, computed once: λ = s², ‖C‖_F, tr C, the
    debiased CKA's Σa and HSIC_u(K, K), SVCCA's kept directions, the width."""
    lam = p.s**2
    return {
        "lam": lam,
        "norm": np.sum(lam**2) ** 0.5,
        "trace": p.a.sum(),
        "a_sum": p.a.sum(),
        "self": p.hsic_self,
        "kept": formulas.principal(lam) if len(lam) else 0,
        "width": p.width,
    }


def _cells(name: str, blocks: list, side_x: list, side_y: dict, ab, m: int) -> np.ndarray:
    """Measure `name` of every source's cell with one (permuted) target, from the cells' B."""
    if name == "cka":
        return np.array(
            [
                formulas.cka(np.sum(B * B), sx["norm"], side_y["norm"])
                for B, sx in zip(blocks, side_x, strict=True)
            ]
        )
    if name == "cka-debiased":
        out = np.empty(len(blocks))
        for i, (B, sx) in enumerate(zip(blocks, side_x, strict=True)):
            if m < 4:
                out[i] = np.nan
                continue
            cross = formulas.hsic_unbiased(
                m, np.sum(B * B) - ab[i], -sx["a_sum"], -side_y["a_sum"], ab[i]
            )
            out[i] = formulas.cka_debiased(cross, sx["self"], side_y["self"])
        return out
    if name == "procrustes":
        nuclear = _singular_sums(blocks)
        return np.array(
            [
                formulas.procrustes(v, sx["trace"], side_y["trace"])
                for v, sx in zip(nuclear, side_x, strict=True)
            ]
        )
    if name == "cca":
        return np.array(
            [
                formulas.cca(B, sx["lam"], side_y["lam"], sx["width"], side_y["width"])
                for B, sx in zip(blocks, side_x, strict=True)
            ]
        )
    ky = side_y["kept"]
    reduced = [
        B[: sx["kept"], :ky]
        / np.sqrt(sx["lam"][: sx["kept"]])[:, None]
        / np.sqrt(side_y["lam"][:ky])[None, :]
        for B, sx in zip(blocks, side_x, strict=True)
    ]
    return _singular_sums(reduced) / np.array([min(R.shape) for R in reduced])


def _singular_sums(blocks: list) -> np.ndarray:
    """Σ of the singular values of each block, the blocks of one shape stacked into one
    call: the square roots of the eigenvalues of B·Bᵀ (the narrower side's Gram, a symmetric
    eigenproblem: 3× faster than the SVD at 256 × 384), where the smallest is above
    WELL·the largest; an SVD for the others (a square root's error is ε·σ_max²/(2σ), so the
    sum stays within about 1e-13 of σ_max only where no σ is small)."""
    out = np.empty(len(blocks))
    shapes = {}
    for i, B in enumerate(blocks):
        shapes.setdefault(B.shape, []).append(i)
    for shape, idx in shapes.items():
        stack = np.stack([blocks[i] for i in idx])
        if shape[0] > shape[1]:
            stack = stack.transpose(0, 2, 1)
        lam = np.linalg.eigvalsh(stack @ stack.transpose(0, 2, 1))  # ascending
        well = lam[:, 0] > WELL * lam[:, -1]
        sums = np.sqrt(np.maximum(lam, 0.0)).sum(axis=1)
        if not well.all():
            sums[~well] = np.linalg.svd(stack[~well], compute_uv=False).sum(axis=1)
        out[idx] = sums
    return out
