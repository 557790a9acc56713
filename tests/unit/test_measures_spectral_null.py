"""The spectral measures' permutation null (`measures.spectral_null`): every draw of every cell
of cka, cka-debiased, procrustes, cca and svcca equals the peers' definitions
(tests/helpers/measures_reference.py: Kornblith et al.'s CKA and R²_CCA, platonic-rep's
unbiased CKA, netrep's angular Procrustes, Raghu et al.'s SVCCA) on the target's rows
re-paired by the draw, y[perm], at 1e-10; on boundaries of other widths, one of low rank and
one with copied rows; on numpy and on torch (the fit's GPU code path, run on the CPU)."""

from __future__ import annotations

import numpy as np
import pytest

from align.measures import prepared
from align.measures.spectral_null import SPECTRAL, spectral_null
from align.ridge.backend import CPU, Backend
from tests.helpers import measures_reference as ref

REFERENCE = {
    "cka": ref.cka,
    "cka-debiased": ref.cka_debiased,
    "procrustes": ref.procrustes,
    "cca": ref.cca,
    "svcca": ref.svcca,
}


def boundaries(m: int, widths, rng) -> list:
    """Rows of a shared signal plus noise at each width; the second of low rank (3), the last
    with a third of its rows copies of others."""
    base = rng.standard_normal((m, 4))
    out = []
    for b, d in enumerate(widths):
        x = base @ rng.standard_normal((4, d)) + 0.5 * rng.standard_normal((m, d))
        if b == 1:
            x = rng.standard_normal((m, 3)) @ rng.standard_normal((3, d))
        if b == len(widths) - 1:
            x[: m // 3] = x[m // 3 : 2 * (m // 3)]
        out.append(x)
    return out


@pytest.mark.parametrize("where", ["numpy", "torch"])
@pytest.mark.parametrize("m", [40, 57])
def test_every_draw_equals_the_peers_measure_on_the_repaired_rows(m, where):
    rng = np.random.default_rng(m)
    xs, ys = boundaries(m, (6, 9, 5), rng), boundaries(m, (8, 4), rng)
    perms = np.stack([rng.permutation(m) for _ in range(4)])
    parts = ("svd", "hsic_self")
    px = [prepared.prepare(x, parts, 3) for x in xs]
    py = [prepared.prepare(y, parts, 3) for y in ys]
    backend = Backend("cpu", use_torch=True) if where == "torch" else CPU
    got = spectral_null(px, py, perms, SPECTRAL, backend)
    for name, f in REFERENCE.items():
        assert got[name].shape == (4, 3, 2)
        for q, perm in enumerate(perms):
            for i, x in enumerate(xs):
                for j, y in enumerate(ys):
                    want = f(x, y[perm])
                    assert abs(got[name][q, i, j] - want) <= 1e-10, (name, q, i, j)


def test_only_the_names_asked_are_computed():
    rng = np.random.default_rng(0)
    xs, ys = boundaries(30, (5,), rng), boundaries(30, (6,), rng)
    px = [prepared.prepare(x, ("svd",), 3) for x in xs]
    py = [prepared.prepare(y, ("svd",), 3) for y in ys]
    perm = rng.permutation(30)
    got = spectral_null(px, py, perm[None, :], ("cka", "mknn"))
    assert set(got) == {"cka"}
    assert abs(got["cka"][0, 0, 0] - ref.cka(xs[0], ys[0][perm])) <= 1e-10


@pytest.mark.parametrize("where", ["numpy", "torch"])
def test_singular_sums_by_the_gram_where_its_bound_allows_else_by_the_svd(where):
    """Σσ of blocks of two shapes (wide and tall): well conditioned, graded (σ from 1 to 10⁻⁴:
    λ_min/λ_max = 10⁻⁸, still read from B·Bᵀ's eigenvalues) and of rank 2 (σ at round-off,
    read by the SVD), against numpy's SVD (1e-12 of σ_max); the Gram's bound holds the Gram's
    own error wherever it is computed; the blocks on numpy or on torch."""
    from align.measures.spectral_null import GRAM_TOL, _singular_sums, gram_bound

    rng = np.random.default_rng(5)

    def graded(m, n):
        q1, _ = np.linalg.qr(rng.standard_normal((m, m)))
        q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
        return (q1 * np.logspace(0, -4, m)) @ q2[:m]

    blocks = [rng.standard_normal((6, 9)), rng.standard_normal((9, 6))]
    blocks += [rng.standard_normal((6, 2)) @ rng.standard_normal((2, 9)) for _ in range(2)]
    blocks += [rng.standard_normal((6, 9)), graded(6, 9)]
    backend = Backend("cpu", use_torch=True) if where == "torch" else CPU
    got = _singular_sums([backend.put(B) for B in blocks], backend)
    paths = []
    for B, v in zip(blocks, got, strict=True):
        sigma = np.linalg.svd(B, compute_uv=False)
        assert abs(v - sigma.sum()) <= 1e-12 * sigma[0]
        narrow = B if B.shape[0] <= B.shape[1] else B.T
        lam = np.linalg.eigvalsh(narrow @ narrow.T)[None, :]
        gram = np.sqrt(np.maximum(lam, 0)).sum()
        bound = gram_bound(lam)[0]
        assert abs(gram - sigma.sum()) <= bound
        paths.append(bool(bound <= GRAM_TOL * gram))
    assert paths == [True, True, False, False, True, True]  # both paths, the graded by the Gram
    assert np.ptp(np.log10(np.linalg.eigvalsh(blocks[5] @ blocks[5].T))) > 7.9
