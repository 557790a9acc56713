"""A corpus's documents in order (at most --max-docs), with their answer start and level, and
the record every store and result keeps of its corpus."""

from __future__ import annotations

import os
from typing import Iterator

from align.corpus.formats import Item, generated_format, generated_items
from align.corpus.reading import Reading, corpus_hash
from align.corpus.sources import dataset_items, jsonl_items, text_documents
from align.corpus.spec import PROTOCOL, CorpusSpec, validate


def items(spec: CorpusSpec, reading: Reading | None = None) -> Iterator[Item]:
    """The documents of a corpus with their answer start and level, in order (at most
    --max-docs); raises InputError for unreadable input. With `reading` (a `Reading` of
    `spec`), its files are read through it, so that its hash covers the bytes they came from."""
    validate(spec)
    own = None
    if generated_format(spec.fmt) is not None:
        it = generated_items(spec.fmt, spec.max_docs)
    elif spec.dataset is not None:
        it = dataset_items(spec)
    else:
        if reading is None:
            reading = own = Reading(spec)
        it = _file_items(spec, reading)
    try:
        count = 0
        for d in it:
            if spec.max_docs is not None and count >= spec.max_docs:
                return
            count += 1
            yield d
    finally:
        if own is not None:  # nobody asks for its hash: its open file is closed here
            own.close()


def documents(spec: CorpusSpec, reading: Reading | None = None) -> Iterator[str]:
    """The documents of a corpus, in order (read through `reading`, as `items`); raises
    InputError for unreadable input."""
    for item in items(spec, reading):
        yield item.text


def document_levels(spec: CorpusSpec, reading: Reading | None = None) -> list:
    """The level of each document (None where its format has none), indexed like
    `Sequence.doc` (read through `reading`, as `items`)."""
    return [item.level for item in items(spec, reading)]


def provenance(spec: CorpusSpec, hash: str | None = None) -> dict:
    """What every store and result records about its corpus: source, hash (`hash` when it is
    already known), the options, and the documents' levels (sorted distinct values) where the
    format has levels (a plain corpus is not read again for them)."""
    levels = (
        []
        if spec.fmt in ("plain", "gsm8k")
        else sorted({x for x in document_levels(spec) if x is not None})
    )
    return {
        "source": spec.describe(),
        "hash": hash or corpus_hash(spec),
        **spec.options(),
        **{k: getattr(spec, k) for k in PROTOCOL},
        **({"levels": levels} if levels else {}),
    }


def _file_items(spec: CorpusSpec, reading: Reading) -> Iterator[Item]:
    """The documents of the corpus's files (.jsonl lines, or .txt documents), read through `reading`."""
    for f, lines in reading.files():
        if f.endswith(".jsonl"):
            yield from jsonl_items(f, lines, spec)
        else:
            how = spec.doc_split or ("file" if os.path.isdir(spec.path) else "blank")
            yield from (Item(d) for d in text_documents(lines, how))
