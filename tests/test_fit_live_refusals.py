"""Refusals of `align fit` that both routes share or that tell the two forms apart: the one
tokenizer check (align.fitting.pairing) word for word, and the store-only options given to
`--live` refused in one line naming the option."""

from __future__ import annotations

import pytest

from align.errors import StoreError
from align.fitting.pairing import check_tokenizers
from assertions import one_line_error

HASHES = {"vocab": "v", "merges": "m", "added_tokens": "a", "normalizer_pretokenizer": "n", "special_wrapping": "s"}


def test_the_tokenizer_check_names_every_part_that_differs_in_one_message():
    other = {**HASHES, "vocab": "v2", "special_wrapping": "s2"}
    with pytest.raises(StoreError) as e:
        check_tokenizers(HASHES, other, "a.zarr (m1)", "b.zarr (m2)")
    assert str(e.value) == ("the tokenizers of source a.zarr (m1) and target b.zarr (m2) differ in vocabulary, "
                            "special-token wrapping: a map between models needs one token stream; fit models that "
                            "share a tokenizer")
    check_tokenizers(HASHES, {**HASHES, "all": "another"}, "a", "b")  # only the behaviour's parts count


@pytest.mark.parametrize("given,named", [
    (["--workers", "2"], "--workers applies to `align fit` on two stores only"),
    (["--task-tokens", "4096"], "--task-tokens applies to `align fit` on two stores only"),
    (["--workers", "2", "--task-tokens", "4096"], "--workers, --task-tokens apply to `align fit` on two stores only"),
])
def test_store_only_options_with_live_are_refused_naming_the_option(zoo, corpus_file, cli, tmp_path, given, named):
    out = tmp_path / "r.zarr"
    code, _, err = cli("fit", "--live", zoo("qwen2"), zoo("qwen2"), corpus_file, "-o", out, *given)
    one_line_error(code, err, named, "--batch-size", "drop it" if len(given) == 2 else "drop them")
    assert not out.exists()
