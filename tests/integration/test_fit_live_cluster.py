"""`align fit --live --scheduler ADDRESS`: document shards on the workers of a real Dask
cluster (a `dask scheduler` and two `dask worker` processes on loopback, `loopback_cluster`,
each worker loading both models), their sums added in a tree fixed by shard index. The result
equals the store route's (`align extract` × 2 + `align fit`) to the tolerances of
tests/integration/test_fit_live.py, for one token stream and for two tokenizers (anchors paired
on the fly on the workers, shards cut between grouping windows:
tests/integration/test_fit_live_anchors.py)."""

from __future__ import annotations

from align.store import open_result
from tests.integration import test_fit_live_anchors as anchored
from tests.integration.test_fit_live import BIG, CORPUS, assert_same_result, store_fit


def test_live_on_two_dask_workers_equals_the_store_route(
    zoo, extracted, corpus_file, cli, tmp_path, loopback_cluster
):
    S = extracted("qwen2", **CORPUS)
    T = extracted("qwen2", model_overrides=BIG, **CORPUS)
    want = store_fit(S, T)
    A = extracted("qwen2", **anchored.CORPUS)
    B = extracted("qwen2", model_overrides=anchored.OTHER, **anchored.CORPUS)
    want_anchored = store_fit(A, B, alphas=anchored.ALPHAS)
    out, out_anchored = tmp_path / "a.zarr", tmp_path / "b.zarr"
    code, _, err = cli(
        "fit",
        "--live",
        zoo("qwen2"),
        zoo("qwen2", **BIG),
        corpus_file,
        "-o",
        out,
        "--scheduler",
        loopback_cluster,
        "--max-length",
        CORPUS["max_length"],
        "--batch-size",
        CORPUS["batch_size"],
    )
    assert code == 0, err
    code, _, err_anchored = cli(
        "fit",
        "--live",
        zoo("qwen2"),
        zoo("qwen2", **anchored.OTHER),
        corpus_file,
        "-o",
        out_anchored,
        "--scheduler",
        loopback_cluster,
        "--max-length",
        anchored.CORPUS["max_length"],
        "--batch-size",
        anchored.CORPUS["batch_size"],
        "--overflow",
        "truncate",
        "--alphas",
        ",".join(map(str, anchored.ALPHAS)),
    )
    assert code == 0, err_anchored
    assert (
        "on 2 Dask worker(s), each loading both models" in err
        and "held-out rows scored by a second forward" in err
    )
    got = open_result(str(out), "alignment")
    assert got.attrs["route"] == "live" and got.attrs["options"]["device"] == "cluster"
    assert_same_result(want, got)
    assert (
        "pairing char-anchors" in err_anchored
        and "2 shard(s) of the training batches" in err_anchored
    )
    got = open_result(str(out_anchored), "alignment")
    assert_same_result(want_anchored, got)
    assert got.attrs["pairing"] == want_anchored.attrs["pairing"]
