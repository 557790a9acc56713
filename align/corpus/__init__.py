"""Text sources → tokenized sequences with document ids, positions and character spans.

One concept a module: `spec` (`CorpusSpec` and the check of its options), `formats` (task
formats and generated arithmetic), `sources` (the documents of each kind of source),
`reading` (one read of a corpus's files and its hash), `documents` (a corpus's documents in
order and its provenance record), `tokens` (what a tokenizer adds, drops and is), `windows`
(documents cut or packed into sequences). Every public name is importable from here.
"""

from align.corpus.documents import document_levels, documents, items, provenance
from align.corpus.formats import (
    AIME_MAX_TOKENS,
    ANSWER_MARKERS,
    FORMATS,
    GENERATED,
    GENERATED_COUNT,
    GSM8K_INSTRUCTION,
    JSON_FORMATS,
    MAX_DIGITS,
    Item,
    arithmetic_problem,
    generated_format,
)
from align.corpus.reading import Reading, corpus_hash
from align.corpus.sources import json_lines
from align.corpus.spec import (
    DOC_SPLITS,
    ESCAPES,
    OVERFLOWS,
    PROTOCOL,
    CorpusSpec,
    check_stand_in,
    unescape,
    validate,
)
from align.corpus.tokens import (
    TokenizeStats,
    composing_form,
    special_ids,
    special_tokens,
    tokenizer_hashes,
    uncovered_characters,
)
from align.corpus.windows import Sequence, sequences

__all__ = [
    "AIME_MAX_TOKENS",
    "ANSWER_MARKERS",
    "DOC_SPLITS",
    "ESCAPES",
    "FORMATS",
    "GENERATED",
    "GENERATED_COUNT",
    "GSM8K_INSTRUCTION",
    "JSON_FORMATS",
    "MAX_DIGITS",
    "OVERFLOWS",
    "PROTOCOL",
    "CorpusSpec",
    "Item",
    "Reading",
    "Sequence",
    "TokenizeStats",
    "arithmetic_problem",
    "check_stand_in",
    "composing_form",
    "corpus_hash",
    "json_lines",
    "document_levels",
    "documents",
    "generated_format",
    "items",
    "provenance",
    "sequences",
    "special_ids",
    "special_tokens",
    "tokenizer_hashes",
    "uncovered_characters",
    "unescape",
    "validate",
]
