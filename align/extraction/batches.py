"""Sequences into batches: length grouping within bounded windows, reading the windows back
from a store's token table, and padding a batch into model input.

Windows of GROUP_FACTOR x batch_size sequences, counted from the store's first sequence, are
each cut into batches of similar length. A window's batches depend only on the token table
and the batch size, never on where a run started, so every sequence is computed in the same
batch (same padding, same bits) on a first run, a re-run and a resume. Memory: at most one
window's outputs wait for the sequences before them (4 batches).
"""

from __future__ import annotations

import numpy as np

GROUP_FACTOR = 4


def group_batches(lengths, batch_size: int) -> list[list[int]]:
    """Cut one window into batches of similar length: positions sorted by length (longest
    first, ties by position), cut every `batch_size`; each batch lists its positions in
    increasing order, and batches come in the order of their first position (so the
    window's first sequences are ready, and written, early)."""
    order = sorted(range(len(lengths)), key=lambda i: (-int(lengths[i]), i))
    batches = [sorted(order[i : i + batch_size]) for i in range(0, len(order), batch_size)]
    return sorted(batches)


def padding_fraction(lengths, batch_size: int, window: int) -> float:
    """Padded positions / all positions computed when `lengths` (corpus order) are batched in
    windows of `window` sequences (window == batch_size: consecutive batches, no grouping)."""
    pad = total = 0
    for w0 in range(0, len(lengths), window):
        part = [int(x) for x in lengths[w0 : w0 + window]]
        batches = (
            group_batches(part, batch_size)
            if window > batch_size
            else [
                list(range(i, min(i + batch_size, len(part))))
                for i in range(0, len(part), batch_size)
            ]
        )
        for b in batches:
            T = max(part[i] for i in b)
            total += T * len(b)
            pad += T * len(b) - sum(part[i] for i in b)
    return pad / total if total else 0.0


def seq_start_token(store, seq: int, below: int) -> int:
    """The first token of sequence `seq` (a binary search of the token table's seq column
    in [0, below); a few one-element reads)."""
    lo, hi = 0, below
    while lo < hi:
        mid = (lo + hi) // 2
        if int(store.tokens("seq", mid, mid + 1)[0]) < seq:
            lo = mid + 1
        else:
            hi = mid
    return lo


def windows(store, start_token: int, window: int):
    """Windows of sequences read from the token table from `start_token` (the first token of
    a window's first sequence, or of the store's): yields lists of (seq, first token, token
    ids), each list the sequences of one window [k*window, (k+1)*window). Memory: one block
    of the table and one window of token ids."""
    n, block = store.n_tokens, 1 << 16
    win, cur, cur_seq, cur_start = [], [], None, start_token
    for b0 in range(start_token, n, block):
        b1 = min(n, b0 + block)
        ids, seqs = store.tokens("token_id", b0, b1), store.tokens("seq", b0, b1)
        cuts = np.flatnonzero(np.diff(seqs)) + 1
        starts = [0] + cuts.tolist()
        for s0, piece_ids, piece_seq in zip(starts, np.split(ids, cuts), np.split(seqs, cuts)):
            sid = int(piece_seq[0])
            if cur and sid != cur_seq:
                win.append((cur_seq, cur_start, np.concatenate(cur)))
                cur = []
                if sid // window != cur_seq // window:
                    yield win
                    win = []
            if not cur:
                cur_start = b0 + s0
            cur_seq = sid
            cur.append(piece_ids)
    if cur:
        win.append((cur_seq, cur_start, np.concatenate(cur)))
    if win:
        yield win


def pad(batch, device):
    """(input_ids, attention_mask), both (len(batch), longest) long tensors on `device`:
    each sequence's ids left-aligned, zeros after it, mask 1 on real tokens."""
    import torch

    T = max(len(x) for x in batch)
    ids = torch.zeros((len(batch), T), dtype=torch.long)
    mask = torch.zeros((len(batch), T), dtype=torch.long)
    for i, x in enumerate(batch):
        ids[i, : len(x)] = torch.from_numpy(x.astype(np.int64))
        mask[i, : len(x)] = 1
    return ids.to(device), mask.to(device)
