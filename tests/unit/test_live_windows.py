"""The live route's units for two tokenizers, on hand-built batches: Dask shards cut only
between grouping windows, the plan's count of the target rows kept, and on a corpus whose
target windows are shifted (a document in one tokenization only) every row paired, each target
batch forwarded once and the most rows kept at once, the forwards replaced by a fake that
writes each row's token index into it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align.fitting.live_route.anchors import AnchoredStream
from align.fitting.live_route.shards import shards_of
from align.fitting.planning import budget


@dataclass
class B:
    """What shards_of reads of a batch."""

    members: list
    positions: int
    tokens: np.ndarray


def _batches():
    # windows of 4 sequences (batch size 2): sequences 0-3, 4-7, 8-9; two batches in each full window
    spec = [([0, 2], 10), ([1, 3], 30), ([4, 5], 20), ([6, 7], 20), ([8, 9], 40)]
    return [B(m, p, np.arange(p // 2)) for m, p in spec]


def test_shards_are_cut_between_windows_only():
    bs = _batches()
    window = lambda b: b.members[0] // 4  # noqa: E731
    # without units: cut once the positions so far reach k/n of the 120 (10, 40, 60, 80, 120)
    assert [[b.members for b in s] for s in shards_of(bs, 3)] == [
        [[0, 2], [1, 3]],
        [[4, 5], [6, 7]],
        [[8, 9]],
    ]
    assert [[b.members for b in s] for s in shards_of(bs, 4)] == [
        [[0, 2], [1, 3]],
        [[4, 5]],
        [[6, 7], [8, 9]],
    ]
    # with units: a window is never cut (not after [4, 5]: [6, 7] is in its window)
    got = shards_of(bs, 4, window)
    assert [[b.members for b in s] for s in got] == [[[0, 2], [1, 3]], [[4, 5], [6, 7]], [[8, 9]]]
    assert all(len({window(b) for b in s}) == 1 for s in got)
    assert [b for s in shards_of(bs, 2, window) for b in s] == bs  # every batch once, in order


def test_the_plan_counts_a_windows_rows_of_the_block_only_when_anchored():
    shape = budget.LiveShape(3, 64, 5, 96, 512, 64, 256, 4, 4, 100, 10**6)
    plain = budget.pass_bytes(shape, 2, False)
    assert "window rows" not in plain
    from dataclasses import replace

    anchored = budget.pass_bytes(replace(shape, window_rows=1000), 2, False)
    assert anchored["window rows"] == 4 * 1000 * 2 * 96  # itemsize × rows × block boundaries × d_T
    assert {k: v for k, v in anchored.items() if k != "window rows"} == plain


# -- a corpus whose target windows are shifted: document 3 is in the source's tokenization only ----


def _table(lengths: dict):
    """A token table of one sequence per document (`lengths`: document -> tokens), in order."""
    from align.fitting.live_route.batches import TokenTable

    docs = sorted(lengths)
    n = np.array([lengths[d] for d in docs])
    start = np.r_[0, np.cumsum(n)]
    seqs = [np.arange(a, b) % 50 for a, b in zip(start[:-1], start[1:])]
    return TokenTable(
        seqs, start, np.repeat(docs, n), np.concatenate([np.arange(k) for k in n]).astype(np.int32)
    )


def _shifted():
    from align.fitting.live_route.batches import plan_batches

    src_len = {d: 3 + (5 * d) % 7 for d in range(12)}
    tgt_len = {d: src_len[d] + d % 2 for d in range(12) if d != 3}
    src, tgt = _table(src_len), _table(tgt_len)
    where = {(int(d), int(p)): g for g, (d, p) in enumerate(zip(tgt.doc, tgt.pos))}
    partner = np.array(
        [where.get((int(d), int(p)), -1) if p else -1 for d, p in zip(src.doc, src.pos)]
    )
    part = np.where(partner >= 0, np.where(src.doc % 2 == 0, 0, 2), -1).astype(
        np.int8
    )  # even docs fit, odd held out
    stream = AnchoredStream.build(
        src, tgt, part, partner, batch_size=2
    )  # grouping windows of 8 sequences
    return src, tgt, partner, part, stream, plan_batches(src, part, 2)


def _fake_forward(calls):
    """forward(model, table, batch, ...) -> {j: (positions, 3)}: each real position's row is
    (0 source / 1 target, its token index, j), padding −1; the target's calls are counted."""
    import torch

    def forward(model, table, batch, boundaries, role):
        width = batch.width
        out = {}
        for j in boundaries:
            t = torch.full((len(batch.members) * width, 3), -1.0, dtype=torch.float64)
            for r, s in enumerate(batch.members):
                a, b = int(table.start[s]), int(table.start[s + 1])
                t[r * width : r * width + b - a, 0] = 0.0 if model == "source" else 1.0
                t[r * width : r * width + b - a, 1] = torch.arange(a, b, dtype=torch.float64)
                t[r * width : r * width + b - a, 2] = float(j)
            out[j] = t
        if model != "source":
            calls.append(tuple(batch.members))
        return out

    return forward


def _net():
    from types import SimpleNamespace

    return SimpleNamespace(
        source="source",
        target=SimpleNamespace(config=SimpleNamespace(hidden_size=3)),
        roles=(None, None),
    )


def test_shifted_windows_pair_every_row_and_forward_each_target_batch_once(monkeypatch):
    from align.fitting.live_route import anchors as live_anchors

    src, tgt, partner, part, stream, batches = _shifted()
    calls = []
    monkeypatch.setattr(live_anchors, "forward", _fake_forward(calls))
    # the shift: some target batch holds partners of two source windows
    reads = {}
    for b in batches:
        for g in b.tokens:
            reads.setdefault(int(stream.batch_of[partner[g]]), set()).add(b.members[0] // 8)
    assert any(len(w) > 1 for w in reads.values())
    for rows, keep in (
        ("used", lambda b: b.flat),
        ("heldout", lambda b: b.flat[b.n_train :]),
        ("train", lambda b: b.flat[: b.n_train]),
    ):
        calls.clear()
        todo = [b for b in batches if len(keep(b))]
        seen = 0
        for b, xs, ys in stream.forwards(_net(), todo, [0, 1], [2, 3], None, rows):
            read = set(keep(b).tolist())
            for k in range(b.positions):
                g = int(b.tokens[list(b.flat).index(k)]) if k in set(b.flat.tolist()) else None
                for j in (2, 3):
                    got = ys[j][k].tolist()
                    if k in read:
                        assert got == [1.0, float(partner[g]), float(j)], (rows, k)
                        seen += 1
                    else:
                        assert got == [0.0, 0.0, 0.0], (rows, k)
                for i in (0, 1):
                    if g is not None:
                        assert xs[i][k].tolist() == [0.0, float(g), float(i)]
        assert seen == 2 * sum(len(keep(b)) for b in todo), rows
        assert len(calls) == len(set(calls)), rows  # each target batch forwarded once
        needed = {
            int(stream.batch_of[partner[g]])
            for b in todo
            for g in b.tokens[np.isin(b.flat, keep(b))]
        }
        assert sorted(calls) == sorted(tuple(stream.target_batches[k].members) for k in needed), (
            rows
        )


def test_most_held_is_the_most_rows_alive_at_once():
    src, tgt, partner, part, stream, batches = _shifted()
    # by hand: each target batch's partners are alive from the first source window that reads them to the last
    alive = {}
    for b in batches:
        w = b.members[0] // 8
        for g in b.tokens:
            k = int(stream.batch_of[partner[g]])
            lo, hi, n = alive.get(k, (w, w, 0))
            alive[k] = (min(lo, w), max(hi, w), n + 1)
    most = max(sum(n for lo, hi, n in alive.values() if lo <= w <= hi) for w in range(2))
    assert any(lo < hi for lo, hi, _ in alive.values())  # a batch alive across both windows
    assert stream.most_held(batches) == most
    assert stream.most_held(batches[:3]) <= most  # a subset holds no more


def test_a_corpus_read_differently_by_the_two_tokenizations_is_refused():
    """The two token tables of --live come from two reads of the corpus: a file replaced between
    them (another hash) is refused in one line, before any pair is made."""
    import pytest

    from align.errors import InputError
    from align.fitting.fit_options import FitSpec
    from align.fitting.live_route.anchors import anchor

    a, b = _table({0: 4, 1: 5}), _table({0: 4, 1: 5})
    a.corpus_hash, b.corpus_hash = "a" * 64, "b" * 64
    with pytest.raises(InputError) as e:
        anchor(a, b, FitSpec(), ("src", "tgt"))
    assert str(e.value) == (
        "the corpus changed between the source's read and the target's (hash aaaaaaaaaaaa against "
        "bbbbbbbbbbbb): anchors pair characters of one text; fit from a corpus nothing writes to "
        "while it runs"
    )
