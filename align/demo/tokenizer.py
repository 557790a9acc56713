"""The demo's character-level tokenizer, saved as a transformers fast tokenizer so that the
demo's models load through `align extract PATH` like any checkpoint.

One token per character of `align.demo.data.ALPHABET`, plus `<|endoftext|>` (id 0) as end,
padding and unknown token. No BOS is added (like Qwen2's tokenizer), so position 0 is a real
character.
"""

from __future__ import annotations

from align.demo.data import ALPHABET

SPECIAL = "<|endoftext|>"


def build(alphabet: str = ALPHABET):
    """A PreTrainedTokenizerFast with vocabulary {SPECIAL: 0, alphabet[k]: k + 1}.

    A BPE model with no merges splits a string into single characters, and keeps character
    offsets exact (align's token table records them)."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {SPECIAL: 0, **{c: k + 1 for k, c in enumerate(alphabet)}}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=SPECIAL))
    tok.add_special_tokens([SPECIAL])
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=SPECIAL, pad_token=SPECIAL, unk_token=SPECIAL)


def save(path: str, alphabet: str = ALPHABET):
    """Build the tokenizer and save_pretrained it into the folder `path`; returns it."""
    tok = build(alphabet)
    tok.save_pretrained(path)
    return tok
