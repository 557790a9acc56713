"""`align fit --measures`: the streamed similarity measures (CKA, debiased CKA, Procrustes,
CCA, SVCCA) of every boundary pair against references from the held-out rows themselves
(tests/helpers/measures_reference.py, never importing align), within 1e-8 relative: on real
stores of two tiny models of one tokenizer (store route and --live), on a char-anchor pair;
a model against itself (CKA 1, Procrustes 0 on the diagonal); the delete-a-group jackknife
interval against numpy on the rows without each group and the textbook's formula; the CLI's
option and refusal."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
import xarray as xr
import zarr

from align.fitting import Execution, FitSpec
from align.fitting.fit_options import FitHooks
from tests.helpers.assertions import one_line_error
from tests.helpers.measures_reference import MEASURES as REFERENCE
from tests.helpers.measures_reference import RANGES, jackknife_interval
from tests.integration.test_fit_anchors import OTHER, _reference_anchors, _residuals, _tables
from tests.integration.test_fit_live import live_fit, live_job, live_stores

RTOL = 1e-8
STREAMED = ("cka", "cka-debiased", "procrustes", "cca", "svcca")
M = 150  # sampled held-out rows of the row measures and the calibration
GROUPS = 10  # held-out document index mod 10 (docs/methods.md)


SYNC = Execution(scheduler="synchronous")


def _fit(source, target, output, spec=None, run=SYNC, hooks=None, log=None):
    """align.fit in this process (`SYNC`, unless `run` says otherwise), its log discarded
    unless `log` takes it."""
    import align

    log = log or (lambda m: None)
    return align.fit(source, target, output, spec, run, hooks=hooks, log=log).dataset


def _read(path):
    g = zarr.open_group(path, mode="r")
    bounds = [int(b) for b in g["boundary"][:]]
    X = {b: np.asarray(g["resid"][k], dtype=np.float64) for k, b in enumerate(bounds)}
    return X, g["doc"][:], g["pos"][:]


def _heldout(ds, doc, pos):
    """The rows scored: tokens of the held-out documents, position 0 left out."""
    return np.isin(doc, ds.attrs["split"]["heldout_docs"]) & (pos != 0)


def _check(ds, X, Y, keep_x, keep_y=None, rtol=RTOL):
    keep_y = keep_x if keep_y is None else keep_y
    for i in ds.source_boundary.values:
        for j in ds.target_boundary.values:
            x, y = X[int(i)][keep_x], Y[int(j)][keep_y]
            for name in STREAMED:
                got = float(ds[name.replace("-", "_")].sel(source_boundary=i, target_boundary=j))
                want = REFERENCE[name](x, y)
                np.testing.assert_allclose(got, want, rtol=rtol, err_msg=f"{name} {i}->{j}")


@pytest.fixture(scope="module")
def store_measures(fit_pair):
    S, T = fit_pair
    return _fit(
        S,
        T,
        None,
        FitSpec(measures=",".join(STREAMED), bootstrap=0, alphas=[1e-2], target_boundaries="0,2,4"),
    )


def test_store_route_equals_references_from_the_rows(fit_pair, store_measures):
    S, T = fit_pair
    ds = store_measures
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    _check(ds, X, Y, _heldout(ds, doc, pos))
    summary = ds.attrs["summary"]["measures"]
    assert summary["cka"]["direction"] == "similarity" == ds["cka"].attrs["direction"]
    assert summary["procrustes"]["direction"] == "distance"
    for name, pick in (("cka", np.argmax), ("procrustes", np.argmin)):
        want = ds.target_boundary.values[pick(ds[name].values, axis=1)].tolist()
        assert summary[name]["path"] == want, name


def test_sampled_rows_are_the_documented_draw_and_carry_the_calibration(fit_pair):
    """The M rows: numpy.random.default_rng(seed).choice(n_heldout, M, replace=False) among the
    held-out rows in token order, sorted; every measure on them (`<measure>_sampled` of a
    streamed one, the value of a row one) against the references; the calibration's arrays."""
    S, T = fit_pair
    ds = _fit(
        S,
        T,
        None,
        FitSpec(
            measures="cka,procrustes,rsa",
            bootstrap=0,
            alphas=[1e-2],
            sample_rows=M,
            permutations=9,
            source_boundaries="1,2",
            target_boundaries="2,4",
        ),
    )
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    held = np.flatnonzero(_heldout(ds, doc, pos))
    rows = held[np.sort(np.random.default_rng(0).choice(len(held), M, replace=False))]
    assert ds.attrs["options"]["sampled_rows"]["rows"] == M
    for i in ds.source_boundary.values:
        for j in ds.target_boundary.values:
            x, y = X[int(i)][rows], Y[int(j)][rows]
            cell = ds.sel(source_boundary=i, target_boundary=j)
            for name in ("cka", "procrustes"):
                want = REFERENCE[name](x, y)
                np.testing.assert_allclose(float(cell[name + "_sampled"]), want, rtol=1e-6)
            for f in ("null_mean", "calibrated", "p", "p_family"):
                assert np.isfinite(float(cell[f"cka_{f}"])), f
            assert 0 < float(cell.cka_p) <= 1 and 0 <= float(cell.cka_calibrated) <= 1


def test_default_fit_is_ridge_alone_and_unchanged(fit_pair, store_measures):
    S, T = fit_pair
    ds = _fit(S, T, None, FitSpec(bootstrap=0, alphas=[1e-2], target_boundaries="0,2,4"))
    assert ds.attrs["options"]["measures"] == ["ridge"] and "cka" not in ds
    assert "measures" not in ds.attrs["summary"]
    for name in ("relative_error", "norm_error", "r2", "alpha"):
        np.testing.assert_array_equal(ds[name].values, store_measures[name].values)


def test_live_route_equals_references_from_the_store(zoo, corpus_file, extracted):
    S, T = live_stores(extracted)
    ds = live_fit(
        zoo,
        corpus_file,
        "qwen2",
        "float32",
        measures=",".join(STREAMED),
        bootstrap=0,
        alphas=[1e-2],
        target_boundaries="0,2,4",
    ).dataset
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    _check(ds, X, Y, _heldout(ds, doc, pos))


def test_live_shuffle_pairs_as_the_store_route(zoo, corpus_file, extracted):
    """`--live --control shuffle`: the store route's pairing (each source token with the
    target's token at its position of another document's sequence), the target forwarded per
    grouping window in the order the source reads it, each of its sequences once. Every
    streamed measure equals the reference on the stores' rows paired by the shuffle, and the
    ridge scores the store route's shuffled fit, within 1e-5 relative: the target's rows met
    other batches than its store's, so they may differ in float32's last bits (the
    unshuffled live route, which meets the store's batches, agrees to 1e-8 above). No
    window keeps more target rows than it reads."""
    from align.fitting.fit_options import request
    from align.fitting.live_route import pipeline as live
    from align.fitting.planning.split import shuffle_partners

    S, T = live_stores(extracted)
    spec = dict(
        control="shuffle",
        measures=",".join(STREAMED),
        bootstrap=0,
        alphas=[1e-2],
        target_boundaries="0,2,4",
    )
    ds = live_fit(zoo, corpus_file, "qwen2", "float32", **spec).dataset
    want = _fit(S, T, None, FitSpec(**spec))
    assert ds.attrs["options"]["control"] == "shuffle"
    assert ds.attrs["split"] == want.attrs["split"]
    assert ds.attrs["options"]["n_tokens"] == want.attrs["options"]["n_tokens"]
    for name in ("relative_error", "r2"):
        np.testing.assert_allclose(ds[name].values, want[name].values, rtol=1e-5, err_msg=name)
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    seq = zarr.open_group(S, mode="r")["seq"][:]
    p = shuffle_partners(doc, seq, pos, ds.attrs["options"]["seed"])
    keep = np.flatnonzero(_heldout(ds, doc, pos) & (p >= 0))
    _check(ds, X, Y, keep, p[keep], rtol=1e-5)

    job = live_job(zoo, corpus_file, "qwen2", "float32")
    prepared = live.prepare(job, request(FitSpec(control="shuffle")))
    stream = prepared.stream
    members = [s for b in stream.target_batches for s in b.members]
    assert len(members) == len(set(members))  # each target sequence forwarded once
    per_window: dict = {}
    for b in prepared.batches:
        w = stream.window_of(b)
        per_window[w] = per_window.get(w, 0) + len(b.tokens)
    assert 0 < stream.most_held(prepared.batches) <= max(per_window.values())


def anchored_pair(synthetic):
    """Two stores of one text in two tokenizers (test_fit_anchors' tables), their residuals
    X, Y and the token indices (si, ti) of the anchors both share, found by that module's plain
    loop, position 0 of either side left out: (S, T, X, Y, tabs, si, ti)."""
    tabs = _tables()
    X, Y = _residuals(tabs)
    S = synthetic(X, tabs[0], n_layers=1, model="src")
    T = synthetic(Y, tabs[1], tokenizer=OTHER, n_layers=1, model="tgt")
    src, tgt = _reference_anchors(tabs[0]), _reference_anchors(tabs[1])
    common = sorted(set(src) & set(tgt))
    si, ti = np.array([src[k] for k in common]), np.array([tgt[k] for k in common])
    keep = (tabs[0]["pos"][si] != 0) & (tabs[1]["pos"][ti] != 0)
    return S, T, X, Y, tabs, si[keep], ti[keep]


def test_char_anchor_pair_equals_references_from_the_anchored_rows(synthetic):
    S, T, X, Y, tabs, si, ti = anchored_pair(synthetic)
    ds = _fit(
        S,
        T,
        None,
        FitSpec(pairing="char-anchors", measures=",".join(STREAMED), bootstrap=0, alphas=[1.0]),
    )
    keep = np.isin(tabs[0]["doc"][si], ds.attrs["split"]["heldout_docs"])
    stored = [
        {b: np.asarray(R[b], np.float32).astype(np.float64) for b in range(2)} for R in (X, Y)
    ]
    _check(ds, stored[0], stored[1], si[keep], ti[keep])


def test_a_model_against_itself_gives_cka_one_and_procrustes_zero(fit_pair):
    S, _ = fit_pair
    ds = _fit(
        S, S, None, FitSpec(measures="cka,cka-debiased,procrustes", bootstrap=0, alphas=[1e-2])
    )
    diag = [(int(b), int(b)) for b in ds.source_boundary.values]
    for i, j in diag:
        cell = ds.sel(source_boundary=i, target_boundary=j)
        np.testing.assert_allclose(float(cell.cka), 1.0, rtol=1e-12)
        np.testing.assert_allclose(float(cell.cka_debiased), 1.0, rtol=1e-12)
        assert float(cell.procrustes) < 1e-6  # arccos near 1: half the digits
    assert ds.attrs["summary"]["measures"]["cka"]["path"] == [i for i, _ in diag]


def heldout_groups(ds, doc, keep):
    """Each row's group of held-out documents (its document's index in `heldout_doc` mod
    10; −1 for a row not scored) and the groups holding rows, as docs/methods.md states."""
    heldout = list(ds.heldout_doc.values)
    group = np.array([heldout.index(d) % GROUPS if k else -1 for d, k in zip(doc, keep)])
    return group, [g for g in range(GROUPS) if np.any(group == g)]


@pytest.mark.parametrize("kept", [True, False])
def test_jackknife_interval_equals_the_textbook_on_the_rows_without_each_group(
    fit_pair, kept, monkeypatch
):
    """Every streamed measure's interval against each measure recomputed by numpy from the
    held-out rows minus group g (rows, not sums) and the jackknife written from the textbook
    (tests/helpers/measures_reference.py), within 1e-8 relative, its group passes over the
    held-out rows the statistics tasks kept, and over rows read from the stores again (a
    budget that keeps none: the plan's held-out rows made too large to keep); the summary,
    the options and the arrays' descriptions say the scheme, and the bootstrap's resample
    count and seed change nothing of it."""
    from align.fitting.planning import budget

    if not kept:
        monkeypatch.setattr(budget, "heldout_rows_bytes", lambda *a: 1 << 60)
    S, T = fit_pair
    kw = dict(
        measures=",".join(STREAMED),
        alphas=[1e-2],
        source_boundaries="1,2",
        target_boundaries="0,4",
        test_fraction=0.4,  # 5 of the 12 documents held out: 5 groups
    )
    ds = _fit(S, T, None, FitSpec(bootstrap=100, bootstrap_seed=5, **kw))
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    keep = _heldout(ds, doc, pos)
    group, present = heldout_groups(ds, doc, keep)
    assert len(present) >= 3, present
    for i in (1, 2):
        for j in (0, 4):
            cell = ds.sel(source_boundary=i, target_boundary=j)
            for name in STREAMED:
                x, y = X[i], Y[j]
                left_out = [
                    REFERENCE[name](x[keep & (group != g)], y[keep & (group != g)]) for g in present
                ]
                value = REFERENCE[name](x[keep], y[keep])
                want = jackknife_interval(value, left_out, RANGES[name])
                v = name.replace("-", "_")
                got = (float(cell[v + "_low"]), float(cell[v + "_high"]))
                np.testing.assert_allclose(got, want, rtol=RTOL, err_msg=f"{name} {i}->{j}")
                # the recomputations themselves are kept, one per group holding rows
                np.testing.assert_allclose(
                    cell[v + "_left_out"].values, left_out, rtol=RTOL, err_msg=f"{name} {i}->{j}"
                )
    assert ds["measure_group"].values.tolist() == present
    summary = ds.attrs["summary"]["measures"]["interval"]
    assert summary.startswith("delete-a-group jackknife"), summary
    assert f"({len(present)} of them holding rows" in summary
    option = ds.attrs["options"]["measure_interval"]
    assert option["method"] == "delete-a-group jackknife, t interval"
    assert option["min_groups"] == 3 and option["level"] == 0.95
    assert option["row_measures"] == "jackknife"
    assert "jackknife" in ds["cka_low"].attrs["description"]
    other = _fit(S, T, None, FitSpec(bootstrap=200, bootstrap_seed=9, **kw))
    for name in STREAMED:
        for end in ("_low", "_high"):
            v = name.replace("-", "_") + end
            np.testing.assert_array_equal(other[v].values, ds[v].values, err_msg=v)
    plain = _fit(S, T, None, FitSpec(bootstrap=0, **kw))
    assert (
        np.all(np.isnan(plain["cka_low"].values))
        and plain.attrs["options"]["measure_interval"] == "jackknife"  # the option, no interval
    )
    assert "interval" not in plain.attrs["summary"]["measures"]


@pytest.mark.parametrize("kept", [True, False])
def test_live_jackknife_from_group_passes_equals_the_textbook(
    zoo, corpus_file, extracted, kept, monkeypatch
):
    """`--live` with the interval: the block's sums and one group's at a time (the group
    passes over the block's held-out rows: those the plan keeps from the statistics pass,
    or, where it keeps none, copies on the host taken in the held-out pass), every streamed
    measure's interval against numpy on the held-out rows without each group and the
    textbook's jackknife, within 1e-8 relative."""
    from align.fitting.live_route import plan as live_plan
    from align.fitting.planning import budget

    if not kept:  # the plan's choice replaced (the input of this case): no row kept

        def plan(*a):
            got = budget.plan_passes(*a)
            return got._replace(keep_heldout=False)

        monkeypatch.setattr(live_plan, "plan_passes", plan)
    S, T = live_stores(extracted)
    ds = live_fit(
        zoo,
        corpus_file,
        "qwen2",
        "float32",
        measures=",".join(STREAMED),
        bootstrap=100,
        alphas=[1e-2],
        source_boundaries="1,2",
        target_boundaries="0,3",
        test_fraction=0.4,
    ).dataset
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    keep = _heldout(ds, doc, pos)
    group, present = heldout_groups(ds, doc, keep)
    assert len(present) >= 3, present
    for i in (1, 2):
        for j in (0, 3):
            cell = ds.sel(source_boundary=i, target_boundary=j)
            for name in STREAMED:
                x, y = X[i], Y[j]
                left_out = [
                    REFERENCE[name](x[keep & (group != g)], y[keep & (group != g)]) for g in present
                ]
                want = jackknife_interval(REFERENCE[name](x[keep], y[keep]), left_out, RANGES[name])
                v = name.replace("-", "_")
                got = (float(cell[v + "_low"]), float(cell[v + "_high"]))
                np.testing.assert_allclose(got, want, rtol=RTOL, err_msg=f"{name} {i}->{j}")
                np.testing.assert_allclose(
                    cell[v + "_left_out"].values, left_out, rtol=RTOL, err_msg=f"{name} {i}->{j}"
                )
    assert ds["measure_group"].values.tolist() == present
    assert f"({len(present)} of them holding rows" in ds.attrs["summary"]["measures"]["interval"]


def test_compare_pairs_two_fits_by_the_rows_of_each_group(fit_pair, cli, tmp_path):
    """`align compare --measure cka` of two results fitted on the same held-out documents
    (source -> target and target -> source): each result's mean of cka on its argmax path, its
    jackknife interval, and b − a with the paired jackknife interval, d_(g) = θ_b,(g) −
    θ_a,(g), each θ_(g) the path cells' cka recomputed by numpy from the held-out rows
    without group g (tests/helpers/measures_reference.py), within 1e-8 relative."""
    import csv

    S, T = fit_pair
    kw = dict(measures="cka", alphas=[1e-2], test_fraction=0.4, bootstrap=100)
    pa, pb = str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")
    a = _fit(S, T, pa, FitSpec(source_boundaries="1,2", target_boundaries="0,2,4", **kw))
    b = _fit(T, S, pb, FitSpec(source_boundaries="1,3", target_boundaries="0,1,2", **kw))
    code, out, err = cli("compare", pa, pb, "--measure", "cka", "-o", tmp_path / "t.csv")
    assert code == 0, err
    rows = {r["result"]: r for r in csv.DictReader(open(tmp_path / "t.csv", encoding="utf-8"))}
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    keep = _heldout(a, doc, pos)
    group, present = heldout_groups(a, doc, keep)
    assert len(present) >= 3 and b.heldout_doc.values.tolist() == a.heldout_doc.values.tolist()
    means = {}
    for label, ds, src, tgt in (("a", a, X, Y), ("b", b, Y, X)):
        full, left = [], []
        for i in ds.source_boundary.values:
            cka = [
                REFERENCE["cka"](src[int(i)][keep], tgt[int(j)][keep])
                for j in ds.target_boundary.values
            ]
            j = ds.target_boundary.values[int(np.argmax(cka))]
            full.append(max(cka))
            x, y = src[int(i)], tgt[int(j)]
            left.append(
                [REFERENCE["cka"](x[keep & (group != g)], y[keep & (group != g)]) for g in present]
            )
        value, left = float(np.mean(full)), np.mean(left, axis=0)
        want = (value, *jackknife_interval(value, left, RANGES["cka"]))
        got = [float(rows[label][f"cka on path{e}"]) for e in ("", "_low", "_high")]
        np.testing.assert_allclose(got, want, rtol=RTOL, err_msg=label)
        means[label] = (value, left)
    (va, la), (vb, lb) = means["a"], means["b"]
    want = (vb - va, *jackknife_interval(vb - va, lb - la))
    got = [float(rows["b − a (paired)"][f"cka on path{e}"]) for e in ("", "_low", "_high")]
    np.testing.assert_allclose(got, want, rtol=RTOL)


def test_cli_writes_the_measures_and_refuses_an_unknown_one(fit_pair, cli, tmp_path):
    S, T = fit_pair
    out = tmp_path / "m.zarr"
    args = ("fit", S, T, "--scheduler", "synchronous", "--bootstrap", "0", "--alphas", "0.01")
    code, _, err = cli(*args, "-o", out, "--measures", "cka,procrustes")
    assert code == 0, err
    ds = xr.open_zarr(out)
    assert {"cka", "cka_low", "procrustes_high"} <= set(ds.data_vars)
    assert ds.attrs["options"]["measures"] == ["ridge", "cka", "procrustes"]
    code, _, err = cli(*args, "-o", tmp_path / "n.zarr", "--measures", "cka,mutual")
    one_line_error(
        code, err, "--measures mutual: not a measure", "ridge, cka, cka-debiased, procrustes"
    )
    code, _, err = cli(
        *args, "-o", tmp_path / "n.zarr", "--measures", "cka,mknn", "--permutations", "0"
    )
    one_line_error(code, err, "mknn come with their calibration", "--permutations 1 or more")


def test_planner_counts_the_sums_and_refuses_in_one_line_naming_the_bytes(fit_pair):
    """A worker budget that holds one pair for ridge alone but not its measures' sums: per
    group of held-out documents Σxyᵀ, both Σxxᵀ and the vectors beside them, three copies
    (two inputs of an add and their sum) and, with the bootstrap's interval, a fourth (the
    block's sums held while one group's are made: the jackknife's group passes), whatever
    the G = 10 groups."""
    from align.errors import InputError
    from align.fitting.planning import budget

    S, T = fit_pair
    d_s, d_t = 64, 96
    from align.store import open_activations

    store = open_activations(S)
    n, chunk = store.n_tokens, store.chunk_tokens
    ridge = budget.block_bytes(1, 1, d_s, d_t, 256, chunk, -(-n // 256))  # the test's input
    sums = 4 * 8 * (d_s * d_s + 2 * d_s + 2 + d_t * d_t + 2 * d_t + 2)
    sums += 4 * 8 * (d_s * d_t + 2 * d_s + d_t + 2)  # with qxy, q_sy
    spec = FitSpec(alphas=[1e-2], bootstrap=100, source_boundaries="1", target_boundaries="1")
    run = Execution(scheduler="synchronous", task_tokens=256)
    hooks = FitHooks(worker_budget=ridge + sums // 2)
    ds = _fit(S, T, None, spec, run, hooks)  # ridge alone fits
    assert "cka" not in ds
    with pytest.raises(InputError) as e:
        _fit(S, T, None, replace(spec, measures="cka"), run, hooks)
    text = str(e.value)
    assert "\n" not in text and "one boundary pair of d_source 64, d_target 96" in text, text
    need = (ridge + sums) / 0.9  # PLAN_FRACTION of the budget is planned
    assert f"needs {need / 2**20:.1f} MiB per worker" in text, text


def test_plot_measure_draws_the_argmax_path_of_a_similarity(
    fit_pair, store_measures, cli, tmp_path
):
    from align.plotting import plot_measure

    ds = store_measures
    for name, pick in (("cka", np.argmax), ("procrustes", np.argmin)):
        fig = plot_measure(ds, name)
        (line,) = [ln for ln in fig.axes[0].lines if ln.get_gid() == "measure_path"]
        want = ds.target_boundary.values[pick(ds[name].values, axis=1)]
        np.testing.assert_array_equal(line.get_xdata(), want)
        np.testing.assert_array_equal(line.get_ydata(), ds.source_boundary.values)
    out = tmp_path / "r.zarr"
    S, T = fit_pair
    args = ("--scheduler", "synchronous", "--bootstrap", "0", "--measures", "cka,procrustes")
    assert cli("fit", S, T, "-o", out, *args)[0] == 0
    code, _, err = cli("plot", out, "--measure", "cka", "-o", tmp_path / "cka.png")
    assert code == 0 and (tmp_path / "cka.png").stat().st_size > 0, err
    code, _, err = cli("plot", out, "--measure", "rsa", "-o", tmp_path / "rsa.png")
    one_line_error(code, err, "--measure rsa: not in this result", "it holds cka, procrustes")


def _bytes(text: str) -> float:
    """Bytes of "16.2 MiB"."""
    value, unit = text.split()
    return float(value.replace(",", "")) * 1024 ** ("KMG".index(unit[0]) + 1)


def _rounding(text: str) -> float:
    """Bytes "16.2 MiB" may be off by, written with one decimal: half a tenth of its unit."""
    return 0.05 * 1024 ** ("KMG".index(text.split()[1][0]) + 1)


def test_measures_all_runs_as_typed_and_marks_the_copied_rows(fit_pair, cli, tmp_path, monkeypatch):
    """`align fit S T -o R --measures all` with no other option runs: its first plan line says
    what it computes and the bytes it holds for them (the row measures with their default 99
    permutations and the jackknife's 10 recomputations) and the seconds they take (timed
    from GUESS_ROWS sampled rows, here lowered to this small sample's); the result holds the
    row measures' values, intervals and calibration, the tie
    rule, and each cell's fraction of sampled rows with an exact copy, against a count on the
    store's own rows (numpy.unique); `align info` shows the cells mostly of copies."""
    from align.fitting.store_route import estimate

    monkeypatch.setattr(estimate, "GUESS_ROWS", 16)
    S, T = fit_pair
    out = tmp_path / "all.zarr"
    code, _, err = cli("fit", S, T, "-o", out, "--measures", "all")
    assert code == 0, err
    plan = [line for line in err.splitlines() if line.startswith("align fit:")]
    assert plan[0].startswith("align fit: measures: ridge, cka, cka-debiased"), plan[0]
    for words in ("mknn, cknna, rsa on the", "jackknife interval (10", "against 99 permutations"):
        assert words in plan[0], (words, plan[0])
    # its cost: the bytes the sampled rows and `row_measures` hold, the two amounts the
    # `sampled rows` plan line names, added (human_bytes: KiB/MiB with one decimal)
    rows_line = next(line for line in plan if line.startswith("align fit: sampled rows:"))
    amounts = re.findall(r"([\d.,]+ [KMG]iB)", rows_line)
    held = [_bytes(a) for a in amounts]
    assert len(held) == 2, rows_line
    said = re.search(r"the sampled rows and row measures hold ([\d.,]+ [KMG]iB) and", plan[0])
    off = sum(_rounding(a) for a in (*amounts, said[1] if said else "0 KiB"))
    assert said and abs(_bytes(said[1]) - sum(held)) <= off, plan[0]
    assert re.search(
        r" and take ~[\d,]+ s on this machine, --dry-run times the whole fit$", plan[0]
    )
    streamed = "cka, cka-debiased, procrustes, procrustes-heldout, cca, svcca"
    assert f"{streamed} not calibrated (give --permutations to calibrate them too)" in plan[0]
    ds = xr.open_zarr(out)
    sample = ds.attrs["options"]["sampled_rows"]
    assert sample["permutations"] == 99 and "average rank" in sample["ties"]
    assert ds.attrs["options"]["calibrated"] == ["mknn", "cknna", "rsa"]
    for n in ("cka", "cka_debiased", "procrustes", "procrustes_heldout", "cca", "svcca"):
        assert n in ds and n + "_p" not in ds and n + "_sampled" not in ds, n
    # the rows' bytes by hand: float32 rows of 3 source boundaries of d 64, 5 target of d 96
    assert abs(held[0] - 4 * sample["rows"] * (3 * 64 + 5 * 96)) <= 0.002 * held[0], rows_line
    groups = ds["measure_group"].values
    for n in ("mknn", "cknna", "rsa"):
        for end in ("", "_p", "_calibrated", "_left_out"):
            assert np.isfinite(ds[n + end].values).all(), n + end
        # the jackknife's interval, as every measure's: NaN with fewer than 3 groups of
        # held-out documents holding rows (the default split holds out few of 12 documents)
        bounds = np.stack([ds[n + "_low"].values, ds[n + "_high"].values])
        assert np.isfinite(bounds).all() == (len(groups) >= 3), (n, groups)
    X, doc, pos = _read(S)
    Y, *_ = _read(T)
    held = np.flatnonzero(_heldout(ds, doc, pos))
    m = sample["rows"]
    rows = held[np.sort(np.random.default_rng(0).choice(len(held), m, replace=False))]

    def copied(a):
        _, inverse, counts = np.unique(a[rows], axis=0, return_inverse=True, return_counts=True)
        return counts[inverse.ravel()] > 1

    want = [
        [np.mean(copied(X[int(i)]) | copied(Y[int(j)])) for j in ds.target_boundary.values]
        for i in ds.source_boundary.values
    ]
    got = sample["duplicated_rows"]["fraction"]
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert sample["duplicated_rows"]["mostly_copies"] == int(np.sum(np.array(want) > 0.5))
    code, info, err = cli("info", out)
    assert code == 0, err
    assert "cells have sampled rows mostly exact copies" in info, info
    flat = " ".join(info.split())
    assert "calibration mknn, cknna, rsa against 99 permutations of" in flat, info
    assert f"not calibrated: {streamed}" in flat, info
