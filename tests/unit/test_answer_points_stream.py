"""`--split answer-points-stream` against [P1]'s own loop (`analysis/skip_max_depth.py`,
`main`), transcribed here: Python's `random` seeded 12345 once, then for every level in turn
and every prompt of it `pos = list(range(0, len(atokens) - 4, 4))`, `random.shuffle(pos)`,
`pos[:4]`, each plus the answer's first position. The draws must be P1's exactly."""

from __future__ import annotations

import random

import numpy as np


def _p1_points(levels: list) -> list:
    """P1's loop over `levels` (per level, per prompt: (a_start_pos, len(atokens)))."""
    state = random.getstate()
    random.seed(12345)
    out = []
    for prompts in levels:
        for a_start_pos, n in prompts:
            pos = list(range(0, n - 4, 4))
            random.shuffle(pos)
            pos = pos[:4]
            out.append([a_start_pos + x for x in pos])
    random.setstate(state)
    return out


def _predicts(a: int, n: int, T: int) -> np.ndarray:
    """(T,) bool: token t predicts an answer token (answer tokens at a..a+n−1)."""
    out = np.zeros(T, bool)
    out[a - 1 : a + n - 1] = True
    return out


def test_the_stream_draws_p1s_points_across_levels():
    from align.analyses.skip import answer_points, answer_points_stream

    rng = np.random.default_rng(0)
    levels = [
        [(int(rng.integers(5, 30)), int(rng.integers(3, 40))) for _ in range(5)] for _ in range(3)
    ]
    prompts = [_predicts(a, n, a + n) for level in levels for a, n in level]
    got = answer_points_stream(prompts, 12345)
    assert got == _p1_points(levels)
    assert any(len(p) == 4 for p in got) and any(len(p) == 0 for p in got)  # long and short answers
    # the default seeds each prompt by its index: other draws, the same rule
    per_prompt = [answer_points(p, 12345, i) for i, p in enumerate(prompts)]
    assert per_prompt != got
    assert all(set(x) <= set(range(a, a + n)) for x, (a, n) in zip(per_prompt, sum(levels, [])))
