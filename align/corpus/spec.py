"""What text, cut how: `CorpusSpec`, the check of its options, and the separator as typed.

Sources (`CorpusSpec`):
- a `.txt` file: documents are separated by blank lines (`doc_split="blank"`), or one per
  line (`"line"`), or the whole file is one document (`"file"`);
- a `.jsonl` file: one document per line, text in `text_field` (default `text`);
- a folder of `.txt` files: one document per file, in sorted name order;
- `dataset="NAME[:CONFIG]:SPLIT"`: a split of a `datasets` data set (when installed and
  reachable);
- `fmt=` a task format (below) on a .jsonl file (or --dataset) in that data set's field layout,
  or a generated arithmetic format, which reads no file.

`unescape(text)` reads a separator as typed on a command line: \\n, \\t, \\r and \\\\ are
a line break, a tab, a carriage return and a backslash; any other backslash is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from align.corpus.formats import FORMATS, JSON_FORMATS, generated_format
from align.declarations import not_an_option, option
from align.errors import InputError

DOC_SPLITS = ("blank", "line", "file")
OVERFLOWS = ("split", "truncate")
PROTOCOL = ("pack", "stand_in_token")  # CorpusSpec fields of P1's protocol (align.corpus.windows)
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
# The analyses' pages word --dataset and --format for their input (CORPUS, or erase's and
# igrad's PROMPTS).
DATASET_DOC = "read a `datasets` split instead of {} (`pip install 'align-depth[datasets]'`)"
FORMAT_DOC = (
    "task prompts from a data set's fields (`gsm8k`, `mquake`, `math`, `hellaswag`, `aime`), or "
    "generated arithmetic (`addition:N[:SEED]`, `multiplication:N[:SEED]`: no {} needed)"
)


@dataclass(frozen=True)
class CorpusSpec:
    """What text, cut how. Every field but `path` spelling is part of a store's identity."""

    path: str | None = field(default=None, metadata=not_an_option("the CORPUS argument"))
    dataset: str | None = field(
        default=None,
        metadata=option(
            "--dataset",
            doc="read a `datasets` split instead of CORPUS (`pip install 'align-depth[datasets]'`, and the data reachable)",
            doc_variants={
                "analyses": {"doc": DATASET_DOC.format("CORPUS")},
                "prompts": {"doc": DATASET_DOC.format("PROMPTS")},
            },
            help="Read a `datasets` split instead of CORPUS (needs the datasets package).",
            metavar="NAME[:CONFIG]:SPLIT",
        ),
    )
    """A `datasets` split, NAME[:CONFIG]:SPLIT, read instead of `path`."""
    text_field: str = field(
        default="text",
        metadata=option(
            "--text-field",
            doc="the field holding the text in a `.jsonl` corpus",
            doc_default="`text`",
            doc_metavar="TEXT",
            help="Field holding the text in a .jsonl corpus.",
        ),
    )
    """The field holding the text in a .jsonl corpus."""
    fmt: str = field(
        default="plain",
        metadata=option(
            "--format",
            doc="task prompts built from a data set's fields (`gsm8k`, `mquake`, `math`, `hellaswag`, `aime`: a `.jsonl` file or `--dataset`), or generated arithmetic (`addition:N[:SEED]`, `multiplication:N[:SEED]`: no CORPUS, `--max-docs` problems, 100 by default); templates in [task formats](../formats.md#task-formats-format)",
            doc_variants={
                "analyses": {"doc": FORMAT_DOC.format("CORPUS")},
                "prompts": {"doc": FORMAT_DOC.format("PROMPTS")},
            },
            doc_default="`plain`",
            doc_metavar="FORMAT",
            help="Build task prompts from a data set's fields (gsm8k, mquake, math, hellaswag, "
            "aime: a .jsonl file or --dataset), or generate N-digit arithmetic "
            "(addition:N[:SEED], multiplication:N[:SEED], --max-docs problems, default 100); "
            "templates in docs/formats.md.",
            metavar="|".join(FORMATS),
        ),
    )
    """A task format (`align.corpus.formats`) or a generated arithmetic format."""
    doc_split: str | None = field(
        default=None,
        metadata=option(
            "--doc-split",
            doc="how a `.txt` file becomes documents",
            doc_default="blank lines for a file, one document per file for a folder",
            help="How a .txt file becomes documents [default: blank lines for a file, one per "
            "file for a folder].",
            choices=DOC_SPLITS,
        ),
    )
    """How a .txt file becomes documents; None: "blank" for a .txt file, "file" for a folder."""
    max_length: int = field(
        default=512,
        metadata=option(
            "--max-length",
            doc="tokens per sequence, special tokens included; capped at the model's `max_position_embeddings`, with a log line that says so, unless `--allow-long`",
            doc_variants={
                "analyses": {
                    "doc": "tokens per prompt, special tokens included; the model's "
                    "`max_position_embeddings` at most"
                }
            },
            doc_metavar="N",
            help="Tokens per sequence, special tokens included; longer documents are cut (see "
            "--overflow). Capped at the model's max_position_embeddings (said in a log line) "
            "unless --allow-long.",
            type="whole",
            least=2,
        ),
    )
    """Tokens per sequence, special tokens included."""
    overflow: str = field(
        default="split",
        metadata=option(
            "--overflow",
            doc="a longer document becomes consecutive windows (split) or only its first window (truncate)",
            doc_variants={
                "analyses": {
                    "doc": "a longer document becomes several prompts (split) or only its first "
                    "window (truncate)"
                }
            },
            help="split: every window of a long document is a sequence; truncate: only the first.",
            choices=OVERFLOWS,
        ),
    )
    """What a document longer than `max_length` becomes: every window, or the first."""
    max_tokens: int | None = field(
        default=None,
        metadata=option(
            "--max-tokens",
            doc="stop after N tokens (the last sequence is cut to fit; with `--pack`, whole windows only)",
            doc_variants={"analyses": {"doc": "stop after N tokens"}},
            doc_default="all",
            doc_metavar="N",
            help="Stop after this many tokens.",
            type="whole",
            least=1,
        ),
    )
    """Stop after this many tokens (None: every token)."""
    max_docs: int | None = field(
        default=None,
        metadata=option(
            "--max-docs",
            doc="read at most N documents",
            doc_default="all",
            doc_metavar="N",
            help="Read at most this many documents.",
            type="whole",
            least=1,
        ),
    )
    """Read at most this many documents (None: all)."""
    pack: str | None = field(
        default=None,
        metadata=option(
            "--pack",
            doc="join the documents with SEPARATOR and cut the stream into full windows of `--max-length` tokens ([`--pack`](../formats.md#-pack-separator)); part of the store's identity",
            doc_default="off",
            help="Join the documents with SEPARATOR (text, tokenized; \\n \\t \\r \\\\ are "
            "escapes, e.g. '\\n\\n' or '<|endoftext|>') and cut them into full windows of "
            "--max-length tokens; the last partial window is left out. Part of the store's "
            "identity.",
            metavar="SEPARATOR",
        ),
    )
    """None: one document per sequence; a separator: documents packed into full windows."""
    stand_in_token: int | None = field(
        default=None,
        metadata=option(
            "--stand-in-token",
            doc="put token ID at position 0 of every sequence, so the fit's default leaves out only it ([`--stand-in-token`](../formats.md#-stand-in-token-id)); refused when the tokenizer adds a BOS",
            doc_default="off",
            help="Put token ID at position 0 of every sequence (P1: 0 for a model without BOS, "
            "e.g. Qwen 2.5), so the fit's default leaves out only it; refused when the "
            "tokenizer adds a BOS.",
            type="whole",
            least=0,
            metavar="ID",
        ),
    )
    """An id put at position 0 of every sequence (a stand-in BOS)."""

    def describe(self) -> str:
        if self.path is None and self.dataset is None:
            return f"generated {self.fmt}"
        return self.dataset and f"dataset {self.dataset}" or str(self.path)

    def options(self) -> dict:
        """The fields but `path`. The protocol fields (`PROTOCOL`) appear only when set, so
        the corpus hash of a spec without them is what it was before they existed."""
        d = dict(self.__dict__)
        d.pop("path")
        for k in PROTOCOL:
            if d[k] is None:
                d.pop(k)
        return d


def validate(spec: CorpusSpec) -> None:
    """Check the spec's options before any work (the CLI's bad-option errors)."""
    generated = generated_format(spec.fmt)
    if generated is None and spec.fmt not in FORMATS[:-2]:
        raise InputError(f"`format` {spec.fmt!r} is not one of {', '.join(FORMATS)}")
    if spec.overflow not in OVERFLOWS:
        raise InputError(f"`overflow` {spec.overflow!r} is not one of {', '.join(OVERFLOWS)}")
    if spec.doc_split is not None and spec.doc_split not in DOC_SPLITS:
        raise InputError(f"`doc_split` {spec.doc_split!r} is not one of {', '.join(DOC_SPLITS)}")
    if spec.max_length < 2:
        raise InputError(f"`max_length` {spec.max_length} is too small: it must be at least 2")
    if spec.max_tokens is not None and spec.max_tokens < 1:
        raise InputError(f"`max_tokens` {spec.max_tokens} must be positive")
    _validate_protocol(spec)
    if generated is not None:
        if spec.path is not None or spec.dataset is not None:
            raise InputError(
                f"`format` {spec.fmt} generates its problems: give no CORPUS or `dataset` with it"
            )
        return
    if (spec.path is None) == (spec.dataset is None):
        raise InputError(
            "give a CORPUS path, `dataset` NAME[:CONFIG]:SPLIT or a generated `format` (addition:N, "
            "multiplication:N)"
            if spec.path is None
            else f"give either a CORPUS path ({spec.path}) or `dataset` {spec.dataset}, not both"
        )
    if spec.fmt in JSON_FORMATS and spec.path is not None and not spec.path.endswith(".jsonl"):
        raise InputError(
            f"`format` {spec.fmt} needs a .jsonl file in that data set's field layout, not {spec.path}"
        )


def _validate_protocol(spec: CorpusSpec) -> None:
    """The options of P1's protocol (`align.corpus.windows`), before any work."""
    if spec.stand_in_token is not None and (
        isinstance(spec.stand_in_token, bool)
        or not isinstance(spec.stand_in_token, (int, np.integer))
        or spec.stand_in_token < 0
    ):
        raise InputError(
            f"`stand_in_token` {spec.stand_in_token!r} must be a token id (a whole number >= 0), e.g. 0"
        )
    if spec.pack is None:
        return
    if not isinstance(spec.pack, str):
        raise InputError(
            f"`pack` {spec.pack!r} must be a string (the separator's text), e.g. '\\n\\n'"
        )
    if spec.fmt != "plain":
        raise InputError(
            f"`pack` joins plain documents into windows; `format` {spec.fmt} makes one prompt per "
            "sequence: drop `pack` or `format`"
        )
    if spec.overflow != "split":
        raise InputError(
            f"`pack` cuts the joined documents into consecutive full windows; `overflow` {spec.overflow} "
            "does not apply: drop `overflow`"
        )
    if spec.max_tokens is not None and spec.max_tokens < spec.max_length:
        raise InputError(
            f"`max_tokens` {spec.max_tokens} is less than one packed window of `max_length` "
            f"{spec.max_length}: `pack` keeps whole windows only"
        )


def check_stand_in(spec: CorpusSpec, vocab_size) -> None:
    """A stand-in token must be one of the model's `vocab_size` ids (its config's): a
    one-line InputError naming both otherwise (checked before anything is tokenized)."""
    if (
        spec.stand_in_token is not None
        and isinstance(vocab_size, int)
        and spec.stand_in_token >= vocab_size
    ):
        raise InputError(
            f"`stand_in_token` {spec.stand_in_token} is not a token id of this model (ids 0 to "
            f"{vocab_size - 1:,}): P1 uses 0"
        )


def unescape(text: str) -> str:
    """A separator as typed on a command line: \\n, \\t, \\r and \\\\ become a line break,
    a tab, a carriage return and a backslash; any other backslash is a one-line InputError."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1 : i + 2]
        if nxt not in ESCAPES:
            raise InputError(
                f"`pack` {text!r}: unknown escape \\{nxt} at character {i}; write \\n, \\t, \\r, "
                "or \\\\ for a backslash"
            )
        out.append(ESCAPES[nxt])
        i += 2
    return "".join(out)
