"""The target's batches of a pairing across documents (`--live --control shuffle`,
align.fitting.live_route.batches.read_order_batches), on a token table built by hand: every target
sequence a partner lies in is forwarded once, in a batch of at most `batch_size` sequences
made for the first grouping window of the source that reads it, and the batches come in the
windows' order. The first reader of each sequence is found here by a plain loop over the
source's tokens."""

from __future__ import annotations

import numpy as np


def _table(lengths, docs):
    from align.fitting.live_route.batches import TokenTable

    seqs = [np.arange(n, dtype=np.int64) + 5 for n in lengths]
    start = np.concatenate([[0], np.cumsum(lengths)])
    doc = np.repeat(docs, lengths)
    pos = np.concatenate([np.arange(n) for n in lengths])
    seq = np.repeat(np.arange(len(lengths)), lengths)
    return TokenTable(seqs, start, doc, pos, seq=seq)


def test_each_partner_sequence_is_forwarded_once_in_the_window_that_first_reads_it():
    from align.extraction.batches import GROUP_FACTOR
    from align.fitting.live_route.batches import plan_batches, read_order_batches

    batch_size = 2
    window = batch_size * GROUP_FACTOR
    rng = np.random.default_rng(7)
    lengths = rng.integers(3, 12, size=21)
    table = _table(lengths, np.arange(21) // 2)
    # each source sequence s reads sequence (s + 9) mod 21 at its own positions, as far as
    # that one reaches; sequence 4 reads nothing (its tokens are left out)
    partner = np.full(table.n_tokens, -1, dtype=np.int64)
    for s in range(21):
        if s == 4:
            continue
        t = (s + 9) % 21
        n = min(lengths[s], lengths[t])
        partner[table.start[s] : table.start[s] + n] = table.start[t] + np.arange(n)
    part = np.where(partner >= 0, 0, -1).astype(np.int8)
    target_part = np.full(table.n_tokens, -1, dtype=np.int8)
    target_part[partner[partner >= 0]] = 0
    source = plan_batches(table, part, batch_size)
    got = read_order_batches(table, target_part, partner, source, window)

    first = {}  # target sequence -> the first source window that reads it (a plain loop)
    for b in source:
        for token in b.tokens:
            if partner[token] >= 0:
                t = int(np.searchsorted(table.start, partner[token], side="right") - 1)
                first.setdefault(t, b.members[0] // window)
    members = [s for b in got for s in b.members]
    assert sorted(members) == sorted(first)  # every read sequence, each once
    assert all(len(b.members) <= batch_size for b in got)
    windows = [first[b.members[0]] for b in got]
    assert all(first[s] == w for b, w in zip(got, windows) for s in b.members)
    assert windows == sorted(windows)
    for b in got:  # each batch forwards its sequences' paired tokens
        want = np.concatenate([np.arange(table.start[s], table.start[s + 1]) for s in b.members])
        assert set(b.tokens.tolist()) == set(want[target_part[want] >= 0].tolist())
