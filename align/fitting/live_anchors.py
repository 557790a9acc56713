"""`align fit --live` for two models that tokenize differently: tokens anchored on the text
(fitting.anchors), paired on the fly.

Each model reads the corpus with its own tokenizer (its own token table, the one its store
would hold) and is forwarded in its own extraction batches (fitting.batches.plan_batches over
its own lengths), so every token meets the batch its store saw and gets the same bits. The
anchors, the first-token policy, the split and the coverage are the store route's, computed
from the two token tables; so are the refusals (windows cut at other characters, coverage
under `min_coverage`, packed windows).

The batches of `align extract` are cut within windows of GROUP_FACTOR × batch_size sequences
counted from the first, and a document is cut into the same windows by both tokenizations
(else refused), so a grouping window of the source holds the same documents as that of the
target. Per grouping window of the source: the target batches that hold the partners of its
rows are forwarded first and those rows alone kept (`held`, in the compute dtype, at most one
window's anchors × the block's boundaries); then each source batch is forwarded and handed on
with a target tensor laid out like its own forward, each paired position holding its
partner's row (`AnchoredStream.forwards`). Everything downstream (the statistics, the shifts,
the held-out rows and sums, the Dask shards) reads that pair as it reads the pair of one
batch of one token stream.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from align.errors import InputError
from align.extraction.batches import GROUP_FACTOR
from align.fitting import anchors
from align.fitting.batches import Batch, TokenTable, plan_batches
from align.fitting.pairing import target_part
from align.fitting.passes import forward

ROWS = ("used", "train", "heldout")  # which rows of a source batch a pass reads


def places(table: TokenTable) -> anchors.TokenPlaces:
    """A token table as the anchors read it (a store's doc, seq, pos and span columns)."""
    return anchors.TokenPlaces(table.doc, table.seq, table.pos, table.char_start, table.char_end)


def anchor(source: TokenTable, target: TokenTable, spec, names: tuple) -> tuple:
    """(Anchored, partner): the anchored pairs of the two tables, refused where the store
    route refuses them (windows, coverage under `spec.min_coverage`; `names` are the models'),
    and each source token's target token under the first-token policy (−1: none)."""
    if source.corpus_hash != target.corpus_hash:
        raise InputError(f"the corpus changed between the source's read and the target's (hash {source.corpus_hash[:12]} "
                         f"against {target.corpus_hash[:12]}): anchors pair characters of one text; fit from a corpus "
                         "nothing writes to while it runs")
    s, t = places(source), places(target)
    found = anchors.anchor_pairs(s, t, tuple(f"{side} {name}" for side, name in zip(("source", "target"), names)))
    anchors.check_coverage(found, spec.min_coverage, names)
    return found, found.partner(len(s), spec.include_first_token, s.pos, t.pos)


def slice_of(b: Batch, rows: str) -> slice:
    """The rows of `b.flat` a pass reads: all used ones, the training ones or the held-out ones."""
    return {"used": slice(None), "train": slice(0, b.n_train), "heldout": slice(b.n_train, None)}[rows]


@dataclass
class AnchoredStream:
    """What the passes forward when the models tokenize differently.

    source, target: each model's token table; target_batches: the target's extraction
    batches that hold a partner (fitting.batches.Batch, their part the partners'); partner
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
    def build(cls, source: TokenTable, target: TokenTable, part: np.ndarray, partner: np.ndarray,
              batch_size: int) -> "AnchoredStream":
        """The stream of a split (`part`, each source token's part) paired by `partner`."""
        batches = plan_batches(target, target_part(part, partner, target.n_tokens), batch_size)
        batch_of = np.full(target.n_tokens, -1, dtype=np.int32)
        flat_of = np.full(target.n_tokens, -1, dtype=np.int64)
        for k, b in enumerate(batches):
            batch_of[b.tokens] = k
            flat_of[b.tokens] = b.flat
        return cls(source, target, batches, partner, batch_size * GROUP_FACTOR, batch_of, flat_of)

    def window_of(self, b: Batch) -> int:
        """The grouping window of a source batch (every batch lies in one)."""
        return b.members[0] // self.window

    def most_held(self, batches: list) -> int:
        """The most target rows one grouping window of `batches` holds at once (the memory plan)."""
        most = 0
        for _, run in itertools.groupby(batches, key=self.window_of):
            most = max(most, sum(len(b.tokens) for b in run))
        return most

    def target_positions(self) -> int:
        """Positions of every target batch (the target forwards of one pass)."""
        return sum(b.positions for b in self.target_batches)

    def forwards(self, net, batches: list, source_boundaries, block, progress, rows: str = "used"):
        """Yields (batch, xs, ys) for every source batch of `batches` (corpus order): xs its
        forward (passes.forward), ys {j: (positions, d_T)} laid out like it, holding at each of
        the batch's `rows` (ROWS) the row of its partner (zeros elsewhere), the target
        forwarded in its own batches up to the block's highest boundary."""
        import torch

        for _, run in itertools.groupby(batches, key=self.window_of):
            run = list(run)
            cut = [slice_of(b, rows) for b in run]
            wanted = [self.partner[b.tokens[c]] for b, c in zip(run, cut)]
            need = np.unique(np.concatenate(wanted))
            if np.any(need < 0) or np.any(self.batch_of[need] < 0):
                raise AssertionError("a used source token has no target row")  # the split leaves such tokens out
            held = self._held(net, need, block, progress)
            for b, c, w in zip(run, cut, wanted):
                t = time.perf_counter()
                xs = forward(net.source, self.source, b, source_boundaries, net.roles[0])
                if progress is not None:
                    progress.forward("source", b.positions, time.perf_counter() - t)
                at, slot = torch.from_numpy(b.flat[c]), torch.from_numpy(np.searchsorted(need, w))
                ys = {}
                for j in block:
                    ys[j] = held[j].new_zeros((b.positions, held[j].shape[1]))
                    ys[j][at.to(ys[j].device)] = held[j][slot.to(ys[j].device)]
                yield b, xs, ys
                del xs, ys
            del held

    def _held(self, net, need: np.ndarray, block, progress) -> dict:
        """{j: (len(need), d_T)}: the target rows `need` (sorted token indices), from the
        forwards of the target batches that hold them."""
        import torch

        held: dict = {}
        where = self.batch_of[need]
        for k in np.unique(where):
            tb = self.target_batches[int(k)]
            t = time.perf_counter()
            ys = forward(net.target, self.target, tb, block, net.roles[1])
            if progress is not None:
                progress.forward("target", tb.positions, time.perf_counter() - t)
            mine = np.flatnonzero(where == k)
            slot, flat = torch.from_numpy(mine), torch.from_numpy(self.flat_of[need[mine]])
            for j in block:
                if j not in held:
                    held[j] = ys[j].new_empty((len(need), ys[j].shape[1]))
                held[j][slot.to(held[j].device)] = ys[j].index_select(0, flat.to(ys[j].device))
            del ys
        return held
