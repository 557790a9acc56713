"""`align fit --dry-run`'s row measures (`store_route.estimate.row_measures_seconds`): the
interval is counted as the run computes it, 10 recomputations under the delete-a-group
jackknife whatever `--bootstrap` N, N resamples under `--measure-interval bootstrap`, none
without `--bootstrap`; the permutations are the run's K. The counts reach
`rows_tasks.row_seconds`, whose sum is checked against the costs by hand."""

from __future__ import annotations

import numpy as np
import pytest

from align.fitting import FitSpec
from align.fitting.measuring import rows_tasks
from align.fitting.store_route import estimate


@pytest.mark.parametrize(
    "bootstrap,interval,want",
    [(1000, "jackknife", 10), (250, "jackknife", 10), (250, "bootstrap", 250), (0, "jackknife", 0)],
)
def test_the_interval_counts_ten_groups_or_n_resamples(monkeypatch, bootstrap, interval, want):
    seen = []

    def row_seconds(costs, counts, workers):
        seen.append((costs, counts, workers))
        return sum(costs)

    monkeypatch.setattr(rows_tasks, "row_seconds", row_seconds)
    spec = FitSpec(
        measures=("ridge", "mknn", "rsa"),
        bootstrap=bootstrap,
        measure_interval=interval,
        permutations=9,
        neighbours=3,
    ).checked()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 6))
    ys = {0: rng.standard_normal((40, 5)), 1: rng.standard_normal((40, 5))}
    estimate.row_measures_seconds((x, ys), (spec, 40, "cpu"), (12, 7), 1, {})
    ((_, counts, workers),) = seen
    assert counts == (7, 12, 9, want)  # boundaries, cells, permutations, recomputations
    assert workers == 1


def test_row_seconds_sums_the_parts_in_one_process():
    # 5 boundaries at 2 s, 6 cells at 0.5 s, 7 permutations at 0.25 s, 10 groups at 0.125 s
    got = rows_tasks.row_seconds((2.0, 0.5, 0.25, 0.125), (5, 6, 7, 10), 1)
    assert got == 5 * 2 + 6 * 0.5 + 7 * 0.25 + 10 * 0.125
