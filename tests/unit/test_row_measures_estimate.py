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


def test_the_first_plan_line_times_the_grid_on_rows_of_its_widths(monkeypatch):
    """A fit's first plan line (`guess_row_seconds`): `row_measures_seconds` on rows of the
    grid's widths, min(M, 2,048) of them, one source boundary and two target ones, at the
    run's M, for the grid's cells and boundaries, in this process; nothing below GUESS_ROWS
    sampled rows; the seconds said in the line, an hour or more as such."""
    from align.fitting.measuring.sampled import measures_line
    from align.fitting.planning.sample_budget import SampleShape

    seen = []

    def seconds(rows_, asked, counts, workers, timed):
        seen.append((rows_, asked, counts, workers))
        return 4000.0

    monkeypatch.setattr(estimate, "row_measures_seconds", seconds)
    spec = FitSpec(measures=("ridge", "mknn", "cka"), permutations=9).checked()
    shape = SampleShape(4096, 3, 6, 5, 7, spec.sampled, 10, 10, 4096)
    assert estimate.guess_row_seconds(shape, spec, "cpu") == 4000.0
    (((x, ys), asked, counts, workers),) = seen
    assert x.shape == (2048, 6) and [y.shape for y in ys.values()] == [(2048, 7)] * 2
    assert asked == (spec, 4096, "cpu") and counts == (15, 8) and workers == 1
    assert (
        estimate.guess_row_seconds(shape._replace(rows=estimate.GUESS_ROWS - 1), spec, "cpu")
        is None
    )

    class Split:
        counts = {"heldout": 5000}

    class Sample:
        tokens = np.arange(4096)

    line = measures_line(spec, Sample, Split, shape, 4000.0)
    assert line.endswith(
        "and take over an hour (~1.1 h) on this machine, `dry_run` times the whole fit"
    ), line
    assert measures_line(spec, Sample, Split, shape, 95.0).endswith(
        "take ~95 s on this machine, `dry_run` times the whole fit"
    )
    assert measures_line(spec, Sample, Split, shape, 750.0).endswith(
        "take ~12 min on this machine, `dry_run` times the whole fit"
    )
    assert measures_line(spec, Sample, Split, shape).endswith(", `dry_run` times the seconds")


def test_the_default_calibrates_the_row_measures_alone_and_a_count_given_every_measure():
    """Without `permutations`, mknn, cknna and rsa get 99 draws and the streamed measures none,
    so a streamed measure's cost does not depend on the others asked (`--measures cka` was
    never calibrated by default); a count given calibrates every measure asked; the result
    records the count and the measures calibrated; the plan's first line says which."""
    from align.fitting.measuring.sampled import measures_line

    streamed = ["cka", "cka-debiased", "procrustes", "procrustes-heldout", "cca", "svcca"]
    every = FitSpec(measures="all").checked()
    assert every.permutations is None and every.draws == 99
    assert every.calibrated == ("mknn", "cknna", "rsa") == every.sampled
    assert not every.heldout_calibrated
    assert every.recorded("cpu")["permutations"] == 99
    assert every.recorded("cpu")["calibrated"] == ["mknn", "cknna", "rsa"]
    given = FitSpec(measures="all", permutations=9).checked()
    assert given.draws == 9 and list(given.calibrated) == streamed + ["mknn", "cknna", "rsa"]
    assert "procrustes-heldout" not in given.sampled and given.heldout_calibrated
    alone = FitSpec(measures="cka").checked()
    assert (alone.draws, alone.calibrated, alone.sampled) == (0, (), ())
    assert FitSpec(measures="cka,rsa").checked().calibrated == ("rsa",)

    class Split:
        counts = {"heldout": 5000}

    class Sample:
        tokens = np.arange(1024)

    line = measures_line(every, Sample, Split)
    assert (
        "; mknn, cknna, rsa calibrated against 99 permutations of the 1,024 sampled rows; "
        f"{', '.join(streamed)} not calibrated (give `permutations` to calibrate them too)"
    ) in line, line
    assert "; every measure calibrated against 9 permutations of the 1,024 sampled rows" in (
        measures_line(given, Sample, Split)
    )
