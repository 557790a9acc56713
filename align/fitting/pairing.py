"""What two models must share for a map between them: one token stream. Their tokenizers must
behave identically (the same vocabulary, merges, added tokens, normalizer/pre-tokenizer and
special-token wrapping, compared by `corpus.tokenizer_hashes`); both routes refuse a pair
that differs with this one message (stores: their recorded hashes; --live: the models')."""

from __future__ import annotations

from align.errors import StoreError

TOKENIZER_PARTS = ("vocab", "merges", "added_tokens", "normalizer_pretokenizer", "special_wrapping")
TOKENIZER_NAMES = {"vocab": "vocabulary", "merges": "merges", "added_tokens": "added tokens",
                   "normalizer_pretokenizer": "normalizer/pre-tokenizer", "special_wrapping": "special-token wrapping"}


def check_tokenizers(source_hashes: dict, target_hashes: dict, source: str, target: str) -> None:
    """Refuse two tokenizers that behave differently (`corpus.tokenizer_hashes` of each, or
    the hashes a store records), naming the parts that differ; `source` and `target` say
    which inputs (a store's path and model, or a model's name). A map between models needs
    one token stream."""
    differ = [k for k in TOKENIZER_PARTS if source_hashes.get(k) != target_hashes.get(k)]
    if differ:
        raise StoreError(
            f"the tokenizers of source {source} and target {target} differ in "
            f"{', '.join(TOKENIZER_NAMES[k] for k in differ)}: a map between models needs one token stream; "
            "fit models that share a tokenizer"
        )
