"""What a run will write, known before the model loads: the corpus counted once (tokens,
sequences, documents, each sequence's length, the largest token id), the store's layout,
its size against the free disk, and the provenance the store records."""

from __future__ import annotations

import array
import contextlib
import dataclasses
import errno
from dataclasses import dataclass

import numpy as np

from align import corpus, provenance
from align import store as st
from align.errors import DiskSpaceError, InputError
from align.extraction.inputs import Inputs
from align.messages import human_bytes as human
from align.store import footprint
from align.store.codecs import physical_dtype
from align.store.layout import TOKEN_CHUNK, TOKEN_FIELDS
from align.store.outputs import free_bytes
from align.store.paths import local_path

DISK_MARGIN = 1.05
SEGMENT_ROOM = (
    4096  # bytes of attributes kept for the run segments (~400 each) and progress a run adds
)


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
    windowed: int = 0  # documents cut into more than one window
    longest_document: int = 0  # tokens of the longest document, its windows together


def count(spec: corpus.CorpusSpec, tokenizer, corpus_hash: str | None = None) -> Plan:
    """Tokens, sequences and documents the corpus gives, and what tokenizing dropped. With
    `corpus_hash` (the identity's), a read of other bytes is refused (the corpus changed)."""
    n = s = longest = 0
    docs = set()
    lengths = array.array("i")  # 4 bytes a sequence: the padding estimate of --dry-run needs them
    stats = corpus.TokenizeStats()
    top, top_at = -1, (0, 0)
    reading = corpus.Reading(spec)
    whole = _Documents()
    for sq in corpus.sequences(spec, tokenizer, stats, reading):
        if spec.pack is None:
            whole.add(sq.doc, len(sq))
        if len(sq) and int(sq.token_id.max()) > top:
            t = int(np.argmax(sq.token_id))
            top, top_at = int(sq.token_id[t]), (sq.doc, t)
        lengths.append(len(sq))
        n += len(sq)
        s += 1
        longest = max(longest, len(sq))
        docs.update((sq.doc,) if sq.docs is None else np.unique(sq.docs).tolist())
    if corpus_hash is not None:
        reading.check(spec, corpus_hash)
    else:
        reading.close()
    if n == 0:
        raise InputError(
            f"corpus {spec.describe()} has no text to tokenize: give a corpus with at least one non-empty document"
        )
    whole.close()
    return Plan(
        n, s, len(docs), longest, stats, lengths, top, top_at, whole.windowed, whole.longest
    )


class _Documents:
    """Counts, over sequences in corpus order, the documents cut into more than one window
    and the tokens of the longest document (its windows together)."""

    def __init__(self):
        self.doc, self.windows, self.tokens = None, 0, 0
        self.windowed = self.longest = 0

    def add(self, doc: int, n: int) -> None:
        if doc != self.doc:
            self.close()
            self.doc, self.windows, self.tokens = doc, 0, 0
        self.windows += 1
        self.tokens += n

    def close(self) -> None:
        self.windowed += self.windows > 1
        self.longest = max(self.longest, self.tokens)
        self.windows = 0


def token_rows(spec: corpus.CorpusSpec, tokenizer, n_tokens: int, corpus_hash: str, output: str):
    """The token table's rows (`Sequence.fields()`, corpus order) from one more read of the
    corpus, the one whose tokens the store `output` keeps: a read of other bytes than
    `corpus_hash` (the store's identity) is refused when it ends or passes `n_tokens` (the
    plan's), before the token table is finished, so no store holds the tokens of one text
    and the hash of another."""
    reading = corpus.Reading(spec)
    seen = 0
    for sq in corpus.sequences(spec, tokenizer, reading=reading):
        seen += len(sq)
        if seen > n_tokens:
            break
        yield sq.fields()
    reading.check(
        spec,
        corpus_hash,
        f"the store {output} was left unfinished (its token table is not written): "
        "delete it, keep the corpus unchanged while align runs, and run again",
    )


def dropped_summary(stats: dict) -> str:
    """The run's report of characters the tokenizer dropped (from TokenizeStats.to_json())."""
    if "dropped_characters" not in stats:
        return "dropped characters not counted (a store made before align counted them)"
    n, d = stats["dropped_characters"], stats.get("documents_with_dropped_characters", 0)
    if not n:
        return "no character dropped by the tokenizer"
    first = ", ".join(f"document {doc} ({k})" for doc, k in stats.get("first_dropped", [])[:3])
    return (
        f"{n:,} character{'s' if n != 1 else ''} outside the tokenizer's vocabulary dropped from {d:,} "
        f"document{'s' if d != 1 else ''} (first: {first})"
    )


def layout(inputs: Inputs, plan: Plan):
    """The store's shape: tokens and sequences from the plan, boundaries and blocks kept,
    storage dtype, codec, and chunks of --chunk-tokens (default ~4 MiB) capped at the tokens."""

    d_model = inputs.config.hidden_size
    chunk = inputs.options.chunk_tokens or st.chunk_tokens_for(
        d_model, physical_dtype(inputs.store_dtype).itemsize
    )
    return st.Layout(
        plan.n_tokens,
        plan.n_sequences,
        inputs.config.num_hidden_layers,
        d_model,
        tuple(inputs.boundaries),
        tuple(inputs.sublayer_blocks),
        inputs.store_dtype,
        inputs.options.codec,
        min(chunk, plan.n_tokens),
    )


def store_bytes(layout, provenance: dict, block: int = footprint.BLOCK) -> dict:
    """Bytes the store of `layout` takes on disk at its largest (align.store.footprint):
    {"resid", "attn", "mlp": each array with every chunk of (1, chunk_tokens, d_model) values
    written whole (the last one padded) and encoded, its chunk-key folders and zarr.json;
    each token field (TOKEN_CHUNK-token chunks, crc32c); "metadata": the `boundary` and
    `layer` arrays, the lock file, and the group's zarr.json (attributes: `provenance`, the
    layout, progress, room for SEGMENT_ROOM of run segments; the consolidated copy of every
    array's metadata) twice, as a progress update writes the new one beside the old}."""
    item = physical_dtype(layout.store_dtype).itemsize
    N, C, d = layout.n_tokens, layout.chunk_tokens, layout.d_model
    out = {
        "resid": footprint.array_bytes(
            (len(layout.boundaries), N, d), (1, C, d), item, layout.codec, block
        )
    }
    for name in ("attn", "mlp") if layout.layers else ():
        out[name] = footprint.array_bytes(
            (len(layout.layers), N, d), (1, C, d), item, layout.codec, block
        )
    for name, dt in TOKEN_FIELDS.items():
        out[name] = footprint.array_bytes(
            (N,), (min(TOKEN_CHUNK, max(N, 1)),), np.dtype(dt).itemsize, "crc32c", block
        )
    small = [
        footprint.array_bytes((len(ids),), (max(len(ids), 1),), 4, "zstd", block)
        for ids in (layout.boundaries, layout.layers)
        if len(ids)
    ]
    attrs = (
        footprint.json_bytes(
            {
                "align": {"schema": "activations", "version": 1},
                "provenance": provenance,
                "layout": layout.to_json(),
                "progress": {},
            }
        )
        + SEGMENT_ROOM
    )
    out["metadata"] = (
        sum(small)
        + footprint.on_disk(1, block)
        + 2 * footprint.group_bytes(attrs, len(out) + len(small), True, block)
    )
    return out


def check_disk(output: str, need: int, free: int | None, held: int = 0) -> None:
    """Refuse a run whose store (`store_bytes`, with DISK_MARGIN for slack) does not fit in
    `free` bytes and the `held` bytes a store being resumed already takes."""
    if free is not None and need * DISK_MARGIN > free + held:
        there = f" (and {human(held)} already in the store)" if held else ""
        raise DiskSpaceError(
            f"store {output} needs {human(need)} on disk ({need:,} bytes as written: every chunk whole, and the "
            f"metadata), {human(need * DISK_MARGIN)} with a {DISK_MARGIN - 1:.0%} margin, but only {human(free)} "
            f"({free:,} bytes) is free there{there}: choose fewer `boundaries` or `max_tokens`, or another disk "
            "(nothing was computed)"
        )


@contextlib.contextmanager
def full_disk_named(output: str, need: int):
    """A disk that fills while the store is written (another process took the space after
    `check_disk`) is one DiskSpaceError naming the store, its size and what is free now; the
    store stays as committed, and the same command resumes it."""
    try:
        yield
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        free = free_bytes(output) if local_path(output) is not None else None
        now = f", {human(free)} free now" if free is not None else ""
        raise DiskSpaceError(
            f"no space left on the device while writing store {output} (it needs {human(need)}{now}): free some space "
            "and run the same command again, which resumes from the last committed sequence"
        ) from None


def store_provenance(inputs: Inputs, plan: Plan) -> dict:
    """What the store records: its inputs (align.provenance.inputs_record, the corpus with
    what tokenizing dropped), the weights' identity, the options, the store's identity,
    the counts, and its run segments (none yet)."""
    config, o = inputs.config, inputs.options
    corpus_record = {**corpus.provenance(inputs.cspec, inputs.corpus_hash), **plan.stats.to_json()}
    return {
        **provenance.inputs_record(
            inputs.asked, config, inputs.tokenizer, inputs.cspec, corpus_record
        ),
        "n_layers": config.num_hidden_layers,
        "d_model": config.hidden_size,
        "weights": inputs.weights,
        "store_dtype": inputs.store_dtype,
        "options": {
            "batch_size": o.batch_size,
            "device": inputs.asked.device,
            "boundaries": o.boundaries,
            "sublayers": o.sublayers,
            "codec": o.codec,
        },
        "identity": inputs.identity,
        "counts": {
            "n_tokens": plan.n_tokens,
            "n_sequences": plan.n_sequences,
            "n_docs": plan.n_docs,
        },
        "runs": [],
    }
