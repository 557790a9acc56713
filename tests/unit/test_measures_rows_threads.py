"""`rows.row_measures` with the null's draws and the interval's recomputations cut among
threads (`Draws.threads`, `rows.split`): every field equal, bit for bit, to one thread's, for
the jackknife and the bootstrap, with tied rows; and `split` joins its pieces in order."""

from __future__ import annotations

import numpy as np

from align.measures.rows import Draws, row_measures, split
from align.stats.bootstrap import Resampling

FIELDS = ("value", "low", "high", "null_mean", "null_std", "calibrated", "p", "p_family")


def test_threads_give_one_threads_numbers():
    rng = np.random.default_rng(3)
    base = rng.standard_normal((48, 3))
    xs = {
        0: base @ rng.standard_normal((3, 6)) + rng.standard_normal((48, 6)),
        1: rng.standard_normal((48, 5)),
    }
    ys = {0: base @ rng.standard_normal((3, 7)), 2: rng.standard_normal((48, 4))}
    xs[0][[4, 9, 30]] = xs[0][2]  # copies: ties at the k-th neighbour and in the distances
    docs = np.repeat(np.arange(12), 4)
    names = ("mknn", "cknna", "rsa", "cka", "procrustes")
    for interval in ("jackknife", "bootstrap"):
        one = row_measures(
            xs, ys, docs, names, k=3, draws=Draws(7, 1, Resampling(100, 2), interval)
        )
        two = row_measures(
            xs, ys, docs, names, k=3, draws=Draws(7, 1, Resampling(100, 2), interval, threads=3)
        )
        for n in names:
            for f in FIELDS:
                np.testing.assert_array_equal(getattr(two[n], f), getattr(one[n], f), err_msg=n + f)
            if one[n].left_out is not None:
                np.testing.assert_array_equal(two[n].left_out, one[n].left_out)


def test_split_joins_the_pieces_in_order():
    items = np.arange(10)[:, None] * np.ones(3)
    got = split(lambda piece: {"x": piece * 2, "first": piece[:, :1]}, items, 4)
    np.testing.assert_array_equal(got["x"], items * 2)
    np.testing.assert_array_equal(got["first"], items[:, :1])
    assert split(lambda piece: {"n": np.array([len(piece)])}, items, 1)["n"].tolist() == [10]
