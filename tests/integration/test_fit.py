"""`align fit` end to end, against scikit-learn on the same tokens.

The references read the stores with zarr directly and fit with scikit-learn in float64;
metrics must agree to rtol 1e-6 + atol 1e-9 (the issue's bound). Runs use the in-process
synchronous scheduler except where the scheduler itself is under test."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr
import zarr

from align.fitting import Execution, FitSpec
from align.fitting.fit_options import FitHooks
from tests.helpers.assertions import one_line_error
from tests.helpers.fixtures_fit import TOKENIZER, token_table
from tests.helpers.references import (
    alpha_scale,
    chosen_alpha,
    heldout_scores,
    ridge_val_sse,
    sklearn_ridge,
)

RTOL, ATOL = 1e-6, 1e-9


def _read(path):
    """(resid {boundary: float64 (N, d)}, doc, pos, token_id) straight from the Zarr group."""
    g = zarr.open_group(path, mode="r")
    assert g.attrs["layout"]["store_dtype"] == "float32"
    bounds = [int(b) for b in g["boundary"][:]]
    resid = {b: np.asarray(g["resid"][k], dtype=np.float64) for k, b in enumerate(bounds)}
    return resid, g["doc"][:], g["pos"][:], g["token_id"][:]


SYNC = Execution(scheduler="synchronous")


def _fit(source, target, output, spec=None, run=SYNC, hooks=None, log=None):
    """align.fit in this process (`SYNC`, unless `run` says otherwise), its log discarded
    unless `log` takes it."""
    import align

    log = log or (lambda m: None)
    return align.fit(source, target, output, spec, run, hooks=hooks, log=log)


def test_every_metric_and_alpha_equal_sklearn(fit_pair, tmp_path):
    S, T = fit_pair
    out = str(tmp_path / "a.zarr")
    _fit(S, T, out, None, Execution(scheduler="synchronous", task_tokens=300))
    ds = xr.open_zarr(out)  # the result opens in plain xarray
    X, doc, pos, _ = _read(S)
    Y, *_ = _read(T)
    split = ds.attrs["split"]
    fit_d, val_d, test_d = (
        np.array(split[k]) for k in ("fit_docs", "validation_docs", "heldout_docs")
    )
    assert sorted(np.r_[fit_d, val_d, test_d].tolist()) == sorted(
        np.unique(doc).tolist()
    )  # a partition
    assert ds["heldout_doc"].values.tolist() == test_d.tolist()
    use = pos != 0
    fit_r, val_r, test_r = (np.isin(doc, d) & use for d in (fit_d, val_d, test_d))
    train_r = fit_r | val_r
    assert ds.attrs["options"]["alphas"] == [10.0**k for k in range(-6, 2)]
    for i in ds.source_boundary.values:
        for j in ds.target_boundary.values:
            cell = ds.sel(source_boundary=i, target_boundary=j)
            # the grid this pair was scored on (the default, extended by decades where an end won: --alphas auto)
            curve = cell.val_sse.values
            grid = ds.alpha_grid.values[np.isfinite(curve)]
            assert all(
                np.isclose(grid, 10.0**k, rtol=1e-12).any() for k in range(-6, 2)
            )  # the default grid is in it
            # α: brute force over the grid, each α scored by its validation squared error
            sse = ridge_val_sse(X[i][fit_r], Y[j][fit_r], X[i][val_r], Y[j][val_r], grid)
            # the closed form is a difference of terms of the size of the validation variance: absolute rounding
            np.testing.assert_allclose(
                curve[np.isfinite(curve)],
                sse,
                rtol=1e-6,
                atol=1e-9 * sse.max(),
                err_msg=f"val_sse at ({i}, {j})",
            )
            # ties: within 1e-12 of the validation variance about the fit mean (below it the closed form is rounding)
            k = chosen_alpha(sse, Y[j][fit_r], Y[j][val_r])
            assert float(cell.alpha_rel) == pytest.approx(grid[k], rel=1e-12), (i, j, sse)
            # final fit on all training tokens with the recorded absolute α, scored on held-out tokens
            r = sklearn_ridge(X[i][train_r], Y[j][train_r], float(cell.alpha))
            np.testing.assert_allclose(
                float(cell.alpha), float(cell.alpha_rel) * alpha_scale(X[i][train_r]), rtol=1e-10
            )
            want = heldout_scores(r.predict(X[i][test_r]), Y[j][test_r])
            for name, v in want.items():
                np.testing.assert_allclose(
                    float(cell[name]), v, rtol=RTOL, atol=ATOL, err_msg=f"{name} at ({i}, {j})"
                )


def test_cli_result_schema_and_python_entry_point(fit_pair, tmp_path, cli):
    import align
    import align.fitting  # noqa: F401  (align.fit must stay the function after the package is imported)

    S, T = fit_pair
    out = str(tmp_path / "cli.zarr")
    code, _, err = cli(
        "fit", S, T, "-o", out, "--scheduler", "synchronous", "--alphas", "1e-3,1e-1", "--seed", "3"
    )
    assert code == 0, err
    ds = align.open_alignment(out)
    assert set(ds.data_vars) >= {"relative_error", "norm_error", "r2", "alpha", "alpha_rel"}
    assert ds["heldout_doc"].dims == ("heldout_doc",)
    assert ds.relative_error.dims == ("source_boundary", "target_boundary")
    assert ds.source_boundary.values.tolist() == [
        0,
        1,
        2,
    ] and ds.target_boundary.values.tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(ds.source_depth.values, np.array([0, 1, 2]) / 2)
    np.testing.assert_array_equal(ds.target_depth.values, np.array([0, 1, 2, 3, 4]) / 4)
    a = ds.attrs
    assert (a["n_layers_source"], a["n_layers_target"]) == (2, 4)
    assert a["source"]["tokenizer_hash"] == a["target"]["tokenizer_hash"]
    assert a["options"]["seed"] == 3 and a["options"]["alphas"] == [1e-3, 1e-1]
    s = a["summary"]
    assert s["source_boundaries"] == [1, 2] and s["target_boundaries"] == [1, 2, 3, 4]
    err = ds.relative_error.values
    assert s["argmin_path"] == [int(1 + np.argmin(err[i, 1:])) for i in (1, 2)]
    assert len(s["soft_depth"]) == 2 and np.isfinite(s["soft_depth_spread"])
    # the Python entry point gives the same numbers
    again = align.fit(
        S,
        T,
        None,
        FitSpec(alphas=[1e-3, 1e-1], seed=3),
        Execution(scheduler="synchronous"),
        log=lambda m: None,
    ).dataset
    np.testing.assert_array_equal(again.relative_error.values, err)


def test_known_answers_self_fit_is_the_identity(fit_pair):
    S, _ = fit_pair
    ds = _fit(S, S, None, FitSpec(alphas=[1e-9])).dataset
    # x ↦ x with a ridge of 1e-9 mean eigenvalues: what remains is float32/float64 rounding
    assert np.all(np.diag(ds.relative_error.values) < 1e-4), ds.relative_error.values


def _affine_pair(synthetic, n_docs=24, doc_len=500, d_s=8, d_t=6):
    rng = np.random.default_rng(7)
    tok = token_table(n_docs, doc_len)
    N = len(tok["doc"])
    X = rng.normal(size=(2, N, d_s)) * rng.uniform(0.5, 4, size=d_s) + 10.0
    A, b = rng.normal(size=(d_s, d_t)), rng.normal(size=d_t) * 5
    Y = np.stack(
        [rng.normal(size=(N, d_t)) + 3.0, X[1] @ A + b]
    )  # boundary 0 unrelated, 1 affine in source 1
    return synthetic(X, tok, n_layers=1), synthetic(Y, tok, n_layers=1), N


def test_known_answers_affine_and_unrelated(synthetic):
    S, T, N = _affine_pair(synthetic)
    ds = _fit(S, T, None, FitSpec(alphas=[1e-8, 1e-4, 1e-1])).dataset
    err, r2 = ds.relative_error.values, ds.r2.values
    assert err[1, 1] < 1e-5, err  # exact affine map (up to the float32 store): ≈ 0
    n_train = sum(ds.attrs["options"]["n_tokens"][k] for k in ("fit", "validation"))
    d_s = 8
    assert n_train > 50 * d_s
    for i in (0, 1):  # an unrelated target: |r2| < 5 d_S / n
        assert abs(r2[i, 0]) < 5 * d_s / n_train, r2


def _refusal(cli, tmp_path, source, target, *options):
    code, out, err = cli(
        "fit",
        source,
        target,
        "-o",
        str(tmp_path / "r.zarr"),
        "--scheduler",
        "synchronous",
        *options,
    )
    assert code == 2
    line = one_line_error(code, err)
    assert not os.path.exists(tmp_path / "r.zarr")
    return line


@pytest.fixture(scope="module")
def small_pair(synthetic):
    tok = token_table(6, 40)
    X = np.random.default_rng(0).normal(size=(2, len(tok["doc"]), 4))
    return tok, X, synthetic(X, tok, n_layers=1)


def test_refuses_token_ids_that_differ(small_pair, synthetic, cli, tmp_path):
    tok, X, S = small_pair
    other = dict(tok, token_id=tok["token_id"].copy())
    other["token_id"][77] += 1
    msg = _refusal(cli, tmp_path, S, synthetic(X, other, n_layers=1))
    assert "token 77 is id" in msg and "same token stream" in msg
    shorter = {k: v[:200] for k, v in tok.items()}
    msg = _refusal(cli, tmp_path, S, synthetic(X[:, :200], shorter, n_layers=1))
    assert "has 200 tokens" in msg and "has 240" in msg


@pytest.mark.parametrize(
    "part,word", [("vocab", "vocabulary"), ("merges", "merges"), ("added_tokens", "added tokens")]
)
def test_refuses_tokenizers_that_differ(small_pair, synthetic, cli, tmp_path, part, word):
    tok, X, S = small_pair
    msg = _refusal(
        cli,
        tmp_path,
        S,
        synthetic(X, tok, tokenizer={**TOKENIZER, part: "other"}, n_layers=1),
        "--pairing",
        "tokens",
    )
    assert f"differ in {word}: --pairing tokens needs one token stream" in msg


def test_refuses_incomplete_and_non_activation_stores(
    small_pair, synthetic, cli, tmp_path, fit_pair
):
    tok, X, S = small_pair
    partial = synthetic(X, tok, complete=False, n_layers=1)
    msg = _refusal(cli, tmp_path, S, partial)
    assert partial in msg and "incomplete" in msg and "0 of 240 tokens" in msg
    result = str(tmp_path / "res.zarr")
    _fit(*fit_pair, result, FitSpec(alphas=[1e-2]))
    msg = _refusal(cli, tmp_path, result, S)
    assert result in msg and "schema 'alignment'" in msg and "not an activation store" in msg


def test_memory_budget_blocks_the_grid_with_equal_results(fit_pair):
    from align.fitting.planning.budget import block_bytes

    S, T = fit_pair
    one = _fit(
        S,
        T,
        None,
        FitSpec(alphas=[1e-3, 1e-1]),
        Execution(scheduler="synchronous", task_tokens=300),
    )
    assert len(one.blocks) == 1
    # a per-worker budget just below what the whole 3x5 grid needs with (fixed) 300-token tasks
    from align.store import open_activations

    C = open_activations(S).chunk_tokens
    many = _fit(
        S,
        T,
        None,
        FitSpec(alphas=[1e-3, 1e-1]),
        Execution(scheduler="synchronous", task_tokens=300),
        hooks=FitHooks(worker_budget=block_bytes(3, 5, 64, 96, 300, C) - 1),
    )
    assert many.dataset.attrs["options"]["task_tokens"] == 300 and len(many.blocks) > 1
    pairs = sorted((i, j) for I, J in many.blocks for i in I for j in J)
    assert pairs == sorted((i, j) for i in range(3) for j in range(5))  # every pair once
    for name in ("relative_error", "norm_error", "r2", "alpha"):
        np.testing.assert_allclose(
            many.dataset[name].values, one.dataset[name].values, rtol=1e-12, atol=0
        )


def test_tight_budget_shrinks_tokens_per_task_before_blocks():
    from align.fitting.planning.budget import PairGrid, block_bytes, plan_blocks

    src, tgt, N, C = list(range(9)), list(range(13)), 40_960, 4096

    def need(nI, nJ, t):  # the whole grid's bytes with t-token tasks (N / t of them)
        return block_bytes(nI, nJ, 256, 384, t, C, -(-N // t))

    blocks, step = plan_blocks(PairGrid(src, tgt, 256, 384), C, need(9, 13, C), C, n_tokens=N)
    assert (
        blocks == [(tuple(src), tuple(tgt))] and step == C
    )  # room for everything: one block, whole chunks
    # halving the tasks saves rows but deepens the reduction tree (one more accumulator)
    budget = need(9, 13, 2048)
    assert budget < need(9, 13, C)
    blocks, step = plan_blocks(PairGrid(src, tgt, 256, 384), C, budget, C, n_tokens=N)
    assert (
        blocks == [(tuple(src), tuple(tgt))] and step == 2048
    )  # tasks shrank, the grid did not split
    blocks, step = plan_blocks(
        PairGrid(src, tgt, 256, 384),
        C,
        min(need(9, 13, t) for t in (256, 512, 1024, 2048, C)) - 1,
        C,
        n_tokens=N,
    )
    assert len(blocks) > 1  # only when no task size fits does the grid split
    assert sorted((i, j) for I, J in blocks for i in I for j in J) == [
        (i, j) for i in src for j in tgt
    ]
    assert (
        plan_blocks(
            PairGrid(src, tgt, 256, 384),
            C,
            min(need(1, 1, t) for t in (256, 512, 1024, 2048, C)) - 1,
            C,
            n_tokens=N,
        )
        is None
    )


def test_memory_limit_too_small_is_refused_naming_the_minimum(fit_pair, cli, tmp_path):
    import re

    S, T = fit_pair
    code, _, err = cli(
        "fit",
        S,
        T,
        "-o",
        str(tmp_path / "m.zarr"),
        "--scheduler",
        "synchronous",
        "--memory-limit",
        "1MB",
        "--bootstrap",
        0,
    )  # the fit's own minimum: the bootstrap's share has its own refusal (test_bootstrap_limits)
    assert code == 2
    one_line_error(code, err, "--memory-limit 976.6 KiB is too small", "the minimum is")
    assert not os.path.exists(tmp_path / "m.zarr")
    # the minimum it names (plus 5% for the noise of measuring this process) is enough
    num, unit = re.search(r"the minimum is ([0-9.]+) (MiB|GiB)", err).groups()
    minimum = float(num) * {"MiB": 2**20, "GiB": 2**30}[unit]
    _fit(
        S,
        T,
        None,
        FitSpec(alphas=[1e-2]),
        Execution(scheduler="synchronous", memory_limit=int(minimum * 1.05)),
    )


def test_layer_subsets_and_saved_maps_equal_sklearn(fit_pair):
    S, T = fit_pair
    full = _fit(S, T, None, FitSpec(alphas=[1e-2, 1.0])).dataset
    sub = _fit(
        S,
        T,
        None,
        FitSpec(
            alphas=[1e-2, 1.0], source_boundaries="1:", target_boundaries="::2", save_maps=True
        ),
    ).dataset
    assert sub.source_boundary.values.tolist() == [
        1,
        2,
    ] and sub.target_boundary.values.tolist() == [0, 2, 4]
    np.testing.assert_allclose(
        sub.relative_error.values,
        full.relative_error.sel(source_boundary=[1, 2], target_boundary=[0, 2, 4]).values,
        rtol=1e-12,
    )
    X, doc, pos, _ = _read(S)
    Y, *_ = _read(T)
    split = sub.attrs["split"]
    train = np.isin(doc, split["fit_docs"] + split["validation_docs"]) & (pos != 0)
    r = sklearn_ridge(
        X[2][train], Y[4][train], float(sub.alpha.sel(source_boundary=2, target_boundary=4))
    )
    np.testing.assert_allclose(
        sub.W.sel(source_boundary=2, target_boundary=4).values, r.coef_.T, rtol=RTOL, atol=ATOL
    )
    np.testing.assert_allclose(
        sub.c.sel(source_boundary=2, target_boundary=4).values, r.intercept_, rtol=RTOL, atol=ATOL
    )


def test_include_first_token_changes_the_token_set(fit_pair):
    S, T = fit_pair
    a = _fit(
        S, T, None, FitSpec(alphas=[1e-2], source_boundaries="1", target_boundaries="1")
    ).dataset
    b = _fit(
        S,
        T,
        None,
        FitSpec(
            alphas=[1e-2], source_boundaries="1", target_boundaries="1", include_first_token=True
        ),
    ).dataset
    _, doc, pos, _ = _read(S)
    test = np.isin(doc, a.attrs["split"]["heldout_docs"])
    assert a.attrs["options"]["n_tokens"]["heldout"] == int((test & (pos != 0)).sum())
    assert b.attrs["options"]["n_tokens"]["heldout"] == int(test.sum())


# -- the same statistics under any scheduler ---------------------------------------------


def _assert_bitwise(a, b):
    assert a.keys() == b.keys()
    for blk in a:
        sa, sb = a[blk], b[blk]
        assert (sa.source, sa.target) == (sb.source, sb.target)
        assert np.array_equal(sa.n, sb.n)
        for key in ("sx", "xx", "sy", "yy", "xy"):
            assert getattr(sa, key).shape == getattr(sb, key).shape
            assert getattr(sa, key).tobytes() == getattr(sb, key).tobytes(), (blk, key)


def _linear_pair(synthetic, seed: int, boundary: int):
    """Stores of 16 documents of 300 tokens: a source of 3 boundaries (d 24) and a target of
    2 (d 16), each a linear map of source `boundary` plus noise."""
    tok = token_table(16, 300)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(3, len(tok["doc"]), 24)) * 3 + 1
    Y = np.stack(
        [
            X[boundary] @ rng.normal(size=(24, 16)) + rng.normal(size=(len(tok["doc"]), 16))
            for _ in range(2)
        ]
    )
    return synthetic(X, tok, n_layers=2), synthetic(Y, tok, n_layers=1)


@pytest.mark.slow
def test_statistics_bitwise_equal_under_every_scheduler(synthetic, loopback_cluster, tmp_path, cli):
    S, T = _linear_pair(synthetic, 3, 1)
    spec, keep = FitSpec(alphas=[1e-3, 1e-1]), FitHooks(keep_statistics=True)
    sync = _fit(S, T, None, spec, Execution(scheduler="synchronous", task_tokens=256), keep)
    local_run = Execution(scheduler=None, n_workers=2, memory_limit="3GB", task_tokens=256)
    local = _fit(S, T, None, spec, local_run, keep)
    remote = _fit(S, T, None, spec, Execution(scheduler=loopback_cluster, task_tokens=256), keep)
    assert len(local.workers) >= 2 and len(remote.workers) >= 2, (local.workers, remote.workers)
    for other in (local, remote):
        _assert_bitwise(sync.statistics, other.statistics)
        for name in ("relative_error", "norm_error", "r2", "alpha"):
            np.testing.assert_allclose(
                other.dataset[name].values, sync.dataset[name].values, rtol=1e-10, atol=1e-12
            )
    # and through the command line, on the same external cluster
    out = str(tmp_path / "remote.zarr")
    code, _, err = cli(
        "fit",
        S,
        T,
        "-o",
        out,
        "--scheduler",
        loopback_cluster,
        "--alphas",
        "1e-3,1e-1",
        "--task-tokens",
        "256",
    )
    assert code == 0, err
    np.testing.assert_allclose(
        xr.open_zarr(out).relative_error.values, sync.dataset.relative_error.values, rtol=1e-10
    )


@pytest.mark.slow
def test_a_large_fit_runs_its_products_through_torch_with_the_same_statistics_under_every_scheduler(
    synthetic, monkeypatch
):
    """A fit above SMALL_FIT_FLOPS takes torch's products on the CPU (set to 0 here, so that
    this small one does): the same bits in threads of this process (the default), in this
    process alone and on a local cluster of 2; against the numpy route the same fit within
    1e-10 (the float64 sums differ in order only)."""
    from align.fitting.store_route import pipeline as stores

    S, T = _linear_pair(synthetic, 5, 2)
    spec, keep = FitSpec(alphas=[1e-3, 1e-1]), FitHooks(keep_statistics=True)
    sync_run = Execution(scheduler="synchronous", task_tokens=256)
    numpy_route = _fit(S, T, None, spec, sync_run, keep)
    monkeypatch.setattr(stores, "SMALL_FIT_FLOPS", 0.0)
    local_run = Execution(scheduler=None, n_workers=2, memory_limit="3GB", task_tokens=256)
    runs = {
        "threads": _fit(S, T, None, spec, Execution(scheduler=None, task_tokens=256), keep),
        "sync": _fit(S, T, None, spec, sync_run, keep),
        "local": _fit(S, T, None, spec, local_run, keep),
    }
    assert runs["threads"].plan["mode"] == "threads" and runs["local"].plan["mode"] == "local"
    for name, run in runs.items():
        _assert_bitwise(runs["sync"].statistics, run.statistics)
        for key in ("relative_error", "norm_error", "r2", "alpha"):
            np.testing.assert_allclose(
                run.dataset[key].values,
                numpy_route.dataset[key].values,
                rtol=1e-10,
                atol=1e-12,
                err_msg=f"{name} {key}",
            )
    assert numpy_route.plan["products"] == "numpy"
    assert {run.plan["products"] for run in runs.values()} == {"torch"}
