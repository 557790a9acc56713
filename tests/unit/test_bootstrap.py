"""The shared prompt bootstrap (align.stats.bootstrap) against plain numpy loops: the
documented indices, token-weighted means from per-prompt sums, maxima, percentile intervals
(NaN resamples left out), the prompts' identity, and its refusals."""

from __future__ import annotations

import numpy as np
import pytest


def test_indices_are_the_documented_scheme():
    from align.stats.bootstrap import Resampling, indices

    got = indices(7, Resampling(120, 11))
    np.testing.assert_array_equal(got, np.random.default_rng(11).integers(0, 7, size=(120, 7)))
    got = indices(7, Resampling(120, 11), size=3)
    np.testing.assert_array_equal(got, np.random.default_rng(11).integers(0, 7, size=(120, 3)))


def test_token_means_maxima_and_means_match_loops():
    """Resample b: Σ sums / Σ counts over prompts idx[b] (repeats counted); max and mean over
    them. rtol 1e-12 against explicit loops."""
    from align.stats.bootstrap import resampled_maxima, resampled_means, resampled_token_means

    rng = np.random.default_rng(0)
    n = 9
    counts = rng.integers(1, 30, n)
    sums = rng.normal(size=(n, 3, 4)) * counts[:, None, None]
    idx = np.random.default_rng(5).integers(0, n, size=(40, n))
    got = resampled_token_means(sums, counts, idx)
    for b, ix in enumerate(idx):
        total, count = np.zeros((3, 4)), 0
        for p in ix:
            total += sums[p]
            count += counts[p]
        np.testing.assert_allclose(got[b], total / count, rtol=1e-12)
        np.testing.assert_allclose(
            resampled_maxima(sums, idx)[b], np.max([sums[p] for p in ix], 0), rtol=0
        )
        np.testing.assert_allclose(
            resampled_means(sums, idx)[b], np.mean([sums[p] for p in ix], 0), rtol=1e-12
        )


def test_percentile_interval_leaves_nan_out():
    from align.stats.bootstrap import defined_fraction, percentile_interval

    a = np.arange(1.0, 241.0)
    b = np.where(
        np.arange(240) % 2 == 0, np.nan, a * 3
    )  # every other resample undefined: 120 defined
    s = np.stack([a, b, np.full(240, np.nan)], axis=1)
    low, high = percentile_interval(s)
    np.testing.assert_allclose(
        low[:2], [np.percentile(a, 2.5), np.percentile(a[1::2] * 3, 2.5)], rtol=1e-12
    )
    np.testing.assert_allclose(
        high[:2], [np.percentile(a, 97.5), np.percentile(a[1::2] * 3, 97.5)], rtol=1e-12
    )
    assert np.isnan(low[2]) and np.isnan(high[2])
    np.testing.assert_array_equal(defined_fraction(s), [1.0, 0.5, 0.0])


def test_prompts_hash_is_the_prompts_identity():
    from align.stats.bootstrap import prompts_from_tokens, prompts_hash

    a = prompts_hash([np.array([1, 2]), np.array([3])])
    assert a == prompts_hash([[1, 2], [3]])
    assert a != prompts_hash([[1], [2, 3]])  # same tokens, other prompts
    assert a != prompts_hash([[3], [1, 2]])  # other order
    # A store's rows (any order) give its sequences in index order, tokens by position.
    rows = prompts_from_tokens(np.array([3, 2, 1]), np.array([1, 0, 0]), np.array([0, 1, 0]))
    assert prompts_hash(rows) == a


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"resamples": 0}, "`bootstrap` 0"),
        ({"seed": -1}, "`bootstrap_seed` -1"),
        ({"equal_n": 0}, "`equal_n` 0"),
    ],
)
def test_refusals(kwargs, needle):
    from align.errors import InputError
    from align.stats.bootstrap import Resampling

    with pytest.raises(InputError, match=needle):
        Resampling(**kwargs)
