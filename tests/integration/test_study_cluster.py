"""The two-model study on a Dask cluster of two worker processes, one declaring the GPU
resource (faked on the CPU with `[route] gpu_resource`; the run's `loopback_cluster`, whose
first worker declares it and which the fits' cluster tests share): every unit that runs a model or a
fit lands on that worker, the others anywhere; the stores and the fit equal the single
commands' bit for bit, and the same study run here afterwards has nothing left to run."""

from __future__ import annotations

import json

import numpy as np

from align.fitting import FitSpec
from tests.helpers.fixtures_study import study_text

GPU_UNITS = {"extract a", "extract b", "fit a->b", "contrib a", "lens a"}


def test_units_land_where_their_resources_say(
    zoo, corpus_file, fit_pair, tmp_path, loopback_cluster
):
    import align
    from align.store import open_activations, open_result
    from align.study import load_study, run_study

    text = study_text(zoo, corpus_file, "[route]\ngpu_resource = true\n", models=("a", "b"))
    path = tmp_path / "cluster.toml"
    path.write_text(text.replace("analyses = []", 'analyses = ["depth"]'), encoding="utf-8")
    root = str(tmp_path / "out")
    study = load_study(str(path))
    from distributed import Client

    with Client(loopback_cluster) as c:  # its first worker declares GPU=1
        gpu_worker = next(
            a for a, w in c.scheduler_info()["workers"].items() if w["resources"].get("GPU")
        )
    report = run_study(study, root, scheduler=loopback_cluster, log=lambda m: None)
    assert sorted(report.ran) == sorted(GPU_UNITS | {"depth a", "report"})
    units = json.loads((tmp_path / "out" / "study.json").read_text())["units"]
    assert {n for n, u in units.items() if u["worker"] == gpu_worker} >= GPU_UNITS
    assert all(u["state"] == "done" for u in units.values())

    for name, single in zip("ab", fit_pair):
        mine, theirs = open_activations(f"{root}/stores/{name}.zarr"), open_activations(single)
        for b in mine.boundaries:
            np.testing.assert_array_equal(mine.resid(b), theirs.resid(b))
    expected = align.fit(*fit_pair, None, FitSpec(bootstrap=200), log=lambda m: None).dataset
    result = open_result(f"{root}/results/fits/a--b.zarr")
    for name in expected.data_vars:
        np.testing.assert_array_equal(result[name].values, expected[name].values, err_msg=name)
    assert run_study(study, root, log=lambda m: None).ran == []
