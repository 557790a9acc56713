"""Effective depth's threshold sensitivity and prompt-bootstrap intervals, on contributions and
lens results built by hand from per-token values: a plain-loop reference applies the rules of
docs/methods.md to curves recomputed from the raw per-token values of the resampled prompts
(indices drawn as the depth module documents), rtol 1e-12."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

L = 6
COS_GRID = [-0.2, -0.15, -0.1, -0.05, 0.0, 0.05, 0.1, 0.15, 0.2]
FRACTION_GRID = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]


def ref_cosine(c, t=0.0):
    hits = [l for l in range(L - 1) if c[l] < t <= c[l + 1]]
    return float(hits[-1]) if hits else np.nan


def ref_kl(kl, f=0.5):
    top = max(kl[:L])
    hits = [l for l in range(L - 1) if kl[l] < f * top]
    return float(hits[0]) if hits else np.nan


def ref_overlap(ov, t=0.3):
    hits = [l for l in range(L - 1) if ov[l] > t]
    return float(hits[0]) if hits else np.nan


def make_tokens(seed, n):
    """Per-token values of n prompts: cos (3 parts, L, T_p), kl and overlap (L+1, T_p)."""
    rng = np.random.default_rng(seed)
    prompts = []
    for _ in range(n):
        T = int(rng.integers(3, 15))
        base = np.linspace(-0.3, 0.3, L)[None, :, None]
        cos = base + rng.normal(0, 0.25, (3, L, T))
        kl = np.linspace(8, 0, L + 1)[:, None] * rng.uniform(0.3, 1.7, (L + 1, T))
        kl[L] = 0
        ov = np.clip(np.linspace(0, 1, L + 1)[:, None] + rng.normal(0, 0.2, (L + 1, T)), 0, 1)
        ov[L] = 1
        prompts.append((cos, kl, ov))
    return prompts


def results(prompts, lens_prompts=None, same=True):
    """(contributions, lens) Datasets as `align contrib` and `align lens` write them."""
    lens_prompts = prompts if lens_prompts is None else lens_prompts
    counts = np.array([p[0].shape[-1] for p in prompts])
    cos_sum = np.stack([p[0].sum(-1) for p in prompts])
    cos_mean = cos_sum.sum(0) / counts.sum()
    cos = np.stack([cos_mean, cos_mean + 1], -1)  # the max is not read
    contrib = xr.Dataset(
        {
            "cos": (("part", "layer", "agg"), cos),
            "cos_sum": (("prompt", "part", "layer"), cos_sum),
            "token_count": (("prompt",), counts),
        },
        coords={"part": ["attn", "mlp", "layer"], "layer": np.arange(L), "agg": ["mean", "max"]},
        attrs={"model": "m", "config_hash": "h", "prompts_hash": "sha256:a"},
    )
    lc = np.array([p[1].shape[-1] for p in lens_prompts])
    data = {"token_count": (("prompt",), lc)}
    for k, name in ((1, "kl"), (2, "overlap")):
        s = np.stack([p[k].sum(-1) for p in lens_prompts])
        token = s.sum(0) / lc.sum()
        prompt = (s / lc[:, None]).mean(0)
        data[name] = (("weighting", "boundary"), np.stack([token, prompt]))
        data[f"{name}_sum"] = (("prompt", "boundary"), s)
    lens = xr.Dataset(
        data,
        coords={"weighting": ["token", "prompt"], "boundary": np.arange(L + 1)},
        attrs={
            "model": "m",
            "config_hash": "h",
            "boundaries_measured": list(range(L + 1)),
            "prompts_hash": "sha256:a" if same else "sha256:b",
        },
    )
    return contrib, lens


def curves(prompts, lens_prompts, ic, il):
    """Reference curves of one resample from the raw per-token values."""
    cos = np.concatenate([prompts[p][0] for p in ic], -1).mean(-1).mean(0)
    kl = np.concatenate([lens_prompts[p][1] for p in il], -1).mean(-1)
    ov = np.concatenate([lens_prompts[p][2] for p in il], -1).mean(-1)
    return cos, kl, ov


def test_sensitivity_hand_worked():
    """c = (−0.3, −0.12, 0.07, 0.12, −0.02, 0.13): the last l with c_l < τ ≤ c_{l+1}, by hand;
    none above τ = 0.13; the default τ = 0 gives 4."""
    from align.analyses import effective_depth

    c = [-0.3, -0.12, 0.07, 0.12, -0.02, 0.13]
    r = effective_depth(c, c, c, np.linspace(10, 0, L + 1), np.linspace(0, 1, L + 1))
    by_hand = {
        -0.2: 0,
        -0.15: 0,
        -0.1: 1,
        -0.05: 1,
        0.0: 4,
        0.05: 4,
        0.1: 4,
        0.15: np.nan,
        0.2: np.nan,
    }
    np.testing.assert_array_equal(r["sensitivity"]["cosine"], [by_hand[t] for t in COS_GRID])
    assert r["effective_depth"][0] == 4
    # KL 10 .. 0 over 7 boundaries: max over 0..5 is 10; first l with KL_l < f·10; overlap l/6 > t.
    kl = np.linspace(10, 0, L + 1)
    np.testing.assert_array_equal(r["sensitivity"]["kl"], [ref_kl(kl, f) for f in FRACTION_GRID])
    ov = np.linspace(0, 1, L + 1)
    np.testing.assert_array_equal(
        r["sensitivity"]["overlap"], [ref_overlap(ov, t) for t in FRACTION_GRID]
    )


@pytest.mark.parametrize("same", [True, False])
def test_intervals_match_plain_loops(same):
    """Joint resampling (one idx) when the lens ran on the contributions' prompts, else idx_l
    drawn after idx_c from the same generator."""
    from align.analyses.depth import depth_from_results
    from align.stats.bootstrap import Resampling

    prompts = make_tokens(1, 9)
    lens_prompts = prompts if same else make_tokens(2, 7)
    contrib, lens = results(prompts, lens_prompts, same)
    B, seed = 150, 4
    res = depth_from_results(contrib, lens, Resampling(B, seed))
    rng = np.random.default_rng(seed)
    idx_c = rng.integers(0, len(prompts), size=(B, len(prompts)))
    idx_l = idx_c if same else rng.integers(0, len(lens_prompts), size=(B, len(lens_prompts)))
    eds, sens = [], {"cosine": [], "kl": [], "overlap": []}
    for ic, il in zip(idx_c, idx_l):
        cos, kl, ov = curves(prompts, lens_prompts, ic, il)
        eds.append([ref_cosine(cos), ref_kl(kl), ref_overlap(ov)])
        sens["cosine"].append([ref_cosine(cos, t) for t in COS_GRID])
        sens["kl"].append([ref_kl(kl, f) for f in FRACTION_GRID])
        sens["overlap"].append([ref_overlap(ov, t) for t in FRACTION_GRID])
    eds = np.array(eds)
    cos, kl, ov = curves(prompts, lens_prompts, range(len(prompts)), range(len(lens_prompts)))
    np.testing.assert_array_equal(
        res["effective_depth"], [ref_cosine(cos), ref_kl(kl), ref_overlap(ov)]
    )
    least = 100  # the documented floor: an interval from fewer defined resamples is NaN
    for k in range(3):
        ok = eds[~np.isnan(eds[:, k]), k]
        want = (
            (np.percentile(ok, 2.5), np.percentile(ok, 97.5))
            if len(ok) >= least
            else (np.nan, np.nan)
        )
        np.testing.assert_allclose(
            [res["effective_depth_low"][k], res["effective_depth_high"][k]], want, rtol=1e-12
        )
        np.testing.assert_allclose(res["defined_fraction"][k], len(ok) / B, rtol=1e-12)
    for rule, s in sens.items():
        s = np.array(s)
        for j in range(s.shape[1]):
            ok = s[~np.isnan(s[:, j]), j]
            want = (
                (np.percentile(ok, 2.5), np.percentile(ok, 97.5))
                if len(ok) >= least
                else (np.nan, np.nan)
            )
            np.testing.assert_allclose(
                [res["sensitivity_low"][rule][j], res["sensitivity_high"][rule][j]],
                want,
                rtol=1e-12,
            )
    assert res["bootstrap"]["n"] == {"contributions": 9, "lens": len(lens_prompts)}
    assert res["bootstrap"]["resamples"] == B and res["bootstrap"]["seed"] == seed
    assert res["bootstrap"]["joint"] is same
