"""The demo's character-level tokenizer, saved as a transformers fast tokenizer so that the
demo's models load through `align extract PATH` like any checkpoint.

One token per character of `align.demo.data.ALPHABET`, plus `<|endoftext|>` (id 0) as end,
padding and unknown token. No BOS is added (like Qwen2's tokenizer), so position 0 is a real
character. `build_bpe` is the demo's second tokenizer: a BPE learnt on the training text, so that
one model of the demo reads the same text in other tokens (`align fit` pairs them on the text).
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
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=SPECIAL, pad_token=SPECIAL, unk_token=SPECIAL
    )


def build_bpe(text: str, n_merges: int, alphabet: str = ALPHABET):
    """A PreTrainedTokenizerFast whose BPE starts from the characters of `alphabet` (and
    SPECIAL, id 0) and learns `n_merges` merges from `text` (no pre-tokenizer, so a token may
    span a space): the demo's second tokenizer, which cuts the same text into other tokens."""
    from tokenizers import Tokenizer, decoders, models, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=SPECIAL))
    tok.decoder = decoders.Fuse()
    trainer = trainers.BpeTrainer(
        vocab_size=1 + len(alphabet) + n_merges,
        special_tokens=[SPECIAL],
        initial_alphabet=list(alphabet),
        limit_alphabet=len(alphabet),
        show_progress=False,
    )
    tok.train_from_iterator(text.split("\n"), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=SPECIAL, pad_token=SPECIAL, unk_token=SPECIAL
    )


def save(path: str, alphabet: str = ALPHABET, merges: int = 0, text: str | None = None):
    """Build the tokenizer (with `merges`, the BPE learnt from `text`) and save_pretrained it
    into the folder `path`; returns it."""
    tok = build_bpe(text, merges, alphabet) if merges else build(alphabet)
    tok.save_pretrained(path)
    return tok
