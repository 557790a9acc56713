"""`align fit --live --scheduler ADDRESS`: document shards on the workers of a real Dask
cluster (a `dask scheduler` and two `dask worker` processes on loopback, each worker loading
both models), their sums added in a tree fixed by shard index. The result equals the store
route's (`align extract` × 2 + `align fit`) to the tolerances of tests/integration/test_fit_live.py."""

from __future__ import annotations

from tests.conftest import dask_processes
from tests.integration.test_fit_live import BIG, CORPUS, assert_same_result, store_fit

from align.store import open_result


def test_live_on_two_dask_workers_equals_the_store_route(zoo, extracted, corpus_file, cli, tmp_path):
    S = extracted("qwen2", **CORPUS)
    T = extracted("qwen2", model_overrides=BIG, **CORPUS)
    want = store_fit(S, T)
    out = tmp_path / "a.zarr"
    with dask_processes(2) as addr:
        code, _, err = cli("fit", "--live", zoo("qwen2"), zoo("qwen2", **BIG), corpus_file, "-o", out, "--scheduler", addr,
                           "--max-length", CORPUS["max_length"], "--batch-size", CORPUS["batch_size"])
    assert code == 0, err
    assert "on 2 Dask worker(s), each loading both models" in err and "held-out rows scored by a second forward" in err
    got = open_result(str(out), "alignment")
    assert got.attrs["route"] == "live" and got.attrs["options"]["device"] == "cluster"
    assert_same_result(want, got)
