"""The coverage rule of `align.fitting.pairing.anchors` on hand-worked token tables: text coverage is 1
for one text cut at any granularity or with either space convention, 0 for two texts that end
apart, and counts only the contexts both sides read when windows are cut at other characters;
token coverage is reported with the bound the token counts set. Every expected number is
worked by hand in the comments."""

from __future__ import annotations

import numpy as np
import pytest


def _places(spans_per_window, doc=0):
    """TokenPlaces of one document: a BOS (no span) then the spans, per window (sequence)."""
    from align.fitting.pairing.anchors import TokenPlaces

    cols = {k: [] for k in ("doc", "seq", "pos", "char_start", "char_end")}
    for q, spans in enumerate(spans_per_window):
        for p, (s, e) in enumerate([(-1, -1)] + list(spans)):
            for k, v in zip(cols, (doc, q, p, s, e)):
                cols[k].append(v)
    return TokenPlaces(*(np.asarray(v, np.int64) for v in cols.values()))


def _pairs(a, b):
    from align.fitting.pairing.anchors import anchor_pairs

    return anchor_pairs(_places(a), _places(b))


def test_one_text_at_two_granularities_is_covered_whole():
    # "abcdefgh": four tokens of 2 against two of 4; shared ends 4 and 8
    got = _pairs([[(0, 2), (2, 4), (4, 6), (6, 8)]], [[(0, 4), (4, 8)]])
    assert got.n_pairs == 2
    assert got.text_coverage == {"source": 1.0, "target": 1.0}
    assert got.coverage == {"source": 0.5, "target": 1.0}
    assert got.token_bound("source") == 0.5 and got.token_bound("target") == 1.0


def test_leading_against_trailing_spaces_pair_only_the_end_but_cover_the_text():
    # "the cat sat": "the" " cat" " sat" (ends 3, 7, 11) against "the " "cat " "sat" (4, 8, 11)
    got = _pairs([[(0, 3), (3, 7), (7, 11)]], [[(0, 4), (4, 8), (8, 11)]])
    assert got.n_pairs == 1 and got.coverage == {"source": 1 / 3, "target": 1 / 3}
    assert got.text_coverage == {"source": 1.0, "target": 1.0}
    assert got.trailing == {"source": 0.0, "target": 0.0}  # 2 unpaired anchors: too few to name


def test_a_trailing_space_convention_is_named_from_twenty_unpaired_anchors():
    from align.fitting.pairing.anchors import coverage_line

    # 30 words of 3 letters and a space: leading "▁abc" ends at 3, 7, 11, ...; trailing "abc▁"
    # at 4, 8, 12, ...; the last word has no space after it: both end at 119
    lead = [(0, 3)] + [(4 * k - 1, 4 * k + 3) for k in range(1, 30)]
    trail = [(4 * k, 4 * k + 4) for k in range(29)] + [(116, 119)]
    got = _pairs([lead], [trail])
    assert got.n_pairs == 1 and got.text_coverage == {"source": 1.0, "target": 1.0}
    # target: its 29 unpaired anchors 4, 8, ..., 116 each sit one after a source anchor 3, ..., 115
    assert got.trailing == {"source": 0.0, "target": 1.0}
    line = coverage_line(got)
    assert line.startswith(
        "1 anchored pairs cover source 3.3% of its 30 tokens (at most 100.0% with these token "
        "counts) and 100.0% of its text (lowest: document 0, 100.0%)"
    )
    assert "; the target ends 100% of its unpaired anchors one character after the source" in line


def test_two_texts_that_end_apart_cover_nothing_and_are_refused():
    from align.errors import InputError
    from align.fitting.pairing.anchors import check_coverage

    # shared ends 3 and 6, but one text ends at 10, the other at 12: no shared anchor at 10
    got = _pairs([[(0, 3), (3, 6), (6, 10)]], [[(0, 3), (3, 6), (6, 9), (9, 12)]])
    assert got.n_pairs == 2 and got.text_coverage == {"source": 0.0, "target": 0.0}
    with pytest.raises(InputError) as e:
        check_coverage(got, 0.9, ("a.zarr (m)", "b.zarr (n)"))
    assert str(e.value) == (
        "only 0.0% of the text of source a.zarr (m) lies before an anchor shared with the other model "
        "(2 pairs; floor `min_coverage` 0.9; lowest: document 0, 0.0%): the two tokenizations do not "
        "cover the same text (another corpus, or offsets that do not point into the text read; not "
        "their token counts, 3 against 4, which bound only how many tokens pair); tokenize both from "
        "one corpus, or pass `min_coverage` 0 to fit them anyway"
    )
    check_coverage(got, 0.0)  # no floor


def test_windows_cut_at_other_characters_keep_the_shared_contexts_and_count_the_rest():
    # twelve characters; source windows cut at 6: (0,2) (2,4) (4,6) | (6,8) (8,10) (10,12);
    # target windows cut at 8: (0,4) (4,8) | (8,12). Shared ends: 4 (first windows: paired),
    # 8 (source context 6, target 0: left out), 12 (contexts 6 and 8: left out).
    got = _pairs(
        [[(0, 2), (2, 4), (4, 6)], [(6, 8), (8, 10), (10, 12)]], [[(0, 4), (4, 8)], [(8, 12)]]
    )
    assert got.n_pairs == 1 and got.left_out == {0: 2}
    # both sides: the first windows, to the shorter one's end (6): 4 of 6 characters before the
    # anchor at 4; the later windows start at 6 and 8, read by one side only: not counted
    assert got.text_coverage == pytest.approx({"source": 4 / 6, "target": 4 / 6}, abs=1e-15)
    rec = got.record()
    assert rec["windows"] == {"anchors_left_out": 2, "documents": [0], "left_out": [2]}


def test_a_window_that_begins_inside_a_character_starts_no_context():
    from align.fitting.pairing.anchors import windows_of

    # byte pieces (4,5) (4,5) of one character split across the cut: the second window starts
    # at 4 but the first ended at 5; a clean cut at 6 starts a context at 6
    w = windows_of(_places([[(0, 4), (4, 5)], [(4, 5), (5, 6)], [(6, 8)]]))
    assert w.start.tolist() == [0, -1, 6] and w.last.tolist() == [False, False, True]
    assert w.end.tolist() == [5, 6, 8]


def test_covered_characters_is_the_union_of_the_clipped_spans():
    from align.fitting.pairing.anchors import covered_characters

    # window 0: (0,3) (2,5) (7,9) → 5 + 2 = 7 below 10, below 8: 5 + 1 = 6; window 1: (0,4) (4,4)
    s, e = np.array([0, 2, 7, 0, 4]), np.array([3, 5, 9, 4, 4])
    window = np.array([0, 0, 0, 1, 1])
    np.testing.assert_array_equal(covered_characters(s, e, window, np.array([10, 10])), [7, 4])
    np.testing.assert_array_equal(covered_characters(s, e, window, np.array([8, 2])), [6, 2])


def test_a_full_window_may_have_been_truncated_so_it_need_not_end_with_the_other():
    from align.fitting.pairing.anchors import anchor_pairs

    # `overflow` truncate: BOS + (0,2) (2,4) (4,6) is full at max_length 4, BOS + (0,4) (4,8) at
    # 3; the shared anchor is 4. Known full, both windows are cut: the text reaches the shorter
    # end (6), 4 of 6 characters anchored on each side. Not known, both seem to run to the
    # document's end, which they do not share: nothing counts.
    a, b = _places([[(0, 2), (2, 4), (4, 6)]]), _places([[(0, 4), (4, 8)]])
    cut = anchor_pairs(a, b, (4, 3))
    assert cut.text_coverage == pytest.approx({"source": 4 / 6, "target": 4 / 6}, abs=1e-15)
    assert anchor_pairs(a, b).text_coverage == {"source": 0.0, "target": 0.0}
    assert anchor_pairs(a, b, (5, 5)).text_coverage == {"source": 0.0, "target": 0.0}
