"""`align fit --live`: the study without stores. Both models run over the corpus and the
sufficient statistics of METHODS.md §1 accumulate on the device as the activations appear.

The run is: load both configs and tokenizers (the tokenizers must behave identically, the
store route's check and message) → tokenize the corpus once (the token table a store would
hold) → split documents and mark every token fit / validation / held-out / unused, exactly as
the store route does → batch the sequences exactly as `align extract` does (length-grouped
windows), so every token meets the same batch and gets the same bits → plan the memory:
the target boundaries are covered in blocks, one pass over the corpus per block → per block:

    per batch: source forward (its boundaries, once) + target forward (stopped after the
      block's highest boundary) → rows gathered in part order as float64 → XᵀX, XᵀY, ...
      on the device; held-out rows kept for later where the plan holds them
    solve (the shared solver) → per batch with held-out rows: the error sums of every pair
    (from the kept rows, or a second forward of those batches)

and the result goes through the shared result writer with `route: live`. Nothing else is
written. The math is in align.ridge; the sums here are the same sums in another order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from align import capture, corpus, models, ridge
from align.errors import StoreError

# As align extract: windows of GROUP_FACTOR x batch_size sequences are cut into batches of
# similar length (the same rule, so a live run sees every token in the batch a store saw).
GROUP_FACTOR = 4
TEST = 2  # part code of held-out rows (the store route's); -1: unused
TOKENIZER_PARTS = ("vocab", "merges", "added_tokens", "normalizer_pretokenizer", "special_wrapping")
TOKENIZER_NAMES = {"vocab": "vocabulary", "merges": "merges", "added_tokens": "added tokens",
                   "normalizer_pretokenizer": "normalizer/pre-tokenizer", "special_wrapping": "special-token wrapping"}


# -- inputs ---------------------------------------------------------------------------------

def check_tokenizers(source_hashes: dict, target_hashes: dict, source: str, target: str) -> None:
    """Refuse two tokenizers that behave differently (`corpus.tokenizer_hashes` of each), with
    the store route's message: a map between models needs one token stream."""
    differ = [k for k in TOKENIZER_PARTS if source_hashes.get(k) != target_hashes.get(k)]
    if differ:
        raise StoreError(
            f"the tokenizers of source {source} and target {target} differ in "
            f"{', '.join(TOKENIZER_NAMES[k] for k in differ)}: a map between models needs one token stream; "
            "fit models that share a tokenizer"
        )


@dataclass
class TokenTable:
    """The corpus as a store's token table holds it, in corpus order.

    sequences[s]: (len_s,) token ids; start (n_seq + 1,): first token of each sequence;
    doc, pos (n_tokens,): the document and the position in its sequence of every token."""
    sequences: list
    start: np.ndarray
    doc: np.ndarray
    pos: np.ndarray
    stats: corpus.TokenizeStats = field(default_factory=corpus.TokenizeStats)
    max_id: int = -1
    max_id_at: tuple = (0, 0)

    @property
    def n_tokens(self) -> int:
        return int(self.start[-1])

    @property
    def lengths(self) -> list:
        return [len(s) for s in self.sequences]


def token_table(cspec: corpus.CorpusSpec, tokenizer) -> TokenTable:
    """Tokenize the corpus once (`corpus.sequences`, what `align extract` stores)."""
    from align.errors import InputError

    stats = corpus.TokenizeStats()
    seqs, docs, top, top_at = [], [], -1, (0, 0)
    for sq in corpus.sequences(cspec, tokenizer, stats):
        if len(sq) and int(sq.token_id.max()) > top:
            t = int(np.argmax(sq.token_id))
            top, top_at = int(sq.token_id[t]), (sq.doc, t)
        seqs.append(sq.token_id)
        docs.append(sq.doc)
    if not seqs:
        raise InputError(f"corpus {cspec.describe()} has no text to tokenize: give a corpus with at least one non-empty document")
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(lengths)])
    doc = np.repeat(np.asarray(docs, dtype=np.int64), lengths)
    pos = np.concatenate([np.arange(n, dtype=np.int32) for n in lengths])
    return TokenTable(seqs, start, doc, pos, stats, top, top_at)


# -- batches --------------------------------------------------------------------------------

def group_batches(lengths, batch_size: int) -> list:
    """`align extract`'s rule for one window: positions sorted by length (longest first, ties
    by position), cut every `batch_size`; each batch in increasing order, batches ordered by
    their first position."""
    order = sorted(range(len(lengths)), key=lambda i: (-int(lengths[i]), i))
    return sorted(sorted(order[i:i + batch_size]) for i in range(0, len(order), batch_size))


def extraction_batches(lengths, batch_size: int) -> list:
    """Sequence indices of every batch `align extract` forwards, in its order: windows of
    GROUP_FACTOR x batch_size sequences, each cut by `group_batches`."""
    window = batch_size * GROUP_FACTOR
    out = []
    for w0 in range(0, len(lengths), window):
        out += [[w0 + i for i in b] for b in group_batches(lengths[w0:w0 + window], batch_size)]
    return out


@dataclass
class Batch:
    """One forward's sequences and which of its tokens the fit uses, in part order.

    members: sequence indices; width: the padded length T; flat (n_used,): each used token's
    row in the flattened (len(members) · T) batch, fit rows first, then validation, then
    held-out; tokens (n_used,): the same tokens' indices in the token table; counts: rows per
    part (fit, validation, held-out)."""
    members: list
    width: int
    flat: np.ndarray
    tokens: np.ndarray
    counts: tuple

    @property
    def n_train(self) -> int:
        return self.counts[0] + self.counts[1]

    @property
    def n_test(self) -> int:
        return self.counts[2]


def plan_batches(table: TokenTable, part: np.ndarray, batch_size: int) -> list:
    """The extraction batches of `table` that hold any used token (part >= 0), each with
    its used rows in part order (`Batch`)."""
    out = []
    for members in extraction_batches(table.lengths, batch_size):
        width = max(len(table.sequences[s]) for s in members)
        flat, tokens, parts = [], [], []
        for r, s in enumerate(members):
            a, b = int(table.start[s]), int(table.start[s + 1])
            flat.append(r * width + np.arange(b - a))
            tokens.append(np.arange(a, b))
            parts.append(part[a:b])
        flat, tokens, parts = np.concatenate(flat), np.concatenate(tokens), np.concatenate(parts)
        order = np.argsort(np.where(parts < 0, 99, parts), kind="stable")
        keep = order[parts[order] >= 0]
        if not len(keep):
            continue
        counts = tuple(int((parts == p).sum()) for p in (ridge.FIT, ridge.VAL, TEST))
        out.append(Batch(list(members), width, flat[keep].astype(np.int64), tokens[keep].astype(np.int64), counts))
    return out


def _pad(table: TokenTable, members, device):
    """(ids, mask) of `members`, right-padded as `align extract` pads (id 0, mask 0)."""
    import torch

    seqs = [table.sequences[s] for s in members]
    T = max(len(x) for x in seqs)
    ids = torch.zeros((len(seqs), T), dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for i, x in enumerate(seqs):
        ids[i, : len(x)] = torch.from_numpy(x.astype(np.int64))
        mask[i, : len(x)] = 1
    return ids.to(device), mask.to(device)


# -- the forward and the rows ---------------------------------------------------------------

def forward(model, table: TokenTable, batch: Batch, boundaries) -> dict:
    """Residuals {boundary: (len(members), T, d_model)} of one batch, the forward stopped
    after the highest of `boundaries` (capture.run), refused when not finite (as extract)."""
    ids, mask = _pad(table, batch.members, models.input_device(model))
    out = capture.run(model, ids, mask, boundaries)
    capture.check_finite(out, mask.bool(), lambda k: f"token {k} of the batch")
    return out["resid"]


def gather(resid: dict, boundaries, flat, out, shift=None) -> None:
    """Fill out (n, len(boundaries) · d) float64 with the rows `flat` (a long tensor on the
    accumulators' device) of each boundary side by side, minus `shift` (Σd,) if given."""
    d = out.shape[1] // max(len(boundaries), 1)
    for k, b in enumerate(boundaries):
        t = resid[b]
        rows = t.reshape(-1, t.shape[-1]).to(out.device).index_select(0, flat)
        out[:, k * d:(k + 1) * d].copy_(rows)  # the cast to float64 happens in this copy
    if shift is not None:
        out -= shift


def model_rows(model, table: TokenTable, batches, boundaries, device="cpu"):
    """Yields (batch, rows (n_used, len(boundaries) · d_model) float64) for every batch: the
    rows the statistics see, unshifted (what a test compares with a store)."""
    import torch

    d = model.config.hidden_size
    for b in batches:
        resid = forward(model, table, b, boundaries)
        out = torch.empty((len(b.flat), len(boundaries) * d), dtype=torch.float64, device=device)
        gather(resid, boundaries, torch.from_numpy(b.flat).to(device), out)
        yield b, out


# -- statistics -----------------------------------------------------------------------------

class Statistics:
    """Per-part sums of shifted rows (ridge.chunk_statistics' quantities), float64 on one
    device, for every source boundary and the target boundaries of one block:

        n (P,), sx (P, ΣD_S), xx[i] (P, d_S, d_S), sy (P, ΣD_T), ysq (P, ΣD_T) (Σ y'² per
        column, summed per boundary at the end), xy (P, ΣD_S, ΣD_T)

    `with_source=False` leaves the source's own sums (n, sx, xx) out: the block's pass after
    the first has them already."""

    def __init__(self, n_source: int, d_s: int, n_target: int, d_t: int, device, with_source: bool = True):
        import torch

        P, z = ridge.N_PARTS, dict(dtype=torch.float64, device=device)
        self.d_s, self.d_t, self.with_source = d_s, d_t, with_source
        self.n = torch.zeros(P, **z)
        self.sx = torch.zeros((P, n_source * d_s), **z) if with_source else None
        self.xx = torch.zeros((P, n_source, d_s, d_s), **z) if with_source else None
        self.sy = torch.zeros((P, n_target * d_t), **z)
        self.ysq = torch.zeros((P, n_target * d_t), **z)
        self.xy = torch.zeros((P, n_source * d_s, n_target * d_t), **z)

    def add(self, X, Y, counts) -> None:
        """Add rows X (n, ΣD_S), Y (n, ΣD_T) (shifted, float64) whose first counts[0] are fit
        rows and next counts[1] validation rows; any rows after those are ignored."""
        at = 0
        for p in range(ridge.N_PARTS):
            k = counts[p]
            if not k:
                continue
            x, y = X[at:at + k], Y[at:at + k]
            at += k
            self.sy[p] += y.sum(0)
            self.ysq[p] += (y * y).sum(0)
            self.xy[p].addmm_(x.T, y)
            if self.with_source:
                self.n[p] += k
                self.sx[p] += x.sum(0)
                for i in range(self.xx.shape[1]):
                    c = x[:, i * self.d_s:(i + 1) * self.d_s]
                    self.xx[p, i].addmm_(c.T, c)

    def as_ridge(self, source_layers, target_layers, source=None) -> dict:
        """The sums in `ridge.solve_block`'s layout (numpy float64): {"n", "sx": {i}, "xx":
        {i}, "sy": {j}, "yy": {j}, "xy": {(i, j)}}; `source`: the first pass's Statistics
        when this one has no source sums."""
        src = source or self
        get = lambda t: t.detach().cpu().numpy()  # noqa: E731  (a view on CPU, a copy from a GPU)
        n, sx, xx = get(src.n), get(src.sx), get(src.xx)
        sy, ysq, xy = get(self.sy), get(self.ysq), get(self.xy)
        ds, dt = self.d_s, self.d_t
        out = {"n": n, "sx": {}, "xx": {}, "sy": {}, "yy": {}, "xy": {}}
        for a, i in enumerate(source_layers):
            out["sx"][i] = sx[:, a * ds:(a + 1) * ds]
            out["xx"][i] = xx[:, a]
        for b, j in enumerate(target_layers):
            out["sy"][j] = sy[:, b * dt:(b + 1) * dt]
            out["yy"][j] = ysq[:, b * dt:(b + 1) * dt].sum(1)
            for a, i in enumerate(source_layers):
                out["xy"][(i, j)] = xy[:, a * ds:(a + 1) * ds, b * dt:(b + 1) * dt]
        return out


def first_means(X, Y, counts):
    """Float64 means of the training rows (fit + validation) of the first batch that has
    any: the shifts that keep the sums well conditioned (any shift gives the same fit)."""
    n = counts[0] + counts[1]
    return X[:n].mean(0), Y[:n].mean(0)


# -- held-out sums --------------------------------------------------------------------------

class HeldOut:
    """The held-out error sums of every pair of a block (ridge.heldout_sums' quantities),
    float64 on one device. With e = (x − μ_x) W − (y − μ_y), μ the training means:

        pair (nI, nJ, 3): [Σ ‖e‖/max(‖y‖, eps), Σ ‖e‖, Σ ‖e‖²]
        target (nJ, 3): [n, Σ ‖y‖, Σ ‖y − μ_y‖²]; centred (nJ, d_T): Σ (y − μ_y)
    """

    def __init__(self, maps: dict, source_layers, target_layers, device):
        import torch

        self.torch = torch
        z = dict(dtype=torch.float64, device=device)
        self.nI, self.nJ = len(source_layers), len(target_layers)
        i0, j0 = source_layers[0], target_layers[0]
        self.d_s, self.d_t = maps[(i0, j0)]["W"].shape
        # (nI, d_S, nJ·d_T): each source boundary's maps side by side, one product per source
        self.W = torch.stack([torch.from_numpy(np.concatenate([maps[(i, j)]["W"] for j in target_layers], axis=1))
                              for i in source_layers]).to(**z)
        self.x_mean = torch.from_numpy(np.concatenate([maps[(i, j0)]["x_mean"] for i in source_layers])).to(**z)
        self.y_mean = torch.from_numpy(np.concatenate([maps[(i0, j)]["y_mean"] for j in target_layers])).to(**z)
        self.pair = torch.zeros((self.nI, self.nJ, 3), **z)
        self.target = torch.zeros((self.nJ, 3), **z)
        self.centred = torch.zeros((self.nJ, self.d_t), **z)

    def add(self, X, Y) -> None:
        """X (n, ΣD_S), Y (n, ΣD_T): raw held-out rows (float64); Y is centred in place."""
        torch = self.torch
        n = X.shape[0]
        if not n:
            return
        ynorm = torch.linalg.vector_norm(Y.view(n, self.nJ, self.d_t), dim=2)  # (n, nJ)
        Y -= self.y_mean
        yc = Y.view(n, self.nJ, self.d_t)
        self.target[:, 0] += n
        self.target[:, 1] += ynorm.sum(0)
        self.target[:, 2] += (yc * yc).sum((0, 2))
        self.centred += yc.sum(0)
        inv = 1.0 / torch.clamp(ynorm, min=ridge.EPS)
        for a in range(self.nI):
            xc = X[:, a * self.d_s:(a + 1) * self.d_s] - self.x_mean[a * self.d_s:(a + 1) * self.d_s]
            E = xc @ self.W[a]
            E -= Y
            en = torch.linalg.vector_norm(E.view(n, self.nJ, self.d_t), dim=2)  # (n, nJ)
            self.pair[a, :, 0] += (en * inv).sum(0)
            self.pair[a, :, 1] += en.sum(0)
            self.pair[a, :, 2] += (en * en).sum(0)

    def scores(self, maps: dict, source_layers, target_layers) -> dict:
        """{(i, j): maps' fields + relative_error, norm_error, r2} (ridge.scores)."""
        pair, target, centred = (t.detach().cpu().numpy() for t in (self.pair, self.target, self.centred))
        out = {}
        for a, i in enumerate(source_layers):
            for b, j in enumerate(target_layers):
                out[(i, j)] = {**maps[(i, j)], **ridge.scores(pair[a, b], target[b], centred[b])}
        return out

