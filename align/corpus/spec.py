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
# The analyses word --dataset and --format for their input (CORPUS, or erase's and
# igrad's PROMPTS).
DATASET_DOC = "Read a `datasets` split instead of {} (`pip install 'align-depth[datasets]'`)."
FORMAT_DOC = (
    "Task prompts from a data set's fields (`gsm8k`, `mquake`, `math`, `hellaswag`, `aime`), or "
    "generated arithmetic (`addition:N[:SEED]`, `multiplication:N[:SEED]`: no {} needed)."
)


@dataclass(frozen=True)
class CorpusSpec:
    """What text, cut how. Every field but `path` spelling is part of a store's identity."""

    path: str | None = field(default=None, metadata=not_an_option("the CORPUS argument"))
    dataset: str | None = field(
        default=None,
        metadata=option(
            "--dataset",
            metavar="NAME[:CONFIG]:SPLIT",
            variants={
                "analyses": DATASET_DOC.format("CORPUS"),
                "prompts": DATASET_DOC.format("PROMPTS"),
            },
        ),
    )
    """Read a `datasets` split, NAME[:CONFIG]:SPLIT, instead of CORPUS (`pip install
    'align-depth[datasets]'`, and the data reachable)."""
    text_field: str = field(default="text", metadata=option("--text-field", metavar="TEXT"))
    """The field holding the text in a `.jsonl` corpus."""
    fmt: str = field(
        default="plain",
        metadata=option(
            "--format",
            metavar="FORMAT",
            variants={
                "analyses": FORMAT_DOC.format("CORPUS"),
                "prompts": FORMAT_DOC.format("PROMPTS"),
            },
        ),
    )
    """Task prompts built from a data set's fields (`gsm8k`, `mquake`, `math`, `hellaswag`,
    `aime`: a `.jsonl` file or `--dataset`), or generated arithmetic (`addition:N[:SEED]`,
    `multiplication:N[:SEED]`: no CORPUS, `--max-docs` problems, 100 by default); the templates
    are in the task formats page."""
    doc_split: str | None = field(
        default=None,
        metadata=option(
            "--doc-split",
            choices=DOC_SPLITS,
            shown_default="blank lines for a file, one document per file for a folder",
        ),
    )
    """How a `.txt` file becomes documents."""
    max_length: int = field(
        default=512,
        metadata=option(
            "--max-length",
            metavar="N",
            type="whole",
            least=2,
            variants={
                "analyses": "Tokens per prompt, special tokens included; the model's "
                "`max_position_embeddings` at most."
            },
        ),
    )
    """Tokens per sequence, special tokens included; a longer document is cut (`--overflow`).
    Capped at the model's `max_position_embeddings`, with a log line that says so, unless
    `--allow-long`."""
    overflow: str = field(
        default="split",
        metadata=option(
            "--overflow",
            choices=OVERFLOWS,
            variants={
                "analyses": "What a longer document becomes: several prompts (`split`) or only "
                "its first window (`truncate`)."
            },
        ),
    )
    """What a document longer than `--max-length` becomes: consecutive windows (`split`) or only
    its first window (`truncate`)."""
    max_tokens: int | None = field(
        default=None,
        metadata=option(
            "--max-tokens",
            metavar="N",
            type="whole",
            least=1,
            shown_default="all",
            variants={"analyses": "Stop after N tokens."},
        ),
    )
    """Stop after N tokens (the last sequence is cut to fit; with `--pack`, whole windows
    only)."""
    max_docs: int | None = field(
        default=None,
        metadata=option("--max-docs", metavar="N", type="whole", least=1, shown_default="all"),
    )
    """Read at most N documents."""
    pack: str | None = field(
        default=None,
        metadata=option("--pack", metavar="SEPARATOR", shown_default="off"),
    )
    """Join the documents with SEPARATOR (text, tokenized; `\\n` `\\t` `\\r` `\\\\` are escapes,
    e.g. `'\\n\\n'` or `'<|endoftext|>'`) and cut the stream into full windows of `--max-length`
    tokens, the last partial window left out; part of the store's identity."""
    stand_in_token: int | None = field(
        default=None,
        metadata=option(
            "--stand-in-token", metavar="ID", type="whole", least=0, shown_default="off"
        ),
    )
    """Put token ID at position 0 of every sequence (P1: 0 for a model without BOS, e.g. Qwen
    2.5), so the fit's default leaves out only it; refused when the tokenizer adds a BOS."""

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
