"""`align fit --live`: the study without stores. Both models run over the corpus and the
sufficient statistics of METHODS.md §1 accumulate on the device as the activations appear.

The run is: read both configs and tokenizers (the tokenizers must behave identically: the
store route's check and message) → tokenize the corpus once (the token table a store would
hold) → split documents and mark every token fit / validation / held-out / unused exactly as
the store route does (fitting.split) → batch the sequences exactly as `align extract` does
(length-grouped windows, extraction.batches), so every token meets the batch a store saw and
gets the same bits → plan the memory: the target boundaries are covered in blocks, one pass
over the corpus per block → per block:

    per batch: source forward (its boundaries, once per pass) + target forward (stopped after
      the block's highest boundary) → ridge.chunk_statistics into the block's sums on the
      device (rows of each part gathered in part order, float64); held-out rows kept in the
      compute dtype where the plan holds them
    fitting.solve (the shared solver; each source boundary decomposed once for all blocks)
    held-out rows (kept, or a second forward of their batches) → ridge.heldout_sums

and the result goes through the shared result writer (fitting.result) with `route: live` and
the models' provenance. Nothing else is written. With a Dask scheduler address the batches
are cut into document shards that workers process (each loads both models), their sums
added in a tree fixed by shard index (`align.fitting.live` tasks run there).
"""

from __future__ import annotations

import functools
import math
import sys
import time
from dataclasses import dataclass, field, replace

import numpy as np

from align import capture, corpus, models, provenance, ridge
from align.analyses.run import model_provenance as live_model_provenance
from align.errors import InputError, StoreError
from align.extraction.batches import GROUP_FACTOR, group_batches, pad
from align.faults import fault_point
from align.fitting.budget import human_bytes, statistics_bytes
from align.fitting.options import FitOptions
from align.fitting.result import Side, alignment_dataset, check_result_room, pair_results, write_alignment
from align.fitting.solve import check_alphas, solve
from align.fitting.split import TEST, Split, make_split
from align.layers import parse_layers

TOKENIZER_PARTS = ("vocab", "merges", "added_tokens", "normalizer_pretokenizer", "special_wrapping")
TOKENIZER_NAMES = {"vocab": "vocabulary", "merges": "merges", "added_tokens": "added tokens",
                   "normalizer_pretokenizer": "normalizer/pre-tokenizer", "special_wrapping": "special-token wrapping"}
GPU_FRACTION = 0.9  # of a GPU's free memory a live fit plans for without --device-memory


# -- inputs ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class LiveJob:
    """What the live route runs: both models, the corpus, how sequences are batched."""
    source: models.ModelSpec
    target: models.ModelSpec
    corpus: corpus.CorpusSpec
    batch_size: int = 8
    allow_long: bool = False


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
    max_id: int = -1
    max_id_at: tuple = (0, 0)

    @property
    def n_tokens(self) -> int:
        return int(self.start[-1])

    @property
    def lengths(self) -> list:
        return [len(s) for s in self.sequences]


def token_table(cspec: corpus.CorpusSpec, tokenizer) -> TokenTable:
    """Tokenize the corpus once (`corpus.sequences`: what `align extract` stores)."""
    seqs, docs, top, top_at = [], [], -1, (0, 0)
    for sq in corpus.sequences(cspec, tokenizer):
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
    return TokenTable(seqs, start, doc, pos, top, top_at)


# -- batches --------------------------------------------------------------------------------

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
    out = []
    for members in extraction_batches(table.lengths, batch_size):
        width = max(len(table.sequences[s]) for s in members)
        flat_part = np.full(len(members) * width, -1, dtype=np.int8)
        tokens = np.full(len(members) * width, -1, dtype=np.int64)
        for r, s in enumerate(members):
            a, b = int(table.start[s]), int(table.start[s + 1])
            flat_part[r * width:r * width + b - a] = part[a:b]
            tokens[r * width:r * width + b - a] = np.arange(a, b)
        used = np.flatnonzero(flat_part >= 0)
        if not len(used):
            continue
        flat = used[np.argsort(flat_part[used], kind="stable")]
        counts = tuple(int((flat_part == p).sum()) for p in (ridge.FIT, ridge.VAL, TEST))
        out.append(Batch(list(members), width, flat_part, flat, tokens[flat], counts))
    return out


# -- forwards and rows ----------------------------------------------------------------------

def forward(model, table: TokenTable, batch: Batch, boundaries) -> dict:
    """Residuals {boundary: (len(members) · T, d_model)} of one batch (padding included), the
    forward stopped after the highest of `boundaries` (capture.run), refused when not finite
    (capture.check_finite, as extract does)."""
    ids, mask = pad([table.sequences[s] for s in batch.members], models.input_device(model))
    out = capture.run(model, ids, mask, boundaries)
    capture.check_finite(out, mask.bool(), lambda k: f"token {k} of the batch")
    return {b: t.reshape(-1, t.shape[-1]) for b, t in out["resid"].items()}


def rows(resid: dict, boundaries, flat: np.ndarray, device) -> dict:
    """{boundary: (len(flat), d)} the rows `flat` of each boundary, in the compute dtype, on
    `device` (new tensors: the forward's activations can go)."""
    import torch

    idx = torch.from_numpy(flat).to(device)
    return {b: resid[b].to(device).index_select(0, idx) for b in boundaries}


def model_rows(model, table: TokenTable, batches, boundaries, device="cpu"):
    """Yields (batch, {boundary: (n_used, d)}) for every batch: the rows the statistics and
    the held-out sums see, in part order (what a test compares with a store)."""
    for b in batches:
        yield b, rows(forward(model, table, b, boundaries), boundaries, b.flat, device)


def training_shift(resid: dict, boundaries, batch: Batch) -> dict:
    """{boundary: float64 (d,)}: the mean of a batch's training rows, the shift that keeps
    the float64 sums well conditioned (any fixed vector gives the same fit)."""
    got = rows(resid, boundaries, batch.flat[:batch.n_train], next(iter(resid.values())).device)
    return {b: t.double().mean(0).cpu().numpy() for b, t in got.items()}


def training_scale(resid: dict, boundaries, batch: Batch) -> dict:
    """{boundary: mean per-dimension variance of a batch's training rows} (check_alphas)."""
    got = rows(resid, boundaries, batch.flat[:batch.n_train], next(iter(resid.values())).device)
    return {b: float(t.double().var(0, correction=0).mean()) for b, t in got.items()}


# -- memory ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """What the memory plan needs to know about a job: boundaries and widths of each side,
    the largest batch (positions, padded length), the widest MLP and most heads, the itemsize
    of the compute dtype, held-out rows, and the models' bytes (weights and buffers)."""
    n_source: int
    d_s: int
    n_target: int
    d_t: int
    batch_positions: int
    batch_width: int
    inter: int
    heads: int
    itemsize: int
    n_heldout: int
    model_bytes: int


def batch_bytes(s: Shape, n_target: int) -> int:
    """Peak bytes of one batch beyond the weights: the captured residuals of both forwards,
    a block's transient tensors (four d-wide and two MLP-wide activations, one attention
    matrix per head in float32), the rows ridge gathers (compute dtype twice: selected and
    side by side; float64 twice: converted and shifted) and the squares of the target rows."""
    B = s.batch_positions
    width = s.n_source * s.d_s + n_target * s.d_t
    captured = s.itemsize * B * width
    transient = s.itemsize * B * (4 * max(s.d_s, s.d_t) + 2 * s.inter) + 4 * s.heads * B * s.batch_width
    gathered = (2 * s.itemsize + 16) * B * width + 8 * B * n_target * s.d_t
    return captured + transient + gathered


def block_bytes(s: Shape, n_target: int, keep_heldout: bool) -> dict:
    """Bytes a block of `n_target` target boundaries holds at its peak, by holder: its
    statistics (budget.statistics_bytes), the solve (the block's maps, the factors of every
    source boundary kept for the next blocks, 3·d_S² each, two scatters), one batch
    (`batch_bytes`), the held-out sums' temporaries (the maps side by side, the predictions
    of a batch) and, with `keep_heldout`, the block's held-out rows in the compute dtype."""
    nI, dS, dT = s.n_source, s.d_s, s.d_t
    solve_b = 8 * (nI * n_target * (dS * dT + dS + 2 * dT) + 3 * nI * dS * dS + 2 * dS * dS)
    heldout = 8 * (dS * n_target * dT + 2 * s.batch_positions * n_target * dT)
    kept = s.itemsize * s.n_heldout * (nI * dS + n_target * dT) if keep_heldout else 0
    return {"statistics": statistics_bytes(nI, n_target, dS, dT), "solve": solve_b, "batch": batch_bytes(s, n_target),
            "held-out sums": heldout, "held-out rows": kept}


def plan_blocks(s: Shape, target_layers, budget: int):
    """Blocks of target boundaries whose pass fits `budget` bytes with the models: as few
    passes as possible, and at that number the held-out rows kept (no second forward of their
    batches) when they fit. Returns (blocks, keep_heldout, bytes of the largest block by
    holder) or None when one target boundary per pass does not fit."""
    room, nJ = budget - s.model_bytes, len(target_layers)
    for per in range(nJ, 0, -1):
        for keep in (True, False):
            if sum(block_bytes(s, per, keep).values()) <= room:
                n_blocks = math.ceil(nJ / per)
                size = math.ceil(nJ / n_blocks)  # even blocks: as many passes, less memory
                blocks = [tuple(target_layers[k:k + size]) for k in range(0, nJ, size)]
                return blocks, keep, block_bytes(s, size, keep)
    return None


def least_bytes(s: Shape) -> int:
    """The smallest plan: the models and one target boundary per pass, held-out rows not kept."""
    return s.model_bytes + sum(block_bytes(s, 1, False).values())


def model_bytes(config, dtype: str) -> int:
    """Bytes of a model's weights and buffers in `dtype`, from its config alone (the
    architecture built on torch's meta device: no memory, no weights read)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(config)
    item = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    return item * (sum(p.numel() for p in net.parameters()) + sum(b.numel() for b in net.buffers()))


def budget_of(job: LiveJob, options: FitOptions, device_memory: int | None) -> tuple:
    """(device, budget, bytes already held there, the option that sets the budget). On a GPU
    (the models and the sums live there): --device-memory, default GPU_FRACTION of its free
    memory. On the CPU: --memory-limit (default fitting.cluster's: 60% of the available
    memory), of which this process holds its resident size now (before any model loads).
    options.worker_budget replaces both (the plan's room itself: tests)."""
    import psutil
    import torch

    from align.fitting.cluster import default_memory_limit

    gpu = job.target.device == "cuda" or (job.target.device == "auto" and torch.cuda.is_available())
    if options.worker_budget is not None:
        return ("cuda" if gpu else "cpu"), int(options.worker_budget), 0, "--memory-limit"
    if gpu:
        if device_memory is None:
            free, _ = torch.cuda.mem_get_info()
            device_memory = int(GPU_FRACTION * free)
        return "cuda", int(device_memory), 0, "--device-memory"
    limit = options.memory_limit if options.memory_limit is not None else default_memory_limit()
    return "cpu", int(limit), psutil.Process().memory_info().rss, "--memory-limit"


def refusal(option: str, limit: int, idle: int, s: Shape, where: str) -> str:
    """The one line of a budget that cannot hold one target boundary per pass, naming the minimum."""
    need = block_bytes(s, 1, False)
    parts = ", ".join(f"{k} {human_bytes(v)}" for k, v in need.items() if v)
    held = f"this process holds {human_bytes(idle)} before loading the models; " if idle else ""
    return (f"{option} {human_bytes(limit)} cannot hold one target boundary per pass on {where} ({held}the models need "
            f"{human_bytes(s.model_bytes)}, one target boundary {parts}): the minimum is "
            f"{human_bytes(idle + least_bytes(s))}; raise {option}, or lower --batch-size or the number of --source-layers")


# -- progress -------------------------------------------------------------------------------

class Progress:
    """Tokens/s of each model, pass k of n and the ETA: a tqdm bar on a terminal, else a log
    line every ~10 s."""

    def __init__(self, total_batches: int, log, terminal: bool):
        self.log, self.total = log, max(total_batches, 1)
        self.done, self.t0, self.last = 0, time.perf_counter(), time.perf_counter()
        self.seconds = {"source": 0.0, "target": 0.0}
        self.tokens = {"source": 0, "target": 0}
        self.bar = None
        if terminal:
            from tqdm import tqdm

            # a batch takes tens of ms at least: redraw at each one
            self.bar = tqdm(total=self.total, unit="batch", dynamic_ncols=True, leave=False, file=sys.stderr, mininterval=0)

    def forward(self, side: str, tokens: int, seconds: float) -> None:
        self.tokens[side] += tokens
        self.seconds[side] += seconds

    def rates(self) -> str:
        r = {k: self.tokens[k] / max(self.seconds[k], 1e-9) for k in self.seconds}
        return f"source {r['source']:,.0f} tok/s, target {r['target']:,.0f} tok/s"

    def step(self, what: str) -> None:
        self.done += 1
        now = time.perf_counter()
        eta = (now - self.t0) / self.done * (self.total - self.done)
        if self.bar is not None:
            self.bar.set_description_str(what, refresh=False)
            self.bar.set_postfix_str(f"{self.rates()}, ETA {eta:,.0f} s", refresh=False)
            self.bar.update(1)
        elif now - self.last >= 10 or self.done == self.total:
            self.last = now
            self.log(f"align fit --live: {what}, batch {self.done:,}/{self.total:,}, {self.rates()}, ETA {eta:,.0f} s")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# -- passes ---------------------------------------------------------------------------------

@dataclass
class Models:
    """Both models and where the sums accumulate (the target's GPU, else the CPU)."""
    source: object
    target: object
    device: object

    @property
    def backend(self) -> ridge.Backend:
        """numpy on the CPU (its statistics gather into reused buffers and add in place
        through BLAS), torch on a GPU."""
        return ridge.CPU if self.device.type == "cpu" else ridge.Backend(str(self.device))

    def arrays(self, resid: dict) -> dict:
        """Rows as the backend takes them: on the CPU numpy float32 (a view of a float32
        tensor; bf16 widened, exactly), on a GPU the tensors themselves."""
        import torch

        if self.device.type != "cpu":
            return resid
        return {k: (t if t.dtype == torch.float32 else t.float()).numpy() for k, t in resid.items()}


def load_models(job: LiveJob) -> Models:
    import torch

    src, _ = models.load_model(job.source)
    tgt, _ = models.load_model(job.target)
    dev = models.input_device(tgt)
    return Models(src, tgt, dev if dev.type == "cuda" else torch.device("cpu"))


def forwards(net: Models, table: TokenTable, b: Batch, source_layers, block, progress: Progress | None):
    """Both forwards of one batch, timed for the progress line."""
    t = time.perf_counter()
    xs = forward(net.source, table, b, source_layers)
    t1 = time.perf_counter()
    ys = forward(net.target, table, b, block)
    t2 = time.perf_counter()
    if progress is not None:
        progress.forward("source", b.positions, t1 - t)
        progress.forward("target", b.positions, t2 - t1)
    return xs, ys


@dataclass
class Shifts:
    """The fixed shifts of the sums ({boundary: float64 (d,)}): the source's are taken once
    and serve every block (so its factors serve them all), the target's once per block."""
    x: dict | None = None
    y: dict = field(default_factory=dict)


def statistics_pass(net: Models, table: TokenTable, batches, source_layers, block, shifts: Shifts,
                    keep_heldout: bool, progress: Progress, label: str, alphas_check=None):
    """One pass over `batches` for one block: (ridge.Statistics on the device, kept
    held-out rows [({i: rows}, {j: rows})] or None). `alphas_check(scale)` runs on the first
    batch with training rows (the α grid against the data's scale, before any sum)."""
    d_s, d_t = net.source.config.hidden_size, net.target.config.hidden_size
    backend = net.backend
    stats = ridge.Statistics.zeros(source_layers, block, d_s, d_t, backend)
    kept = [] if keep_heldout else None
    work: dict = {}  # the gather's buffers, reused batch after batch
    for b in batches:
        fault_point("fit_live_batch")
        if not b.n_train and not (keep_heldout and b.n_test):
            progress.step(label)
            continue
        xs, ys = forwards(net, table, b, source_layers, block, progress)
        if b.n_train:
            if shifts.x is None:
                if alphas_check is not None:
                    alphas_check(training_scale(xs, source_layers, b))
                shifts.x = training_shift(xs, source_layers, b)
            if block not in shifts.y:
                shifts.y[block] = training_shift(ys, block, b)
            part = np.where(b.part == TEST, -1, b.part)
            ridge.chunk_statistics(net.arrays(xs), net.arrays(ys), part, shifts.x, shifts.y[block], backend,
                                   into=stats, work=work)
        if keep_heldout and b.n_test:
            held = b.flat[b.n_train:]
            kept.append((rows(xs, source_layers, held, net.device), rows(ys, block, held, net.device)))
        del xs, ys
        progress.step(label)
    return stats, kept


def heldout_pass(net: Models, table: TokenTable, batches, source_layers, block, fitted: dict, kept,
                 progress: Progress, label: str) -> dict:
    """The held-out sums (ridge.heldout_sums, added batch after batch) of every pair of the
    block: from the kept rows, or a second forward of the batches with held-out rows (the
    same batches, the same bits)."""
    backend = net.backend
    sums = None

    def add(xh, yh):
        nonlocal sums
        s = ridge.heldout_sums(net.arrays(xh), net.arrays(yh), fitted, backend)
        sums = s if sums is None else ridge.add_heldout(sums, s)

    if kept is not None:
        for xh, yh in kept:
            add(xh, yh)
        return sums
    for b in batches:
        if not b.n_test:
            continue
        fault_point("fit_live_heldout_batch")
        xs, ys = forwards(net, table, b, source_layers, block, progress)
        held = b.flat[b.n_train:]
        add(rows(xs, source_layers, held, net.device), rows(ys, block, held, net.device))
        del xs, ys
        progress.step(label)
    return sums


def run_blocks(net: Models, table: TokenTable, batches, source_layers, blocks, keep_heldout: bool,
               options: FitOptions, split: Split, progress: Progress) -> tuple:
    """Every block in turn: statistics pass, solve (the shared solver, the source's factors
    shared by all blocks), held-out pass. Returns ({(i, j): fitted + scores}, {block:
    numpy statistics} when options.keep_statistics)."""
    results, kept_stats, factors, shifts = {}, {}, {}, Shifts()
    solve_device = "cuda" if net.device.type == "cuda" else "cpu"

    def alphas_check(scale):
        check_alphas(options.alphas, scale, split.n_select, split.n_train)

    for k, block in enumerate(blocks):
        label = f"pass {k + 1} of {len(blocks)}"
        stats, kept = statistics_pass(net, table, batches, source_layers, block, shifts, keep_heldout, progress,
                                      label, alphas_check if k == 0 else None)
        reduced = stats.numpy(net.backend)
        del stats
        fitted = solve(reduced, options.alphas, shifts.x, shifts.y[block], solve_device, factors)
        if options.keep_statistics:
            kept_stats[block] = reduced
        del reduced
        sums = heldout_pass(net, table, batches, source_layers, block, fitted, kept, progress, label + ", held-out")
        results.update(pair_results(fitted, sums))
        del kept, fitted
    return results, kept_stats


# -- the run --------------------------------------------------------------------------------

@dataclass
class Prepared:
    """Everything known before the first forward: configs, tokenizers, the token table, the
    split, the batches and the chosen boundaries of each side."""
    job: LiveJob
    configs: tuple
    tokenizers: tuple
    table: TokenTable
    split: Split
    batches: list
    source_layers: list
    target_layers: list


def prepare(job: LiveJob, options: FitOptions) -> Prepared:
    """Read both configs and tokenizers (refusing tokenizers that differ, token ids a model
    has no embedding for, sequences beyond a model's positions), tokenize once, split by
    document (fitting.split) and batch."""
    if job.batch_size < 1:
        raise InputError(f"--batch-size {job.batch_size} must be at least 1")
    corpus.validate(job.corpus)
    configs = tuple(models.load_config(s) for s in (job.source, job.target))
    toks = tuple(models.load_tokenizer(s) for s in (job.source, job.target))
    check_tokenizers(*(corpus.tokenizer_hashes(t) for t in toks), job.source.name, job.target.name)
    layers = [parse_layers(spec, c.num_hidden_layers, f"--{side}-layers") for spec, c, side in
              ((options.source_layers, configs[0], "source"), (options.target_layers, configs[1], "target"))]
    table = token_table(job.corpus, toks[0])
    for spec, config in zip((job.source, job.target), configs):
        models.check_token_ids(spec, config, table.max_id, "document {}, position {}".format(*table.max_id_at))
        limit = getattr(config, "max_position_embeddings", None)
        if limit and job.corpus.max_length > limit and not job.allow_long:
            raise InputError(
                f"--max-length {job.corpus.max_length} is above the position limit of {spec.name} "
                f"(max_position_embeddings {limit}): use --max-length {limit} or less, or pass --allow-long")
    split = make_split(table.doc, table.pos, options)
    return Prepared(job, configs, toks, table, split, plan_batches(table, split.part, job.batch_size), *layers)


def shape_of(p: Prepared) -> Shape:
    """The memory plan's view of a prepared job (the models' bytes from their configs)."""
    cs, ct = p.configs
    dts = p.job.source.resolved_dtype(), p.job.target.resolved_dtype()
    big = max(p.batches, key=lambda b: b.positions)
    inter = max(getattr(c, "intermediate_size", None) or 4 * c.hidden_size for c in (cs, ct))
    return Shape(len(p.source_layers), cs.hidden_size, len(p.target_layers), ct.hidden_size, big.positions, big.width,
                 inter, max(cs.num_attention_heads, ct.num_attention_heads), 4 if "float32" in dts else 2,
                 p.split.counts["heldout"], model_bytes(cs, dts[0]) + model_bytes(ct, dts[1]))


def sides_of(p: Prepared) -> tuple:
    """Each model as the result records it (fitting.result.Side): what a live-model analysis
    records (analyses.run.model_provenance), the weights' identity (as a store records it)
    and the batch size (the batches decide the float32 rounding)."""
    out = []
    for spec, config, tok in zip((p.job.source, p.job.target), p.configs, p.tokenizers):
        prov = {**live_model_provenance(spec, config, tok, p.job.corpus),
                "weights": provenance.weights_identity(spec, config), "batch_size": p.job.batch_size}
        out.append(Side(prov, spec.name, config.num_hidden_layers, config.hidden_size))
    return tuple(out)


@dataclass
class LivePlan:
    """The plan printed before the first forward."""
    device: str
    budget: int
    blocks: list
    keep_heldout: bool
    bytes: dict
    n_tokens: int
    counts: dict
    batches: int
    positions: int

    @property
    def passes(self) -> int:
        return len(self.blocks)

    def lines(self, n_source: int, n_target: int, batch_size: int) -> list:
        c = self.counts
        held = "kept from the first forward" if self.keep_heldout else "scored by a second forward of their batches"
        return [
            f"align fit --live: {self.n_tokens:,} tokens ({c['fit']:,} fit / {c['validation']:,} validation / "
            f"{c['heldout']:,} held-out) in {self.batches:,} batches of up to {batch_size} sequences",
            f"align fit --live: {n_source}x{n_target} pairs in {self.passes} block(s) of up to "
            f"{max(len(b) for b in self.blocks)} target boundaries, one pass over the corpus each; held-out rows {held}",
            f"align fit --live: memory on {self.device}: " + ", ".join(f"{k} {human_bytes(v)}" for k, v in self.bytes.items())
            + f" = {human_bytes(sum(self.bytes.values()))} of {human_bytes(self.budget)} planned",
        ]

    def record(self) -> dict:
        return {"device": self.device, "budget": self.budget, "blocks": [list(b) for b in self.blocks],
                "passes": self.passes, "keep_heldout": self.keep_heldout, "bytes": dict(self.bytes),
                "n_tokens": self.n_tokens, "counts": dict(self.counts), "batches": self.batches,
                "positions": self.positions}


def make_plan(p: Prepared, options: FitOptions, device_memory: int | None, per_worker: tuple | None = None) -> LivePlan:
    """The blocks and memory of the run, or the one-line refusal of a budget that cannot
    hold one target boundary per pass (naming the minimum). `per_worker` (limit, idle
    footprint) plans for a Dask worker instead, which keeps no held-out rows between tasks."""
    s = shape_of(p)
    if per_worker is not None:
        s = replace(s, n_heldout=0)
        where, (limit, idle), option = "each worker", per_worker, "--memory-limit (per worker)"
    else:
        where, limit, idle, option = budget_of(p.job, options, device_memory)
    planned = plan_blocks(s, p.target_layers, limit - idle)
    if planned is None:
        raise InputError(refusal(option, limit, idle, s, where))
    blocks, keep, need = planned
    if per_worker is not None:
        keep = False
        need.pop("held-out rows")
    return LivePlan(where, limit - idle, blocks, keep, {"models": s.model_bytes, **need}, p.table.n_tokens,
                    p.split.counts, len(p.batches), sum(b.positions for b in p.batches))


@dataclass
class LiveReport:
    """What `fit_live` returns: the result's path (None: not written), the Dataset, seconds,
    the plan (LivePlan.record()), statistics per block when asked, the progress rates, the
    seconds of the passes, and with a dry run its estimate."""
    path: str | None
    dataset: object
    seconds: float
    plan: dict
    statistics: dict = field(default_factory=dict)
    rates: str = ""
    loop_seconds: float = 0.0  # the passes, solves and held-out sums (loading and tokenizing not counted)
    dry_run: dict | None = None


def fit_live(job: LiveJob, output: str | None, options: FitOptions | None = None, *, device_memory: int | None = None,
             dry_run: bool = False, log=None, **option_values) -> LiveReport:
    """`align fit --live`: the store route's alignment result computed from the models
    themselves (see the module docstring). `options` (FitOptions, or its fields as keywords):
    the fit's fractions, seed, α grid, first token, layers, save_maps, memory_limit (the host
    budget), overwrite, keep_statistics; scheduler: a Dask address runs document shards on
    its workers. `device_memory`: the GPU budget when the models run on one. With `dry_run`
    nothing is written: the plan and a time estimate from one timed batch of each model.

    Before any model is loaded: -o (store.check_output: never an input, never anything but
    an alignment result, replaced only with overwrite), the tokenizers, the split, room for
    the result and the memory plan are checked; every refusal is one line."""
    from align import store as st

    terminal = log is None and sys.stderr.isatty()
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.time()
    options = (replace(options, **option_values) if options is not None else FitOptions(**option_values)).checked()
    inputs = {k: v for k, v in (("source model folder", job.source.name), ("target model folder", job.target.name),
                                ("corpus", job.corpus.path)) if v}
    if output is not None and not dry_run:
        st.check_output(output, "alignment", inputs=inputs, overwrite=options.overwrite)
    p = prepare(job, options)
    sides = sides_of(p)
    if output is not None and not dry_run:
        check_result_room(output, p.source_layers, p.target_layers, *sides, p.split, options.save_maps)
    if options.scheduler not in (None, "synchronous", "sync") and not dry_run:
        plan, results, statistics, rates, loop_s = run_on_cluster(p, options, log)
        return finish(p, sides, results, statistics, plan, options, output, inputs, rates, loop_s, "cluster", log, t0)
    plan = make_plan(p, options, device_memory)
    for line in plan.lines(len(p.source_layers), len(p.target_layers), job.batch_size):
        log(line)
    if dry_run:
        est = estimate(p, plan, log)
        return LiveReport(None, None, time.time() - t0, plan.record(), dry_run=est)
    net = load_models(job)
    total = plan.passes * len(p.batches) + (0 if plan.keep_heldout else plan.passes * sum(1 for b in p.batches if b.n_test))
    progress = Progress(total, log, terminal)
    t_loop = time.time()
    try:
        results, statistics = run_blocks(net, p.table, p.batches, p.source_layers, plan.blocks, plan.keep_heldout,
                                         options, p.split, progress)
    finally:
        progress.close()
    loop_s = time.time() - t_loop
    return finish(p, sides, results, statistics, plan, options, output, inputs, progress.rates(), loop_s,
                  str(net.device.type), log, t0)


def finish(p: Prepared, sides, results, statistics, plan: LivePlan, options: FitOptions, output, inputs, rates: str,
           loop_s: float, where: str, log, t0: float) -> LiveReport:
    """The alignment Dataset (the shared writer's, route "live") written to `output`."""
    log(f"align fit --live: {plan.passes} pass(es) over {p.table.n_tokens:,} tokens, {rates}")
    recorded = options.recorded(batch_size=p.job.batch_size, n_tokens=p.split.counts, device=where)
    ds = alignment_dataset(results, p.source_layers, p.target_layers, *sides, p.split, recorded, route="live",
                           save_maps=options.save_maps)
    if output is not None:
        fault_point("fit_live_before_write")
        write_alignment(output, ds, inputs, options.overwrite)
        log(f"align fit --live: wrote {output} ({len(p.source_layers)}x{len(p.target_layers)} pairs) in "
            f"{time.time() - t0:.1f} s")
    return LiveReport(output, ds, time.time() - t0, plan.record(), statistics, rates, loop_s)


# -- on a Dask cluster ----------------------------------------------------------------------

@dataclass(frozen=True)
class ShardTask:
    """What one shard task needs (opaque to Dask: its tuples are no graph keys): the job, the
    source boundaries, the block of target boundaries and the shard's batches."""
    job: LiveJob
    source_layers: tuple
    block: tuple
    batches: tuple


@functools.lru_cache(maxsize=1)
def worker_models(job: LiveJob) -> Models:
    """Both models, loaded once per worker process (on its own device, as the job says)."""
    return load_models(job)


def shift_task(task: ShardTask, table: TokenTable, x_shift) -> dict:
    """On a worker: the shifts of a block from the first batch with training rows (the
    source's only when `x_shift` is None) and the source's scale (check_alphas)."""
    net = worker_models(task.job)
    b = task.batches[0]
    xs, ys = forwards(net, table, b, list(task.source_layers), task.block, None)
    scale = training_scale(xs, task.source_layers, b) if x_shift is None else {}
    x = training_shift(xs, task.source_layers, b) if x_shift is None else x_shift
    return {"x": x, "y": training_shift(ys, task.block, b), "scale": scale}


def shard_statistics_task(task: ShardTask, table: TokenTable, shifts: dict) -> ridge.Statistics:
    """On a worker: the sums (numpy) of the training rows of the shard's batches."""
    net = worker_models(task.job)
    d_s, d_t = net.source.config.hidden_size, net.target.config.hidden_size
    stats = ridge.Statistics.zeros(task.source_layers, task.block, d_s, d_t, net.backend)
    for b in task.batches:
        fault_point("fit_live_batch")
        xs, ys = forwards(net, table, b, list(task.source_layers), task.block, None)
        part = np.where(b.part == TEST, -1, b.part)
        ridge.chunk_statistics(net.arrays(xs), net.arrays(ys), part, shifts["x"], shifts["y"], net.backend, into=stats)
    return stats.numpy(net.backend)


def shard_heldout_task(task: ShardTask, table: TokenTable, fitted: dict) -> dict:
    """On a worker: the held-out sums of the shard's batches (a second forward of each)."""
    net = worker_models(task.job)
    sums = None
    for b in task.batches:
        xs, ys = forwards(net, table, b, list(task.source_layers), task.block, None)
        held = b.flat[b.n_train:]
        s = ridge.heldout_sums(net.arrays(rows(xs, task.source_layers, held, net.device)),
                               net.arrays(rows(ys, task.block, held, net.device)), fitted, net.backend)
        sums = s if sums is None else ridge.add_heldout(sums, s)
    return sums


def shards_of(batches: list, n: int) -> list:
    """`batches` (corpus order) cut into at most `n` runs of consecutive batches, as even in
    positions as the batches allow: shard k is fixed by the batches alone."""
    total = sum(b.positions for b in batches)
    out, cur, at = [], [], 0
    for b in batches:
        cur.append(b)
        at += b.positions
        if at * n >= total * (len(out) + 1) and len(out) < n - 1:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def run_on_cluster(p: Prepared, options: FitOptions, log) -> tuple:
    """The blocks of `plan` on the Dask cluster at options.scheduler: per block, document
    shards (runs of consecutive batches) on the workers, each loading both models once; the
    shards' sums added in a tree fixed by shard index (graph.tree), solved here, and the
    held-out sums of the shards added the same way. Held-out rows are forwarded again (rows
    are not kept between tasks). The plan is made per worker (--memory-limit per worker, or
    the workers' own limit, less the largest worker's idle footprint). Returns (plan,
    results, statistics, rates, seconds)."""
    from align.fitting.cluster import executor
    from align.fitting.graph import add_heldout_task, add_task, tree

    results, kept_stats, factors = {}, {}, {}
    t_loop = time.time()
    with executor(options.scheduler, None, options.memory_limit, log) as ex:
        plan = make_plan(p, options, None, (ex.limit, ex.idle))
        for line in plan.lines(len(p.source_layers), len(p.target_layers), p.job.batch_size):
            log(line)
        n = max(1, min(len(p.batches), 4 * ex.n_workers))
        train = shards_of([b for b in p.batches if b.n_train], n)
        test = shards_of([b for b in p.batches if b.n_test], n)
        first = next(b for b in p.batches if b.n_train)
        log(f"align fit --live: {len(train)} shard(s) of the training batches and {len(test)} of the held-out ones on "
            f"{ex.n_workers} Dask worker(s), each loading both models")
        x_shift = None
        for k, block in enumerate(plan.blocks):
            I = tuple(p.source_layers)
            shifts = ex.run({"table": p.table, "shift": (shift_task, ShardTask(p.job, I, block, (first,)), "table", x_shift)},
                            "shift")
            if x_shift is None:
                check_alphas(options.alphas, shifts["scale"], p.split.n_select, p.split.n_train)
                x_shift = shifts["x"]
            dsk = {"table": p.table, "shifts": shifts}
            keys = []
            for s, shard in enumerate(train):
                dsk[("stats", s)] = (shard_statistics_task, ShardTask(p.job, I, block, tuple(shard)), "table", "shifts")
                keys.append(("stats", s))
            stats = ex.run(dsk, tree(dsk, "stats-sum", keys, add_task))
            fitted = solve(stats, options.alphas, shifts["x"], shifts["y"], options.device, factors)
            if options.keep_statistics:
                kept_stats[block] = stats
            dsk = {"table": p.table, "fitted": fitted}
            keys = []
            for s, shard in enumerate(test):
                dsk[("heldout", s)] = (shard_heldout_task, ShardTask(p.job, I, block, tuple(shard)), "table", "fitted")
                keys.append(("heldout", s))
            sums = ex.run(dsk, tree(dsk, "heldout-sum", keys, add_heldout_task))
            results.update(pair_results(fitted, sums))
            log(f"align fit --live: pass {k + 1} of {plan.passes} done on the cluster")
    return plan, results, kept_stats, f"{plan.positions * plan.passes:,} positions forwarded on the cluster", time.time() - t_loop


def estimate(p: Prepared, plan: LivePlan, log) -> dict:
    """--dry-run: time one batch of each model (the batch with most training rows, after a
    warm-up) and the statistics of its rows for the first block, and scale them to the run:
    every pass forwards every batch through the source and, up to the block's highest
    boundary, the target; the sums cost in proportion to training rows × target boundaries;
    held-out rows cost one product each (half a training row's sums), and a second forward
    of their batches when not kept. Returns the estimate (seconds by phase)."""
    import torch

    net = load_models(p.job)
    b = max(p.batches, key=lambda x: x.n_train)
    block = plan.blocks[0]
    L_T = net.target.config.num_hidden_layers
    for _ in range(2):  # the first is the warm-up
        t = time.perf_counter()
        xs = forward(net.source, p.table, b, p.source_layers)
        ts = time.perf_counter() - t
        t = time.perf_counter()
        ys = forward(net.target, p.table, b, p.target_layers)
        tt = time.perf_counter() - t
    backend = net.backend
    stats = ridge.Statistics.zeros(p.source_layers, block, net.source.config.hidden_size,
                                   net.target.config.hidden_size, backend)
    part = np.where(b.part == TEST, -1, b.part)
    shift_x, shift_y = training_shift(xs, p.source_layers, b), training_shift(ys, block, b)
    t = time.perf_counter()
    ridge.chunk_statistics(net.arrays(xs), net.arrays({j: ys[j] for j in block}), part, shift_x, shift_y, backend,
                           into=stats)
    if net.device.type == "cuda":
        torch.cuda.synchronize(net.device)
    tp = time.perf_counter() - t
    scale = plan.positions / b.positions
    depth = sum(max(blk) for blk in plan.blocks) / max(L_T, 1)  # model depths of the target run in all passes
    per_row = tp / max(b.n_train, 1) * len(p.target_layers) / len(block)
    c = plan.counts
    sec = {"source forward": ts * scale * plan.passes, "target forward": tt * scale * depth,
           "statistics": per_row * (c["fit"] + c["validation"]), "held-out": per_row * c["heldout"] / 2}
    if not plan.keep_heldout:
        held = sum(x.positions for x in p.batches if x.n_test)
        sec["held-out"] += (ts + tt) * held / b.positions * plan.passes
    total = sum(sec.values())
    log(f"align fit --live --dry-run: one batch of {len(b.members)} sequences ({b.positions:,} positions): source "
        f"{ts * 1e3:.1f} ms, target {tt * 1e3:.1f} ms, statistics of its {b.n_train:,} training rows {tp * 1e3:.1f} ms")
    log("align fit --live --dry-run: whole run ~" + ", ".join(f"{k} {v:,.3g} s" for k, v in sec.items())
        + f" = ~{total:,.3g} s (model loading and the solve not counted); nothing was written")
    return {"seconds": sec, "seconds_estimate": total,
            "batch": {"positions": b.positions, "rows": b.n_train, "source_s": ts, "target_s": tt, "statistics_s": tp}}
