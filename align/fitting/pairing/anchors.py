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
- a row pairs the anchors of the two tokenizations at the same (document, c) whose contexts
  start at the same character (windows, below);
- a pair with either token at position 0 of its sequence is left out unless
  `include_first_token` (the first-token policy applies per model).

Windows: a token's context starts where its window starts (`contexts`): at 0 in a document's
first window; in a later one at the character x where the window begins, when the cut is
clean (the previous window's last token with a span ends at x and the window's first starts
at x); a window that begins inside a character, or after a gap, starts no context that can be
matched. Two anchors at one (document, c) pair only when their contexts start at the same
character: both models then read exactly [x, c). So a document that the two tokenizations cut
into windows at other characters keeps every anchor of its first windows up to the shorter
one's end and of its later windows that start at one character on both sides; the others are
left out and counted per document (`Anchored.left_out`); nothing is refused for it. (A store
holds residuals computed in its windows, so neither route can re-cut them; `--live` forwards
each model in its own windows and applies the same rule.) Packed stores (`pack`) are refused
elsewhere (`pairing.check_same_text`): a packed window's tokens read the end of the documents
before them.

Coverage (`text_coverage`, what `min_coverage` bounds) is measured on the text, not on token
counts: per side, the fraction of the characters its tokens cover, in the contexts both sides
read, that lie before the last anchor the two sides share there. A context both sides read is
a document's first window (held by either side) or a later window that starts at one
character on both; it reaches to the end of the shorter of the two windows, or, when both run
to the document's end (a document's last window, unless it is full: a full window may have been
truncated), to the end of the longer, and then the two must end together (a
shared anchor at the shorter one's end; else none of the document's text counts as covered).
Two tokenizations of one text, of any granularity or space convention, end their last tokens
of a document at its last character (or share an anchor where one of them stops short of
trailing whitespace), so their anchors cover all of its text but a few characters; two texts
that differ end apart in almost every document, and a text whose offsets point elsewhere
shares no anchor. Token coverage (the fraction of a side's tokens with a span that are
paired anchors) is reported, never refused: it is bounded by the token counts (at most
min(n_source, n_target) / n_side), and a tokenizer that ends its tokens after the space that
follows a word ("the▁") shares with one that starts them with it ("▁the") only the ends that
punctuation or a line makes (`Anchored.trailing` names it).

Pure: arrays in, arrays out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from align.errors import InputError

PAIRINGS = ("auto", "tokens", "char-anchors")
MIN_COVERAGE = 0.9  # default floor of each side's text coverage (`text_coverage`)
TRAILING_SAMPLE = 20  # unpaired anchors needed to name a trailing-space convention
TRAILING_MARGIN = 0.2  # and how much more often one side trails than the other (`trails`)


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


@dataclass(frozen=True)
class Windows:
    """One tokenization's windows, as the anchors read them (`windows_of`).

    spanned (n_spanned,): the indices of its tokens with a span, in store order; window
    (n_spanned,): the window of each (0..n_windows−1, increasing); doc, start, end, last
    (n_windows,): each window's document, the character its context starts at (0 for a
    document's first window, x for a later one cut cleanly at x, −1 for one that starts no
    matchable context), the last character its tokens cover, and whether it runs to its
    document's end (its document's last window)."""

    spanned: np.ndarray
    window: np.ndarray
    doc: np.ndarray
    start: np.ndarray
    end: np.ndarray
    last: np.ndarray

    def contexts(self, n_tokens: int) -> np.ndarray:
        """(n_tokens,) int64: the character each token's context starts at (−1: no span, or
        a window that starts no matchable context)."""
        out = np.full(n_tokens, -1, dtype=np.int64)
        out[self.spanned] = self.start[self.window]
        return out


def windows_of(t: TokenPlaces, max_length: int | None = None) -> Windows:
    """The windows of a tokenization (module docstring): a window is a run of tokens of one
    sequence and one document; a later window of a document starts a context at x when the
    previous window's last token with a span ends at x and its own first starts at x (x > 0).
    A document's last window runs to its end unless its sequence holds `max_length` tokens
    (given): a full window may have been truncated (`overflow` truncate), so it counts as cut."""
    sp = np.flatnonzero(np.asarray(t.char_start) >= 0)
    doc, seq = np.asarray(t.doc)[sp], np.asarray(t.seq)[sp]
    s, e = (
        np.asarray(t.char_start)[sp].astype(np.int64),
        np.asarray(t.char_end)[sp].astype(np.int64),
    )
    new = (
        np.r_[True, (seq[1:] != seq[:-1]) | (doc[1:] != doc[:-1])] if len(sp) else np.zeros(0, bool)
    )
    firsts = np.flatnonzero(new)
    wdoc = doc[firsts].astype(np.int64)
    first_of_doc = np.r_[True, wdoc[1:] != wdoc[:-1]] if len(firsts) else np.zeros(0, bool)
    last_of_doc = np.r_[wdoc[1:] != wdoc[:-1], True] if len(firsts) else np.zeros(0, bool)
    x, before = s[firsts], e[np.maximum(firsts - 1, 0)]
    start = np.where(first_of_doc, 0, np.where((before == x) & (x > 0), x, -1))
    end = np.maximum.reduceat(e, firsts) if len(firsts) else np.zeros(0, np.int64)
    if max_length is not None and len(firsts):
        held = np.bincount(np.asarray(t.seq, np.int64))  # tokens per sequence, specials included
        last_of_doc &= held[seq[firsts].astype(np.int64)] < max_length
    return Windows(sp, np.cumsum(new) - 1, wdoc, start.astype(np.int64), end, last_of_doc)


def covered_characters(s, e, window, limit) -> np.ndarray:
    """(n_windows,) the characters of each window covered by its tokens' spans [s, e) below
    its `limit`: the length of the union of the spans clipped to [·, limit). s, e, window:
    (n,) in store order (windows contiguous, increasing); limit: (n_windows,) ≥ 0."""
    lim = limit[window]
    s2, e2 = np.minimum(s, lim), np.minimum(e, lim)
    off = window.astype(np.int64) << 40  # a running maximum that restarts at each window
    run = np.maximum.accumulate(e2 + off) - off
    first = np.r_[True, window[1:] != window[:-1]] if len(window) else np.zeros(0, bool)
    prev = np.where(first, s2, np.r_[0, run[:-1]])
    got = np.maximum(0, e2 - np.maximum(s2, prev))
    return np.bincount(window, weights=got, minlength=len(limit))


@dataclass
class Anchored:
    """The anchored pairs of two tokenizations and what they cover.

    source, target: (n_pairs,) int64 token indices, in store order on both sides; coverage:
    per side the fraction of its tokens with a span that are paired (token coverage, reported
    only); tokens: per side its tokens with a span; documents: the documents either side
    holds (sorted), with each side's token coverage in each (doc_coverage); text_coverage and
    doc_text_coverage: per side the fraction of its text, in the contexts both read, that
    lies before their last shared anchor (module docstring; what `min_coverage` bounds);
    left_out: {document: anchors at one character of it on both sides left out because their
    windows start at other characters}; trailing: per side the fraction of its unpaired
    anchors at c where the other side has one at c − 1 (its tokens end after the space the
    other's start with)."""

    source: np.ndarray
    target: np.ndarray
    coverage: dict  # {"source": float, "target": float}
    tokens: dict  # {"source": tokens with a span, "target": ...}
    documents: np.ndarray
    doc_coverage: dict  # {"source": (n_docs,) float, "target": (n_docs,) float}
    text_coverage: dict = field(default_factory=dict)  # {"source": float, "target": float}
    doc_text_coverage: dict = field(default_factory=dict)  # per side (n_docs,) float
    left_out: dict = field(default_factory=dict)  # {document: anchors left out}
    trailing: dict = field(default_factory=dict)  # {"source": float, "target": float}

    @property
    def n_pairs(self) -> int:
        return len(self.source)

    def token_bound(self, side: str) -> float:
        """The most token coverage `side` can have: min(n_source, n_target) / n_side."""
        n = self.tokens[side]
        return min(self.tokens.values()) / n if n else 0.0

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
                    "token_bound": self.token_bound(side),
                    "text_coverage": self.text_coverage.get(side, 0.0),
                    "document_text_coverage": [
                        round(float(x), 6) for x in self.doc_text_coverage.get(side, ())
                    ],
                }
                for side in ("source", "target")
            },
            "documents": self.documents.tolist(),
            "windows": {
                "anchors_left_out": int(sum(self.left_out.values())),
                "documents": sorted(self.left_out),
                "left_out": [self.left_out[d] for d in sorted(self.left_out)],
            },
        }


def _key(tab: TokenPlaces, idx: np.ndarray, shift: int = 0) -> np.ndarray:
    return (tab.doc[idx].astype(np.int64) << 32) | (tab.char_end[idx].astype(np.int64) + shift)


def anchor_pairs(s: TokenPlaces, t: TokenPlaces, max_lengths: tuple = (None, None)) -> Anchored:
    """The anchored pairs of two tokenizations of one corpus (module docstring): anchors at one
    (document, c) whose contexts start at one character; those whose contexts differ are
    left out and counted per document. `max_lengths`: each side's `max_length`, where known
    (`windows_of`: a full window may have been truncated)."""
    win = {"source": windows_of(s, max_lengths[0]), "target": windows_of(t, max_lengths[1])}
    ctx_s, ctx_t = win["source"].contexts(len(s)), win["target"].contexts(len(t))
    a_s, a_t = anchor_tokens(s), anchor_tokens(t)
    _, i, j = np.intersect1d(_key(s, a_s), _key(t, a_t), assume_unique=True, return_indices=True)
    src, tgt = (
        a_s[i],
        a_t[j],
    )  # in key order = store order (documents in corpus order, c increasing)
    same = (ctx_s[src] == ctx_t[tgt]) & (ctx_s[src] >= 0)
    docs_out, n_out = np.unique(s.doc[src[~same]], return_counts=True)
    src, tgt = src[same].astype(np.int64), tgt[same].astype(np.int64)
    documents = np.union1d(np.unique(s.doc[s.char_start >= 0]), np.unique(t.doc[t.char_start >= 0]))
    coverage, tokens, per_doc = {}, {}, {}
    for side, tab, idx in (("source", s, src), ("target", t, tgt)):
        spanned_docs = tab.doc[tab.char_start >= 0]
        tokens[side] = int(len(spanned_docs))
        coverage[side] = float(len(idx) / tokens[side]) if tokens[side] else 0.0
        n = np.bincount(np.searchsorted(documents, spanned_docs), minlength=len(documents))
        k = np.bincount(np.searchsorted(documents, tab.doc[idx]), minlength=len(documents))
        per_doc[side] = np.divide(k, n, out=np.zeros(len(documents)), where=n > 0)
    text, doc_text = text_coverage((s, t), win, (src, tgt), documents)
    trailing = {
        "source": _trailing(s, a_s, src, t, a_t),
        "target": _trailing(t, a_t, tgt, s, a_s),
    }
    left = {int(d): int(k) for d, k in zip(docs_out, n_out)}
    return Anchored(src, tgt, coverage, tokens, documents, per_doc, text, doc_text, left, trailing)


def _trailing(tab, anchors_, paired, other, other_anchors) -> float:
    """The fraction of `tab`'s unpaired anchors at c where `other` has an anchor at c − 1 (0
    under TRAILING_SAMPLE unpaired anchors: too few to tell a convention from chance)."""
    alone = np.setdiff1d(anchors_, paired, assume_unique=True)
    if len(alone) < TRAILING_SAMPLE:
        return 0.0
    return float(np.isin(_key(tab, alone, -1), _key(other, other_anchors)).mean())


def text_coverage(tabs: tuple, win: dict, pairs: tuple, documents: np.ndarray) -> tuple:
    """({side: fraction}, {side: (n_docs,) fraction}): per side the characters its tokens cover
    in the contexts both sides read that lie before their last shared anchor, over those its
    tokens cover in those contexts (module docstring)."""
    w = (win["source"], win["target"])
    keys = [(x.doc << 32) | np.where(x.start >= 0, x.start, 0) for x in w]
    out, per_doc = {}, {}
    for k, side in enumerate(("source", "target")):
        mine, other = w[k], w[1 - k]
        at = np.searchsorted(keys[1 - k], keys[k])
        at = np.minimum(at, max(len(keys[1 - k]) - 1, 0))
        has = (
            (mine.start >= 0) & (keys[1 - k][at] == keys[k]) & (other.start[at] >= 0)
            if len(keys[1 - k])
            else np.zeros(len(keys[k]), bool)
        )
        both_last = has & mine.last & other.last[at] if len(keys[1 - k]) else has
        o_end = other.end[at] if len(keys[1 - k]) else mine.end
        end = np.where(both_last, np.maximum(mine.end, o_end), np.minimum(mine.end, o_end))
        # a document's first window is read by both sides, held or not; a later one only when both hold it
        limit = np.where(has, end, np.where(mine.start == 0, mine.end, 0))
        tab, idx = tabs[k], pairs[k]
        last_anchor = np.zeros(len(limit), np.int64)
        pos = np.searchsorted(mine.spanned, idx)  # the pairs' places among the spanned tokens
        np.maximum.at(last_anchor, mine.window[pos], tab.char_end[idx].astype(np.int64))
        sp = mine.spanned
        s, e = tab.char_start[sp].astype(np.int64), tab.char_end[sp].astype(np.int64)
        total = covered_characters(s, e, mine.window, np.maximum(limit, 0))
        # where both run to the document's end, the two texts must end together: a shared anchor
        # at the shorter one's end (else the document is another text on the two sides)
        apart = both_last & (last_anchor != np.minimum(mine.end, o_end))
        reach = np.where(apart, 0, np.minimum(last_anchor, np.maximum(limit, 0)))
        anchored = covered_characters(s, e, mine.window, reach)
        out[side] = float(anchored.sum() / total.sum()) if total.sum() else 0.0
        d = np.searchsorted(documents, mine.doc)
        n = np.bincount(d, weights=total, minlength=len(documents))
        a = np.bincount(d, weights=anchored, minlength=len(documents))
        per_doc[side] = np.divide(a, n, out=np.zeros(len(documents)), where=n > 0)
    return out, per_doc


def check_coverage(
    anchored: Anchored, min_coverage: float, names: tuple = ("source", "target")
) -> None:
    """Refuse a pair whose anchors cover less than `min_coverage` of either side's text, in the
    contexts both read (module docstring)."""
    for side, name in zip(("source", "target"), names):
        c = anchored.text_coverage.get(side, 0.0)
        if c < min_coverage:
            per = anchored.doc_text_coverage.get(side, np.zeros(0))
            low = (
                f"; lowest: document {int(anchored.documents[int(np.argmin(per))])}, {per.min():.1%}"
                if len(per)
                else ""
            )
            raise InputError(
                f"only {c:.1%} of the text of {side} {name} lies before an anchor shared with the other model "
                f"({anchored.n_pairs:,} pairs; floor `min_coverage` {min_coverage:g}{low}): the two tokenizations "
                "do not cover the same text (another corpus, or offsets that do not point into the text read; "
                f"not their token counts, {anchored.tokens['source']:,} against {anchored.tokens['target']:,}, "
                "which bound only how many tokens pair); tokenize both from one corpus, or pass `min_coverage` 0 "
                "to fit them anyway"
            )


def coverage_line(anchored: Anchored) -> str:
    """One line of what the anchors cover, per side: its tokens (with the bound the token
    counts set) and its text (with its lowest document), and a trailing-space convention
    when one side's tokens end one character after the other's."""
    parts = []
    for side in ("source", "target"):
        per = anchored.doc_text_coverage.get(side, np.zeros(0))
        low = int(np.argmin(per)) if len(per) else 0
        parts.append(
            f"{side} {anchored.coverage[side]:.1%} of its {anchored.tokens[side]:,} tokens (at most "
            f"{anchored.token_bound(side):.1%} with these token counts) and "
            f"{anchored.text_coverage.get(side, 0.0):.1%} of its text"
            + (
                f" (lowest: document {int(anchored.documents[low])}, {per[low]:.1%})"
                if len(per)
                else ""
            )
        )
    line = f"{anchored.n_pairs:,} anchored pairs cover " + "; ".join(parts)
    for side, other in (("source", "target"), ("target", "source")):
        if trails(anchored.trailing, side, other):
            line += (
                f"; the {side} ends {anchored.trailing[side]:.0%} of its unpaired anchors one character after "
                f"the {other} (a trailing-space convention, 'the▁' against '▁the'): there only the ends "
                "that punctuation or a line makes pair"
            )
    return line


def trails(trailing: dict, side: str, other: str) -> bool:
    """Whether `side` ends its tokens after the space `other` starts them with: more than half
    of its unpaired anchors sit one character after one of the other's, and at least
    TRAILING_MARGIN more than the other way round (small tokens put many anchors one character
    apart by chance, on both sides alike)."""
    mine, theirs = trailing.get(side, 0.0), trailing.get(other, 0.0)
    return mine > 0.5 and mine - theirs >= TRAILING_MARGIN


def windows_line(anchored: Anchored) -> str | None:
    """One line of the anchors windows cut at other characters left out, per document (the
    five with most), or None when none were."""
    if not anchored.left_out:
        return None
    top = sorted(anchored.left_out.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    more = len(anchored.left_out) - len(top)
    return (
        f"{sum(anchored.left_out.values()):,} anchors left out in {len(anchored.left_out):,} document(s) whose "
        "windows start at other characters in the two tokenizations ("
        + ", ".join(f"document {d}: {k:,}" for d, k in top)
        + (f", {more:,} more" if more else "")
        + "): they read the text in other contexts; a `max_length` that holds every document keeps them"
    )


def check_pairing(pairing: str) -> None:
    if pairing not in PAIRINGS:
        raise InputError(f"`pairing` {pairing!r} is not one of {', '.join(PAIRINGS)}")


def check_min_coverage(value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InputError(
            f"`min_coverage` {value}: give the fraction of each model's text that must lie before a shared "
            "anchor, "
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
    return replace(anchored, source=anchored.source[ok], target=anchored.target[p[ok]])
