"""The options of an extraction, grouped as ModelSpec and CorpusSpec group the model's and the
corpus's: `ExtractOptions`, and the split of `align.extract`'s flat keywords into the three."""

from __future__ import annotations

from dataclasses import dataclass

from align import corpus, models
from align.declarations import declared, option
from align.errors import InputError
from align.records import take
from align.store.codecs import CODECS, DEFAULT_CODEC, STORE_DTYPES, compressors, physical_dtype


@dataclass(frozen=True)
class ExtractOptions:
    """How the store is cut and written (with ModelSpec and CorpusSpec: everything a run needs).

    `boundaries`: the boundaries to keep, as `--boundaries` spells them (None: all 0..L);
    `sublayers`: also what attention and MLP add (blocks whose two boundaries are kept);
    `store_dtype`: None keeps the compute dtype; `chunk_tokens`: None picks ~4 MiB chunks;
    `allow_long`: accept a max_length beyond the model's max_position_embeddings;
    `dry_run`: report size and time from one timed batch, write nothing;
    `break_lock`: remove a lock left by a run that cannot be shown dead from here;
    `overwrite`: replace an activation store at `output` (another identity, or complete) by a
    new extraction instead of resuming or refusing it; nothing but an activation store is
    ever removed."""

    batch_size: int = declared(
        8,
        metadata=option(
            "--batch-size",
            help="Sequences per forward pass.",
            type="whole",
            least=1,
            show_default=True,
        ),
    )
    boundaries: str | None = declared(
        None,
        metadata=option(
            "--boundaries",
            help="Residual boundaries to keep: e.g. 0,4,8 or ::2 or 1: [default: all 0..L].",
            metavar="SPEC",
        ),
    )
    sublayers: bool = declared(
        False,
        metadata=option(
            "--sublayers",
            help="Also store what attention and MLP add to the residual.",
            is_flag=True,
        ),
    )
    store_dtype: str | None = declared(
        None,
        metadata=option(
            "--store-dtype",
            help="Storage dtype [default: the compute dtype, lossless]. float16 refuses values "
            "beyond 65504.",
            choices=STORE_DTYPES,
        ),
    )
    codec: str = declared(
        DEFAULT_CODEC,
        metadata=option(
            "--codec",
            help="Chunk codec (docs/commands/extract.md, the store layout).",
            choices=CODECS,
            show_default=True,
        ),
    )
    chunk_tokens: int | None = declared(
        None,
        metadata=option(
            "--chunk-tokens",
            help="Tokens per stored chunk [default: ~4 MiB per chunk, measured; "
            "docs/commands/extract.md]. Part of the store's identity.",
            type="whole",
            least=1,
        ),
    )
    allow_long: bool = declared(
        False,
        metadata=option(
            "--allow-long",
            help="Keep a --max-length above the model's max_position_embeddings (capped at it "
            "otherwise).",
            is_flag=True,
        ),
    )
    dry_run: bool = declared(
        False,
        metadata=option(
            "--dry-run",
            help="Print what the run would write and cost, and check free disk; write nothing.",
            is_flag=True,
        ),
    )
    break_lock: bool = declared(
        False,
        metadata=option(
            "--break-lock", help="Remove a stale lock left by a run that died.", is_flag=True
        ),
    )
    overwrite: bool = declared(
        False,
        metadata=option(
            "--overwrite",
            help="Replace an activation store at -o made from other inputs (or complete) by a "
            "new extraction; nothing else is ever removed.",
            is_flag=True,
        ),
    )

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


# align.extract's keyword for a CorpusSpec field, where the two differ.
CORPUS_KEYWORDS = {"format": "fmt"}


def specs(model, corpus_source, options, keywords: dict):
    """(ModelSpec, CorpusSpec, ExtractOptions) from `align.extract`'s arguments: each given as
    its dataclass, or as a path (model, corpus) or None (options) with its fields among
    `keywords` (the flat form the CLI and notebooks use: revision=, max_length=, batch_size=).
    A keyword that names no field, or one given beside its dataclass, is a TypeError."""
    keywords = dict(keywords)
    if not isinstance(model, models.ModelSpec):
        model = models.ModelSpec(model, **take(models.ModelSpec, keywords, skip=("name",)))
    if not isinstance(corpus_source, corpus.CorpusSpec):
        corpus_source = corpus.CorpusSpec(
            corpus_source, **take(corpus.CorpusSpec, keywords, CORPUS_KEYWORDS, skip=("path",))
        )
    if options is None:
        options = ExtractOptions(**take(ExtractOptions, keywords))
    if keywords:
        raise TypeError(
            f"extract() got unexpected keyword arguments {sorted(keywords)} (not a field of the ModelSpec, "
            "CorpusSpec or ExtractOptions it was given, or of none)"
        )
    return model, corpus_source, options
