"""Rows of a map between models that tokenize differently: tokens anchored on the text.

Two tokenizations of one document agree on a prefix of its text wherever both end a token at
the same character c: there both models have read exactly the characters [0, c) (plus their
own special tokens), so their residuals at those two tokens describe the same context. Such a
c is an anchor, and the pair of tokens ending at it is a row of the fit (docs/methods.md,
"Pairing tokens across tokenizers").

The rule, per tokenization (a store's token table: doc, seq, pos, char_start, char_end):
- a token is an anchor of its tokenization at c = char_end when its span is not empty and the
  next token of its document that has a span starts at or after c; so of the byte pieces of
  one multi-byte character (which share its span) only the last, the one that has read the
  whole character, is an anchor; tokens with no span (BOS, a stand-in, packing separators,
  char_start −1) never are;
- a row pairs the anchors of the two tokenizations at the same (document, c);
- a pair with either token at position 0 of its sequence is left out unless
  `include_first_token` (the first-token policy applies per model).

Windows: a token's context starts where its window starts. The two stores must cut every
document into windows that start at the same characters (a document in one window each, the
usual case, always does); otherwise the fit is refused, naming the document (a store holds
residuals computed in its windows, so neither route can re-cut them; `--live` follows the
same rule, so that both routes fit the same rows, and reads each model's windows as its
extraction would). Packed stores (`pack`) are refused: a
packed window's tokens read the end of the documents before them, cut at other characters by
each tokenizer.

Coverage: per model, the fraction of its tokens with a span that are paired anchors (before
the first-token policy), over the corpus and per document. A pair below `min_coverage` on
either side is refused: the stores then hardly hold the same text (another corpus, another
normalisation), which a fit would otherwise hide as a poor map.

Pure: arrays in, arrays out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align.errors import InputError

PAIRINGS = ("auto", "tokens", "char-anchors")
MIN_COVERAGE = 0.5  # default floor of each side's anchor coverage


@dataclass(frozen=True)
class TokenPlaces:
    """One tokenization's token table: (n_tokens,) arrays in store order."""

    doc: np.ndarray
    seq: np.ndarray
    pos: np.ndarray
    char_start: np.ndarray
    char_end: np.ndarray

    @classmethod
    def of_store(cls, store) -> "TokenPlaces":
        return cls(
            *(
                np.asarray(store.tokens(name))
                for name in ("doc", "seq", "pos", "char_start", "char_end")
            )
        )

    def __len__(self) -> int:
        return len(self.doc)


def anchor_tokens(t: TokenPlaces) -> np.ndarray:
    """Indices (sorted) of the tokens that are anchors of their tokenization (module docstring)."""
    spanned = np.flatnonzero(np.asarray(t.char_start) >= 0)
    if not len(spanned):
        return spanned
    doc, s, e = t.doc[spanned], t.char_start[spanned], t.char_end[spanned]
    last_of_doc = np.r_[doc[1:] != doc[:-1], True]
    next_start = np.r_[s[1:], np.iinfo(np.int64).max]
    ok = (e > s) & (last_of_doc | (next_start >= e))
    return spanned[ok]


def window_starts(t: TokenPlaces) -> dict:
    """{document: tuple of the character each of its windows starts at}: 0 for a document's
    first window, else the span start of the window's first token that has one, with the
    end of the previous window's last such token (a cut inside a character differs from a
    clean cut at it)."""
    spanned = np.flatnonzero(np.asarray(t.char_start) >= 0)
    doc, seq = t.doc[spanned], t.seq[spanned]
    first = np.r_[True, seq[1:] != seq[:-1]]
    out: dict = {}
    for k in np.flatnonzero(first):
        d = int(doc[k])
        if d not in out:
            out[d] = [0]
        else:
            out[d].append((int(t.char_end[spanned[k - 1]]), int(t.char_start[spanned[k]])))
    return {d: tuple(v) for d, v in out.items()}


@dataclass
class Anchored:
    """The anchored pairs of two tokenizations and what they cover.

    source, target: (n_pairs,) int64 token indices, in store order on both sides; coverage:
    per side the fraction of its tokens with a span that are paired; documents: the
    documents either side holds (sorted), with each side's coverage in each."""

    source: np.ndarray
    target: np.ndarray
    coverage: dict  # {"source": float, "target": float}
    tokens: dict  # {"source": tokens with a span, "target": ...}
    documents: np.ndarray
    doc_coverage: dict  # {"source": (n_docs,) float, "target": (n_docs,) float}

    @property
    def n_pairs(self) -> int:
        return len(self.source)

    def partner(
        self,
        n_source: int,
        include_first_token: bool,
        source_pos: np.ndarray,
        target_pos: np.ndarray,
    ):
        """(n_source,) int64: the target token paired with each source token, −1 where none
        (or either token is at position 0 and `include_first_token` is off)."""
        out = np.full(n_source, -1, dtype=np.int64)
        keep = np.ones(self.n_pairs, dtype=bool)
        if not include_first_token:
            keep = (source_pos[self.source] != 0) & (target_pos[self.target] != 0)
        out[self.source[keep]] = self.target[keep]
        return out

    def record(self) -> dict:
        """What the result records of the pairing (JSON)."""
        return {
            "mode": "char-anchors",
            "pairs": self.n_pairs,
            **{
                side: {
                    "coverage": self.coverage[side],
                    "tokens": self.tokens[side],
                    "anchors": self.n_pairs,
                    "document_coverage": [round(float(x), 6) for x in self.doc_coverage[side]],
                }
                for side in ("source", "target")
            },
            "documents": self.documents.tolist(),
        }


def anchor_pairs(s: TokenPlaces, t: TokenPlaces, names: tuple = ("source", "target")) -> Anchored:
    """The anchored pairs of two tokenizations of one corpus (module docstring). Refuses two
    stores that cut a document into windows at different characters, naming it; `names`
    say how the refusal names the two stores."""
    ws, wt = window_starts(s), window_starts(t)
    for d in sorted(set(ws) & set(wt)):
        if ws[d] != wt[d]:
            raise InputError(
                f"document {d} is cut into {len(ws[d])} window(s) in {names[0]} but {len(wt[d])} in {names[1]}, at other "
                "characters: each model would read the text after a cut in another context, so no token there can be "
                "paired; tokenize both with a `max_length` that holds every document whole, or with `overflow` truncate"
            )
    a_s, a_t = anchor_tokens(s), anchor_tokens(t)

    def key(tab, idx):
        return (tab.doc[idx].astype(np.int64) << 32) | tab.char_end[idx].astype(np.int64)

    _, i, j = np.intersect1d(key(s, a_s), key(t, a_t), assume_unique=True, return_indices=True)
    src, tgt = (
        a_s[i],
        a_t[j],
    )  # both in key order = store order (documents in corpus order, c increasing)
    documents = np.union1d(np.unique(s.doc[s.char_start >= 0]), np.unique(t.doc[t.char_start >= 0]))
    coverage, tokens, per_doc = {}, {}, {}
    for side, tab, idx in (("source", s, src), ("target", t, tgt)):
        spanned_docs = tab.doc[tab.char_start >= 0]
        tokens[side] = int(len(spanned_docs))
        coverage[side] = float(len(idx) / tokens[side]) if tokens[side] else 0.0
        n = np.bincount(np.searchsorted(documents, spanned_docs), minlength=len(documents))
        k = np.bincount(np.searchsorted(documents, tab.doc[idx]), minlength=len(documents))
        per_doc[side] = np.divide(k, n, out=np.zeros(len(documents)), where=n > 0)
    return Anchored(
        src.astype(np.int64), tgt.astype(np.int64), coverage, tokens, documents, per_doc
    )


def check_coverage(
    anchored: Anchored, min_coverage: float, names: tuple = ("source", "target")
) -> None:
    """Refuse a pair whose anchors cover less than `min_coverage` of either side's tokens."""
    for side, name in zip(("source", "target"), names):
        c = anchored.coverage[side]
        if c < min_coverage:
            raise InputError(
                f"only {c:.1%} of the tokens of {side} {name} are anchors shared with the other model "
                f"({anchored.n_pairs:,} pairs; floor `min_coverage` {min_coverage:g}): the two tokenizations hardly hold the "
                "same text (another corpus, or a tokenizer that changes it); tokenize both from one corpus, or pass "
                "`min_coverage` 0 to fit them anyway"
            )


def coverage_line(anchored: Anchored) -> str:
    """One line of what the anchors cover, per side, with its lowest document."""
    parts = []
    for side in ("source", "target"):
        per = anchored.doc_coverage[side]
        low = int(np.argmin(per)) if len(per) else 0
        parts.append(
            f"{side} {anchored.coverage[side]:.1%} of its {anchored.tokens[side]:,} tokens"
            + (
                f" (lowest: document {int(anchored.documents[low])}, {per[low]:.1%})"
                if len(per)
                else ""
            )
        )
    return f"{anchored.n_pairs:,} anchored pairs cover " + "; ".join(parts)


def check_pairing(pairing: str) -> None:
    if pairing not in PAIRINGS:
        raise InputError(f"`pairing` {pairing!r} is not one of {', '.join(PAIRINGS)}")


def check_min_coverage(value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InputError(
            f"`min_coverage` {value}: give the fraction of each model's tokens that must be anchors, "
            "between 0 and 1 (0: no floor)"
        )


def shuffled(anchored: Anchored, source: TokenPlaces, seed: int, shuffle_partners) -> Anchored:
    """The anchored pairs with `--control shuffle`: each source anchor keeps its token and is
    given the target token of the anchor at the same ordinal of a sequence of another
    document (`split.shuffle_partners` over the anchors, the anchor's ordinal in its
    sequence as its position); pairs without a partner are dropped."""
    seq = source.seq[anchored.source]
    doc = source.doc[anchored.source]
    starts = np.r_[0, np.flatnonzero(seq[1:] != seq[:-1]) + 1]
    ordinal = np.arange(len(seq)) - np.repeat(starts, np.diff(np.r_[starts, len(seq)]))
    p = shuffle_partners(doc, seq, ordinal, seed)
    ok = p >= 0
    return Anchored(
        anchored.source[ok],
        anchored.target[p[ok]],
        anchored.coverage,
        anchored.tokens,
        anchored.documents,
        anchored.doc_coverage,
    )
