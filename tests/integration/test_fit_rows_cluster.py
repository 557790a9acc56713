"""`align fit --workers 2` on two stores with the row measures: their preparation, values,
null and bootstrap run as tasks of the local cluster's worker processes
(align.fitting.measuring.rows_tasks), and every array of mknn, cknna and rsa and every calibration
array of cka equals the fit in this process (Dask's synchronous scheduler, where
`row_measures` runs as it always has) within 1e-12: the same sampled rows, read from the
stores by the client in both. The in-process arrays are checked against references that
never import align in tests/integration/test_fit_measures.py and
tests/unit/test_measures_rows.py."""

from __future__ import annotations

import numpy as np
import pytest

from align.fitting import Execution, FitSpec

SAME = 1e-12
OPTIONS = dict(  # the `--live` cluster's test fits with these too
    measures="cka,mknn,cknna,rsa",
    bootstrap=100,
    alphas=[1e-2],
    sample_rows=90,
    neighbours=4,
    permutations=9,
    source_boundaries="0,2",
    target_boundaries="1,3,4",
    test_fraction=0.4,
)
SPEC = FitSpec(**OPTIONS)
ROW_FIELDS = ("", "_low", "_high", "_null_mean", "_null_std", "_calibrated", "_p", "_p_family")
CKA_FIELDS = ("_sampled", "_null_mean", "_null_std", "_p", "_p_family")


@pytest.mark.slow  # two fits, one starting a cluster of two worker processes: ~30 s
def test_row_measures_on_the_workers_equal_the_fit_in_this_process(fit_pair):
    import align

    S, T = fit_pair
    quiet = dict(log=lambda m: None, spec=SPEC)
    here = align.fit(S, T, None, run=Execution(scheduler="synchronous"), **quiet)
    there = align.fit(S, T, None, run=Execution(n_workers=2, memory_limit="3GB"), **quiet)
    for kind in ("row-prepare", "row-values", "row-null", "row-interval"):
        assert there.task_seconds.get(kind, 0) > 0, (kind, there.task_seconds)
    assert len(there.workers) == 2, there.workers
    assert_same_row_measures(there.dataset, here.dataset)


def assert_same_row_measures(there, here) -> None:
    """Every array of the row measures (and the sampled cka's) in `here` finite, and `there`'s
    equal to it within SAME; both drew the same sampled rows."""
    names = [f"{n}{f}" for n in ("mknn", "cknna", "rsa") for f in ROW_FIELDS]
    names += [f"cka{f}" for f in CKA_FIELDS]
    for name in names:
        assert np.isfinite(here[name].values).all(), name
        np.testing.assert_allclose(
            there[name].values, here[name].values, rtol=SAME, atol=SAME, err_msg=name
        )
    assert there.attrs["options"]["sampled_rows"] == here.attrs["options"]["sampled_rows"]
