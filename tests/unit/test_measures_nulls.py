"""RSA's null read in batches (`align.measures.nulls`): every draw of every cell equals
scipy's Spearman correlation of the two condensed correlation-distance matrices with the
target's rows permuted (a reference that never imports align), at 1e-10, with tied rows, a
batch that does not divide the draws, pieces that cut the pairs, either side gathered, and
on torch as a GPU runs it."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import pdist
from scipy.stats import spearmanr

TOL = 1e-10


def reference(x: np.ndarray, y: np.ndarray) -> float:
    """rsatoolbox's RSA: Spearman of the correlation distances of the pairs a < b, the copies'
    rule written in: two equal rows are at distance 0 (scipy's rounding can leave 1e-16)."""

    def rdm(z):
        a, b = np.triu_indices(len(z), 1)
        d = pdist(z, "correlation")
        d[(z[a] == z[b]).all(axis=1)] = 0.0
        return d

    return float(spearmanr(rdm(x), rdm(y)).statistic)


def grids(n_source: int, n_target: int, m: int = 40, seed: int = 0) -> tuple:
    """Rows of a shared part and noise; some rows duplicated (ties in the distances)."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((m, 3))
    xs, ys = {}, {}
    for grid, n, d in ((xs, n_source, 5), (ys, n_target, 7)):
        for b in range(n):
            z = base @ rng.standard_normal((3, d)) + rng.standard_normal((m, d))
            z[10:16] = z[2]  # six copies of one row
            z[30] = z[31]
            grid[b] = z
    return xs, ys


def device_backend():
    """torch as a fit's GPU runs it (`on_cpu` False), on the CPU."""
    from align.ridge.backend import Backend

    class Device(Backend):
        on_cpu = False

    return Device("cpu", use_torch=True)


@pytest.mark.parametrize("shape", [(2, 3), (3, 2)])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_every_batched_draw_equals_spearman_of_the_permuted_rows(monkeypatch, shape, backend):
    """11 draws in batches of 4 (the last holds 3) and pieces of 97 pairs (780 pairs: the
    last piece short): each draw of each cell within 1e-10 of scipy on (x, y[perm])."""
    from align.measures import nulls, rows
    from align.measures.calibration import draw_permutations
    from align.ridge.backend import CPU

    monkeypatch.setattr(nulls, "BATCH", 4)
    monkeypatch.setattr(nulls, "CHUNK", 97)
    xs, ys = grids(*shape)
    perms, scheme = draw_permutations(np.repeat(np.arange(10), 4), 11, 3)
    assert scheme == "documents"
    where = device_backend() if backend == "torch" else CPU
    records = rows.prepare_all(xs, ys, ("rsa",), 3, where)
    got = nulls.rsa_null(list(records[0].values()), list(records[1].values()), perms, where)
    assert got.shape == (11, *shape)
    for q, perm in enumerate(perms):
        for a, x in xs.items():
            for b, y in ys.items():
                assert abs(got[q, a, b] - reference(x, y[perm])) <= TOL, (q, a, b)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_prime_row_count_in_pieces_and_short_batches_equals_spearman(monkeypatch, backend):
    """37 rows (a prime: 666 pairs, pieces of 50, the last holding 16), 7 draws of rows
    permuted one by one in batches of 3 (the last holds 1), tied rows, the target side
    gathered (3 source boundaries, 2 target): each draw of each cell within 1e-10 of scipy
    on (x, y[perm])."""
    from align.measures import nulls, rows
    from align.ridge.backend import CPU

    monkeypatch.setattr(nulls, "BATCH", 3)
    monkeypatch.setattr(nulls, "CHUNK", 50)
    assert nulls.piece_of(37 * 36 // 2) == 50
    xs, ys = grids(3, 2, m=37, seed=9)
    perms = np.stack([np.random.default_rng(q).permutation(37) for q in range(7)])
    where = device_backend() if backend == "torch" else CPU
    records = rows.prepare_all(xs, ys, ("rsa",), 3, where)
    got = nulls.rsa_null(list(records[0].values()), list(records[1].values()), perms, where)
    for q, perm in enumerate(perms):
        for a, x in xs.items():
            for b, y in ys.items():
                assert abs(got[q, a, b] - reference(x, y[perm])) <= TOL, (q, a, b)


def test_null_values_rows_scheme_batched_rsa_equals_spearman():
    """`rows.null_values` with rows permuted one by one (fewer than 8 documents) and a
    neighbour measure beside rsa: rsa's draws are the batched ones, equal to scipy's."""
    from align.measures.calibration import draw_permutations
    from align.measures.rows import null_values

    xs, ys = grids(2, 2, seed=4)
    perms, scheme = draw_permutations(np.repeat(np.arange(4), 10), 9, 8)
    assert scheme == "rows"
    got = null_values(xs, ys, perms, ("mknn", "rsa"), 3)
    for q, perm in enumerate(perms):
        for a, x in xs.items():
            for b, y in ys.items():
                assert abs(got["rsa"][q, a, b] - reference(x, y[perm])) <= TOL, (q, a, b)


def test_square_lays_out_the_condensed_pairs():
    """`nulls.square` of condensed values is scipy's squareform (zero diagonal)."""
    from scipy.spatial.distance import squareform

    from align.measures import nulls, prepared

    m = 9
    v = np.random.default_rng(1).standard_normal(m * (m - 1) // 2)
    a, b = (i.astype(np.int64) for i in prepared.pair_rows(m))
    np.testing.assert_array_equal(nulls.square(v, a, b, m).reshape(m, m), squareform(v))


def reference_weighted(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Spearman of the resample's rows (row r written w_r times), the pairs of two copies of
    one row left out and equal rows at distance 0 (the record's rule)."""
    o = np.repeat(np.arange(len(x)), w)
    a, b = np.triu_indices(len(o), 1)
    keep = o[a] != o[b]

    def rdm(z):
        d = pdist(z[o], "correlation")
        d[(z[o][a] == z[o][b]).all(axis=1)] = 0.0
        return d[keep]

    return float(spearmanr(rdm(x), rdm(y)).statistic)


def test_weighted_rsa_scaled_ranks_equal_spearman_of_the_resampled_rows():
    """`cells.weighted_grid`'s rsa, read as the dot of sqrt(ω)-scaled ranks (`ranks_scaled`),
    under a jackknife's 0/1 weights (each of 10 groups of documents left out) and under
    bootstrap multiplicities 0..3, equals scipy's Spearman on the rows written out, at 1e-10,
    tied rows included; `ranks_scaled` on torch equals numpy's."""
    from align.measures import cells, prepared, rows

    xs, ys = grids(2, 2, seed=6)
    records = rows.prepare_all(xs, ys, ("rsa",), 3)
    torch_records = rows.prepare_all(xs, ys, ("rsa",), 3, device_backend())
    doc = np.repeat(np.arange(20), 2)
    jackknife = (doc[None, :] % 10 != np.arange(10)[:, None]).astype(np.int64)
    boot = np.random.default_rng(3).integers(0, 4, size=(3, len(doc)))
    forms = {"rsa": cells.BY_RANKS}  # how rsa is read under weights (its registry record)
    for w in (*jackknife, *boot):
        got = cells.weighted_grid(*records, forms, 3, w, cells.Scratch.of(len(w), forms))
        for a, x in xs.items():
            for b, y in ys.items():
                assert abs(got["rsa"][a, b] - reference_weighted(x, y, w)) <= TOL
        p, q = records[1][0], torch_records[1][0]
        s, total = prepared.ranks_scaled(p, w)
        scratch = cells.Scratch.of(len(w), forms, device_backend())
        wd = scratch.backend.put(w)
        omega = wd[scratch.pairs[0]] * wd[scratch.pairs[1]]
        st, total_t = prepared.ranks_scaled(q, w, omega)
        np.testing.assert_allclose(st.numpy(), s, rtol=0, atol=1e-12)
        assert abs(total - total_t) <= 1e-12 * total


def test_ranks_are_narrowed_to_float32_only_where_it_holds_them_exactly():
    """Centred average ranks of P pairs are multiples of 1/2 below P/2 in magnitude: float32
    holds every one of them while P < 2^24 (M <= 5,793), and no longer at M = 5,794, whose
    largest half-integer ranks round (numpy's float32 round trip, by hand)."""
    from align.measures.nulls import exact_in_float32

    def round_trips(m):
        p = m * (m - 1) // 2
        top = (p - 1) / 2  # the largest centred rank, and the half-integers just below it
        values = np.array([top, top - 0.5, -top, -(top - 0.5), 0.5, 0.0])
        return bool(np.all(values.astype(np.float32).astype(np.float64) == values))

    assert exact_in_float32(5793) and round_trips(5793)
    assert not exact_in_float32(5794) and not round_trips(5794)
    assert exact_in_float32(1024) and round_trips(1024)
