"""`align depthscore`'s prompt-bootstrap intervals on hand-built per-prompt R and O: a numpy
reference from the same documented resample indices, identical prompts collapse the interval
to the point, the seed reproduces it, results without per-prompt values get none (said so),
and an edited result is refused."""

from __future__ import annotations

import numpy as np

from tests.helpers.assertions import one_line_error

L = 4
PARTS = ["layer", "attn"]


def _skip_result(path, Rp, Op, model="m"):
    """A "skipping" result of one setting ("future") whose per-prompt maxima are Rp (n, part,
    L, L), Op (n, part, L), and whose aggregates are their max and mean over prompts."""
    from align.analyses.skip import to_dataset
    from align.store import write_result

    n = len(Rp)
    R = np.stack([Rp.max(0), Rp.mean(0)], 1)[None]
    O = np.stack([Op.max(0), Op.mean(0)], 1)[None]
    res = {
        "R": R,
        "O": O,
        "settings": ["future"],
        "parts": PARTS,
        "n_prompts": {"future": n},
        "n_prompts_too_short": 0,
        "n_prompts_total": n,
        "used": {"future": list(range(n))},
        "per_prompt": {"future": (Rp, Op)},
    }
    write_result(
        str(path), to_dataset(res, {"model": model, "config_hash": "h"}, seed=0), "skipping"
    )
    return str(path)


def _random_prompts(seed, n):
    rng = np.random.default_rng(seed)
    return rng.random((n, len(PARTS), L, L)), rng.random((n, len(PARTS), L))


def _ref_ds(m):
    m = np.asarray(m, float)
    return np.nan if m.sum() == 0 else float((np.arange(len(m)) * m).sum() / m.sum())


def _ref_layer(R):
    """The future setting's layer effect as P1's code computes it (skip_max_depth.py, `main`):
    max_dall.sum(-1) / torch.arange(L-1, -1, -1).clamp(min=1), every skipped layer s = 0..L-1,
    written as a loop."""
    return [sum(R[s, l] for l in range(L)) / max(L - 1 - s, 1) for s in range(L)]


def test_interval_matches_numpy_reference(cli, tmp_path):
    """Documented procedure: rng = default_rng(seed); per level (given order), per setting:
    idx = rng.integers(0, n, size=(B, n)); DS of the max / mean over prompts idx[b];
    2.5 / 97.5 percentiles. Reference written with numpy alone, rtol 1e-12."""
    from align.store import open_result

    data = [_random_prompts(1, 7), _random_prompts(2, 5)]
    paths = [_skip_result(tmp_path / f"s{i}", *d) for i, d in enumerate(data)]
    B, seed = 200, 5
    code, _, err = cli(
        "depthscore",
        *paths,
        "--levels",
        "3,2",
        "--bootstrap",
        B,
        "--seed",
        seed,
        "-o",
        tmp_path / "ds",
    )
    assert code == 0, err
    ds = open_result(str(tmp_path / "ds"), "depthscore")
    rng = np.random.default_rng(seed)
    for level, (Rp, Op) in zip((3, 2), data):
        n = len(Rp)
        idx = rng.integers(0, n, size=(B, n))
        for agg, f in (("max", lambda x: x.max(0)), ("mean_over_prompts", lambda x: x.mean(0))):
            for k, part in enumerate(PARTS):
                lay = [_ref_ds(_ref_layer(f(Rp[ix])[k])) for ix in idx]
                out = [_ref_ds(f(Op[ix])[k]) for ix in idx]
                for effect, samples, point in (
                    ("layer", lay, _ref_ds(_ref_layer(f(Rp)[k]))),
                    ("output", out, _ref_ds(f(Op)[k])),
                ):
                    cell = ds.sel(level=level, setting="future", part=part, agg=agg, effect=effect)
                    np.testing.assert_allclose(float(cell["DS"]), point, rtol=1e-12)
                    np.testing.assert_allclose(
                        float(cell["ds_low"]), np.percentile(samples, 2.5), rtol=1e-12
                    )
                    np.testing.assert_allclose(
                        float(cell["ds_high"]), np.percentile(samples, 97.5), rtol=1e-12
                    )
                    assert float(cell["ds_low"]) < float(cell["ds_high"])
    assert "bootstrap" in ds.attrs["intervals"] and "200" in ds.attrs["intervals"]


def test_identical_prompts_collapse_the_interval(cli, tmp_path):
    """Every prompt the same: every resample is the sample, so ds_low = DS = ds_high exactly."""
    from align.store import open_result

    R1, O1 = _random_prompts(3, 1)
    Rp, Op = np.repeat(R1, 6, 0), np.repeat(O1, 6, 0)
    a = _skip_result(tmp_path / "a", Rp, Op)
    assert cli("depthscore", a, "--levels", "1", "--bootstrap", 100, "-o", tmp_path / "ds")[0] == 0
    ds = open_result(str(tmp_path / "ds"), "depthscore")
    assert np.isfinite(ds["DS"].values).all()
    np.testing.assert_array_equal(ds["ds_low"].values, ds["DS"].values)
    np.testing.assert_array_equal(ds["ds_high"].values, ds["DS"].values)


def test_seed_reproduces(cli, tmp_path):
    from align.store import open_result

    a = _skip_result(tmp_path / "a", *_random_prompts(4, 6))
    runs = {}
    for name, seed in (("x", 0), ("y", 0), ("z", 1)):
        assert (
            cli(
                "depthscore",
                a,
                "--levels",
                "2",
                "--bootstrap",
                100,
                "--seed",
                seed,
                "-o",
                tmp_path / name,
            )[0]
            == 0
        )
        runs[name] = open_result(str(tmp_path / name), "depthscore")
    for v in ("ds_low", "ds_high"):
        np.testing.assert_array_equal(runs["x"][v].values, runs["y"][v].values)
    assert not np.array_equal(runs["x"]["ds_low"].values, runs["z"]["ds_low"].values)


def test_without_per_prompt_values_no_interval(cli, tmp_path):
    """A result made before per-prompt values were stored: DS as before, ds_low/ds_high NaN,
    and attrs and the log line say why."""
    from align.analyses.skip import to_dataset
    from align.store import open_result, write_result

    Rp, Op = _random_prompts(5, 3)
    res = {
        "R": np.stack([Rp.max(0), Rp.mean(0)], 1)[None],
        "O": np.stack([Op.max(0), Op.mean(0)], 1)[None],
        "settings": ["future"],
        "parts": PARTS,
        "n_prompts": {"future": 3},
        "n_prompts_too_short": 0,
    }
    write_result(
        str(tmp_path / "old"),
        to_dataset(res, {"model": "m", "config_hash": "h"}, seed=0),
        "skipping",
    )
    code, _, err = cli("depthscore", tmp_path / "old", "--levels", "2", "-o", tmp_path / "ds")
    assert code == 0, err
    ds = open_result(str(tmp_path / "ds"), "depthscore")
    assert np.isnan(ds["ds_low"].values).all() and np.isnan(ds["ds_high"].values).all()
    np.testing.assert_allclose(
        float(ds["DS"].sel(level=2, setting="future", part="layer", agg="max", effect="output")),
        _ref_ds(Op.max(0)[0]),
        rtol=1e-12,
    )
    assert ds.attrs["intervals"].startswith("none") and "per-prompt" in err


def test_edited_aggregate_is_refused(cli, tmp_path):
    """R no longer the max of R_prompt: refused in one line, nothing written."""
    Rp, Op = _random_prompts(6, 4)
    from align.analyses.skip import to_dataset
    from align.store import write_result

    R = np.stack([Rp.max(0) * 1.5, Rp.mean(0)], 1)[None]
    O = np.stack([Op.max(0), Op.mean(0)], 1)[None]
    res = {
        "R": R,
        "O": O,
        "settings": ["future"],
        "parts": PARTS,
        "n_prompts": {"future": 4},
        "n_prompts_too_short": 0,
        "n_prompts_total": 4,
        "used": {"future": list(range(4))},
        "per_prompt": {"future": (Rp, Op)},
    }
    write_result(
        str(tmp_path / "b"), to_dataset(res, {"model": "m", "config_hash": "h"}, seed=0), "skipping"
    )
    code, _, err = cli("depthscore", tmp_path / "b", "--levels", "2", "-o", tmp_path / "ds")
    one_line_error(code, err, "is not the max of R_prompt")
    assert not (tmp_path / "ds").exists()


def test_plot_draws_interval_bars(cli, tmp_path):
    from align.plotting import plot_result
    from align.store import open_result

    paths = [_skip_result(tmp_path / f"s{i}", *_random_prompts(10 + i, 5)) for i in range(2)]
    assert (
        cli("depthscore", *paths, "--levels", "1,2", "--bootstrap", 100, "-o", tmp_path / "ds")[0]
        == 0
    )
    ds = open_result(str(tmp_path / "ds"))
    fig = plot_result(ds, part="layer", agg="max")
    gids = {c.get_gid() for ax in fig.axes for c in ax.collections}
    assert {"DS-interval/layer/future", "DS-interval/output/future"} <= gids
    bars = next(
        c for ax in fig.axes for c in ax.collections if c.get_gid() == "DS-interval/layer/future"
    )
    segs = bars.get_segments()
    lo = ds["ds_low"].sel(setting="future", part="layer", agg="max", effect="layer").values
    hi = ds["ds_high"].sel(setting="future", part="layer", agg="max", effect="layer").values
    np.testing.assert_allclose([s[0][1] for s in segs], lo, rtol=1e-12)
    np.testing.assert_allclose([s[1][1] for s in segs], hi, rtol=1e-12)
