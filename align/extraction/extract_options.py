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
        default=8, metadata=option("--batch-size", metavar="N", type="whole", least=1)
    )
    """Sequences per forward pass (right-padded; padding is never stored); batches are grouped
    by length."""
    boundaries: str | None = field(
        default=None,
        metadata=option("--boundaries", metavar="SPEC", shown_default="all 0..L"),
    )
    """The boundaries to keep: `0,4,8`, `::2`, `1:`, `-1` (the old name `--layers` still works
    in this release, with a warning)."""
    sublayers: bool = field(default=False, metadata=option("--sublayers", is_flag=True))
    """Also store what attention and MLP add (`attn`, `mlp`), for blocks whose two boundaries
    are kept."""
    store_dtype: str | None = field(
        default=None,
        metadata=option(
            "--store-dtype", choices=STORE_DTYPES, shown_default="the compute dtype (lossless)"
        ),
    )
    """Storage dtype; float16 refuses values beyond ±65504, naming the boundary and the largest
    value."""
    codec: str = field(default=DEFAULT_CODEC, metadata=option("--codec", choices=CODECS))
    """Chunk codec: `crc32c` is checksummed and uncompressed, so a flipped byte is an error
    instead of a wrong number; `blosc-lz4` when disk matters more than speed (no checksum)."""
    chunk_tokens: int | None = field(
        default=None,
        metadata=option(
            "--chunk-tokens",
            metavar="N",
            type="whole",
            least=1,
            shown_default="the power of two nearest 4 MiB per boundary (512 for d_model 1536 in "
            "float32)",
        ),
    )
    """Tokens per stored chunk; part of the store's identity."""
    allow_long: bool = field(default=False, metadata=option("--allow-long", is_flag=True))
    """Keep a `--max-length` above the model's `max_position_embeddings` (positions the model
    was not built for) instead of capping it."""
    dry_run: bool = field(default=False, metadata=option("--dry-run", is_flag=True))
    """Print what the run would write and cost (size, and time from one timed batch) and check
    the free disk; write nothing."""
    break_lock: bool = field(default=False, metadata=option("--break-lock", is_flag=True))
    """Remove a lock that cannot be checked from here (held from another host, or written
    without the holder's start time) by a run known to be dead."""
    overwrite: bool = field(default=False, metadata=option("--overwrite", is_flag=True))
    """Replace an activation store at `-o` made from other options or inputs (or complete) by a
    new extraction, under its lock, instead of resuming or refusing it; anything at `-o` that is
    not an activation store is still refused and never removed."""

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
