"""What a tokenizer adds and changes: its special tokens, what tokenizing drops or parses as
special tokens (counted, never silent), and hashes of its behaviour.

What tokenizing changes in the text is counted (`TokenizeStats`), never silent:
- characters outside the tokenizer's vocabulary that it drops (a tokenizer without byte
  fallback or an unknown token drops them: a document of emoji becomes no tokens at all) are
  the non-whitespace characters covered by no token's character span. Whitespace is not
  counted: byte-level tokenizers that trim offsets leave the space a token carries outside
  its span, so an uncovered space is no evidence of loss. Nor is a character the tokenizer's
  NFC/NFKC normalizer composes with the one before it (e + U+0301 -> é, Hangul jamo): the
  composed character's span is its first original character's alone.
- literal special-token text in a document ("<|endoftext|>", "<s>") is parsed as the special
  token, as the model's own tokenizer does by default (and as a chat template relies on):
  align keeps that behaviour, so its token ids equal the tokenizer's, and counts and reports
  each occurrence (a token id among the special ones with a non-empty character span).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from dataclasses import dataclass, field

import numpy as np


def special_tokens(tokenizer) -> tuple[list[int], list[int]]:
    """The ids the tokenizer adds before and after a text (Llama: [BOS], []; Qwen: [], [])."""
    probe = "a b"
    plain = tokenizer(probe, add_special_tokens=False)["input_ids"]
    full = tokenizer(probe, add_special_tokens=True)["input_ids"]
    for k in range(len(full) - len(plain) + 1):
        if full[k : k + len(plain)] == plain:
            return list(full[:k]), list(full[k + len(plain) :])
    return [], []


@dataclass
class TokenizeStats:
    """What tokenizing changed in the documents it read (see the module docstring)."""

    dropped_characters: int = 0
    documents_with_dropped_characters: int = 0
    first_dropped: list = field(default_factory=list)  # up to 5 [doc, n_dropped]
    special_token_text: int = (
        0  # occurrences of literal special-token text parsed as special tokens
    )
    first_special: list | None = None  # [doc, text] of the first occurrence
    over_format_limit: int = (
        0  # documents longer than their format allows (aime: 400 tokens), left out
    )
    packed_tail_tokens: int | None = None  # packed: tokens after the last full window, left out

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        if not d["over_format_limit"]:
            d.pop(
                "over_format_limit"
            )  # absent unless a format limits length: older stores read the same
        if d["packed_tail_tokens"] is None:
            d.pop("packed_tail_tokens")  # absent unless packed
        return d

    def add(
        self,
        doc: int,
        text: str,
        ids: np.ndarray,
        offs: np.ndarray,
        special: np.ndarray,
        compose: str | None = None,
    ) -> None:
        n = uncovered_characters(text, offs, compose)
        if n:
            self.dropped_characters += n
            self.documents_with_dropped_characters += 1
            if len(self.first_dropped) < 5:
                self.first_dropped.append([doc, n])
        if len(ids) and len(special):
            hit = np.flatnonzero(np.isin(ids, special) & (offs[:, 1] > offs[:, 0]))
            if len(hit):
                self.special_token_text += len(hit)
                if self.first_special is None:
                    k = hit[0]
                    self.first_special = [doc, text[offs[k, 0] : offs[k, 1]]]


# str.isspace() is true exactly for these code points.
_WHITESPACE = np.array([c for c in range(0x3001) if chr(c).isspace()], np.uint32)


def uncovered_characters(text: str, offsets: np.ndarray, compose: str | None = None) -> int:
    """Non-whitespace characters of `text` inside no token's character span [start, end), less
    those the normalization `compose` ("NFC" or "NFKC": the tokenizer's, `composing_form`)
    merges into the characters before them.

    offsets: (n_tokens, 2) character offsets into `text`, as fast tokenizers return them. For
    each run of uncovered characters [a, b) after the starter s before it, the characters merged
    are |N(text[s:a])| + |N(text[a:b])| - |N(text[s:b])|, N the normalization: `tokenizers` aligns
    a composed character with its first original character only."""
    if not text:
        return 0
    edges = np.zeros(len(text) + 1, np.int64)
    spans = offsets[offsets[:, 1] > offsets[:, 0]] if len(offsets) else np.zeros((0, 2), np.int64)
    np.add.at(edges, spans[:, 0], 1)
    np.add.at(edges, spans[:, 1], -1)
    uncovered = np.cumsum(edges[:-1]) <= 0
    if not uncovered.any():
        return 0
    codes = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    lost = uncovered & ~np.isin(codes, _WHITESPACE)
    n = int(np.count_nonzero(lost))
    if compose is None or not n:
        return n
    flips = np.flatnonzero(np.diff(np.r_[0, uncovered.astype(np.int8), 0]))
    for a, b in zip(flips[::2], flips[1::2]):
        s = a - 1  # the starter the run's marks may compose with (a run of marks goes back to it)
        while s > 0 and unicodedata.combining(text[s]) and a - s < 32:
            s -= 1
        if s < 0:
            continue
        size = lambda t: len(unicodedata.normalize(compose, t))  # noqa: E731
        merged = size(text[s:a]) + size(text[a:b]) - size(text[s:b])
        n -= min(max(merged, 0), int(np.count_nonzero(lost[a:b])))
    return n


def composing_form(tokenizer) -> str | None:
    """The composing Unicode normalization ("NFC" or "NFKC") the tokenizer's normalizer
    applies (the last one in a Sequence), or None."""
    normalizer = getattr(getattr(tokenizer, "backend_tokenizer", None), "normalizer", None)
    if normalizer is None:
        return None
    form = None
    todo = [json.loads(normalizer.__getstate__())]
    while todo:
        step = todo.pop(0)
        if step.get("type") in ("NFC", "NFKC", "NFD", "NFKD"):
            form = step["type"] if step["type"] in ("NFC", "NFKC") else None
        todo[:0] = step.get("normalizers") or []
    return form


def special_ids(tokenizer) -> np.ndarray:
    """Ids of the tokenizer's special tokens (named ones and added tokens marked special)."""
    ids = set(getattr(tokenizer, "all_special_ids", None) or [])
    for i, t in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
        if getattr(t, "special", False):
            ids.add(int(i))
    return np.asarray(sorted(ids), np.int64)


def tokenizer_hashes(tokenizer) -> dict[str, str]:
    """Hashes of the tokenizer's behaviour: its vocabulary, merges, added tokens, and how it
    wraps a text (special tokens), each separately so a mismatch can say what differs."""

    def digest(obj) -> str:
        return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()

    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    model = spec.get("model", {})
    added = sorted(
        (t.get("id"), t.get("content"), t.get("special")) for t in spec.get("added_tokens", [])
    )
    prefix, suffix = special_tokens(tokenizer)
    out = {
        "vocab": digest(model.get("vocab")),
        "merges": digest(model.get("merges")),
        "added_tokens": digest(added),
        "normalizer_pretokenizer": digest([spec.get("normalizer"), spec.get("pre_tokenizer")]),
        "special_wrapping": digest([prefix, suffix]),
    }
    out["all"] = digest(out)
    return out
