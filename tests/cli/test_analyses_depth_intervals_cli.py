"""`align depth` on contributions and lens results built by hand: the intervals and the threshold
sensitivity it writes, and no interval for results without per-prompt sums."""

from __future__ import annotations

import numpy as np

from tests.unit.test_analyses_depth_intervals import (
    COS_GRID,
    FRACTION_GRID,
    L,
    make_tokens,
    results,
)


def test_cli_writes_intervals_and_sensitivity(cli, tmp_path):
    from align.store import open_result, write_result

    contrib, lens = results(make_tokens(3, 6))
    write_result(str(tmp_path / "c"), contrib, "contributions")
    write_result(str(tmp_path / "l"), lens, "lens")
    code, _, err = cli(
        "depth",
        "--contrib",
        tmp_path / "c",
        "--lens",
        tmp_path / "l",
        "-o",
        tmp_path / "d",
        "--bootstrap",
        180,
        "--bootstrap-seed",
        2,
    )
    assert code == 0, err
    ds = open_result(str(tmp_path / "d"), "depth")
    assert ds.attrs["bootstrap"]["resamples"] == 180 and ds.attrs["bootstrap"]["seed"] == 2
    assert ds.attrs["bootstrap"]["n"] == {"contributions": 6, "lens": 6}
    assert ds.attrs["thresholds"] == {"cosine": 0.0, "kl": 0.5, "overlap": 0.3}
    np.testing.assert_allclose(ds["threshold_cosine"].values, COS_GRID, atol=1e-12)
    np.testing.assert_allclose(ds["threshold_kl"].values, FRACTION_GRID, atol=1e-12)
    for r in ("cosine", "kl", "overlap"):
        default = ds.attrs["thresholds"][r]
        at = float(ds[f"sensitivity_{r}"].sel({f"threshold_{r}": default}, method="nearest"))
        point = float(ds["effective_depth"].sel(rule=r))
        assert at == point or (np.isnan(at) and np.isnan(point))
    lo, hi = ds["effective_depth_low"].values, ds["effective_depth_high"].values
    ok = np.isfinite(lo)
    assert ok.any() and np.all(lo[ok] <= hi[ok])
    np.testing.assert_allclose(ds["ratio_low"].values[ok], (lo[ok] + 1) / L, rtol=1e-12)


def test_results_without_per_prompt_sums_get_no_interval(cli, tmp_path):
    from align.store import open_result, write_result

    contrib, lens = results(make_tokens(3, 6))
    write_result(
        str(tmp_path / "c"), contrib.drop_vars(["cos_sum", "token_count"]), "contributions"
    )
    write_result(str(tmp_path / "l"), lens, "lens")
    code, _, err = cli(
        "depth", "--contrib", tmp_path / "c", "--lens", tmp_path / "l", "-o", tmp_path / "d"
    )
    assert code == 0, err
    ds = open_result(str(tmp_path / "d"), "depth")
    assert "effective_depth_low" not in ds and ds.attrs["intervals"].startswith("none")
    assert "sensitivity_kl" in ds
