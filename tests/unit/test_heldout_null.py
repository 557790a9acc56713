"""procrustes-heldout's value and permutation null on the sampled rows
(align.fitting.measuring.sampled.heldout_null): against scipy's orthogonal_procrustes of the training
rows on the re-paired rows (tests/helpers/measures_reference.py), within 1e-8 relative, for a
narrower and a wider source, on numpy and on torch; the rotations dropped from the maps; independent X and Y give
p-values spread as the null says; a sampled side without variance refused in one line."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from tests.helpers.measures_reference import calibration, procrustes_heldout_null

RTOL = 1e-8


@dataclass
class Map:
    """What heldout_null reads of a solved map: its rotation."""

    rotation: np.ndarray | None


def _rotation(x, y):
    """U Vᵀ of the centred training cross product (docs/methods.md, procrustes-heldout)."""
    u, _, vt = np.linalg.svd((x - x.mean(0)).T @ (y - y.mean(0)), full_matrices=False)
    return u @ vt


def _case(seed, d_s, d_t, m=32, n_train=60, related=True, k=19):
    from align.fitting.measuring.sampled import Sample

    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(d_s, d_t))
    xt, xs = rng.normal(size=(n_train, d_s)), rng.normal(size=(m, d_s))
    yt = (xt @ mix if related else 0) + rng.normal(size=(n_train, d_t))
    ys = (xs @ mix if related else 0) + rng.normal(size=(m, d_t))
    docs = np.repeat(np.arange(8), m // 8)
    perms = np.array([rng.permutation(m) for _ in range(k)])
    sample = Sample(np.arange(m), docs, {0: xs}, {1: ys}, perms=perms, scheme="rows")
    return sample, (xt, yt, xs, ys, perms)


@pytest.mark.parametrize("use_torch", [False, True], ids=["numpy", "torch"])
@pytest.mark.parametrize("widths", [(6, 9), (9, 6)])
def test_value_and_null_equal_scipy_on_the_re_paired_rows(widths, use_torch):
    """On the host's numpy and on torch (the code path of a fit's GPU, run on the CPU)."""
    from align.fitting.measuring.sampled import heldout_null
    from align.ridge.backend import Backend

    sample, (xt, yt, xs, ys, perms) = _case(3, *widths)
    backend = Backend("cpu", use_torch=use_torch)
    out = heldout_null(sample, {(0, 1): Map(_rotation(xt, yt))}, backend)
    assert out[(0, 1)].rotation is None
    value, null = procrustes_heldout_null(xt, yt, xs, ys, perms)
    got = sample.heldout[(0, 1)]
    assert got.shape == (len(perms) + 1,)
    np.testing.assert_allclose(got, [value, *null], rtol=RTOL)
    assert value < null.min()  # related rows: the pairing beats every re-pairing here


def test_independent_rows_give_spread_p_values():
    """200 seeds of independent X and Y (the rotation from independent training rows too),
    K = 19: p is uniform on {1/20, ..., 1} under this null, so P(p ≤ 0.25) = 0.25 and
    P(p ≤ 0.5) = 0.5; each observed fraction is within 0.1 of its share (binomial sd
    0.031-0.035: 3 sd)."""
    from align.fitting.measuring.sampled import heldout_null

    p = []
    for seed in range(200):
        sample, (xt, yt, *_) = _case(seed, 6, 5, related=False)
        heldout_null(sample, {(0, 1): Map(_rotation(xt, yt))})
        got = sample.heldout[(0, 1)]
        p.append(calibration(got[:1, None], got[1:, None, None], "distance", 0.0)["p"][0, 0])
    p = np.array(p)
    assert abs(np.mean(p <= 0.25) - 0.25) <= 0.1, np.mean(p <= 0.25)
    assert abs(np.mean(p <= 0.5) - 0.5) <= 0.1, np.mean(p <= 0.5)


def test_a_sampled_side_without_variance_is_refused_in_one_line():
    from align.errors import InputError
    from align.fitting.measuring.sampled import heldout_null

    sample, (xt, yt, *_) = _case(1, 6, 5)
    sample.ys[1] = np.ones_like(sample.ys[1])
    with pytest.raises(InputError) as err:
        heldout_null(sample, {(0, 1): Map(_rotation(xt, yt))})
    message = str(err.value)
    assert "\n" not in message
    assert "source boundary 0 × target boundary 1" in message and "without variance" in message
