"""`align fit --live --scheduler ADDRESS --measures`: the similarity measures of a live fit on
a real Dask cluster (a `dask scheduler` and two `dask worker` processes on loopback, started
once for the files that fit on one: `loopback_cluster`). The streamed measures'
held-out sums come from the workers' held-out shards; the sampled rows of the row measures
and the calibration are kept by the held-out shards that forward them and gathered through
the tree.

- every streamed measure, held-out Procrustes, the row measures and the calibration together,
  with the document bootstrap: every array (values, `_low`, `_high`, `_sampled`, `_null_mean`,
  `_null_std`, `_calibrated`, `_p`, `_p_family`) equals the one-process `--live` fit's within
  1e-10 relative (the same batches, the same bits), in one pass and in a pass per target
  boundary, and the cluster's values equal the references from the stores' rows: every
  streamed measure on every held-out row (tests/helpers/measures_reference.py, 1e-8, as
  tests/integration/test_fit_measures.py checks the one-process route), held-out Procrustes
  with the rotation of the training rows (1e-8) and its calibration on the documented draw of
  M rows and the documented re-pairings (1e-8; its null computed by the workers' tasks), `_sampled`, mknn and rsa on that draw (1e-6,
  the tolerance of the store route's check of the sample; rsa away from boundary 0, whose rows
  of one repeated token are equal: their correlation distances are 0 up to rounding, and two
  implementations rank those tied zeros differently, 2e-5 apart in rsa at 0 -> 0);
- a char-anchor pair (two tokenizers) on the cluster equals the one-process `--live` fit
  within 1e-10 relative on every measure array; held-out Procrustes away from boundary 0: there
  the 450 training rows of this pair's embeddings give a C_t = X_tᵀY_t of rank below the width
  (its smallest singular values 1e-16 of its largest, measured), so its rotation is not unique
  (docs/methods.md) and the two sums' rounding picks another one, 8e-4 apart in the error."""

from __future__ import annotations

import numpy as np
import pytest

from align.fitting import Execution, FitSpec
from tests.helpers.measures_reference import MEASURES as REFERENCE
from tests.helpers.measures_reference import procrustes_heldout
from tests.integration import test_fit_live_anchors as anchored
from tests.integration.test_fit_live import live_fit, live_stores
from tests.integration.test_fit_measures import STREAMED, _heldout, _read
from tests.integration.test_fit_procrustes_heldout import _training, check_calibration
from tests.unit.test_measures_rows import ref_mknn, ref_rsa

SAME = 1e-10  # cluster against one process: the same rows, summed in another order
RTOL = 1e-8  # against the references on every held-out row (test_fit_measures.py)
SAMPLED_RTOL = 1e-6  # against the references on the sampled rows (test_fit_measures.py)
M = 150  # sampled held-out rows
K = 4  # neighbours of mknn
OPTIONS = dict(
    measures="cka,cka-debiased,procrustes,procrustes-heldout,cca,svcca,mknn,rsa",
    permutations=9,
    bootstrap=100,
    alphas=[1e-2],
    sample_rows=M,
    neighbours=K,
    target_boundaries="0,2,4",
    test_fraction=0.4,  # enough held-out documents for the jackknife's groups (3 or more)
)
FIELDS = ("", "_low", "_high", "_sampled", "_null_mean", "_null_std", "_calibrated", "_p")
FIELDS += ("_p_family",)


@pytest.fixture(scope="module")
def stores(extracted):
    S, T = live_stores(extracted)
    return _read(S), _read(T)


@pytest.fixture(scope="module")
def both(zoo, corpus_file, loopback_cluster):
    """(one process, cluster) live fits of every kind of measure."""
    one = live_fit(zoo, corpus_file, "qwen2", "float32", **OPTIONS).dataset
    on = live_fit(
        zoo, corpus_file, "qwen2", "float32", run=Execution(scheduler=loopback_cluster), **OPTIONS
    ).dataset
    return one, on


def _measure_arrays(ds) -> list:
    return sorted(
        v
        for v in ds.data_vars
        if any(v.startswith(m.replace("-", "_")) for m in OPTIONS["measures"].split(","))
    )


def test_every_measure_array_on_the_cluster_equals_one_process(both):
    one, on = both
    assert on.attrs["options"]["device"] == "cluster" and one.attrs["options"]["device"] == "cpu"
    names = _measure_arrays(one)
    want = {
        f"{m.replace('-', '_')}{f}"
        for m in (*STREAMED, "procrustes-heldout", "mknn", "rsa")
        for f in FIELDS
        if not (f == "_sampled" and m in ("mknn", "rsa"))
    } | {
        f"{m.replace('-', '_')}_left_out" for m in (*STREAMED, "procrustes-heldout", "mknn", "rsa")
    }
    assert set(names) == want == set(_measure_arrays(on))
    for v in names:
        assert np.isfinite(one[v].values).all(), v
        np.testing.assert_allclose(on[v].values, one[v].values, rtol=SAME, atol=0, err_msg=v)
    for v in ("relative_error", "r2", "alpha"):
        np.testing.assert_allclose(on[v].values, one[v].values, rtol=SAME, atol=0, err_msg=v)
    assert on.attrs["options"]["sampled_rows"] == one.attrs["options"]["sampled_rows"]
    assert on.attrs["summary"]["measures"] == one.attrs["summary"]["measures"]


def test_one_target_boundary_a_pass_on_the_cluster_equals_one_process(
    both, zoo, corpus_file, loopback_cluster, monkeypatch
):
    """The cluster's plan cut into a pass per target boundary (a worker budget that holds one
    is what makes such a plan; here the plan is replaced, which the workers never see): the
    sampled rows of the source come with the first pass, the target's with each."""
    from align.fitting.live_route import pipeline as live

    planned = live.make_plan

    def one_a_pass(*args, **kw):
        plan = planned(*args, **kw)
        plan.blocks = [(j,) for block in plan.blocks for j in block]
        return plan

    monkeypatch.setattr(live, "make_plan", one_a_pass)
    one, _ = both
    report = live_fit(
        zoo, corpus_file, "qwen2", "float32", run=Execution(scheduler=loopback_cluster), **OPTIONS
    )
    assert report.plan["passes"] == 3
    names = _measure_arrays(one)
    assert names == _measure_arrays(report.dataset)
    for v in names:
        got = report.dataset[v].values
        np.testing.assert_allclose(got, one[v].values, rtol=SAME, atol=0, err_msg=v)


def test_the_cluster_measures_equal_references_from_the_stores(both, stores):
    _, ds = both
    (X, doc, pos), (Y, *_) = stores
    test, train = _heldout(ds, doc, pos), _training(ds, doc, pos)
    held = np.flatnonzero(test)
    rows = held[np.sort(np.random.default_rng(0).choice(len(held), M, replace=False))]
    assert ds.attrs["options"]["sampled_rows"]["rows"] == M
    for i in ds.source_boundary.values:
        for j in ds.target_boundary.values:
            x, y = X[int(i)], Y[int(j)]
            cell = ds.sel(source_boundary=i, target_boundary=j)
            at = f"{i}->{j}"
            for name in STREAMED:
                v = name.replace("-", "_")
                want = REFERENCE[name](x[test], y[test])
                np.testing.assert_allclose(float(cell[v]), want, rtol=RTOL, err_msg=f"{name} {at}")
                want = REFERENCE[name](x[rows], y[rows])
                got = float(cell[v + "_sampled"])
                np.testing.assert_allclose(got, want, rtol=SAMPLED_RTOL, err_msg=f"{name} {at}")
            want = procrustes_heldout(x[train], y[train], x[test], y[test])
            np.testing.assert_allclose(float(cell.procrustes_heldout), want, rtol=RTOL, err_msg=at)
            want = ref_mknn(x[rows], y[rows], K)
            np.testing.assert_allclose(float(cell.mknn), want, rtol=SAMPLED_RTOL, err_msg=at)
            if i == 0 or j == 0:  # see the module's docstring
                continue
            want = ref_rsa(x[rows], y[rows])
            np.testing.assert_allclose(float(cell.rsa), want, rtol=SAMPLED_RTOL, err_msg=at)
    check_calibration(ds, X, Y, doc, pos, M, OPTIONS["permutations"])


def test_a_char_anchor_pair_on_the_cluster_equals_one_process(zoo, corpus_file, loopback_cluster):
    from align.fitting.live_route import pipeline as live

    job = anchored.job_of(zoo, corpus_file, "float32")
    options = {k: v for k, v in OPTIONS.items() if k != "sample_rows"}  # every held-out row
    spec = FitSpec(**dict(options, alphas=anchored.ALPHAS))
    quiet = lambda m: None  # noqa: E731
    one = live.fit_live(job, None, spec, log=quiet).dataset
    on = live.fit_live(job, None, spec, Execution(scheduler=loopback_cluster), log=quiet).dataset
    assert on.attrs["pairing"]["mode"] == "char-anchors" == one.attrs["pairing"]["mode"]
    names = _measure_arrays(one)
    assert names == _measure_arrays(on) and "rsa_p_family" in names and "cka_low" in names
    for v in names:
        got, want = on[v], one[v]
        if v.startswith("procrustes_heldout"):  # see the module's docstring
            assert ((got >= 0) & (got <= 2)).all(), v
            got, want = (
                a.sel(source_boundary=slice(1, None), target_boundary=slice(1, None))
                for a in (got, want)
            )
        np.testing.assert_allclose(got.values, want.values, rtol=SAME, atol=0, err_msg=v)


def test_the_shuffle_control_on_the_cluster_equals_one_process(zoo, corpus_file, loopback_cluster):
    """`--live --control shuffle --scheduler`: the shards forward the same target batches (per
    grouping window of the source, in the order it reads them), so every array equals the
    one-process shuffled fit within 1e-10 relative, and the shuffle is the store route's (the
    same split and token counts as test_fit_measures.py's check against the stores)."""
    spec = dict(
        control="shuffle",
        measures="cka,rsa",
        permutations=9,
        sample_rows=M,
        bootstrap=0,
        alphas=[1e-2],
        source_boundaries="2",
        target_boundaries="4",
    )
    one = live_fit(zoo, corpus_file, "qwen2", "float32", **spec).dataset
    on = live_fit(
        zoo, corpus_file, "qwen2", "float32", run=Execution(scheduler=loopback_cluster), **spec
    ).dataset
    assert on.attrs["options"]["control"] == "shuffle" == one.attrs["options"]["control"]
    assert on.attrs["split"] == one.attrs["split"]
    names = _measure_arrays(one) + ["relative_error", "r2"]
    assert "rsa_calibrated" in names and "cka" in names
    for v in names:
        np.testing.assert_allclose(on[v].values, one[v].values, rtol=SAME, atol=0, err_msg=v)
