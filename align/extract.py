"""`align extract`: a model's residual streams over a corpus into an activation store.

The run is: check options, -o, the device and the weights (their identity, see
align.provenance) → tokenize once to count (and check the disk) → load the model → create the
store and write its token table (the plan) → forward batches grouped by length (within
windows of GROUP_FACTOR x batch size sequences) with hooks, check each batch is finite (one
device reduction per captured tensor, one host sync per batch), gather the real tokens into
the batch's host arrays (pinned, on a copy stream, on CUDA; no sync per boundary), and hand
each sequence, in corpus order, through a bounded queue to a writer thread that fills chunk
buffers, spreads whole-chunk writes over WRITER_THREADS threads and commits after them. Every check that can
fail runs before the store exists. Re-running the same command resumes an incomplete store
from its last committed sequence, and records each run as a segment of the store's provenance.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import re
import shutil
import sys
import tempfile
import threading
import time
import types
from dataclasses import dataclass

import numpy as np

import align
from align import capture, corpus, models, provenance
from align.errors import DiskSpaceError, InputError, OutputRefused, StoreMismatch
from align.faults import fault_point
from align.layers import parse_layers
from align.store.codecs import DEFAULT_CODEC, encode, physical_dtype

# Defining options: a store made with other values of these is another store. The hub
# revision as typed is not one: "weights" (the commit it resolved to, or the weight files'
# hash) is what decides the numbers, so a resume may pin the commit a moved branch had. The
# tokenizer's behaviour (its hashes) is one too: the same text read another way is other ids.
DEFINING = ("model", "dtype", "random_init", "seed", "corpus_hash", "text_field", "format",
            "doc_split", "max_length", "overflow", "max_tokens", "max_docs", "layers", "sublayers",
            "store_dtype", "codec", "chunk_tokens", "config_hash", "weights", "tokenizer")
DISK_MARGIN = 1.05


@dataclass
class Plan:
    n_tokens: int
    n_sequences: int
    n_docs: int
    longest: int
    stats: corpus.TokenizeStats = dataclasses.field(default_factory=corpus.TokenizeStats)
    lengths: list = dataclasses.field(default_factory=list)  # tokens per sequence, corpus order
    max_id: int = -1  # the largest token id, and where it first occurs (document, position)
    max_id_at: tuple = (0, 0)


@dataclass
class ExtractReport:
    path: str
    status: str  # "complete", "resumed", "already complete", "dry run"
    n_tokens: int
    seconds: float
    tokens_per_second: float
    dry_run: dict | None = None
    stats: dict | None = None  # padding_fraction, group_window, loop_s, queue_blocked_s (a run that forwarded)


def _model_id(name: str) -> str:
    expanded = os.path.expanduser(name)
    return os.path.abspath(expanded) if os.path.isdir(expanded) else name


def count(spec: corpus.CorpusSpec, tokenizer) -> Plan:
    """Tokens, sequences and documents the corpus gives, and what tokenizing dropped."""
    import array

    n = s = longest = 0
    docs = set()
    lengths = array.array("i")  # 4 bytes a sequence: the padding estimate of --dry-run needs them
    stats = corpus.TokenizeStats()
    top, top_at = -1, (0, 0)
    for sq in corpus.sequences(spec, tokenizer, stats):
        if len(sq) and int(sq.token_id.max()) > top:
            t = int(np.argmax(sq.token_id))
            top, top_at = int(sq.token_id[t]), (sq.doc, t)
        lengths.append(len(sq))
        n += len(sq)
        s += 1
        longest = max(longest, len(sq))
        docs.add(sq.doc)
    if n == 0:
        raise InputError(f"corpus {spec.describe()} has no text to tokenize: give a corpus with at least one non-empty document")
    return Plan(n, s, len(docs), longest, stats, lengths, top, top_at)


def dropped_summary(stats: dict) -> str:
    """The run's report of characters the tokenizer dropped (from TokenizeStats.to_json())."""
    if "dropped_characters" not in stats:
        return "dropped characters not counted (a store made before align counted them)"
    n, d = stats["dropped_characters"], stats.get("documents_with_dropped_characters", 0)
    if not n:
        return "no character dropped by the tokenizer"
    first = ", ".join(f"document {doc} ({k})" for doc, k in stats.get("first_dropped", [])[:3])
    return (f"{n:,} character{'s' if n != 1 else ''} outside the tokenizer's vocabulary dropped from {d:,} "
            f"document{'s' if d != 1 else ''} (first: {first})")


def _check_output(output: str, inputs: dict[str, str]) -> None:
    """-o must be a new path, an empty folder or an activation store: never a file, one of the
    run's own inputs (the model folder, the corpus), inside one or holding one, nor a folder
    holding anything else (align.store.check_output), and its nearest existing ancestor must
    be a folder. Nothing is touched here; refusals are one line."""
    from align import store as st

    st.check_output(output, "activations", inputs=inputs)
    local = st.local_path(output)
    if local is None:
        return
    parent = os.path.dirname(os.path.abspath(os.path.expanduser(local)))
    while parent and not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if parent and not os.path.isdir(parent):
        raise OutputRefused(f"-o {output}: {parent} is a file, not a folder: choose another -o")


def _check_device(device: str) -> None:
    """The device exists (cheap, before hashing weights or tokenizing a corpus)."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError("--device cuda was asked for but torch sees no CUDA device: use --device cpu")


def _check_max_length(max_length: int, config, allow_long: bool) -> None:
    """A sequence longer than the positions the model was built for is refused unless forced."""
    limit = getattr(config, "max_position_embeddings", None)
    if limit and max_length > limit and not allow_long:
        raise InputError(
            f"--max-length {max_length} is above the model's position limit (max_position_embeddings {limit}): "
            f"use --max-length {limit} or less, or pass --allow-long to run positions the model was not built for"
        )


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024


# Length grouping. Windows of GROUP_FACTOR x batch_size sequences, counted from the store's
# first sequence, are each cut into batches of similar length. A window's batches depend only
# on the token table and the batch size, never on where a run started, so every sequence is
# computed in the same batch (same padding, same bits) on a first run, a re-run and a resume.
# Memory: at most one window's outputs wait for the sequences before them (4 batches).
GROUP_FACTOR = 4


def group_batches(lengths, batch_size: int) -> list[list[int]]:
    """Cut one window into batches of similar length: positions sorted by length (longest
    first, ties by position), cut every `batch_size`; each batch lists its positions in
    increasing order, and batches come in the order of their first position (so the
    window's first sequences are ready, and written, early)."""
    order = sorted(range(len(lengths)), key=lambda i: (-int(lengths[i]), i))
    batches = [sorted(order[i:i + batch_size]) for i in range(0, len(order), batch_size)]
    return sorted(batches)


def padding_fraction(lengths, batch_size: int, window: int) -> float:
    """Padded positions / all positions computed when `lengths` (corpus order) are batched in
    windows of `window` sequences (window == batch_size: consecutive batches, no grouping)."""
    pad = total = 0
    for w0 in range(0, len(lengths), window):
        part = [int(x) for x in lengths[w0:w0 + window]]
        batches = group_batches(part, batch_size) if window > batch_size else \
            [list(range(i, min(i + batch_size, len(part)))) for i in range(0, len(part), batch_size)]
        for b in batches:
            T = max(part[i] for i in b)
            total += T * len(b)
            pad += T * len(b) - sum(part[i] for i in b)
    return pad / total if total else 0.0


def _seq_start_token(store, seq: int, below: int) -> int:
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


def _windows(store, start_token: int, window: int):
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


def _pad(batch, device):
    import torch

    T = max(len(x) for x in batch)
    ids = torch.zeros((len(batch), T), dtype=torch.long)
    mask = torch.zeros((len(batch), T), dtype=torch.long)
    for i, x in enumerate(batch):
        ids[i, : len(x)] = torch.from_numpy(x.astype(np.int64))
        mask[i, : len(x)] = 1
    return ids.to(device), mask.to(device)


# Chunk writes run in this many threads (store.ActivationWriter): zarr encodes and checksums
# a chunk in the thread that writes it. Measured in bench/store_layout.py.
WRITER_THREADS = 4
# Items (lists of sequences' activations) that may wait for the writer: the back-pressure
# that bounds host memory to this many batches, the chunk buffers and one flush in flight.
QUEUE_DEPTH = 2


def _storage_torch_dtype(store_dtype: str):
    import torch

    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[store_dtype]


_side_streams: dict = {}


def _side_stream(device):
    """One copy stream per CUDA device, made once (device-to-host copies overlap the next forward)."""
    import torch

    if device not in _side_streams:
        _side_streams[device] = torch.cuda.Stream(device=device)
    return _side_streams[device]


def forward_batch(model, batch, boundaries, layers, store_dtype: str, locate=None, pending: list | None = None) -> dict[str, np.ndarray]:
    """Run one batch of sequences; returns {kind: (n_kept, n_real_tokens, d_model)} encoded
    for storage, tokens in sequence order, padding dropped. Non-finite values are refused
    before anything is encoded (`capture.check_finite`: the batch's one host-device
    synchronisation). The per-boundary loop never synchronises: which tokens are real is
    known on the host, so the gather is an `index_select` with indices made there, and each
    captured tensor is gathered, cast to the storage dtype and copied once into the batch's
    output (on CPU straight into it; on CUDA into pinned host memory, on a side stream,
    non-blocking). On CUDA the copies may still be running when this returns: each
    device's completion event is added to `pending` (a list), and whoever reads the arrays
    waits for them first; without `pending` this function waits itself."""
    import torch

    lengths = [len(x) for x in batch]
    T, n = max(lengths), sum(lengths)
    padded = min(lengths) < T
    ids, mask = _pad(batch, models.input_device(model))
    out = capture.run(model, ids, mask, boundaries, layers)
    capture.check_finite(out, mask.bool(), locate)
    if store_dtype == "float16":
        _check_float16(out)
    tdt = _storage_torch_dtype(store_dtype)
    idx_host = None
    if padded:
        idx_host = torch.cat([torch.arange(i * T, i * T + k) for i, k in enumerate(lengths)])
    idx_on: dict = {}
    events: dict = {}
    result = {}
    for kind, index in (("resid", boundaries), ("attn", layers), ("mlp", layers)):
        if not index:
            continue
        rows = None
        for r, i in enumerate(index):
            t = out[kind].pop(i)
            d = t.shape[-1]
            if rows is None:
                cuda = any(x.device.type == "cuda" for x in out[kind].values()) or t.device.type == "cuda"
                rows = torch.empty((len(index), n, d), dtype=tdt, pin_memory=cuda and torch.cuda.is_available())
            flat = t.reshape(-1, d)
            if t.device.type == "cuda":
                dev = t.device
                side = _side_stream(dev)
                if dev not in events:
                    side.wait_stream(torch.cuda.current_stream(dev))
                with torch.cuda.stream(side):
                    if padded:
                        if dev not in idx_on:
                            idx_on[dev] = idx_host.pin_memory().to(dev, non_blocking=True)
                        flat = flat.index_select(0, idx_on[dev])
                    rows[r].copy_(flat.to(tdt), non_blocking=True)
                    t.record_stream(side)
                    events[dev] = True
            elif padded and flat.dtype == tdt and t.device.type == "cpu":
                torch.index_select(flat, 0, idx_host, out=rows[r])  # gathered straight into the output
            else:
                if padded:
                    if t.device not in idx_on:
                        idx_on[t.device] = idx_host.to(t.device)
                    flat = flat.index_select(0, idx_on[t.device])
                rows[r].copy_(flat)  # the cast to the storage dtype happens in this copy
            del t, flat
        result[kind] = rows
    waits = []
    for dev in events:
        ev = torch.cuda.Event()
        ev.record(_side_stream(dev))
        waits.append(ev)
    if pending is not None:
        pending.extend(waits)
    else:
        for ev in waits:
            ev.synchronize()
    return {k: _as_stored(v, store_dtype) for k, v in result.items()}


def _as_stored(t, store_dtype: str) -> np.ndarray:
    """A host tensor in the storage dtype as the numpy array the store holds (bfloat16 as its
    uint16 bits), sharing memory."""
    import torch

    if store_dtype == "bfloat16":
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _check_float16(out: dict) -> None:
    """float16 storage refuses values beyond ±65504 (store.codecs.encode's check): one
    maximum per tensor on its device, the maxima gathered, one host read for the batch."""
    import torch

    from align.errors import OverflowError16
    from align.store.codecs import FLOAT16_MAX

    named = [(k, i, t) for k in ("resid", "attn", "mlp") for i, t in out[k].items()]
    if not named:
        return
    dev = named[0][2].device
    amax = torch.stack([t.abs().amax().float().to(dev) for _, _, t in named]).cpu().numpy()
    for (kind, i, _), v in zip(named, amax):
        if not np.isfinite(v) or v > FLOAT16_MAX:
            raise OverflowError16(
                f"{kind} at {'boundary' if kind == 'resid' else 'layer'} {i} has a value of magnitude {float(v):.6g}, "
                f"beyond float16's {FLOAT16_MAX:g}: use --store-dtype bfloat16 or float32"
            )


class _Progress:
    """A tqdm bar on a terminal; otherwise a plain log line (through `log`) every ~10 s."""

    def __init__(self, total: int, done: int, log, terminal: bool):
        self.stream, self.log = sys.stderr, log
        self.total, self.done, self.t0, self.last = total, done, time.time(), 0.0
        self.start_done = done
        self.bar = None
        if terminal:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit="tok", unit_scale=True, file=self.stream, dynamic_ncols=True)

    def update(self, n: int, padding: float | None = None):
        """`n` more tokens written; `padding`: the run's padded fraction of computed positions."""
        self.done += n
        if self.bar is not None:
            if padding is not None:
                self.bar.set_postfix_str(f"padding {padding:.1%}", refresh=False)
            self.bar.update(n)
            return
        now = time.time()
        if now - self.last >= 10 or self.done == self.total:
            self.last = now
            rate = (self.done - self.start_done) / max(now - self.t0, 1e-9)
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            pad = f", padding {padding:.1%}" if padding is not None else ""
            self.log(f"align extract: {self.done:,}/{self.total:,} tokens, {rate:,.0f} tok/s{pad}, ETA {eta:,.0f} s")

    def close(self):
        if self.bar is not None:
            self.bar.close()


class _BackgroundWriter:
    """Runs the store writer in a thread so writing overlaps the next forward pass. Each item
    is a list of appends (arrays, seq_end), one per sequence, in sequence order, with the
    device events its arrays' copies must finish by; at most `depth` items wait (the
    back-pressure that keeps host memory bounded: `put` blocks while the queue is full)."""

    def __init__(self, writer, depth: int = QUEUE_DEPTH):
        self.writer, self.q, self.error = writer, queue.Queue(maxsize=depth), None
        self.blocked_s = 0.0  # time the forward loop waited for room in the queue
        self.max_depth = 0  # the most items seen waiting (at most `depth`)
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            item = self.q.get()
            if item is None:
                if self.error is None:
                    try:
                        self.writer.drain()  # what is handed over is written and committed
                    except BaseException as e:
                        self.error = e
                return
            appends, events = item
            if self.error is None:
                try:
                    for ev in events:
                        ev.synchronize()  # the batch's device-to-host copies are done
                    for arrays, seq_end in appends:
                        self.writer.append(arrays, seq_end)
                except BaseException as e:  # re-raised in the caller's thread
                    self.error = e

    def put(self, appends: list, events: list = ()):
        if self.error is not None:
            raise self.error
        t = time.perf_counter()
        self.q.put((appends, list(events)))
        self.blocked_s += time.perf_counter() - t
        self.max_depth = max(self.max_depth, self.q.qsize())

    def close(self, raise_error: bool = True):
        self.q.put(None)
        self.thread.join()
        if self.error is not None and raise_error:
            raise self.error


def extract(
    model: str,
    corpus_path: str | None,
    output: str,
    *,
    revision: str | None = None,
    dtype: str | None = None,
    device: str = "cpu",
    trust_remote_code: bool = False,
    allow_pickle_weights: bool = False,
    random_init: bool = False,
    seed: int = 0,
    dataset: str | None = None,
    text_field: str = "text",
    format: str = "plain",
    doc_split: str | None = None,
    max_length: int = 512,
    overflow: str = "split",
    max_tokens: int | None = None,
    max_docs: int | None = None,
    batch_size: int = 8,
    layers: str | None = None,
    sublayers: bool = False,
    store_dtype: str | None = None,
    codec: str = DEFAULT_CODEC,
    chunk_tokens: int | None = None,
    allow_long: bool = False,
    dry_run: bool = False,
    break_lock: bool = False,
    log=None,
) -> ExtractReport:
    """Extract raw residuals (boundaries 0..L, before the final norm) and optionally the
    sublayer outputs of `model` over a corpus into the activation store `output`.

    `allow_long` accepts a `max_length` beyond the model's max_position_embeddings.
    Returns an ExtractReport. Raises AlignError subclasses for every bad input, all of them
    before the store is created."""
    from align import store as st

    terminal = log is None and sys.stderr.isatty()
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.time()
    if batch_size < 1:
        raise InputError(f"--batch-size {batch_size} must be at least 1")
    if chunk_tokens is not None and chunk_tokens < 1:
        raise InputError(f"--chunk-tokens {chunk_tokens} must be at least 1")
    spec = models.ModelSpec(model, revision, dtype, device, trust_remote_code, allow_pickle_weights, random_init, seed)
    compute_dtype = spec.resolved_dtype()
    store_dtype = store_dtype or compute_dtype
    physical_dtype(store_dtype)
    from align.store.codecs import compressors

    compressors(codec)
    cspec = corpus.CorpusSpec(corpus_path, dataset, text_field, format, doc_split, max_length, overflow, max_tokens, max_docs)
    corpus.validate(cspec)
    _check_output(output, {"model folder": model, "corpus": corpus_path})
    if spec.device not in ("cpu", "cuda", "auto"):
        raise InputError(f"--device {spec.device!r} is not one of cpu, cuda, auto")
    _check_device(spec.device)
    config = models.load_config(spec)
    _check_max_length(max_length, config, allow_long)
    L = config.num_hidden_layers
    boundaries = parse_layers(layers, L)
    kept_layers = [l for l in range(L) if l in boundaries and l + 1 in boundaries] if sublayers else []
    if sublayers and not kept_layers:
        raise InputError(f"--sublayers keeps block l only when boundaries l and l+1 are both kept; --layers {layers} keeps no such pair")

    weights = provenance.weights_identity(spec, config)
    if weights["kind"] == "hub":
        # Load exactly the commit recorded, even if the branch moves while this runs.
        spec = dataclasses.replace(spec, revision=weights["commit"])
    tokenizer = models.load_tokenizer(spec)
    chash = corpus.corpus_hash(cspec)
    identity = {
        "model": _model_id(model), "revision": revision, "dtype": compute_dtype, "random_init": random_init,
        "seed": seed if random_init else None, "corpus_hash": chash, "text_field": text_field, "format": format,
        "doc_split": doc_split, "max_length": max_length, "overflow": overflow, "max_tokens": max_tokens,
        "max_docs": max_docs, "layers": boundaries, "sublayers": sublayers, "store_dtype": store_dtype, "codec": codec,
        "chunk_tokens": chunk_tokens, "config_hash": models.config_hash(config), "weights": weights["id"],
        "tokenizer": corpus.tokenizer_hashes(tokenizer)["all"],
    }

    existing = st.exists(output)
    if existing:
        attrs = st.read_attrs(output)
        if attrs["align"]["schema"] != "activations":
            raise StoreMismatch(f"{output} already holds an align store of schema {attrs['align']['schema']!r}: choose another -o")
        old = attrs.get("provenance", {}).get("identity", {})
        differ = [k for k in DEFINING if old.get(k) != identity.get(k)]
        if differ:
            detail = "; ".join(f"{k}: store has {_short(old.get(k))}, now {_short(identity.get(k))}" for k in differ[:5])
            raise StoreMismatch(
                f"store {output} was made with different options or inputs ({detail}): use another -o, "
                "or delete the store to start over"
            )
        if attrs["progress"]["complete"]:
            n = attrs["layout"]["n_tokens"]
            log(f"align extract: store {output} is already complete ({n:,} tokens); nothing to do")
            return ExtractReport(output, "already complete", n, time.time() - t0, 0.0)

    plan = count(cspec, tokenizer)
    models.check_token_ids(spec, config, plan.max_id, "document {}, position {}".format(*plan.max_id_at))
    if plan.stats.special_token_text:
        doc, text = plan.stats.first_special
        log(f"align extract: warning: {plan.stats.special_token_text:,} literal special-token text(s) in the corpus are "
            f"read as special tokens, as the tokenizer does (first: {text!r} in document {doc}); remove them from "
            "the text if they are meant as plain text")
    d_model = config.hidden_size
    item = physical_dtype(store_dtype).itemsize
    layout = st.Layout(plan.n_tokens, plan.n_sequences, L, d_model, tuple(boundaries), tuple(kept_layers),
                       store_dtype, codec, min(chunk_tokens or st.chunk_tokens_for(d_model, item), plan.n_tokens))
    sizes = layout.bytes_per_array()
    need = sum(sizes.values())
    free = st.free_bytes(output) if st.is_local(output) else None

    if dry_run:
        return _dry_run(spec, cspec, tokenizer, plan, layout, sizes, need, free, batch_size, boundaries, kept_layers, output, log, t0)

    if free is not None and need * DISK_MARGIN > free:
        raise DiskSpaceError(
            f"store {output} needs {_human(need)} but only {_human(free)} is free there: "
            "choose fewer --layers or --max-tokens, or another disk"
        )

    # The model is loaded before the store exists: a model that cannot load (no CUDA, pickle
    # weights not allowed, a damaged file) leaves nothing behind.
    net, _ = models.load_model(spec)
    with st.write_lock(output, break_lock=break_lock):
        store = st.open_activations(output) if existing else None
        if store is None or not store.progress["planned"]:
            prov = {
                "model": model, "revision": revision, "random_init": random_init, "seed": seed if random_init else None,
                "model_type": config.model_type, "n_layers": L, "d_model": d_model,
                "config_hash": identity["config_hash"], "weights": weights,
                "tokenizer_hash": corpus.tokenizer_hashes(tokenizer),
                "special_tokens": dict(zip(("prefix", "suffix"), corpus.special_tokens(tokenizer))),
                "corpus": {**corpus.provenance(cspec, chash), **plan.stats.to_json()},
                "compute_dtype": compute_dtype, "store_dtype": store_dtype,
                "options": {"batch_size": batch_size, "device": device, "layers": layers, "sublayers": sublayers, "codec": codec},
                "identity": identity, "align_version": align.__version__,
                "counts": {"n_tokens": plan.n_tokens, "n_sequences": plan.n_sequences, "n_docs": plan.n_docs},
                "runs": [],
            }
            st.create_activations(output, layout, prov)
            store = st.open_activations(output, mode="r+")
            pw = st.PlanWriter(store)
            for sq in corpus.sequences(cspec, tokenizer):
                pw.append(sq.fields())
            pw.finish()
            status = "complete"
        else:
            removed = st.clean_partial_writes(output)
            store = st.open_activations(output, mode="r+")
            p = store.progress
            log(f"align extract: resuming {output} at {p['committed_tokens']:,} of {store.n_tokens:,} tokens"
                + (f" (removed {removed} partial file(s) left by a killed write)" if removed else ""))
            status = "resumed"

        segment = provenance.run_segment(store.progress["committed_tokens"], batch_size, device, compute_dtype)
        segment["group_window"] = batch_size * GROUP_FACTOR
        _start_segment(store, segment)
        return _forward_all(net, store, batch_size, boundaries, kept_layers, store_dtype, status, log, t0, terminal)


def _short(v) -> str:
    """An identity value for a one-line message: hashes cut to 12 hex digits."""
    if isinstance(v, str):
        return re.sub(r"\b([0-9a-f]{12})[0-9a-f]{8,}\b", "\\1…", v)
    r = repr(v)
    return r if len(r) <= 40 else r[:16] + "..." + r[-8:]


def _set_runs(store, runs: list) -> None:
    """Rewrite the store's provenance with `runs` (its list of run segments). Called only while
    no writer thread runs, so it never races the writer's progress updates."""
    prov = dict(store.group.attrs["provenance"])
    prov["runs"] = runs
    store.group.attrs["provenance"] = prov
    store.provenance = prov


def _start_segment(store, segment: dict) -> None:
    """Append this run's segment. What an earlier run covered is known only now (it may have
    been killed): it ends where this one starts, at the store's committed token count."""
    runs = [dict(r) for r in store.group.attrs["provenance"].get("runs", [])]
    if runs:
        runs[-1]["tokens"] = [runs[-1]["tokens"][0], segment["tokens"][0]]
    _set_runs(store, runs + [segment])


def _end_segment(store, padding: float) -> None:
    runs = [dict(r) for r in store.group.attrs["provenance"].get("runs", [])]
    runs[-1]["tokens"] = [runs[-1]["tokens"][0], store.n_tokens]
    runs[-1]["padding_fraction"] = round(float(padding), 6)
    _set_runs(store, runs)


def _forward_all(model, store, batch_size, boundaries, kept_layers, store_dtype, status, log, t0, terminal) -> ExtractReport:
    """Forward the store's sequences window by window (length-grouped batches, see
    group_batches) and hand each sequence's activations to the writer in sequence order, as
    soon as every sequence before it is done. A resume starts at a committed sequence, which
    may lie inside a window: the whole window is computed again, so every sequence meets the
    batch it had in an uninterrupted run, and the sequences already written are dropped."""
    from align import store as st

    writer = st.ActivationWriter(store, threads=WRITER_THREADS)
    start_tokens, start_seq = writer.committed
    window = batch_size * GROUP_FACTOR
    w0 = (start_seq // window) * window
    # Nothing is recomputed when every token is written (a run killed at its final metadata).
    recompute = w0 < start_seq and start_tokens < store.n_tokens
    first_token = _seq_start_token(store, w0, start_tokens) if recompute else start_tokens
    progress = _Progress(store.n_tokens, start_tokens, log, terminal)
    bg = _BackgroundWriter(writer)
    t_fwd = time.time()
    stats = {"padded": 0, "computed": 0}

    def locator(members):
        """locate(k) for a batch: k indexes its real tokens, sequence after sequence."""
        cum = np.cumsum([0] + [len(ids) for _, _, ids in members])

        def locate(k: int) -> str:
            j = int(np.searchsorted(cum, k, side="right")) - 1
            g = members[j][1] + (k - int(cum[j]))
            doc, pos = int(store.tokens("doc", g, g + 1)[0]), int(store.tokens("pos", g, g + 1)[0])
            return f"document {doc}, position {pos} (token {g:,})"
        return locate

    n_forward = 0
    events: list = []  # device copies the next handed-over item's arrays wait for
    try:
        for win in _windows(store, first_token, window):
            ready: dict[int, dict] = {}
            nxt = next((i for i, (sid, _, _) in enumerate(win) if sid >= start_seq), len(win))
            for b in group_batches([len(ids) for _, _, ids in win], batch_size):
                if n_forward:
                    fault_point("between_batches")
                n_forward += 1
                members = [win[i] for i in b]
                seqs = [ids for _, _, ids in members]
                arrays = forward_batch(model, seqs, boundaries, kept_layers, store_dtype, locator(members), events)
                T = max(len(x) for x in seqs)
                stats["computed"] += T * len(seqs)
                stats["padded"] += T * len(seqs) - sum(len(x) for x in seqs)
                off = 0
                for i, x in zip(b, seqs):
                    # Views into the batch's arrays: no copy until the writer's flush.
                    ready[i] = {k: v[:, off:off + len(x)] for k, v in arrays.items()}
                    off += len(x)
                del arrays
                appends, n_new = [], 0
                while nxt in ready:
                    appends.append((ready.pop(nxt), win[nxt][0] + 1))
                    n_new += len(win[nxt][2])
                    nxt += 1
                if appends:
                    bg.put(appends, events)
                    events = []
                    progress.update(n_new, stats["padded"] / stats["computed"])
    except BaseException:
        # The sequences already handed over are finite and whole: let them be written (and
        # committed at chunk ends) before the error propagates and the lock is released.
        bg.close(raise_error=False)
        try:
            writer.close()
        except BaseException:  # the first error is the one to report
            pass
        raise
    finally:
        progress.close()
    bg.close()
    padding = stats["padded"] / max(stats["computed"], 1)
    _end_segment(store, padding)
    writer.finish()
    n = store.n_tokens - start_tokens
    dt = time.time() - t_fwd
    dropped = dropped_summary(store.provenance.get("corpus", {}))
    log(f"align extract: wrote {store.path} ({store.n_tokens:,} tokens, boundaries {_span(boundaries)}"
        + (f", sublayers of {len(kept_layers)} blocks" if kept_layers else "") + f") at {n / max(dt, 1e-9):,.0f} tok/s, "
        + f"padding {padding:.1%} of computed positions (batches grouped by length in windows of {window} sequences); "
        + dropped)
    run_stats = {"padding_fraction": padding, "group_window": window, "loop_s": dt, "queue_blocked_s": bg.blocked_s,
                 "queue_max_depth": bg.max_depth, "writer_threads": writer.threads}
    return ExtractReport(store.path, status, store.n_tokens, time.time() - t0, n / max(dt, 1e-9), stats=run_stats)


def _span(idx) -> str:
    idx = list(idx)
    if idx == list(range(idx[0], idx[-1] + 1)):
        return f"{idx[0]}..{idx[-1]}"
    return ",".join(map(str, idx))


def _sync(device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously), so a phase's time is its own."""
    import torch

    if getattr(device, "type", str(device)) == "cuda" and torch.cuda.is_available():
        torch.cuda.synchronize(device)


def _timed_batch(model, sequences, boundaries, kept_layers, layout, workdir: str) -> dict[str, float]:
    """One batch through every phase of a real run, each timed on its own: the forward with
    hooks (and the finite check), the gather of real tokens and their device-to-host copy, the
    encoding to the storage dtype, and the write of the batch's chunks (checksum included) by
    the store's own writer into a temporary store under `workdir` (same layout and codec as
    the real store)."""
    from align import store as st

    seqs = [sq.token_id for sq in sequences]
    dev = models.input_device(model)
    ids, mask = _pad(seqs, dev)
    t0 = time.perf_counter()
    out = capture.run(model, ids, mask, boundaries, kept_layers)
    keep = mask.bool()
    capture.check_finite(out, keep)
    _sync(dev)
    t1 = time.perf_counter()
    host = {}
    for kind, index in (("resid", boundaries), ("attn", kept_layers), ("mlp", kept_layers)):
        host[kind] = []
        for i in index:
            t = out[kind].pop(i)
            host[kind].append(t[keep.to(t.device)].to("cpu"))
    _sync(dev)
    t2 = time.perf_counter()
    arrays = {}
    for kind, ts in host.items():
        if ts:
            arrays[kind] = np.stack([encode(t, layout.store_dtype) for t in ts])
    t3 = time.perf_counter()
    n = int(keep.sum())
    tmp_layout = dataclasses.replace(layout, n_tokens=n, n_sequences=len(seqs), chunk_tokens=min(layout.chunk_tokens, n))
    path = os.path.join(workdir, "batch.zarr")
    st.create_activations(path, tmp_layout, {"runs": []})
    store = st.open_activations(path, mode="r+")
    pw = st.PlanWriter(store)
    for k, sq in enumerate(sequences):
        fields = sq.fields()
        fields["seq"] = np.full(len(sq), k, np.int64)
        pw.append(fields)
    pw.finish()
    t4 = time.perf_counter()
    w = st.ActivationWriter(store, threads=WRITER_THREADS)
    w.append(arrays, len(seqs))
    w.finish()
    t5 = time.perf_counter()
    return {"forward": t1 - t0, "copy": t2 - t1, "encode": t3 - t2, "write": t5 - t4, "tokens": n,
            "positions": int(keep.numel())}


def _scratch_dir(output: str) -> tuple[str, bool]:
    """A temporary folder on the file system of -o (its nearest existing ancestor), so the
    timed write meets the disk the real run writes to, and whether it is there: the system's
    temporary folder stands in when -o is not a local path or its folder is not writable."""
    from align import store as st

    local = st.local_path(output)
    if local is None:
        return tempfile.mkdtemp(prefix="align-dry-run-"), False
    parent = os.path.dirname(os.path.abspath(os.path.expanduser(local)))
    while not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    try:
        return tempfile.mkdtemp(prefix=".align-dry-run-", dir=parent), True
    except OSError:
        return tempfile.mkdtemp(prefix="align-dry-run-"), False


def _dry_run(spec, cspec, tokenizer, plan, layout, sizes, need, free, batch_size, boundaries, kept_layers, output, log, t0):
    """Print what the run will produce and cost, from one batch timed end to end.

    The batch is the corpus's first `batch_size` sequences. Its phases scale to the whole run:
    the forward by computed positions (real tokens plus the padding the run's length-grouped
    batches will have, from the plan), the copy, encoding and write by real tokens. The real
    run does forward, copy and encoding in one thread and writes in another, so the predicted
    time is the larger of the two; the phase that makes it so bounds the run."""
    model, _ = models.load_model(spec)
    seqs = []
    for sq in corpus.sequences(cspec, tokenizer):
        seqs.append(sq)
        if len(seqs) >= batch_size:
            break
    work, beside = _scratch_dir(output)
    try:
        _timed_batch(model, seqs[:1], boundaries, kept_layers, layout, work)  # warm-up
        shutil.rmtree(os.path.join(work, "batch.zarr"), ignore_errors=True)
        ph = _timed_batch(model, seqs, boundaries, kept_layers, layout, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    window = batch_size * GROUP_FACTOR
    pad = padding_fraction(plan.lengths, batch_size, window) if plan.lengths else 0.0
    positions = plan.n_tokens / max(1.0 - pad, 1e-9)
    run_s = {
        "forward": ph["forward"] * positions / ph["positions"],
        "copy": ph["copy"] * plan.n_tokens / ph["tokens"],
        "encode": ph["encode"] * plan.n_tokens / ph["tokens"],
        "write": ph["write"] * plan.n_tokens / ph["tokens"],
    }
    main = run_s["forward"] + run_s["copy"] + run_s["encode"]
    total = max(main, run_s["write"])
    bound = max(run_s, key=run_s.get) if run_s["write"] < main else "write"
    if bound == "write":
        margin = f"the write takes {run_s['write'] / max(main, 1e-12):.2f}x the forward, copy and encoding together"
    else:
        rest = sorted(v for k, v in run_s.items() if k != bound)[-1]
        margin = (f"{bound} is {run_s[bound] / max(rest, 1e-12):.2f}x the next phase; the writer thread needs "
                  f"{run_s['write'] / max(main, 1e-12):.0%} of the compute thread's time")
    rate = plan.n_tokens / max(total, 1e-12)
    lines = [
        f"align extract --dry-run: {output}",
        f"  model {spec.name} ({layout.n_layers} layers, d_model {layout.d_model}), compute {spec.resolved_dtype()}, store {layout.store_dtype}, codec {layout.codec}",
        f"  corpus {cspec.describe()}: {plan.n_docs:,} documents, {plan.n_sequences:,} sequences, {plan.n_tokens:,} tokens (longest {plan.longest})",
        f"  boundaries {_span(boundaries)}" + (f"; sublayers of blocks {_span(kept_layers)}" if kept_layers else "") + f"; chunks of {layout.chunk_tokens} tokens",
    ]
    for name, b in sizes.items():
        if b >= 1 << 20 or name in ("resid", "attn", "mlp"):
            lines.append(f"  {name:<10} {_human(b)}")
    lines.append(f"  total      {_human(need)}" + (f" of {_human(free)} free" if free is not None else ""))
    lines.append(f"  one batch of {len(seqs)} sequences ({ph['tokens']:,} tokens), timed end to end"
                 + ("" if beside else f" (written to {tempfile.gettempdir()}: -o's file system could not be used)") + ":")
    for k in ("forward", "copy", "encode", "write"):
        lines.append(f"    {k:<8} {ph[k] * 1e3:10.2f} ms   whole run ~{run_s[k]:,.3g} s")
    lines.append(f"  padding    {pad:.1%} of computed positions (length-grouped batches, windows of {window} sequences)")
    lines.append(f"  bound by   {bound}: {margin}")
    lines.append(f"  time       ~{total:,.3g} s at {rate:,.0f} tok/s (forward, copy and encoding in one thread, writes in another)")
    if free is not None and need * DISK_MARGIN > free:
        lines.append("  DISK: not enough free space; the real run would refuse")
    for line in lines:
        log(line)
    info = {"n_tokens": plan.n_tokens, "n_sequences": plan.n_sequences, "bytes": sizes, "total_bytes": need,
            "free_bytes": free, "tokens_per_second": rate, "seconds_estimate": total,
            "batch": {k: ph[k] for k in ("forward", "copy", "encode", "write", "tokens", "positions")},
            "phases_seconds": run_s, "bound_by": bound, "write_timed_beside_output": beside, "padding_fraction": pad, "group_window": window}
    return ExtractReport(output, "dry run", plan.n_tokens, time.time() - t0, rate, info)


class _CallableModule(types.ModuleType):
    """`align.extract(...)` calls the function even after `import align.extract`."""

    def __call__(self, *args, **kwargs):
        return extract(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
