"""What a run will write, known before the model loads: the corpus counted once (tokens,
sequences, documents, each sequence's length, the largest token id), the store's layout,
its size against the free disk, and the provenance the store records."""

from __future__ import annotations

import array
import dataclasses
from dataclasses import dataclass

import numpy as np

from align import corpus, provenance
from align.errors import DiskSpaceError, InputError
from align.extraction.inputs import Inputs
from align.extraction.report import human
from align.store.codecs import physical_dtype

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


def count(spec: corpus.CorpusSpec, tokenizer, corpus_hash: str | None = None) -> Plan:
    """Tokens, sequences and documents the corpus gives, and what tokenizing dropped. With
    `corpus_hash` (the identity's), a read of other bytes is refused (the corpus changed)."""
    n = s = longest = 0
    docs = set()
    lengths = array.array("i")  # 4 bytes a sequence: the padding estimate of --dry-run needs them
    stats = corpus.TokenizeStats()
    top, top_at = -1, (0, 0)
    reading = corpus.Reading(spec)
    for sq in corpus.sequences(spec, tokenizer, stats, reading):
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
        raise InputError(f"corpus {spec.describe()} has no text to tokenize: give a corpus with at least one non-empty document")
    return Plan(n, s, len(docs), longest, stats, lengths, top, top_at)


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
    reading.check(spec, corpus_hash, f"the store {output} was left unfinished (its token table is not written): "
                                     "delete it, keep the corpus unchanged while align runs, and run again")


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


def layout(inputs: Inputs, plan: Plan):
    """The store's shape: tokens and sequences from the plan, boundaries and blocks kept,
    storage dtype, codec, and chunks of --chunk-tokens (default ~4 MiB) capped at the tokens."""
    from align import store as st

    d_model = inputs.config.hidden_size
    chunk = inputs.options.chunk_tokens or st.chunk_tokens_for(d_model, physical_dtype(inputs.store_dtype).itemsize)
    return st.Layout(plan.n_tokens, plan.n_sequences, inputs.config.num_hidden_layers, d_model,
                     tuple(inputs.boundaries), tuple(inputs.kept_layers), inputs.store_dtype, inputs.options.codec,
                     min(chunk, plan.n_tokens))


def check_disk(output: str, need: int, free: int | None) -> None:
    """Refuse a run whose store (with DISK_MARGIN for blocks and slack) does not fit."""
    if free is not None and need * DISK_MARGIN > free:
        raise DiskSpaceError(
            f"store {output} needs {human(need)} but only {human(free)} is free there: "
            "choose fewer --layers or --max-tokens, or another disk"
        )


def store_provenance(inputs: Inputs, plan: Plan) -> dict:
    """What the store records: its inputs (align.provenance.inputs_record, the corpus with
    what tokenizing dropped), the weights' identity, the options, the store's identity,
    the counts, and its run segments (none yet)."""
    config, o = inputs.config, inputs.options
    corpus_record = {**corpus.provenance(inputs.cspec, inputs.corpus_hash), **plan.stats.to_json()}
    return {
        **provenance.inputs_record(inputs.asked, config, inputs.tokenizer, inputs.cspec, corpus_record),
        "n_layers": config.num_hidden_layers, "d_model": config.hidden_size, "weights": inputs.weights,
        "store_dtype": inputs.store_dtype,
        "options": {"batch_size": o.batch_size, "device": inputs.asked.device, "layers": o.layers,
                    "sublayers": o.sublayers, "codec": o.codec},
        "identity": inputs.identity,
        "counts": {"n_tokens": plan.n_tokens, "n_sequences": plan.n_sequences, "n_docs": plan.n_docs},
        "runs": [],
    }
