"""The corpus as the live route forwards it: the token table a store would hold (`token_table`)
and the batches `align extract` forwards, in its order (`plan_batches`), each with the part
of every position (fit / validation / held-out / unused, fitting.planning.split) so that every token
meets the batch a store saw and gets the same bits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align import corpus
from align.errors import InputError
from align.extraction.batches import GROUP_FACTOR, group_batches
from align.fitting.planning.split import TEST
from align.ridge.statistics import FIT, VAL


@dataclass
class TokenTable:
    """The corpus as a store's token table holds it, in corpus order.

    sequences[s]: (len_s,) token ids; start (n_seq + 1,): first token of each sequence;
    doc, pos (n_tokens,): the document and the position in its sequence of every token;
    corpus_hash: the hash of the bytes these tokens were read from (corpus.Reading);
    seq, char_start, char_end (n_tokens,): each token's sequence and character span, as a
    store's token table holds them (what the anchors of fitting.pairing.anchors read)."""

    sequences: list
    start: np.ndarray
    doc: np.ndarray
    pos: np.ndarray
    max_id: int = -1
    max_id_at: tuple = (0, 0)
    corpus_hash: str | None = None
    seq: np.ndarray | None = None
    char_start: np.ndarray | None = None
    char_end: np.ndarray | None = None

    @property
    def n_tokens(self) -> int:
        return int(self.start[-1])

    @property
    def lengths(self) -> list:
        return [len(s) for s in self.sequences]


def token_table(cspec: corpus.CorpusSpec, tokenizer) -> TokenTable:
    """Tokenize the corpus once (`corpus.sequences`: what `align extract` stores), hashing
    the bytes read in the same read."""
    seqs, docs, ids, spans, top, top_at = [], [], [], ([], []), -1, (0, 0)
    reading = corpus.Reading(cspec)
    for sq in corpus.sequences(cspec, tokenizer, reading=reading):
        if len(sq) and int(sq.token_id.max()) > top:
            t = int(np.argmax(sq.token_id))
            top, top_at = int(sq.token_id[t]), (sq.doc, t)
        seqs.append(sq.token_id)
        docs.append(sq.doc)
        ids.append(sq.seq)
        spans[0].append(sq.char_start)
        spans[1].append(sq.char_end)
    if not seqs:
        raise InputError(
            f"corpus {cspec.describe()} has no text to tokenize: give a corpus with at least one non-empty document"
        )
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(lengths)])
    doc = np.repeat(np.asarray(docs, dtype=np.int64), lengths)
    pos = np.concatenate([np.arange(n, dtype=np.int32) for n in lengths])
    seq = np.repeat(np.asarray(ids, dtype=np.int64), lengths)
    char_start, char_end = (np.concatenate(x).astype(np.int64) for x in spans)
    return TokenTable(
        seqs, start, doc, pos, top, top_at, reading.hexdigest(), seq, char_start, char_end
    )


# -- batches --------------------------------------------------------------------------------


def extraction_batches(lengths, batch_size: int) -> list:
    """Sequence indices of every batch `align extract` forwards, in its order: windows of
    GROUP_FACTOR x batch_size sequences, each cut by `group_batches`."""
    window = batch_size * GROUP_FACTOR
    out = []
    for w0 in range(0, len(lengths), window):
        out += [[w0 + i for i in b] for b in group_batches(lengths[w0 : w0 + window], batch_size)]
    return out


@dataclass
class Batch:
    """One forward's sequences and which of its tokens the fit uses.

    members: sequence indices; width: the padded length T; part (len(members) · T,) int8:
    each position's part (ridge.FIT, ridge.VAL, TEST, -1 for unused tokens and padding);
    flat (n_used,): the used positions, fit first, then validation, then held-out (each in
    position order: the order ridge.chunk_statistics gathers them); tokens (n_used,): their
    indices in the token table; counts: positions per part (fit, validation, held-out)."""

    members: list
    width: int
    part: np.ndarray
    flat: np.ndarray
    tokens: np.ndarray
    counts: tuple

    @property
    def n_train(self) -> int:
        return self.counts[0] + self.counts[1]

    @property
    def n_test(self) -> int:
        return self.counts[2]

    @property
    def positions(self) -> int:
        return len(self.members) * self.width


def plan_batches(table: TokenTable, part: np.ndarray, batch_size: int) -> list:
    """The extraction batches of `table` that hold any used token (part >= 0)."""
    batches = (
        batch_of(table, part, members) for members in extraction_batches(table.lengths, batch_size)
    )
    return [b for b in batches if b is not None]


def batch_of(table: TokenTable, part: np.ndarray, members: list) -> Batch | None:
    """The batch forwarding the sequences `members` of `table` (None: no used token)."""
    width = max(len(table.sequences[s]) for s in members)
    flat_part = np.full(len(members) * width, -1, dtype=np.int8)
    tokens = np.full(len(members) * width, -1, dtype=np.int64)
    for r, s in enumerate(members):
        a, b = int(table.start[s]), int(table.start[s + 1])
        flat_part[r * width : r * width + b - a] = part[a:b]
        tokens[r * width : r * width + b - a] = np.arange(a, b)
    used = np.flatnonzero(flat_part >= 0)
    if not len(used):
        return None
    flat = used[np.argsort(flat_part[used], kind="stable")]
    counts = tuple(int((flat_part == p).sum()) for p in (FIT, VAL, TEST))
    return Batch(list(members), width, flat_part, flat, tokens[flat], counts)


def read_order_batches(
    target: TokenTable, part: np.ndarray, partner: np.ndarray, source_batches: list, window: int
) -> list:
    """The target's batches for a pairing that crosses documents (`--control shuffle`): per
    grouping window of the source's batches (`window` sequences), the target sequences that
    hold partners of its rows and no earlier window read, cut by `group_batches` into batches
    of at most `window // GROUP_FACTOR` sequences. Each target sequence is forwarded once, in
    the window that first reads it, so the rows kept between forwards stay one window's
    (`AnchoredStream.most_held`), where the target's own extraction batches would keep rows
    from across the corpus. `part`: each target token's part (fitting.pairing.partners.target_part)."""
    batch_size = window // GROUP_FACTOR
    seq_of = np.repeat(np.arange(len(target.sequences)), target.lengths)
    seen = np.zeros(len(target.sequences), dtype=bool)
    out = []
    by_window: dict = {}
    for b in source_batches:
        by_window.setdefault(b.members[0] // window, []).append(b)
    for run in by_window.values():
        order = []  # the window's new target sequences, in the order its batches read them
        for batch in run:
            paired = partner[batch.tokens]
            seqs = seq_of[paired[paired >= 0]]
            _, first = np.unique(seqs, return_index=True)
            seqs = seqs[np.sort(first)]
            new = seqs[~seen[seqs]]
            seen[new] = True
            order += new.tolist()
        lengths = [len(target.sequences[s]) for s in order]
        for group in group_batches(lengths, batch_size):
            made = batch_of(target, part, [order[i] for i in group])
            if made is not None:
                out.append(made)
    return out
