"""The options of an extraction, grouped as ModelSpec and CorpusSpec group the model's and the
corpus's: `ExtractOptions`, and the split of `align.extract`'s flat keywords into the three."""

from __future__ import annotations

from dataclasses import dataclass

from align import corpus, models
from align.errors import InputError
from align.records import take
from align.store.codecs import DEFAULT_CODEC, compressors, physical_dtype


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

    batch_size: int = 8
    boundaries: str | None = None
    sublayers: bool = False
    store_dtype: str | None = None
    codec: str = DEFAULT_CODEC
    chunk_tokens: int | None = None
    allow_long: bool = False
    dry_run: bool = False
    break_lock: bool = False
    overwrite: bool = False

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
