"""The sampled rows gathered from chunks of held-out rows as the live route's Dask shards
gather them (`sampled.found` per chunk, `sampled.joined` in any order of the tree,
`Sample.put`) equal the rows of the sampled tokens indexed directly, exactly; and a result
that lacks an asked measure's array, or its calibration, is refused naming the arrays."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from align.fitting.measuring import sampled
from align.fitting.results import dataset as result


def _rows(seed=0, n=60, widths=(5, 3)):
    rng = np.random.default_rng(seed)
    tokens = np.sort(rng.choice(1000, n, replace=False))
    xs = {0: rng.standard_normal((n, widths[0])), 2: rng.standard_normal((n, widths[0]))}
    ys = {1: rng.standard_normal((n, widths[1])).astype(np.float32)}
    return tokens, xs, ys


def test_rows_joined_from_chunks_in_any_order_equal_the_sampled_rows():
    tokens, xs, ys = _rows()
    pick = np.sort(np.random.default_rng(1).choice(len(tokens), 17, replace=False))
    sample = sampled.Sample(tokens[pick], np.zeros(17, dtype=np.int64))
    order = np.random.default_rng(2).permutation(len(tokens))  # a chunk's rows in any order
    chunks = np.array_split(order, 4)
    parts = [
        sampled.found(
            {b: v[c] for b, v in xs.items()},
            {b: torch.from_numpy(v[c]) for b, v in ys.items()},  # tensors, as the forwards give
            tokens[c],
            sample.tokens,
        )
        for c in chunks
    ]
    got = None
    for part in reversed(parts):  # the tree adds them in another order than the corpus's
        got = sampled.joined(got, part)
    sample.put(got)
    for b, v in xs.items():
        np.testing.assert_array_equal(sample.xs[b], v[pick])
    np.testing.assert_array_equal(sample.ys[1], ys[1][pick].astype(np.float64))
    assert sample.ys[1].dtype == np.float64


def test_a_chunk_without_a_sampled_token_gives_nothing():
    tokens, xs, ys = _rows()
    assert sampled.found(xs, ys, tokens, np.array([1001, 1002])) is None
    sample = sampled.Sample(np.array([1001]), np.zeros(1, dtype=np.int64))
    sample.put(sampled.joined(None, None))
    assert sample.xs == {} and sample.ys == {}


@pytest.mark.parametrize(
    "data,options,missing",
    [
        ({"cka": 1}, {"measures": ["ridge", "cka", "rsa"]}, "rsa"),
        ({"cka": 1}, {"measures": ["ridge", "cka"], "calibrated": ["cka"]}, "cka_p"),
        (
            {"procrustes_heldout": 1},
            {"measures": ["ridge", "procrustes-heldout"], "calibrated": ["procrustes-heldout"]},
            "procrustes-heldout_p",
        ),
    ],
)
def test_a_result_without_an_asked_measure_is_refused_naming_it(data, options, missing):
    with pytest.raises(RuntimeError) as e:
        result._check_every_measure(data, options)
    assert str(e.value) == f"the fit computed no {missing}, which it was asked for"


def test_a_result_with_every_asked_measure_passes():
    data = {"cka": 1, "cka_p": 1, "procrustes_heldout": 1, "procrustes_heldout_p": 1}
    options = {
        "measures": ["ridge", "cka", "procrustes-heldout"],
        "calibrated": ["cka", "procrustes-heldout"],
    }
    assert result._check_every_measure(data, options) is None
    # a measure left uncalibrated (the default leaves the streamed ones) needs no _p
    left = {"measures": ["ridge", "cka"], "calibrated": []}
    assert result._check_every_measure({"cka": 1}, left) is None
    assert result._check_every_measure({}, {"measures": ["ridge"]}) is None
