"""mknn's and cknna's permutation null read from the prepared neighbour lists
(`align.measures.neighbour_null`): every draw of every cell equals platonic-rep's mutual_knn
and cknna (tests/helpers/rows_reference.py, the documented tie rule written in, never
importing align) on the explicitly permuted rows (x, y[perm]), at 1e-12, on random rows and
on rows most of which copy another (ties at the k-th place, as at boundary 0, some running
past the 4k + 8 places a record keeps), for several k, draws of documents and of rows, a grid
of 2 × 3 boundaries, source boundaries spread over several slots and records prepared on
torch as a GPU prepares them."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import rows_reference as R

TOL = 1e-12  # every draw against the reference on the permuted rows, relative to max(1, |v|)


def random_rows(seed: int, m: int, widths: tuple) -> list:
    """Rows of a shared part of rank 3 and noise, one array a width."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((m, 3))
    return [base @ rng.standard_normal((3, d)) + rng.standard_normal((m, d)) for d in widths]


def copied_rows(seed: int, m: int, widths: tuple) -> list:
    """`random_rows` where, as at boundary 0, most rows copy another: rows 50.. copy row 0
    (30 copies: a tie that runs past the 4k + 8 places kept for k ≤ 5), rows 20..49 copy
    rows 1..19 drawn at random, row 5 is twice row 6 (one direction, not a copy)."""
    out = random_rows(seed, m, widths)
    pick = np.random.default_rng(seed + 1).integers(1, 20, size=30)
    for z in out:
        z[50:] = z[0]
        z[20:50] = z[pick]
        z[5] = 2.0 * z[6]
    return out


def tied_at_k(y: np.ndarray, k: int) -> int:
    """The rows of y whose k-th largest cosine to another row equals the (k+1)-th."""
    s = R.cosines(y)
    np.fill_diagonal(s, -np.inf)
    ordered = -np.sort(-s, axis=1)
    return int(np.sum(ordered[:, k - 1] == ordered[:, k]))


def draws(m: int, scheme: str, seed: int) -> np.ndarray:
    """(6, M) permutations: of 16 documents of five rows (`calibration.draw_permutations`)
    or of single rows."""
    if scheme == "rows":
        rng = np.random.default_rng(seed)
        return np.stack([rng.permutation(m) for _ in range(6)])
    from align.measures.calibration import draw_permutations

    return draw_permutations(np.arange(m) // 5, 6, seed)[0]


def assert_every_draw(got: dict, xs: dict, ys: dict, perms: np.ndarray, k: int) -> None:
    """Every draw q of every cell (a, b) of got {measure: (K, n_source, n_target)} within TOL
    of the reference on (xs[a], ys[b][perms[q]])."""
    refs = {"mknn": R.mutual_knn, "cknna": R.cknna}
    for n, values in got.items():
        for q, perm in enumerate(perms):
            for a, x in enumerate(xs.values()):
                for b, y in enumerate(ys.values()):
                    want = refs[n](x, y[perm], k)
                    v = values[q, a, b]
                    assert abs(v - want) <= TOL * max(1.0, abs(want)), (n, q, a, b, v, want)


@pytest.mark.parametrize("kind", ["random", "copies"])
@pytest.mark.parametrize("k", [2, 4, 7])
@pytest.mark.parametrize("scheme", ["documents", "rows"])
def test_every_draw_equals_the_measures_on_the_permuted_rows(kind, k, scheme):
    """A 2 × 3 grid of 80 rows, six draws: mknn and cknna of every draw and cell equal the
    references on (x, y[perm]); with copies, rows tie at their k-th place at every target
    boundary (the draw's new labels decide which copies are the neighbours)."""
    from align.measures.rows import null_values

    make = copied_rows if kind == "copies" else random_rows
    xs = dict(enumerate(make(1, 80, (5, 6))))
    ys = dict(enumerate(make(2, 80, (7, 4, 6))))
    if kind == "copies":
        assert all(tied_at_k(y, k) >= 30 for y in ys.values())
    perms = draws(80, scheme, 3)
    got = null_values(xs, ys, perms, ("mknn", "cknna"), k)
    assert_every_draw(got, xs, ys, perms, k)


def lattice_rows(seed: int, m: int, width: int) -> np.ndarray:
    """Rows of -1, 0 and 1 (no zero row): rows of different directions tie exactly in their
    cosine to a third row, so the copies a draw picks change a boundary's own HSIC_u(A∘L,
    A∘L) (copies of one direction would leave it as it is)."""
    z = np.random.default_rng(seed).integers(-1, 2, (m, width)).astype(np.float64)
    z[~z.any(axis=1)] = 1.0
    return z


@pytest.mark.parametrize("k", [2, 5])
def test_ties_across_directions_recompute_the_targets_own_hsic(k):
    """Lattice rows (ties among rows of different directions at the k-th place): every draw
    of cknna equals the reference, whose denominator moves with the draw."""
    from align.measures.rows import null_values

    xs = {0: lattice_rows(1, 80, 4), 1: random_rows(2, 80, (5,))[0]}
    ys = {0: lattice_rows(3, 80, 4), 1: lattice_rows(4, 80, 3), 2: random_rows(5, 80, (6,))[0]}
    perms = draws(80, "rows", 6)
    own = [R.hsic_unbiased(*[R.masks(ys[0][p], k) * R.cosines(ys[0][p])] * 2) for p in perms]
    assert np.ptp(own) > 1e-6  # the draws move the target's own HSIC
    got = null_values(xs, ys, perms, ("mknn", "cknna"), k)
    assert_every_draw(got, xs, ys, perms, k)


def test_sources_over_several_slots_and_sums_in_pieces(monkeypatch):
    """Five source boundaries over slots of two (three slots, the last holding one), the
    dense row sums one source at a time and the cosines of the rows whose tie runs past the
    places kept 7 rows at a time: every draw still equals the references."""
    from align.measures import neighbour_null
    from align.measures.rows import null_values

    monkeypatch.setattr(neighbour_null, "SLOT_BITS", 2)
    monkeypatch.setattr(neighbour_null, "ROW_SUMS", 1)
    monkeypatch.setattr(neighbour_null, "DEEP_BLOCK", 7)
    xs = dict(enumerate(copied_rows(4, 80, (5, 6, 3, 8, 4))))
    ys = dict(enumerate(copied_rows(5, 80, (7, 4))))
    perms = draws(80, "documents", 6)
    got = null_values(xs, ys, perms, ("mknn", "cknna"), 3)
    assert_every_draw(got, xs, ys, perms, 3)


def test_mknn_alone_and_k_of_every_other_row():
    """mknn alone (records without knn_self) at k = 1, and both measures at k = M − 1 (every
    other row a neighbour: no (k+1)-th place; mknn 1): equal to the references."""
    from align.measures.rows import null_values

    xs = dict(enumerate(copied_rows(7, 80, (5, 6))))
    ys = dict(enumerate(copied_rows(8, 80, (7, 4, 6))))
    perms = draws(80, "rows", 9)
    assert_every_draw(null_values(xs, ys, perms, ("mknn",), 1), xs, ys, perms, 1)
    xs, ys = dict(enumerate(random_rows(10, 12, (4, 5)))), {0: random_rows(11, 12, (3,))[0]}
    ys[0][6:] = ys[0][:6]
    perms = draws(12, "rows", 12)
    got = null_values(xs, ys, perms, ("mknn", "cknna"), 11)
    assert np.all(got["mknn"] == 1.0)
    assert_every_draw(got, xs, ys, perms, 11)


def test_records_prepared_on_torch_as_a_gpu_prepares_them():
    """Records whose cosines were computed and sorted on torch (a backend whose on_cpu is
    False; the lists come back to the host): every draw equals the references, with ties."""
    from align.measures.rows import null_values, prepare_all
    from align.ridge.backend import Backend

    class Device(Backend):
        on_cpu = False

    xs = dict(enumerate(copied_rows(13, 80, (5, 6))))
    ys = dict(enumerate(copied_rows(14, 80, (7, 4, 6))))
    records = prepare_all(xs, ys, ("mknn", "cknna"), 4, Device("cpu", use_torch=True))
    perms = draws(80, "documents", 15)
    got = null_values(xs, ys, perms, ("mknn", "cknna"), 4, records)
    assert_every_draw(got, xs, ys, perms, 4)
