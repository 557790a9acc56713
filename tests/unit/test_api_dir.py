"""`dir(align)` shows the entry points the API page documents, so completion offers them."""

from __future__ import annotations


def test_dir_lists_the_entry_points():
    import align

    names = dir(align)
    # the entry points the API page documents, written out by hand
    for name in ("extract", "open_alignment", "open_activations", "apply_map", "fit", "FitSpec"):
        assert name in names, name
    assert set(align.__all__) <= set(names)
    assert names == sorted(names)
