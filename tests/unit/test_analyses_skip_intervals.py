"""Skip results' prompt-bootstrap intervals of R and O and the equal-n mode, on hand-built
per-prompt maxima: a plain-loop reference from the documented indices (per setting, idx then
idx_N from one generator), rtol 1e-12; N above a setting's prompts is refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

L = 3
PARTS = ["layer", "attn"]
SETTINGS = ["current", "future"]


def make_result(seed, n_current, n_future):
    """A `skipping` result dict with random per-prompt maxima; the future setting used the
    first n_future prompts."""
    rng = np.random.default_rng(seed)
    per, used, R, O = {}, {}, [], []
    for setting, n in zip(SETTINGS, (n_current, n_future)):
        Rp, Op = rng.random((n, len(PARTS), L, L)), rng.random((n, len(PARTS), L))
        per[setting], used[setting] = (Rp, Op), list(range(n))
        R.append(np.stack([Rp.max(0), Rp.mean(0)], 1))
        O.append(np.stack([Op.max(0), Op.mean(0)], 1))
    return {
        "R": np.array(R),
        "O": np.array(O),
        "settings": SETTINGS,
        "parts": PARTS,
        "n_prompts": {"current": n_current, "future": n_future},
        "n_prompts_too_short": n_current - n_future,
        "n_prompts_total": n_current,
        "used": used,
        "per_prompt": per,
    }


def ref_aggregates(x, ix):
    drawn = [x[p] for p in ix]
    return np.max(drawn, 0), np.mean(drawn, 0)


def test_intervals_and_equal_n_match_plain_loops():
    from align.analyses.skip import to_dataset
    from align.stats.bootstrap import Resampling

    res = make_result(0, 8, 5)
    B, seed, N = 120, 9, 3
    ds = to_dataset(res, {}, seed=0, resampling=Resampling(B, seed, N))
    rng = np.random.default_rng(seed)
    for setting in SETTINGS:
        Rp, Op = res["per_prompt"][setting]
        n = len(Rp)
        idx = rng.integers(0, n, size=(B, n))
        idx_n = rng.integers(0, n, size=(B, N))
        for var, x in (("R", Rp), ("O", Op)):
            for a, agg in enumerate(("max", "mean_over_prompts")):
                reps = np.array([ref_aggregates(x, ix)[a] for ix in idx])
                cell = {"setting": setting, "agg": agg}
                np.testing.assert_allclose(
                    ds[f"{var}_low"].sel(cell).values, np.percentile(reps, 2.5, axis=0), rtol=1e-12
                )
                np.testing.assert_allclose(
                    ds[f"{var}_high"].sel(cell).values,
                    np.percentile(reps, 97.5, axis=0),
                    rtol=1e-12,
                )
                reps_n = np.array([ref_aggregates(x, ix)[a] for ix in idx_n])
                np.testing.assert_allclose(
                    ds[f"{var}_equal_n"].sel(cell).values, reps_n.mean(0), rtol=1e-12
                )
                np.testing.assert_allclose(
                    ds[f"{var}_equal_n_low"].sel(cell).values,
                    np.percentile(reps_n, 2.5, axis=0),
                    rtol=1e-12,
                )
                np.testing.assert_allclose(
                    ds[f"{var}_equal_n_high"].sel(cell).values,
                    np.percentile(reps_n, 97.5, axis=0),
                    rtol=1e-12,
                )
    boot = ds.attrs["bootstrap"]
    assert (
        boot["n"] == {"current": 8, "future": 5}
        and boot["resamples"] == B
        and boot["seed"] == seed
        and boot["equal_n"] == N
    )


def test_equal_n_maximum_does_not_grow_with_the_prompt_count():
    """Prompts drawn from one distribution: the max over all prompts grows with n, the
    equal-n max over N does not (its expectation is that of N prompts: N/(N+1) for uniform
    values)."""
    from align.analyses.skip import to_dataset
    from align.stats.bootstrap import Resampling

    small, large = make_result(1, 10, 10), make_result(2, 400, 400)
    a = to_dataset(small, {}, seed=0, resampling=Resampling(400, 0, 5))
    b = to_dataset(large, {}, seed=0, resampling=Resampling(400, 0, 5))
    cell = {"setting": "current", "agg": "max"}
    assert float(b["R"].sel(cell).mean()) > float(a["R"].sel(cell).mean()) + 0.05
    for ds in (a, b):
        np.testing.assert_allclose(
            float(ds["R_equal_n"].sel(cell).isel(skipped=0).mean()), 5 / 6, atol=0.06
        )


def test_equal_n_above_the_prompts_is_refused():
    from align.analyses.skip import check_prompts, to_dataset
    from align.errors import InputError
    from align.stats.bootstrap import Resampling

    with pytest.raises(InputError, match="`equal_n` 6 is above the 5 prompts the future setting"):
        to_dataset(make_result(0, 8, 5), {}, seed=0, resampling=Resampling(100, 0, 6))
    prompts = [np.arange(20), np.arange(5)]
    with pytest.raises(InputError, match="`equal_n` 2 is above the 1 prompts the future setting"):
        check_prompts(prompts, ("current", "future"), equal_n=2)
