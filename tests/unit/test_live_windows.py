"""The live route's units for two tokenizers, on hand-built batches: Dask shards cut only
between grouping windows, the most target rows one window holds, and the plan's count of them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align.fitting import budget
from align.fitting.live_anchors import AnchoredStream
from align.fitting.shards import shards_of


@dataclass
class B:
    """What shards_of and the stream read of a batch."""
    members: list
    positions: int
    tokens: np.ndarray


def _batches():
    # windows of 4 sequences (batch size 2): sequences 0-3, 4-7, 8-9; two batches in each full window
    spec = [([0, 2], 10), ([1, 3], 30), ([4, 5], 20), ([6, 7], 20), ([8, 9], 40)]
    return [B(m, p, np.arange(p // 2)) for m, p in spec]


def test_shards_are_cut_between_windows_only():
    bs = _batches()
    window = lambda b: b.members[0] // 4  # noqa: E731
    # without units: cut once the positions so far reach k/n of the 120 (10, 40, 60, 80, 120)
    assert [[b.members for b in s] for s in shards_of(bs, 3)] == [[[0, 2], [1, 3]], [[4, 5], [6, 7]], [[8, 9]]]
    assert [[b.members for b in s] for s in shards_of(bs, 4)] == [[[0, 2], [1, 3]], [[4, 5]], [[6, 7], [8, 9]]]
    # with units: a window is never cut (not after [4, 5]: [6, 7] is in its window)
    got = shards_of(bs, 4, window)
    assert [[b.members for b in s] for s in got] == [[[0, 2], [1, 3]], [[4, 5], [6, 7]], [[8, 9]]]
    assert all(len({window(b) for b in s}) == 1 for s in got)
    assert [b for s in shards_of(bs, 2, window) for b in s] == bs  # every batch once, in order


def test_most_held_counts_a_windows_used_rows():
    bs = _batches()  # used rows: 5 + 15 | 10 + 10 | 20
    stream = AnchoredStream(None, None, [], np.zeros(0, np.int64), 4, np.zeros(0, np.int32), np.zeros(0, np.int64))
    assert stream.most_held(bs) == 20
    assert stream.most_held(bs[:1] + bs[2:4]) == 20 and stream.most_held(bs[:2]) == 20 and stream.most_held(bs[:1]) == 5


def test_the_plan_counts_a_windows_rows_of_the_block_only_when_anchored():
    shape = budget.LiveShape(3, 64, 5, 96, 512, 64, 256, 4, 4, 100, 10 ** 6)
    plain = budget.pass_bytes(shape, 2, False)
    assert "window rows" not in plain
    from dataclasses import replace

    anchored = budget.pass_bytes(replace(shape, window_rows=1000), 2, False)
    assert anchored["window rows"] == 4 * 1000 * 2 * 96  # itemsize × rows × block boundaries × d_T
    assert {k: v for k, v in anchored.items() if k != "window rows"} == plain
