"""The options of an extraction, grouped as ModelSpec and CorpusSpec group the model's and the
corpus's: `ExtractOptions`, and `align.extract`'s three records from what it was given."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from align import corpus, models
from align.declarations import option
from align.errors import InputError
from align.store.codecs import CODECS, DEFAULT_CODEC, STORE_DTYPES, compressors, physical_dtype


@dataclass(frozen=True)
class ExtractOptions:
    """How the store is cut and written (with ModelSpec and CorpusSpec: everything a run needs);
    each field's option is declared on it, its meaning under it."""

    batch_size: int = field(
        default=8,
        metadata=option(
            "--batch-size",
            doc="sequences per forward pass (right-padded; padding is never stored); batches are grouped by length (below)",
            doc_metavar="N",
            help="Sequences per forward pass.",
            type="whole",
            least=1,
        ),
    )
    """Sequences per forward pass."""
    boundaries: str | None = field(
        default=None,
        metadata=option(
            "--boundaries",
            doc="boundaries to keep: `0,4,8`, `::2`, `1:`, `-1` (the old name `--layers` still works in this release, with a warning)",
            doc_default="all 0..L",
            help="Residual boundaries to keep: e.g. 0,4,8 or ::2 or 1: [default: all 0..L].",
            metavar="SPEC",
        ),
    )
    """The boundaries to keep, as `--boundaries` spells them (None: all 0..L)."""
    sublayers: bool = field(
        default=False,
        metadata=option(
            "--sublayers",
            doc="also store what attention and MLP add (`attn`, `mlp`), for blocks whose two boundaries are kept",
            help="Also store what attention and MLP add to the residual.",
            is_flag=True,
        ),
    )
    """Also what attention and MLP add (blocks whose two boundaries are kept)."""
    store_dtype: str | None = field(
        default=None,
        metadata=option(
            "--store-dtype",
            doc="storage dtype; float16 refuses values beyond ±65504, naming the boundary and the largest value",
            doc_default="the compute dtype (lossless)",
            help="Storage dtype [default: the compute dtype, lossless]. float16 refuses values "
            "beyond 65504.",
            choices=STORE_DTYPES,
        ),
    )
    """The storage dtype (None: the compute dtype)."""
    codec: str = field(
        default=DEFAULT_CODEC,
        metadata=option(
            "--codec",
            doc="chunk codec: `crc32c` is checksummed and uncompressed, so a flipped byte is an error instead of a wrong number; `blosc-lz4` when disk matters more than speed (no checksum)",
            help="Chunk codec (docs/commands/extract.md, the store layout).",
            choices=CODECS,
        ),
    )
    """The chunk codec."""
    chunk_tokens: int | None = field(
        default=None,
        metadata=option(
            "--chunk-tokens",
            doc="tokens per stored chunk; part of the store's identity",
            doc_default="the power of two nearest 4 MiB per boundary (512 for d_model 1536 in float32)",
            doc_metavar="N",
            help="Tokens per stored chunk [default: ~4 MiB per chunk, measured; "
            "docs/commands/extract.md]. Part of the store's identity.",
            type="whole",
            least=1,
        ),
    )
    """Tokens per stored chunk (None: ~4 MiB chunks)."""
    allow_long: bool = field(
        default=False,
        metadata=option(
            "--allow-long",
            doc="keep a `--max-length` above the model's `max_position_embeddings` (positions the model was not built for) instead of capping it",
            help="Keep a --max-length above the model's max_position_embeddings (capped at it "
            "otherwise).",
            is_flag=True,
        ),
    )
    """Accept a max_length beyond the model's max_position_embeddings."""
    dry_run: bool = field(
        default=False,
        metadata=option(
            "--dry-run",
            doc="print what the run would write and cost (below); write nothing",
            help="Print what the run would write and cost, and check free disk; write nothing.",
            is_flag=True,
        ),
    )
    """Report size and time from one timed batch, write nothing."""
    break_lock: bool = field(
        default=False,
        metadata=option(
            "--break-lock",
            doc="remove a lock that cannot be checked from here (held from another host, or written without the holder's start time) by a run known to be dead",
            help="Remove a stale lock left by a run that died.",
            is_flag=True,
        ),
    )
    """Remove a lock left by a run that cannot be shown dead from here."""
    overwrite: bool = field(
        default=False,
        metadata=option(
            "--overwrite",
            doc="replace an activation store at `-o` made from other options or inputs (or complete) by a new extraction, under its lock; anything at `-o` that is not an activation store is still refused and never removed",
            help="Replace an activation store at -o made from other inputs (or complete) by a "
            "new extraction; nothing else is ever removed.",
            is_flag=True,
        ),
    )
    """Replace an activation store at `output` (another identity, or complete) by a new
    extraction instead of resuming or refusing it; nothing but an activation store is ever
    removed."""

    def check(self) -> None:
        """One-line InputError for a value no model or corpus could make right."""
        if self.batch_size < 1:
            raise InputError(f"`batch_size` {self.batch_size} must be at least 1")
        if self.chunk_tokens is not None and self.chunk_tokens < 1:
            raise InputError(f"`chunk_tokens` {self.chunk_tokens} must be at least 1")

    def check_storage(self, compute_dtype: str) -> str:
        """The storage dtype (the compute dtype unless chosen), after checking it and the codec."""
        store_dtype = self.store_dtype or compute_dtype
        physical_dtype(store_dtype)
        compressors(self.codec)
        return store_dtype


# align.extract's earlier flat keyword for a CorpusSpec field, where the two differ: named in
# the TypeError that says which record a keyword goes in.
CORPUS_KEYWORDS = {"format": "fmt"}


def specs(model, corpus_source, options):
    """(ModelSpec, CorpusSpec, ExtractOptions) from `align.extract`'s arguments: the model as a
    ModelSpec or a path (a folder or a hub id), the corpus as a CorpusSpec or a path (None: a
    dataset or a generated format, which only a CorpusSpec names), the options as an
    ExtractOptions or None (its defaults). Anything else is a TypeError naming the parameter."""
    if not isinstance(model, models.ModelSpec):
        _path("model", model, "ModelSpec")
        model = models.ModelSpec(model)
    if not isinstance(corpus_source, corpus.CorpusSpec):
        if corpus_source is not None:
            _path("corpus_source", corpus_source, "CorpusSpec")
        corpus_source = corpus.CorpusSpec(corpus_source)
    if options is None:
        options = ExtractOptions()
    elif not isinstance(options, ExtractOptions):
        raise TypeError(f"`options` must be an ExtractOptions, not {type(options).__name__}")
    return model, corpus_source, options


def _path(name: str, value, record: str) -> None:
    """Refuse a `name` that is neither its record nor a path."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"`{name}` must be a {record} or a path, not {type(value).__name__}")
