"""`align fit --live` for two models that tokenize differently: tokens anchored on the text
(fitting.pairing.anchors), paired on the fly.

Each model reads the corpus with its own tokenizer (its own token table, the one its store
would hold) and is forwarded in its own windows and its own extraction batches
(fitting.live_route.batches.plan_batches over its own lengths), so every token meets the batch its store
saw and gets the same bits. The anchors, the windows rule (anchors whose contexts start at
other characters are left out and counted), the first-token policy, the split and the
coverage are the store route's, computed from the two token tables; so are the refusals
(coverage under `min_coverage`, packed windows).

The batches of `align extract` are cut within windows of GROUP_FACTOR × batch_size sequences
counted from the first. Nothing assumes the two tokenizations cut the corpus into the same
sequences: a document cut into more windows by one of them, or in one tokenization only (a
prompt one tokenizer makes too long for its format, a text one tokenizer reads as no token),
shifts the target's sequences against the source's, and a target batch then holds partners
of rows of several grouping windows of the source. Per grouping window of the source: the
target batches that hold the partners of its rows and have not been forwarded yet are
forwarded, and those rows alone kept (in the compute dtype, the block's boundaries) until the
last window that reads them (`AnchoredStream.needs`; `most_held` is what the memory plan
counts), so each target batch is forwarded once a pass (once a shard on a cluster, whose
shards are cut between grouping windows). Then each source batch is forwarded and handed on
with a target tensor laid out like its own forward, each paired position holding its
partner's row (`AnchoredStream.forwards`). Everything downstream (the statistics, the shifts,
the held-out rows and sums, the Dask shards) reads that pair as it reads the pair of one
batch of one token stream.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from align.errors import InputError
from align.extraction.batches import GROUP_FACTOR
from align.fitting.live_route.batches import Batch, TokenTable, plan_batches, read_order_batches
from align.fitting.live_route.passes import forward
from align.fitting.pairing import anchors
from align.fitting.pairing.partners import partner_of, target_part


def places(table: TokenTable) -> anchors.TokenPlaces:
    """A token table as the anchors read it (a store's doc, seq, pos and span columns)."""
    return anchors.TokenPlaces(table.doc, table.seq, table.pos, table.char_start, table.char_end)


def anchor(
    source: TokenTable, target: TokenTable, spec, names: tuple, max_length: int | None = None
) -> tuple:
    """(Anchored, partner): the anchored pairs of the two tables, refused where the store
    route refuses them (coverage under `spec.min_coverage`; `names` are the models'),
    and each source token's target token under the first-token policy and `--control
    shuffle` (−1: none), as the store route pairs them (fitting.pairing.partners.partner_of).
    `max_length`: the corpus's, which both tables' windows were cut at."""
    if source.corpus_hash != target.corpus_hash:
        raise InputError(
            f"the corpus changed between the source's read and the target's (hash {source.corpus_hash[:12]} "
            f"against {target.corpus_hash[:12]}): anchors pair characters of one text; fit from a corpus "
            "nothing writes to while it runs"
        )
    s, t = places(source), places(target)
    found = anchors.anchor_pairs(s, t, (max_length, max_length))
    anchors.check_coverage(found, spec.min_coverage, names)
    return found, partner_of(found, s, t, spec)


def slice_of(b: Batch, rows: str) -> slice:
    """The rows of `b.flat` a pass reads: all used ones, the training ones or the held-out ones."""
    return {"used": slice(None), "train": slice(0, b.n_train), "heldout": slice(b.n_train, None)}[
        rows
    ]


class Needs(NamedTuple):
    """What a pass over some source batches reads of the target (`AnchoredStream.needs`)."""

    cut: list  # per source batch, the slice of its `flat` the pass reads
    wanted: list  # per source batch, the partners of those rows (target token indices)
    held: dict  # target batch -> the partners it holds, sorted
    first: dict  # target batch -> the first grouping window that reads it
    last: dict  # target batch -> the last


@dataclass
class AnchoredStream:
    """What the passes forward when the models tokenize differently.

    source, target: each model's token table; target_batches: the target's extraction
    batches that hold a partner (fitting.live_route.batches.Batch, their part the partners'); partner
    (n_source_tokens,): each source token's target token (−1: none); window: sequences per
    grouping window; batch_of, flat_of (n_target_tokens,): each target token's batch (an
    index into target_batches, −1: none) and its position in that batch's forward."""

    source: TokenTable
    target: TokenTable
    target_batches: list
    partner: np.ndarray
    window: int
    batch_of: np.ndarray
    flat_of: np.ndarray

    @classmethod
    def build(
        cls,
        source: TokenTable,
        target: TokenTable,
        part: np.ndarray,
        partner: np.ndarray,
        batch_size: int,
        read_order: list | None = None,
    ) -> "AnchoredStream":
        """The stream of a split (`part`, each source token's part) paired by `partner`: the
        target forwarded in its extraction batches (the bits of its store), or, given the
        source's batches `read_order` (a pairing across documents, `--control shuffle`), in
        the order they read it (fitting.live_route.batches.read_order_batches)."""
        tpart = target_part(part, partner, target.n_tokens)
        batches = (
            plan_batches(target, tpart, batch_size)
            if read_order is None
            else read_order_batches(target, tpart, partner, read_order, batch_size * GROUP_FACTOR)
        )
        batch_of = np.full(target.n_tokens, -1, dtype=np.int32)
        flat_of = np.full(target.n_tokens, -1, dtype=np.int64)
        for k, b in enumerate(batches):
            batch_of[b.tokens] = k
            flat_of[b.tokens] = b.flat
        return cls(source, target, batches, partner, batch_size * GROUP_FACTOR, batch_of, flat_of)

    def window_of(self, b: Batch) -> int:
        """The grouping window of a source batch (every batch lies in one)."""
        return b.members[0] // self.window

    def needs(self, batches: list, rows: str = "used") -> "Needs":
        """What forwarding `batches` (corpus order) for their `rows` needs of the target: each
        batch's rows (slices of its `flat`) and their partners, and per target batch the
        partners it holds (sorted) and the first and last grouping window that reads them."""
        cut = [slice_of(b, rows) for b in batches]
        wanted = [self.partner[b.tokens[c]] for b, c in zip(batches, cut)]
        tokens = np.concatenate(wanted) if wanted else np.zeros(0, np.int64)
        if np.any(tokens < 0) or np.any(self.batch_of[tokens] < 0):
            raise AssertionError(
                "a used source token has no target row"
            )  # the split leaves such tokens out
        if not len(tokens):
            return Needs(cut, wanted, {}, {}, {})
        window = np.repeat([self.window_of(b) for b in batches], [len(w) for w in wanted]).astype(
            np.int64
        )
        k = self.batch_of[tokens]
        order = np.lexsort((tokens, k))
        k, tokens, window = k[order], tokens[order], window[order]
        starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        ids = k[starts].tolist()
        held = dict(zip(ids, np.split(tokens, starts[1:])))
        first = dict(zip(ids, np.minimum.reduceat(window, starts).tolist()))
        last = dict(zip(ids, np.maximum.reduceat(window, starts).tolist()))
        return Needs(cut, wanted, held, first, last)

    def most_held(self, batches: list) -> int:
        """The most target rows `forwards` holds at once over `batches` (the memory plan): each
        target batch's rows from the first grouping window that reads them to the last (one
        window, when both tokenizations cut the corpus into the same sequences; more where a
        document is cut into more windows, or is, in one of them and shifts the target's
        sequences). Any subset of
        `batches` and of their rows holds no more."""
        n = self.needs(batches)
        if not n.held:
            return 0
        top = max(n.last.values()) + 2
        change = np.zeros(top, np.int64)
        for k, rows in n.held.items():
            change[n.first[k]] += len(rows)
            change[n.last[k] + 1] -= len(rows)
        return int(np.cumsum(change).max())

    def forwards(self, net, batches: list, source_boundaries, block, progress, rows: str = "used"):
        """Yields (batch, xs, ys) for every source batch of `batches` (corpus order): xs its
        forward (passes.forward), ys {j: (positions, d_T)} laid out like it, holding at each of
        the batch's `rows` (`slice_of`) the row of its partner (zeros elsewhere). The target is
        forwarded in its own batches up to the block's highest boundary, each batch once: its
        partners' rows are kept from the first grouping window that reads them to the last."""
        n = self.needs(batches, rows)
        kept: dict = {}  # target batch -> {j: the rows of its partners (n.held)}
        items = list(zip(batches, n.cut, n.wanted))
        for w_id, run in itertools.groupby(items, key=lambda item: self.window_of(item[0])):
            run = list(run)
            for k in np.unique(self.batch_of[np.concatenate([w for _, _, w in run])]).tolist():
                if k not in kept:
                    kept[k] = self._rows(net, k, n.held[k], block, progress)
            for b, c, w in run:
                t = time.perf_counter()
                xs = forward(net.source, self.source, b, source_boundaries, net.roles[0])
                if progress is not None:
                    progress.forward("source", b.positions, time.perf_counter() - t)
                ys = self._laid_out(b, b.flat[c], w, n.held, kept, block, xs, net)
                yield b, xs, ys
                del xs, ys
            for k in [k for k in kept if n.last[k] <= w_id]:
                del kept[k]

    def _rows(self, net, k: int, tokens: np.ndarray, block, progress) -> dict:
        """{j: (len(tokens), d_T)}: the rows of `tokens` (sorted, all in target batch k) from
        that batch's forward."""
        import torch

        tb = self.target_batches[k]
        t = time.perf_counter()
        ys = forward(net.target, self.target, tb, block, net.roles[1])
        if progress is not None:
            progress.forward("target", tb.positions, time.perf_counter() - t)
        flat = torch.from_numpy(self.flat_of[tokens])
        return {j: ys[j].index_select(0, flat.to(ys[j].device)) for j in block}

    def _laid_out(
        self, b: Batch, at: np.ndarray, partners: np.ndarray, held: dict, kept: dict, block, xs, net
    ) -> dict:
        """{j: (b.positions, d_T)}: zeros but at positions `at` of the batch, where the kept rows
        of their `partners` are (`held`: each target batch's partners, the order of its kept rows)."""
        import torch

        where = self.batch_of[partners]
        ys = {}
        for j in block:
            like = next((rows[j] for rows in kept.values()), None)
            if like is None:  # no row of this pass in the batch: nothing is read, only the layout
                like = xs[next(iter(xs))].new_zeros((0, net.target.config.hidden_size))
            ys[j] = like.new_zeros((b.positions, like.shape[1]))
        for k in np.unique(where).tolist():
            m = where == k
            pos = torch.from_numpy(at[m])
            slot = torch.from_numpy(np.searchsorted(held[k], partners[m]))
            for j in block:
                ys[j][pos.to(ys[j].device)] = kept[k][j][slot.to(ys[j].device)]
        return ys
