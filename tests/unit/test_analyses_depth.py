"""Effective-depth rules (docs/methods.md) on hand-built curves."""

import numpy as np
import pytest


def ed(cos=None, kl=None, ov=None, L=6):
    from align.analyses import effective_depth

    cos = np.zeros(L) + 0.5 if cos is None else np.asarray(cos, float)
    kl = np.linspace(10, 0, L + 1) if kl is None else np.asarray(kl, float)
    ov = np.linspace(0, 1, L + 1) if ov is None else np.asarray(ov, float)
    return effective_depth(cos, cos, cos, kl, ov)


def test_cosine_last_crossing():
    # crossings (c_l < 0 <= c_{l+1}) at l = 0 and l = 3: the LAST one counts
    r = ed(cos=[-0.2, 0.1, -0.3, -0.1, 0.0, 0.4])
    assert r["effective_depth"][0] == 3 and r["ratio"][0] == pytest.approx(4 / 6)


def test_cosine_mean_of_three():
    from align.analyses import effective_depth

    # mean of (−0.6, 0.3, 0.0) = −0.1 < 0 at l = 1; mean at l = 2 is +0.1
    a, m, lay = np.array([[0.1, -0.6, 0.2], [0.1, 0.3, 0.0], [0.1, 0.0, 0.1]])
    r = effective_depth(a, m, lay, [5, 4, 3, 0], [0, 0.5, 0.6, 1])
    assert r["effective_depth"][0] == 1


def test_cosine_no_crossing():
    r = ed(cos=[0.2, 0.1, -0.3, -0.1, -0.2, -0.4])  # goes negative, never back
    assert np.isnan(r["effective_depth"][0]) and np.isnan(r["ratio"][0])
    assert "never crosses" in r["reasons"]["cosine"]


def test_cosine_crossing_at_last_layer_is_ignored():
    # l ranges over 0..L−2: a crossing between L−2 and L−1 counts, beyond does not exist
    r = ed(cos=[0.2, 0.1, 0.3, 0.1, -0.2, 0.4])
    assert r["effective_depth"][0] == 4


def test_kl_first_below_half_max():
    # boundaries 0..L−1 read; max over them = 8 (the 100 at boundary L is ignored); first < 4 is l = 2
    r = ed(kl=[8, 5, 3.9, 5, 1, 0.5, 100])
    assert r["effective_depth"][1] == 2 and r["ratio"][1] == pytest.approx(3 / 6)


def test_kl_exactly_half_is_not_below_and_last_layer_not_counted():
    r = ed(kl=[8, 4, 4, 4, 4, 1, 0])  # only boundary 5 = L−1 is below: outside 0..L−2
    assert np.isnan(r["effective_depth"][1]) and "below 0.5" in r["reasons"]["kl"]


def test_overlap_first_above():
    r = ed(
        ov=[0, 0.2, 0.3, 0.4, 0.2, 0.8, 1]
    )  # 0.3 is not > 0.3; first is l = 3; dip later ignored
    assert r["effective_depth"][2] == 3


def test_overlap_no_crossing():
    r = ed(ov=[0, 0.1, 0.2, 0.1, 0.3, 0.9, 1])
    assert np.isnan(r["effective_depth"][2]) and "above 0.3" in r["reasons"]["overlap"]
    # the default KL curve 10, 8.33, 6.67, 5, 3.33, 1.67 (boundaries 0..5): first below 5 is l = 4
    assert r["reasons"]["kl"] == "" and r["effective_depth"][1] == 4


def test_mismatched_curves():
    from align.errors import InputError

    with pytest.raises(InputError, match="boundaries"):
        ed(kl=[1, 2, 3])
