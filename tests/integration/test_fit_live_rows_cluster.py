"""`align fit --live --scheduler ADDRESS` with the row measures: after the passes, their
preparation, values, null and interval run as tasks of the cluster's workers
(align.fitting.measuring.rows_tasks, as the store route's `--workers` runs them:
tests/integration/test_fit_rows_cluster.py), on the run's `loopback_cluster` (a `dask
scheduler` and two `dask worker` processes, shared with the other files that fit on one);
every array of mknn, cknna and rsa and every calibration array of cka equals the one-process
`--live` fit's within 1e-12 (the same batches give the same sampled rows, bit for bit, so
only the order of the row measures' work differs, and it changes no number). The scheduler's
task stream shows the `row-*` tasks ran on both workers. The one-process arrays are checked
against references that never import align in
tests/integration/test_fit_live_cluster_measures.py and tests/unit/test_measures_rows.py."""

from __future__ import annotations

import pytest

from align.fitting import Execution
from tests.integration.test_fit_live import live_fit
from tests.integration.test_fit_rows_cluster import OPTIONS, assert_same_row_measures

ROW_TASKS = ("row-prepare", "row-values", "row-null", "row-interval")


@pytest.mark.slow  # two live fits, one on the cluster's two worker processes
def test_live_row_measures_on_the_workers_equal_one_process(zoo, corpus_file, loopback_cluster):
    from dask.utils import key_split
    from distributed import Client, get_task_stream

    here = live_fit(zoo, corpus_file, "qwen2", "float32", **OPTIONS).dataset
    with Client(loopback_cluster) as client:
        with get_task_stream(client) as stream:
            run = Execution(scheduler=loopback_cluster)
            there = live_fit(zoo, corpus_file, "qwen2", "float32", run=run, **OPTIONS).dataset
        workers = set(client.scheduler_info()["workers"])
    ran = {}
    for t in stream.data:
        ran.setdefault(key_split(t["key"]), set()).add(t["worker"])
    for kind in ROW_TASKS:
        assert ran.get(kind, set()) <= workers and ran.get(kind), (kind, ran)
    assert set().union(*(ran[k] for k in ROW_TASKS)) == workers, ran
    assert there.attrs["options"]["device"] == "cluster"
    assert_same_row_measures(there, here)
