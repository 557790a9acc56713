"""The row measures' default interval (align.measures.rows, `interval="jackknife"`): every
delete-a-group recomputation of mknn, cknna and rsa against the measure recomputed from
scratch on the sampled rows left (tests/helpers/rows_reference.py: platonic-rep's and
rsatoolbox's definitions in numpy and scipy, never importing align) within 1e-10, ties
included; the interval against a hand-written jackknife t interval (scipy.stats.t) of those
recomputations; the groups as the streamed measures' (document index mod 10)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.rows_reference import MEASURES, RANGES, K, jackknife_t

TOL = 1e-10
NAMES = tuple(MEASURES)


def _grid(seed, m=60):
    """Two source and two target boundaries of m rows sharing a common part, with exact
    copies (ties) at source boundary 0 and target boundary 2; 23 documents of 1 to 3 rows,
    their rows scattered, so every group (document mod 10) holds rows."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(m, 4))
    xs = {b: base @ rng.normal(size=(4, 6)) + rng.normal(size=(m, 6)) for b in (0, 3)}
    ys = {b: base @ rng.normal(size=(4, 5)) + rng.normal(size=(m, 5)) for b in (1, 2)}
    xs[0][[5, 17, 25]] = xs[0][2]
    ys[2][[9, 28]] = ys[2][21]
    docs = rng.permutation(np.arange(m) % 23)
    return xs, ys, docs


def test_each_recomputation_is_the_measure_on_the_rows_left_and_the_interval_is_the_t():
    from align.measures.rows import Draws, row_measures
    from align.stats.bootstrap import Resampling

    for seed in (0, 1):
        xs, ys, docs = _grid(seed)
        out = row_measures(
            xs, ys, docs, NAMES, k=K, draws=Draws(3, 0, Resampling(100, 0), "jackknife")
        )
        groups = sorted(set(int(d) % 10 for d in docs))
        assert len(groups) == 10
        for n in NAMES:
            got = out[n]
            assert got.interval == "jackknife" and got.groups == tuple(groups)
            assert got.left_out.shape == (len(groups), 2, 2)
            for a, x in enumerate(xs.values()):
                for b, y in enumerate(ys.values()):
                    value = MEASURES[n](x, y)
                    assert abs(got.value[a, b] - value) <= TOL, (n, a, b)
                    left = []
                    for g_at, g in enumerate(groups):
                        keep = docs % 10 != g
                        left.append(MEASURES[n](x[keep], y[keep]))
                        diff = abs(got.left_out[g_at, a, b] - left[-1])
                        assert diff <= TOL, (seed, n, a, b, g, diff)
                    low, high = jackknife_t(value, left, RANGES[n])
                    assert abs(got.low[a, b] - low) <= TOL, (seed, n, a, b)
                    assert abs(got.high[a, b] - high) <= TOL, (seed, n, a, b)
                    cell = got.cell(a, b)
                    assert cell.low == got.low[a, b] and cell.left_out.shape == (10,)


def test_without_intervals_nothing_is_recomputed_and_the_bootstrap_keeps_no_left_out():
    """intervals=() gives NaN bounds and no recomputations; the bootstrap option keeps its
    percentile interval and no jackknife recomputations."""
    from align.measures.rows import Draws, row_measures
    from align.stats.bootstrap import Resampling

    xs, ys, docs = _grid(2, m=40)
    draws = Draws(3, 0, Resampling(100, 0))
    none = row_measures(xs, ys, docs, ("rsa",), k=K, draws=draws, intervals=())
    assert none["rsa"].interval is None and none["rsa"].left_out is None
    assert np.isnan(none["rsa"].low).all() and np.isnan(none["rsa"].high).all()
    boot = row_measures(xs, ys, docs, ("rsa",), k=K, draws=draws._replace(interval="bootstrap"))
    assert boot["rsa"].interval == "bootstrap" and boot["rsa"].left_out is None
    assert np.isfinite(boot["rsa"].low).all()


def test_an_unknown_scheme_is_refused_in_one_line():
    """By `row_measures` and by the fit's options (`FitSpec.checked`, every route and the
    study), naming the value and the two schemes."""
    import pytest

    from align.errors import InputError
    from align.fitting import FitSpec
    from align.measures.rows import Draws, row_measures
    from align.stats.bootstrap import Resampling

    xs, ys, docs = _grid(3, m=30)
    with pytest.raises(InputError) as e:
        row_measures(xs, ys, docs, ("rsa",), draws=Draws(3, 0, Resampling(), "percentile"))
    with pytest.raises(InputError) as f:
        FitSpec(measures="rsa", measure_interval="percentile").checked()
    for got in (e, f):
        text = str(got.value)
        assert "\n" not in text and "`measure_interval` 'percentile'" in text, text
        assert "jackknife or bootstrap" in text, text


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_rsa_recomputations_read_in_target_blocks_equal_spearman_of_the_rows_left(
    monkeypatch, backend
):
    """rsa's delete-a-group recomputations on 2 × 6 boundaries of 53 rows (a prime: no
    block divides it), the targets' scaled ranks read 4 to a product (the last holds 2),
    every boundary but one without tied distances (the whole-count ranks of 0/1 weights) and
    target 5 with copies: each recomputation of each cell equals scipy's Spearman of the
    correlation distances of the rows left (rows_reference.rsa) within 1e-10, on numpy and on
    torch as a GPU runs it."""
    from align.measures import cells, rows
    from align.ridge.backend import CPU, Backend

    class Device(Backend):
        on_cpu = False

    monkeypatch.setattr(cells, "TARGETS", 4)
    rng = np.random.default_rng(7)
    m = 53
    base = rng.normal(size=(m, 4))
    xs = {b: base @ rng.normal(size=(4, 6)) + rng.normal(size=(m, 6)) for b in range(2)}
    ys = {b: base @ rng.normal(size=(4, 5)) + rng.normal(size=(m, 5)) for b in range(6)}
    ys[5][[3, 40]] = ys[5][11]
    docs = rng.permutation(np.arange(m) % 19)
    where = Device("cpu", use_torch=True) if backend == "torch" else CPU
    records = rows.prepare_all(xs, ys, ("rsa",), K, where)
    got, groups = rows.jackknife_values(xs, ys, docs, ("rsa",), K, records)
    assert got["rsa"].shape == (len(groups), 2, 6)
    for g_at, g in enumerate(groups):
        keep = docs % 10 != g
        for a, x in xs.items():
            for b, y in ys.items():
                want = MEASURES["rsa"](x[keep], y[keep])
                assert abs(got["rsa"][g_at, a, b] - want) <= TOL, (backend, g, a, b)
