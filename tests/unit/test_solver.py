"""`solver.solve_all` takes `solve`'s arguments as one record (`Solving`): the record's fields
are `solve`'s parameters after the statistics, in order and with its defaults, and a two-part
block solved through it equals scikit-learn's Ridge (α brute-forced on the validation rows,
the refit on all training rows) at rtol 1e-6 + atol 1e-9. The six-part fractions are proved
against scikit-learn in tests/integration/test_fit_convergence.py."""

from __future__ import annotations

import inspect

import numpy as np

from align import ridge
from align.fitting.results.solver import Solving, solve, solve_all
from tests.helpers.references import alpha_scale, ridge_val_sse, sklearn_ridge


def test_solving_holds_solves_parameters_in_order():
    parameters = list(inspect.signature(solve).parameters.values())[1:]  # after `stats`
    assert Solving._fields == tuple(p.name for p in parameters)
    for p in parameters:
        if p.default is not p.empty:
            assert Solving._field_defaults[p.name] == p.default, p.name


def test_two_part_block_solved_through_the_record_equals_sklearn():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 6)) @ rng.normal(size=(6, 6)) + 10.0
    Y = X @ rng.normal(size=(6, 4)) * 0.1 + rng.normal(size=(400, 4))
    part = np.where(np.arange(400) < 300, ridge.FIT, ridge.VAL).astype(np.int8)
    shifts = ({0: X[:50].mean(0)}, {1: Y[:50].mean(0)})
    stats = ridge.chunk_statistics({0: X}, {1: Y}, part, shifts)
    grid = (1e-4, 1e-2, 1.0)
    maps, fractions = solve_all(stats, Solving(grid, *shifts))
    assert fractions == {}  # two parts: the full fit alone
    m = maps[(0, 1)]
    fit, val = part == ridge.FIT, part == ridge.VAL
    sse = ridge_val_sse(X[fit], Y[fit], X[val], Y[val], grid)
    assert m.alpha_rel == grid[int(np.argmin(sse))]
    r = sklearn_ridge(X, Y, m.alpha_rel * alpha_scale(X))
    np.testing.assert_allclose(m.W, r.coef_.T, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(m.c, r.intercept_, rtol=1e-6, atol=1e-9)
