"""The memory plan of the sampled rows (align.fitting.planning.sample_budget): the rows' bytes against
M·d·8 worked by hand, row_measures' working memory against its peak measured with
tracemalloc (the plan must bound it and stay within 2x), and the refusal's one line."""

import tracemalloc

import numpy as np
import pytest

from align.fitting.planning.sample_budget import (
    SampleShape,
    row_measures_bytes,
    sample_bytes,
    sample_refusal,
)
from align.measures import rows
from align.stats.bootstrap import Resampling, indices

ALL = ("mknn", "cknna", "rsa", "cka", "cka-debiased", "procrustes", "cca", "svcca")


def test_sample_bytes_is_m_times_widths_times_8():
    # Qwen2.5-1.5B -> 14B: 29 boundaries of 1536 and 49 of 5120, M 4,096, float64
    s = SampleShape(4096, 29, 1536, 49, 5120, ("mknn",), 10, 199, 4096)
    assert sample_bytes(s) == 4096 * (29 * 1536 + 49 * 5120) * 8
    assert abs(sample_bytes(s) / 2**30 - 9.0) < 0.05  # methods.md's 9.0 GiB


SMALL = (2, 24, 2, 40)  # sources, their width, targets, their width
WIDE = (10, 90, 3, 70)


@pytest.mark.parametrize(
    "measures, spectral, threads, grid",
    [
        (("mknn",), None, 1, SMALL),
        (("rsa",), None, 1, SMALL),
        (("cka", "procrustes"), None, 1, SMALL),
    ]
    + [(ALL, None, 1, SMALL), (ALL, ("mknn", "cknna", "rsa"), 1, SMALL)]
    + [(ALL, ("mknn", "cknna", "rsa"), 3, SMALL), (("cka", "procrustes"), (), 1, WIDE)],
)
def test_working_memory_bounds_tracemalloc_peak_within_2x(measures, spectral, threads, grid):
    """row_measures with every measure bootstrapped (intervals None, `--measure-interval
    bootstrap`, the larger of the two schemes' working memory: a resample holds more rows
    than the sample), and as a fit asks it (only mknn, cknna and rsa), on one thread and on
    three (each thread's phase held side by side), and on a grid of many wide sources
    without an interval, where the spectral measures' null product is the largest phase: the
    plan bounds tracemalloc's peak within 2x."""
    m, k = 160, 5
    n_s, d_s, n_t, d_t = grid
    rng = np.random.default_rng(0)
    xs = {i: rng.standard_normal((m, d_s)) for i in range(n_s)}
    ys = {j: rng.standard_normal((m, d_t)) for j in range(n_t)}
    docs = np.sort(rng.integers(0, 16, m))
    res = Resampling(100, 1)
    ids, per_doc = np.unique(docs, return_counts=True)
    largest = int(per_doc[indices(len(ids), res)].sum(axis=1).max())

    def run():
        rows.row_measures(
            xs,
            ys,
            docs,
            measures,
            k=k,
            draws=rows.Draws(2, 0, res, "bootstrap", threads),
            intervals=spectral,
        )

    run()  # the imports (scipy's rankdata) before the measured run
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        run()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    shape = SampleShape(m, n_s, d_s, n_t, d_t, measures, k, 102, largest, threads=threads)
    plan = row_measures_bytes(shape._replace(spectral_intervals=spectral is None))
    assert peak <= plan <= 2 * peak, (plan, peak)


def test_refusal_names_bytes_and_sample_rows():
    s = SampleShape(4096, 29, 1536, 49, 5120, ("mknn", "cka"), 10, 199, 4200)
    line = sample_refusal(s, 8 * 2**30, "of this process's budget", "`memory_limit`")
    need = sample_bytes(s) + row_measures_bytes(s)
    assert "\n" not in line
    assert "4,096 sampled rows" in line and "`sample_rows`" in line and "GiB" in line
    assert f"{need / 2**30:.1f} GiB" in line
    assert sample_refusal(s, need, "here", "`memory_limit`") is None
