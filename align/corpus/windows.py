"""Documents → model inputs: windows of at most `max_length` tokens, one document per
sequence or packed.

Sequences: each document is tokenized whole (no special tokens), then cut into windows of at
most `max_length` tokens including the special tokens the tokenizer adds (Llama's BOS,
recorded in the store); `overflow="split"` (default) keeps every window, `"truncate"` only the
first. Documents with no tokens are skipped (their index is still consumed, so `doc` always
points back to the source). Special tokens have char_start = char_end = -1.

Packing (`pack=SEPARATOR`, P1's protocol; plain documents only): each document and the
separator are tokenized separately (no special tokens; the separator as text, so
"<|endoftext|>" becomes the tokenizer's special token, as in a document) and their ids are
concatenated, doc0 sep doc1 sep doc2 ... (no separator before the first document or after the
last), then cut into consecutive windows that are full: `max_length` tokens, the special
tokens the tokenizer adds to each window and the stand-in included. A document cut across
two windows keeps its one id in both. The separator's tokens belong to the document before
them (they end it, as an end-of-text token does; their residuals are formed from its
context) and have char spans -1. The tokens after the last full window (the last partial
window) are left out and counted (`TokenizeStats.packed_tail_tokens`); a corpus without one
full window is refused. With `max_tokens`, only whole windows are kept (the first
max_tokens // max_length). Packing gives up the one-document-per-sequence context: a window's
tokens attend to the end of the documents before them in the window.

Stand-in first token (`stand_in_token=ID`, P1's protocol for a model without BOS, e.g. 0
for Qwen 2.5): ID is put at position 0 of every sequence, packed or not (a special token:
char span -1, and the document of the token after it), so the fit's default, which leaves
position 0 out, drops exactly it and scores every real token. A tokenizer that already adds
tokens before a text (Llama's BOS) is refused: its BOS is already what the fit leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from align.corpus.documents import items
from align.corpus.formats import AIME_MAX_TOKENS
from align.corpus.reading import Reading
from align.corpus.spec import CorpusSpec
from align.corpus.tokens import TokenizeStats, composing_form, special_ids, special_tokens
from align.errors import InputError


@dataclass
class Sequence:
    """One model input: token ids and, per token, its document, position and char span."""

    token_id: np.ndarray  # (n,) int
    doc: int
    seq: int
    char_start: np.ndarray  # (n,) int, -1 for special tokens
    char_end: np.ndarray
    level: int | None = None  # the document's difficulty level, where its format has one
    docs: np.ndarray | None = (
        None  # (n,) int64, each token's document, when a packed window holds several
    )

    def __len__(self) -> int:
        return len(self.token_id)

    def doc_ids(self) -> np.ndarray:
        """(n,) int64: the document of every token (`doc` is the first token's)."""
        return np.full(len(self), self.doc, np.int64) if self.docs is None else self.docs

    def fields(self) -> dict[str, np.ndarray]:
        n = len(self)
        return {
            "token_id": self.token_id,
            "doc": self.doc_ids(),
            "seq": np.full(n, self.seq, np.int64),
            "pos": np.arange(n, dtype=np.int32),
            "char_start": self.char_start,
            "char_end": self.char_end,
        }


def sequences(
    spec: CorpusSpec, tokenizer, stats: TokenizeStats | None = None, reading: Reading | None = None
) -> Iterator[Sequence]:
    """Tokenized sequences in corpus order, at most `spec.max_tokens` tokens in all: one
    document per sequence, or documents packed into full windows (`spec.pack`), each with the
    stand-in first token where `spec.stand_in_token` asks (module docstring). With `stats`,
    counts what tokenizing dropped or parsed as special tokens in each document read. With
    `reading` (a `Reading` of `spec`), the files are read through it: its `hexdigest()` is
    the hash of the bytes these tokens came from."""
    prefix, suffix = special_tokens(tokenizer)
    if spec.stand_in_token is not None:
        if prefix:
            raise InputError(
                f"`stand_in_token` {spec.stand_in_token}: this model's tokenizer already puts {prefix} "
                "(its BOS) at position 0 of every sequence, which the fit leaves out: drop `stand_in_token`"
            )
        prefix = [int(spec.stand_in_token)]
    room = spec.max_length - len(prefix) - len(suffix)
    if room < 1:
        raise InputError(
            f"`max_length` {spec.max_length} leaves no room after the {len(prefix) + len(suffix)} special "
            "token(s) of each sequence"
        )
    wrap = _Wrap(np.asarray(prefix, np.int64), np.asarray(suffix, np.int64))
    encoded = _encoded(spec, tokenizer, stats, len(prefix) + len(suffix), reading)
    if spec.pack is None:
        yield from _document_windows(spec, encoded, room, wrap)
    else:
        separator = np.asarray(
            tokenizer(spec.pack, add_special_tokens=False)["input_ids"], np.int64
        )
        yield from _packed_windows(spec, encoded, room, wrap, separator, stats)


@dataclass(frozen=True)
class _Wrap:
    """The special tokens put around each window's tokens (the stand-in is a prefix)."""

    pre: np.ndarray
    suf: np.ndarray

    def sequence(
        self, ids, cs, ce, docs, seq: int, level=None, budget: int | None = None
    ) -> Sequence:
        """A Sequence of `ids` (with char spans `cs`, `ce` and documents `docs`) wrapped in the
        prefix and suffix (char spans -1; documents of the first and last token), cut to
        `budget` tokens."""
        np_, ns = len(self.pre), len(self.suf)
        pad = lambda k: np.full(k, -1, np.int64)  # noqa: E731
        tok = np.concatenate([self.pre, ids, self.suf])
        cs = np.concatenate([pad(np_), cs, pad(ns)])
        ce = np.concatenate([pad(np_), ce, pad(ns)])
        docs = np.concatenate(
            [np.full(np_, docs[0], np.int64), docs, np.full(ns, docs[-1], np.int64)]
        )
        if budget is not None:
            tok, cs, ce, docs = tok[:budget], cs[:budget], ce[:budget], docs[:budget]
        several = len(docs) and docs[0] != docs[-1]
        return Sequence(
            tok.astype(np.int32), int(docs[0]), seq, cs, ce, level, docs if several else None
        )


def _encoded(
    spec: CorpusSpec,
    tokenizer,
    stats: TokenizeStats | None,
    n_special: int,
    reading: Reading | None,
):
    """(doc, item, ids, offsets) of every document that gives tokens, in corpus order (a
    format's over-long prompt left out and counted)."""
    special = special_ids(tokenizer) if stats is not None else None
    compose = composing_form(tokenizer) if stats is not None else None
    for doc, item in enumerate(items(spec, reading)):
        text = item.text
        if not text:
            continue
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = np.asarray(enc["input_ids"], np.int64)
        offs = np.asarray(enc["offset_mapping"], np.int64).reshape(-1, 2)
        if spec.fmt == "aime" and n_special + len(ids) > AIME_MAX_TOKENS:
            if stats is not None:
                stats.over_format_limit += 1
            continue
        if stats is not None:
            stats.add(doc, text, ids, offs, special, compose)
        if len(ids):
            yield doc, item, ids, offs


def _document_windows(spec: CorpusSpec, encoded, room: int, wrap: _Wrap) -> Iterator[Sequence]:
    """One document per sequence: each cut into windows of `room` tokens (all of them, or the
    first with overflow="truncate"), the last sequence cut to --max-tokens."""
    budget = spec.max_tokens
    seq = 0
    for doc, item, ids, offs in encoded:
        starts = range(0, len(ids), room) if spec.overflow == "split" else [0]
        for s in starts:
            if budget is not None and budget <= 0:
                return
            body = slice(s, s + room)
            sq = wrap.sequence(
                ids[body],
                offs[body, 0],
                offs[body, 1],
                np.full(len(ids[body]), doc, np.int64),
                seq,
                item.level,
                budget,
            )
            if budget is not None:
                budget -= len(sq)
            yield sq
            seq += 1
        if budget is not None and budget <= 0:
            return  # the next document is not read (nor counted)


def _packed_windows(
    spec: CorpusSpec,
    encoded,
    room: int,
    wrap: _Wrap,
    separator: np.ndarray,
    stats: TokenizeStats | None,
) -> Iterator[Sequence]:
    """Documents joined by `separator` (its tokens in the document before it, char spans -1)
    cut into full windows of `room` tokens; the last partial window left out and counted;
    with --max-tokens, whole windows only."""
    windows = None if spec.max_tokens is None else spec.max_tokens // spec.max_length
    if stats is not None:
        stats.packed_tail_tokens = 0
    parts: list = []  # (ids, char_start, char_end, docs) not yet in a window
    held = seq = 0
    previous = None
    for doc, _, ids, offs in encoded:
        if previous is not None and len(separator):
            none = np.full(len(separator), -1, np.int64)
            parts.append((separator, none, none, np.full(len(separator), previous, np.int64)))
            held += len(separator)
        parts.append((ids, offs[:, 0], offs[:, 1], np.full(len(ids), doc, np.int64)))
        held += len(ids)
        previous = doc
        while held >= room:
            joined = (
                parts[0] if len(parts) == 1 else tuple(np.concatenate(col) for col in zip(*parts))
            )
            yield wrap.sequence(*(c[:room] for c in joined), seq)
            seq += 1
            held -= room
            parts = [tuple(c[room:] for c in joined)] if held else []
            if windows is not None and seq >= windows:
                return
    if stats is not None:
        stats.packed_tail_tokens = held
    if seq == 0:
        raise InputError(
            f"`pack`: corpus {spec.describe()} gives {held:,} tokens, less than one full window of "
            f"{room:,} (`max_length` {spec.max_length} less the special tokens): give more text or a "
            "smaller `max_length`"
        )
