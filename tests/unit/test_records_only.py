"""align's entry points take their options as records only: a field given as a flat keyword
(the earlier form, `align.fit(S, T, out, seed=1)`) is a TypeError of one line that names the
keyword, its value and the record it goes in, raised before anything is opened or written. The
expected messages are written out by hand."""

from __future__ import annotations

import pytest


def _refusal(call) -> str:
    with pytest.raises(TypeError) as e:
        call()
    text = str(e.value)
    assert "\n" not in text, text
    return text


def test_fit_names_the_record_of_each_old_keyword(tmp_path):
    import align

    out = tmp_path / "r.zarr"
    S, T = str(tmp_path / "s.zarr"), str(tmp_path / "t.zarr")  # never opened
    cases = {
        "seed": (1, "align.fit() got seed=1: pass it in FitSpec(seed=1)"),
        "scheduler": (
            "synchronous",
            "align.fit() got scheduler='synchronous': pass it in "
            "Execution(scheduler='synchronous')",
        ),
        "worker_budget": (
            5000,
            "align.fit() got worker_budget=5000: pass it in FitHooks(worker_budget=5000)",
        ),
    }
    for name, (value, want) in cases.items():
        assert _refusal(lambda: align.fit(S, T, str(out), **{name: value})) == want
    assert _refusal(lambda: align.fit(S, T, str(out), alphas=[1.0], seed=2)) == (
        "align.fit() got alphas=[1.0] (and 1 more keyword(s)): pass it in FitSpec(alphas=[1.0])"
    )
    assert _refusal(lambda: align.fit(S, T, str(out), sead=1)) == (
        "align.fit() got an unexpected keyword argument 'sead'"
    )
    assert not out.exists()


def test_fit_live_names_the_record_of_each_old_keyword():
    from align.fitting.live_route.pipeline import fit_live

    assert _refusal(lambda: fit_live(None, None, bootstrap=0)) == (
        "fit_live() got bootstrap=0: pass it in FitSpec(bootstrap=0)"
    )
    assert _refusal(lambda: fit_live(None, None, memory_limit="8GB")) == (
        "fit_live() got memory_limit='8GB': pass it in Execution(memory_limit='8GB')"
    )


def test_extract_names_the_record_of_each_old_keyword(tmp_path):
    import align

    out = tmp_path / "s.zarr"
    cases = {
        "dtype": ("float32", "ModelSpec(name, dtype='float32')"),
        "max_length": (64, "CorpusSpec(max_length=64)"),
        "format": ("tasks", "CorpusSpec(fmt='tasks')"),  # the old keyword of the field `fmt`
        "batch_size": (8, "ExtractOptions(batch_size=8)"),
    }
    for name, (value, record) in cases.items():
        text = _refusal(lambda: align.extract("m", "c.txt", str(out), **{name: value}))
        assert text == f"align.extract() got {name}={value!r}: pass it in {record}", text
    assert not out.exists()


def test_a_record_of_the_wrong_type_is_named(tmp_path):
    import align
    from align.fitting import Execution

    S, T = str(tmp_path / "s.zarr"), str(tmp_path / "t.zarr")
    assert _refusal(lambda: align.fit(S, T, None, Execution())) == (
        "`spec` must be a FitSpec, not Execution"
    )
    assert _refusal(
        lambda: align.extract("m", "c.txt", str(tmp_path / "o"), {"batch_size": 8})
    ) == ("`options` must be an ExtractOptions, not dict")
