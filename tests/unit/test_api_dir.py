"""`dir(align)` shows the names `align` imports on first use, so completion offers them."""

from __future__ import annotations


def test_dir_lists_the_lazily_imported_names():
    import align

    names = dir(align)
    # the entry points the API page documents, lazy or not, written out by hand
    for name in ("extract", "open_alignment", "open_activations", "apply_map", "fit", "FitSpec"):
        assert name in names, name
    assert set(align.__all__) <= set(names)
    assert names == sorted(names)
