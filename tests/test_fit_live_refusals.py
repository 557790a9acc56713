"""Refusals of `align fit` that both routes share or that tell the two forms apart: the one
tokenizer check (align.fitting.pairing) word for word, and the store-only options given to
`--live` refused in one line naming the option."""

from __future__ import annotations

import pytest

from align.errors import StoreError
from align.fitting.pairing import check_tokenizers

HASHES = {"vocab": "v", "merges": "m", "added_tokens": "a", "normalizer_pretokenizer": "n", "special_wrapping": "s"}


def test_the_tokenizer_check_names_every_part_that_differs_in_one_message():
    other = {**HASHES, "vocab": "v2", "special_wrapping": "s2"}
    with pytest.raises(StoreError) as e:
        check_tokenizers(HASHES, other, "a.zarr (m1)", "b.zarr (m2)")
    assert str(e.value) == ("the tokenizers of source a.zarr (m1) and target b.zarr (m2) differ in vocabulary, "
                            "special-token wrapping: a map between models needs one token stream; fit models that "
                            "share a tokenizer")
    check_tokenizers(HASHES, {**HASHES, "all": "another"}, "a", "b")  # only the behaviour's parts count
