"""Text sources → tokenized sequences with document ids, positions and character spans.

Sources (`CorpusSpec`):
- a `.txt` file: documents are separated by blank lines (`doc_split="blank"`), or one per
  line (`"line"`), or the whole file is one document (`"file"`);
- a `.jsonl` file: one document per line, text in `text_field` (default `text`);
- a folder of `.txt` files: one document per file, in sorted name order;
- `dataset="NAME[:CONFIG]:SPLIT"`: a split of a `datasets` data set (when installed and
  reachable);
- `fmt=` a task format (below) on a .jsonl file (or --dataset) in that data set's field layout,
  or a generated arithmetic format, which reads no file.

Task formats (`items(spec)` gives each prompt's text, where its answer starts, and its
`level`; `document_levels(spec)` the levels alone, indexed like `Sequence.doc`):
- `gsm8k` (`question`, `answer` with "#### final"): the prompt of docs/methods.md, ending
  "The final answer is {final}"; no level.
- `mquake` (MQuAKE case: `questions`, `answer`, `single_hops`):
  "Question: {questions[0]}\nAnswer: {answer}"; level = hops = len(single_hops) (or
  len(orig.triples) when a case has no single_hops).
- `math` (hendrycks MATH: `problem`, `solution`, `level` "Level N"):
  "Problem: {problem}\nSolution: {solution}"; level = N (1-5).
- `hellaswag` (`ctx`, `endings`, `label`): "{ctx} {endings[label]}" (the gold ending); no
  level.
- `aime` (`Problem`/`problem`, `Answer`/`answer`): "Problem: {problem}\nAnswer: {answer}";
  no level. As in P2, a prompt of more than 400 tokens (special tokens included) is left out,
  and counted (TokenizeStats.over_format_limit).
- `addition:N[:SEED]` / `multiplication:N[:SEED]` (generated, seed 0 by default):
  "{a} + {b} = {a+b}" / "{a} * {b} = {a*b}" with a, b uniform N-digit integers (0-9 for
  N = 1) drawn by numpy's default_rng([SEED, N]); --max-docs problems (default 100); level =
  N.
The answer is the text after "Answer: ", "Solution: ", the ending, "The final answer is " or
"= " (ANSWER_MARKERS names the marker of each format; hellaswag has none, use answer_start).

Sequences: each document is tokenized whole (no special tokens), then cut into windows of at
most `max_length` tokens including the special tokens the tokenizer adds (Llama's BOS,
recorded in the store); `overflow="split"` (default) keeps every window, `"truncate"` only the
first. Documents with no tokens are skipped (their index is still consumed, so `doc` always
points back to the source). Special tokens have char_start = char_end = -1.

Packing (`pack=SEPARATOR`, P1's protocol; plain documents only): each document and the
separator are tokenized separately (no special tokens; the separator as text, so
"<|endoftext|>" becomes the tokenizer's special token, as in a document) and their ids are
concatenated, doc0 sep doc1 sep doc2 ... (no separator before the first document or after the
last), then cut into consecutive windows that are full: `max_length` tokens, the special
tokens the tokenizer adds to each window and the stand-in included. A document cut across
two windows keeps its one id in both. The separator's tokens belong to the document before
them (they end it, as an end-of-text token does; their residuals are formed from its
context) and have char spans -1. The tokens after the last full window (the last partial
window) are left out and counted (`TokenizeStats.packed_tail_tokens`); a corpus without one
full window is refused. With `max_tokens`, only whole windows are kept (the first
max_tokens // max_length). Packing gives up the one-document-per-sequence context: a window's
tokens attend to the end of the documents before them in the window.

Stand-in first token (`stand_in_token=ID`, P1's protocol for a model without BOS, e.g. 0
for Qwen 2.5): ID is put at position 0 of every sequence, packed or not (a special token:
char span -1, and the document of the token after it), so the fit's default, which leaves
position 0 out, drops exactly it and scores every real token. A tokenizer that already adds
tokens before a text (Llama's BOS) is refused: its BOS is already what the fit leaves out.

Reading (`Reading`): a read of the corpus hashes the bytes it decodes in the same read (each
file opened once, each line hashed as it is decoded: `align.textfiles`, which also names a
file that is not UTF-8), and its `hexdigest()` is `corpus_hash`'s value. A store or result
records the hash of the read its tokens came from; a later read of other bytes in the same run
is refused (`Reading.check`): the corpus changed while align read it.

`unescape(text)` reads a separator as typed on a command line: \\n, \\t, \\r and \\\\ are
a line break, a tab, a carriage return and a backslash; any other backslash is refused.

What tokenizing changes in the text is counted (`TokenizeStats`), never silent:
- characters outside the tokenizer's vocabulary that it drops (a tokenizer without byte
  fallback or an unknown token drops them: a document of emoji becomes no tokens at all) are
  the non-whitespace characters covered by no token's character span. Whitespace is not
  counted: byte-level tokenizers that trim offsets leave the space a token carries outside
  its span, so an uncovered space is no evidence of loss. Nor is a character the tokenizer's
  NFC/NFKC normalizer composes with the one before it (e + U+0301 -> é, Hangul jamo): the
  composed character's span is its first original character's alone.
- literal special-token text in a document ("<|endoftext|>", "<s>") is parsed as the special
  token, as the model's own tokenizer does by default (and as a chat template relies on):
  align keeps that behaviour, so its token ids equal the tokenizer's, and counts and reports
  each occurrence (a token id among the special ones with a non-empty character span).
"""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from align import textfiles
from align.errors import InputError

GSM8K_INSTRUCTION = (
    "Given the following problem, reason and give a final answer to the problem.\n"
    "Problem: {question}\n"
    'Your response should end with "The final answer is [answer]" where [answer] is the response to the problem.'
)
DOC_SPLITS = ("blank", "line", "file")
OVERFLOWS = ("split", "truncate")
FORMATS = ("plain", "gsm8k", "mquake", "math", "hellaswag", "aime", "addition:N", "multiplication:N")
JSON_FORMATS = ("gsm8k", "mquake", "math", "hellaswag", "aime")
GENERATED = {"addition": "+", "multiplication": "*"}
GENERATED_COUNT = 100  # problems of a generated format without --max-docs
MAX_DIGITS = 18  # a and b stay within int64
AIME_MAX_TOKENS = 400  # P2 keeps AIME prompts of at most 400 tokens
PROTOCOL = ("pack", "stand_in_token")  # CorpusSpec fields of P1's protocol (module docstring)
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
ANSWER_MARKERS = {"gsm8k": "The final answer is", "mquake": "\nAnswer:", "math": "\nSolution:", "aime": "\nAnswer:",
                  "addition": " =", "multiplication": " ="}


@dataclass(frozen=True)
class CorpusSpec:
    """What text, cut how. Every field but `path` spelling is part of a store's identity."""

    path: str | None = None
    dataset: str | None = None
    text_field: str = "text"
    fmt: str = "plain"
    doc_split: str | None = None  # None: "blank" for a .txt file, "file" for a folder
    max_length: int = 512
    overflow: str = "split"
    max_tokens: int | None = None
    max_docs: int | None = None
    pack: str | None = None  # None: one document per sequence; a separator: documents packed into full windows
    stand_in_token: int | None = None  # an id put at position 0 of every sequence (a stand-in BOS)

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


@dataclass
class Sequence:
    """One model input: token ids and, per token, its document, position and char span."""

    token_id: np.ndarray  # (n,) int
    doc: int
    seq: int
    char_start: np.ndarray  # (n,) int, -1 for special tokens
    char_end: np.ndarray
    level: int | None = None  # the document's difficulty level, where its format has one
    docs: np.ndarray | None = None  # (n,) int64, each token's document, when a packed window holds several

    def __len__(self) -> int:
        return len(self.token_id)

    def doc_ids(self) -> np.ndarray:
        """(n,) int64: the document of every token (`doc` is the first token's)."""
        return np.full(len(self), self.doc, np.int64) if self.docs is None else self.docs

    def fields(self) -> dict[str, np.ndarray]:
        n = len(self)
        return {
            "token_id": self.token_id,
            "doc": self.doc_ids(),
            "seq": np.full(n, self.seq, np.int64),
            "pos": np.arange(n, dtype=np.int32),
            "char_start": self.char_start,
            "char_end": self.char_end,
        }


# ------------------------------------------------------------------------------- sources


def _text_docs(lines: Iterator[str], how: str) -> Iterator[str]:
    """Documents of a .txt file's `lines`: the whole file, each line, or blocks between blank lines."""
    if how == "file":
        yield "\n".join(lines)
        return
    if how == "line":
        yield from lines
        return
    cur: list[str] = []
    for line in lines:
        if line.strip():
            cur.append(line)
        elif cur:
            yield "\n".join(cur)
            cur = []
    if cur:
        yield "\n".join(cur)


@dataclass(frozen=True)
class Item:
    """One document: its text, the character where its answer starts (None: no answer), and
    its difficulty level (None: the format has none)."""

    text: str
    answer_start: int | None = None
    level: int | None = None


def _field(item, names: tuple, fmt: str, where: str):
    if isinstance(item, dict):
        for n in names:
            if n in item:
                return item[n]
    wanted = " or ".join(repr(n) for n in names)
    raise InputError(f"{where}: --format {fmt} needs a field {wanted}; check the file is in that data set's layout")


def _string(value, name: str, fmt: str, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{where}: --format {fmt} needs {name!r} to be a string, not {type(value).__name__}")
    return str(value)


def _qa(prefix: str, question: str, marker: str, answer: str, level=None) -> Item:
    head = f"{prefix}{question}{marker}"
    return Item(head + answer, len(head), level)


def _format_item(fmt: str, item, where: str) -> Item:
    """The prompt of one data-set item in a task format (module docstring)."""
    if fmt == "gsm8k":
        try:
            question, answer = item["question"], item["answer"]
        except (KeyError, TypeError):
            raise InputError(f"{where}: --format gsm8k needs 'question' and 'answer' fields") from None
        if not isinstance(question, str) or not isinstance(answer, str) or "####" not in answer:
            raise InputError(f"{where}: a GSM8K answer must be a string containing '#### <final answer>'")
        reasoning, _, final = answer.partition("####")
        if reasoning and not reasoning.endswith("\n"):
            reasoning += "\n"
        head = GSM8K_INSTRUCTION.format(question=question) + "\n\n" + reasoning + "The final answer is "
        return Item(head + final.strip(), len(head))
    if fmt == "mquake":
        questions = _field(item, ("questions",), fmt, where)
        if not isinstance(questions, list) or not questions or not isinstance(questions[0], str):
            raise InputError(f"{where}: --format mquake needs 'questions' to be a non-empty list of strings")
        answer = _string(_field(item, ("answer",), fmt, where), "answer", fmt, where)
        hops = item.get("single_hops")
        if hops is None and isinstance(item.get("orig"), dict):
            hops = item["orig"].get("triples")
        if not isinstance(hops, list) or not hops:
            raise InputError(f"{where}: --format mquake needs 'single_hops' (or 'orig.triples') to count the hops")
        return _qa("Question: ", questions[0], "\nAnswer: ", answer, len(hops))
    if fmt == "math":
        problem = _string(_field(item, ("problem",), fmt, where), "problem", fmt, where)
        solution = _string(_field(item, ("solution",), fmt, where), "solution", fmt, where)
        raw = _field(item, ("level",), fmt, where)
        text = str(raw).strip()
        digits = text[len("Level"):].strip() if text.startswith("Level") else text
        if isinstance(raw, bool) or not digits.isdigit() or not 1 <= int(digits) <= 5:
            raise InputError(f"{where}: --format math needs 'level' like \"Level 3\" (1 to 5), got {raw!r}")
        return _qa("Problem: ", problem, "\nSolution: ", solution, int(digits))
    if fmt == "hellaswag":
        ctx = _string(_field(item, ("ctx",), fmt, where), "ctx", fmt, where)
        endings = _field(item, ("endings",), fmt, where)
        label = _field(item, ("label",), fmt, where)
        ok = isinstance(endings, list) and str(label).strip().isdigit() and not isinstance(label, bool)
        if not ok or not int(label) < len(endings) or not isinstance(endings[int(label)], str):
            raise InputError(f"{where}: --format hellaswag needs 'endings' (a list of strings) and 'label' (the gold "
                             f"ending's index), got label {label!r}; a test split without labels cannot be used")
        return Item(f"{ctx} {endings[int(label)]}", len(ctx) + 1)
    if fmt == "aime":
        problem = _string(_field(item, ("Problem", "problem"), fmt, where), "problem", fmt, where)
        answer = _string(_field(item, ("Answer", "answer"), fmt, where), "answer", fmt, where)
        return _qa("Problem: ", problem, "\nAnswer: ", answer)
    raise InputError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")


def arithmetic_problem(op: str, a: int, b: int) -> Item:
    """The prompt of one generated problem: "{a} + {b} = {a+b}" or "{a} * {b} = {a*b}"."""
    value = a + b if op == "+" else a * b
    return _qa(f"{a} {op} ", str(b), " = ", str(value))


def generated_format(fmt: str) -> tuple[str, int, int] | None:
    """(operator, digits, seed) of `addition:N[:SEED]` / `multiplication:N[:SEED]`; None for
    any other format. A malformed one is an InputError naming it."""
    name, sep, rest = fmt.partition(":")
    if name not in GENERATED:
        return None
    parts = rest.split(":") if sep else []
    ok = len(parts) in (1, 2) and all(p.isdigit() for p in parts) and 1 <= int(parts[0]) <= MAX_DIGITS
    if not ok:
        raise InputError(f"--format {fmt!r}: write {name}:N or {name}:N:SEED with N digits from 1 to {MAX_DIGITS} "
                         f"and a seed >= 0, e.g. {name}:3")
    return GENERATED[name], int(parts[0]), int(parts[1]) if len(parts) == 2 else 0


def _generated_items(spec: CorpusSpec) -> Iterator[Item]:
    op, n, seed = generated_format(spec.fmt)
    lo, hi = (0 if n == 1 else 10 ** (n - 1)), 10 ** n  # N-digit integers, [lo, hi)
    rng = np.random.default_rng([seed, n])
    for _ in range(spec.max_docs if spec.max_docs is not None else GENERATED_COUNT):
        a, b = (int(x) for x in rng.integers(lo, hi, size=2))
        item = arithmetic_problem(op, a, b)
        yield Item(item.text, item.answer_start, n)


def _jsonl_items(path: str, lines: Iterator[str], spec: CorpusSpec) -> Iterator[Item]:
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        where = f"{path} line {i + 1}"
        try:
            item = json.loads(line)
        except ValueError as e:
            raise InputError(f"{where} is not valid JSON ({e.msg}): each line must be one JSON object") from None
        if spec.fmt in JSON_FORMATS:
            yield _format_item(spec.fmt, item, where)
            continue
        if not isinstance(item, dict) or spec.text_field not in item:
            raise InputError(f"{where} has no field {spec.text_field!r}: pass --text-field NAME")
        value = item[spec.text_field]
        if not isinstance(value, str):
            raise InputError(f"{where}: field {spec.text_field!r} is {type(value).__name__}, not a string")
        yield Item(value)


def _dataset_items(spec: CorpusSpec) -> Iterator[Item]:
    parts = spec.dataset.split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise InputError(f"--dataset {spec.dataset!r} must be NAME:SPLIT or NAME:CONFIG:SPLIT")
    name, config, split = (parts[0], None, parts[1]) if len(parts) == 2 else parts
    try:
        import datasets  # noqa: F401
    except ImportError:
        raise InputError("--dataset needs the `datasets` package: pip install 'align[datasets]', or export the data to jsonl") from None
    try:
        ds = datasets.load_dataset(name, config, split=split)
    except Exception as e:  # datasets raises many types for unreachable data
        raise InputError(f"--dataset {spec.dataset!r} could not be loaded: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    for i, item in enumerate(ds):
        if spec.fmt in JSON_FORMATS:
            yield _format_item(spec.fmt, item, f"{spec.dataset} item {i}")
        else:
            if spec.text_field not in item:
                raise InputError(f"{spec.dataset} item {i} has no field {spec.text_field!r}: pass --text-field NAME")
            yield Item(item[spec.text_field])


def _source_files(spec: CorpusSpec) -> list[str]:
    path = spec.path
    if not os.path.exists(path):
        raise InputError(f"corpus {path} does not exist")
    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".txt"))
        if not files:
            raise InputError(f"corpus folder {path} holds no .txt files")
        return files
    if not path.endswith((".txt", ".jsonl")):
        raise InputError(f"corpus {path} is neither a .txt nor a .jsonl file nor a folder of .txt files")
    return [path]


def validate(spec: CorpusSpec) -> None:
    """Check the spec's options before any work (the CLI's bad-option errors)."""
    generated = generated_format(spec.fmt)
    if generated is None and spec.fmt not in FORMATS[:-2]:
        raise InputError(f"--format {spec.fmt!r} is not one of {', '.join(FORMATS)}")
    if spec.overflow not in OVERFLOWS:
        raise InputError(f"--overflow {spec.overflow!r} is not one of {', '.join(OVERFLOWS)}")
    if spec.doc_split is not None and spec.doc_split not in DOC_SPLITS:
        raise InputError(f"--doc-split {spec.doc_split!r} is not one of {', '.join(DOC_SPLITS)}")
    if spec.max_length < 2:
        raise InputError(f"--max-length {spec.max_length} is too small: it must be at least 2")
    if spec.max_tokens is not None and spec.max_tokens < 1:
        raise InputError(f"--max-tokens {spec.max_tokens} must be positive")
    _validate_protocol(spec)
    if generated is not None:
        if spec.path is not None or spec.dataset is not None:
            raise InputError(f"--format {spec.fmt} generates its problems: give no CORPUS or --dataset with it")
        return
    if (spec.path is None) == (spec.dataset is None):
        raise InputError("give a CORPUS path, --dataset NAME[:CONFIG]:SPLIT or a generated --format (addition:N, "
                         "multiplication:N)" if spec.path is None else
                         f"give either a CORPUS path ({spec.path}) or --dataset {spec.dataset}, not both")
    if spec.fmt in JSON_FORMATS and spec.path is not None and not spec.path.endswith(".jsonl"):
        raise InputError(f"--format {spec.fmt} needs a .jsonl file in that data set's field layout, not {spec.path}")


def _validate_protocol(spec: CorpusSpec) -> None:
    """The options of P1's protocol (module docstring), before any work."""
    if spec.stand_in_token is not None and (isinstance(spec.stand_in_token, bool) or not isinstance(
            spec.stand_in_token, (int, np.integer)) or spec.stand_in_token < 0):
        raise InputError(f"--stand-in-token {spec.stand_in_token!r} must be a token id (a whole number >= 0), e.g. 0")
    if spec.pack is None:
        return
    if not isinstance(spec.pack, str):
        raise InputError(f"--pack {spec.pack!r} must be a string (the separator's text), e.g. '\\n\\n'")
    if spec.fmt != "plain":
        raise InputError(f"--pack joins plain documents into windows; --format {spec.fmt} makes one prompt per "
                         "sequence: drop --pack or --format")
    if spec.overflow != "split":
        raise InputError(f"--pack cuts the joined documents into consecutive full windows; --overflow {spec.overflow} "
                         "does not apply: drop --overflow")
    if spec.max_tokens is not None and spec.max_tokens < spec.max_length:
        raise InputError(f"--max-tokens {spec.max_tokens} is less than one packed window of --max-length "
                         f"{spec.max_length}: --pack keeps whole windows only")


def check_stand_in(spec: CorpusSpec, vocab_size) -> None:
    """A stand-in token must be one of the model's `vocab_size` ids (its config's): a
    one-line InputError naming both otherwise (checked before anything is tokenized)."""
    if spec.stand_in_token is not None and isinstance(vocab_size, int) and spec.stand_in_token >= vocab_size:
        raise InputError(f"--stand-in-token {spec.stand_in_token} is not a token id of this model (ids 0 to "
                         f"{vocab_size - 1:,}): P1 uses 0")


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
        nxt = text[i + 1:i + 2]
        if nxt not in ESCAPES:
            raise InputError(f"--pack {text!r}: unknown escape \\{nxt} at character {i}; write \\n, \\t, \\r, "
                             "or \\\\ for a backslash")
        out.append(ESCAPES[nxt])
        i += 2
    return "".join(out)


def items(spec: CorpusSpec, reading: Reading | None = None) -> Iterator[Item]:
    """The documents of a corpus with their answer start and level, in order (at most
    --max-docs); raises InputError for unreadable input. With `reading` (a `Reading` of
    `spec`), its files are read through it, so that its hash covers the bytes they came from."""
    validate(spec)
    own = None
    if generated_format(spec.fmt) is not None:
        it = _generated_items(spec)
    elif spec.dataset is not None:
        it = _dataset_items(spec)
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


def _file_items(spec: CorpusSpec, reading: Reading) -> Iterator[Item]:
    """The documents of the corpus's files (.jsonl lines, or .txt documents), read through `reading`."""
    for f, lines in reading.files():
        if f.endswith(".jsonl"):
            yield from _jsonl_items(f, lines, spec)
        else:
            how = spec.doc_split or ("file" if os.path.isdir(spec.path) else "blank")
            yield from (Item(d) for d in _text_docs(lines, how))


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
    levels = [] if spec.fmt in ("plain", "gsm8k") else sorted({x for x in document_levels(spec) if x is not None})
    return {"source": spec.describe(), "hash": hash or corpus_hash(spec), **spec.options(),
            **{k: getattr(spec, k) for k in PROTOCOL}, **({"levels": levels} if levels else {})}


def corpus_hash(spec: CorpusSpec) -> str:
    """sha256 of the source bytes (file names and contents in order) and the cutting options
    (`Reading`'s hash, of a read that decodes nothing). A generated format's problems follow
    from its options alone."""
    validate(spec)
    return Reading(spec).hexdigest()


class Reading:
    """One read of a corpus's files, each opened once: the text of its documents is decoded
    from exactly the bytes its hash covers (`items(spec, reading)`, `sequences(...,
    reading=)`), so a file replaced while align runs can never give tokens of one text and
    the hash of another.

    The hash is `corpus_hash`'s: sha256 of the options (JSON, sorted keys), then the data set
    name, or for each source file its name, a zero byte and its bytes. `hexdigest()` ends the
    read: the bytes not yet read (the rest of a file the documents stopped in, at --max-docs
    or --max-tokens, and the files after it) are read into the hash from the same handles."""

    def __init__(self, spec: CorpusSpec):
        self._h = hashlib.sha256(json.dumps(spec.options(), sort_keys=True).encode())
        self._paths: list[str] = []
        if spec.dataset is not None:
            self._h.update(spec.dataset.encode())
        elif spec.path is not None and generated_format(spec.fmt) is None:
            self._paths = _source_files(spec)
        self._begun = 0  # source files opened so far
        self._open = None  # (path, handle) of the file being read, where its reader stopped
        self._digest: str | None = None

    def files(self) -> Iterator[tuple[str, Iterator[str]]]:
        """(path, its lines) of each source file in order; each raw line enters the hash as it
        is read (`align.textfiles.lines`)."""
        while self._digest is None and self._begun < len(self._paths):
            path, f = self._begin()
            yield path, self._lines(path, f)

    def _begin(self):
        self._finish_open()
        path = self._paths[self._begun]
        self._begun += 1
        self._h.update(os.path.basename(path).encode() + b"\0")
        self._open = (path, textfiles.open_binary(path, "corpus file"))
        return self._open

    def _lines(self, path: str, f) -> Iterator[str]:
        yield from textfiles.lines(f, path, "corpus file", self._h)
        if self._open is not None and self._open[1] is f:
            self._open = None
            f.close()

    def _finish_open(self) -> None:
        if self._open is None:
            return
        path, f = self._open
        self._open = None
        with f:
            try:
                for block in iter(lambda: f.read(1 << 20), b""):
                    self._h.update(block)
            except OSError as e:
                raise InputError(f"cannot read corpus file {path}: {e.strerror or e}") from None

    def close(self) -> None:
        """Close the file being read, without reading the rest (no hash is asked for)."""
        if self._open is not None:
            self._open[1].close()
            self._open = None

    def hexdigest(self) -> str:
        """The corpus hash of this read, its unread bytes read into it first (once)."""
        if self._digest is None:
            self._finish_open()
            while self._begun < len(self._paths):
                self._begin()
                self._finish_open()
            self._digest = self._h.hexdigest()
        return self._digest

    def check(self, spec: CorpusSpec, recorded: str,
              advice: str = "keep it unchanged while align runs, then run again") -> None:
        """Refuse this read (InputError, one line ending in `advice`) when its hash is not
        `recorded`, the hash taken earlier in the same run: the corpus changed while align
        was reading it."""
        now = self.hexdigest()
        if now != recorded:
            raise InputError(f"corpus {spec.describe()} changed while align read it (sha256 {recorded[:12]}… when the "
                             f"run began, {now[:12]}… now): {advice}")


# ---------------------------------------------------------------------------- tokenizing


def special_tokens(tokenizer) -> tuple[list[int], list[int]]:
    """The ids the tokenizer adds before and after a text (Llama: [BOS], []; Qwen: [], [])."""
    probe = "a b"
    plain = tokenizer(probe, add_special_tokens=False)["input_ids"]
    full = tokenizer(probe, add_special_tokens=True)["input_ids"]
    for k in range(len(full) - len(plain) + 1):
        if full[k:k + len(plain)] == plain:
            return list(full[:k]), list(full[k + len(plain):])
    return [], []


@dataclass
class TokenizeStats:
    """What tokenizing changed in the documents it read (see the module docstring)."""

    dropped_characters: int = 0
    documents_with_dropped_characters: int = 0
    first_dropped: list = field(default_factory=list)  # up to 5 [doc, n_dropped]
    special_token_text: int = 0  # occurrences of literal special-token text parsed as special tokens
    first_special: list | None = None  # [doc, text] of the first occurrence
    over_format_limit: int = 0  # documents longer than their format allows (aime: 400 tokens), left out
    packed_tail_tokens: int | None = None  # packed: tokens after the last full window, left out

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        if not d["over_format_limit"]:
            d.pop("over_format_limit")  # absent unless a format limits length: older stores read the same
        if d["packed_tail_tokens"] is None:
            d.pop("packed_tail_tokens")  # absent unless packed
        return d

    def add(self, doc: int, text: str, ids: np.ndarray, offs: np.ndarray, special: np.ndarray,
            compose: str | None = None) -> None:
        n = uncovered_characters(text, offs, compose)
        if n:
            self.dropped_characters += n
            self.documents_with_dropped_characters += 1
            if len(self.first_dropped) < 5:
                self.first_dropped.append([doc, n])
        if len(ids) and len(special):
            hit = np.flatnonzero(np.isin(ids, special) & (offs[:, 1] > offs[:, 0]))
            if len(hit):
                self.special_token_text += len(hit)
                if self.first_special is None:
                    k = hit[0]
                    self.first_special = [doc, text[offs[k, 0]:offs[k, 1]]]


# str.isspace() is true exactly for these code points.
_WHITESPACE = np.array([c for c in range(0x3001) if chr(c).isspace()], np.uint32)


def uncovered_characters(text: str, offsets: np.ndarray, compose: str | None = None) -> int:
    """Non-whitespace characters of `text` inside no token's character span [start, end), less
    those the normalization `compose` ("NFC" or "NFKC": the tokenizer's, `composing_form`)
    merges into the characters before them.

    offsets: (n_tokens, 2) character offsets into `text`, as fast tokenizers return them. For
    each run of uncovered characters [a, b) after the starter s before it, the characters merged
    are |N(text[s:a])| + |N(text[a:b])| - |N(text[s:b])|, N the normalization: `tokenizers` aligns
    a composed character with its first original character only."""
    if not text:
        return 0
    edges = np.zeros(len(text) + 1, np.int64)
    spans = offsets[offsets[:, 1] > offsets[:, 0]] if len(offsets) else np.zeros((0, 2), np.int64)
    np.add.at(edges, spans[:, 0], 1)
    np.add.at(edges, spans[:, 1], -1)
    uncovered = np.cumsum(edges[:-1]) <= 0
    if not uncovered.any():
        return 0
    codes = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    lost = uncovered & ~np.isin(codes, _WHITESPACE)
    n = int(np.count_nonzero(lost))
    if compose is None or not n:
        return n
    flips = np.flatnonzero(np.diff(np.r_[0, uncovered.astype(np.int8), 0]))
    for a, b in zip(flips[::2], flips[1::2]):
        s = a - 1  # the starter the run's marks may compose with (a run of marks goes back to it)
        while s > 0 and unicodedata.combining(text[s]) and a - s < 32:
            s -= 1
        if s < 0:
            continue
        size = lambda t: len(unicodedata.normalize(compose, t))  # noqa: E731
        merged = size(text[s:a]) + size(text[a:b]) - size(text[s:b])
        n -= min(max(merged, 0), int(np.count_nonzero(lost[a:b])))
    return n


def composing_form(tokenizer) -> str | None:
    """The composing Unicode normalization ("NFC" or "NFKC") the tokenizer's normalizer
    applies (the last one in a Sequence), or None."""
    normalizer = getattr(getattr(tokenizer, "backend_tokenizer", None), "normalizer", None)
    if normalizer is None:
        return None
    form = None
    todo = [json.loads(normalizer.__getstate__())]
    while todo:
        step = todo.pop(0)
        if step.get("type") in ("NFC", "NFKC", "NFD", "NFKD"):
            form = step["type"] if step["type"] in ("NFC", "NFKC") else None
        todo[:0] = step.get("normalizers") or []
    return form


def special_ids(tokenizer) -> np.ndarray:
    """Ids of the tokenizer's special tokens (named ones and added tokens marked special)."""
    ids = set(getattr(tokenizer, "all_special_ids", None) or [])
    for i, t in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
        if getattr(t, "special", False):
            ids.add(int(i))
    return np.asarray(sorted(ids), np.int64)


def sequences(spec: CorpusSpec, tokenizer, stats: TokenizeStats | None = None,
              reading: Reading | None = None) -> Iterator[Sequence]:
    """Tokenized sequences in corpus order, at most `spec.max_tokens` tokens in all: one
    document per sequence, or documents packed into full windows (`spec.pack`), each with the
    stand-in first token where `spec.stand_in_token` asks (module docstring). With `stats`,
    counts what tokenizing dropped or parsed as special tokens in each document read. With
    `reading` (a `Reading` of `spec`), the files are read through it: its `hexdigest()` is
    the hash of the bytes these tokens came from."""
    prefix, suffix = special_tokens(tokenizer)
    if spec.stand_in_token is not None:
        if prefix:
            raise InputError(f"--stand-in-token {spec.stand_in_token}: this model's tokenizer already puts {prefix} "
                             "(its BOS) at position 0 of every sequence, which the fit leaves out: drop --stand-in-token")
        prefix = [int(spec.stand_in_token)]
    room = spec.max_length - len(prefix) - len(suffix)
    if room < 1:
        raise InputError(f"--max-length {spec.max_length} leaves no room after the {len(prefix) + len(suffix)} special "
                         "token(s) of each sequence")
    wrap = _Wrap(np.asarray(prefix, np.int64), np.asarray(suffix, np.int64))
    encoded = _encoded(spec, tokenizer, stats, len(prefix) + len(suffix), reading)
    if spec.pack is None:
        yield from _document_windows(spec, encoded, room, wrap)
    else:
        separator = np.asarray(tokenizer(spec.pack, add_special_tokens=False)["input_ids"], np.int64)
        yield from _packed_windows(spec, encoded, room, wrap, separator, stats)


@dataclass(frozen=True)
class _Wrap:
    """The special tokens put around each window's tokens (the stand-in is a prefix)."""

    pre: np.ndarray
    suf: np.ndarray

    def sequence(self, ids, cs, ce, docs, seq: int, level=None, budget: int | None = None) -> Sequence:
        """A Sequence of `ids` (with char spans `cs`, `ce` and documents `docs`) wrapped in the
        prefix and suffix (char spans -1; documents of the first and last token), cut to
        `budget` tokens."""
        np_, ns = len(self.pre), len(self.suf)
        pad = lambda k: np.full(k, -1, np.int64)  # noqa: E731
        tok = np.concatenate([self.pre, ids, self.suf])
        cs = np.concatenate([pad(np_), cs, pad(ns)])
        ce = np.concatenate([pad(np_), ce, pad(ns)])
        docs = np.concatenate([np.full(np_, docs[0], np.int64), docs, np.full(ns, docs[-1], np.int64)])
        if budget is not None:
            tok, cs, ce, docs = tok[:budget], cs[:budget], ce[:budget], docs[:budget]
        several = len(docs) and docs[0] != docs[-1]
        return Sequence(tok.astype(np.int32), int(docs[0]), seq, cs, ce, level, docs if several else None)


def _encoded(spec: CorpusSpec, tokenizer, stats: TokenizeStats | None, n_special: int, reading: Reading | None):
    """(doc, item, ids, offsets) of every document that gives tokens, in corpus order (a
    format's over-long prompt left out and counted)."""
    special = special_ids(tokenizer) if stats is not None else None
    compose = composing_form(tokenizer) if stats is not None else None
    for doc, item in enumerate(items(spec, reading)):
        text = item.text
        if not text:
            continue
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = np.asarray(enc["input_ids"], np.int64)
        offs = np.asarray(enc["offset_mapping"], np.int64).reshape(-1, 2)
        if spec.fmt == "aime" and n_special + len(ids) > AIME_MAX_TOKENS:
            if stats is not None:
                stats.over_format_limit += 1
            continue
        if stats is not None:
            stats.add(doc, text, ids, offs, special, compose)
        if len(ids):
            yield doc, item, ids, offs


def _document_windows(spec: CorpusSpec, encoded, room: int, wrap: _Wrap) -> Iterator[Sequence]:
    """One document per sequence: each cut into windows of `room` tokens (all of them, or the
    first with overflow="truncate"), the last sequence cut to --max-tokens."""
    budget = spec.max_tokens
    seq = 0
    for doc, item, ids, offs in encoded:
        starts = range(0, len(ids), room) if spec.overflow == "split" else [0]
        for s in starts:
            if budget is not None and budget <= 0:
                return
            body = slice(s, s + room)
            sq = wrap.sequence(ids[body], offs[body, 0], offs[body, 1], np.full(len(ids[body]), doc, np.int64), seq,
                               item.level, budget)
            if budget is not None:
                budget -= len(sq)
            yield sq
            seq += 1
        if budget is not None and budget <= 0:
            return  # the next document is not read (nor counted)


def _packed_windows(spec: CorpusSpec, encoded, room: int, wrap: _Wrap, separator: np.ndarray,
                    stats: TokenizeStats | None) -> Iterator[Sequence]:
    """Documents joined by `separator` (its tokens in the document before it, char spans -1)
    cut into full windows of `room` tokens; the last partial window left out and counted;
    with --max-tokens, whole windows only."""
    windows = None if spec.max_tokens is None else spec.max_tokens // spec.max_length
    if stats is not None:
        stats.packed_tail_tokens = 0
    parts: list = []  # (ids, char_start, char_end, docs) not yet in a window
    held = seq = 0
    previous = None
    for doc, _, ids, offs in encoded:
        if previous is not None and len(separator):
            none = np.full(len(separator), -1, np.int64)
            parts.append((separator, none, none, np.full(len(separator), previous, np.int64)))
            held += len(separator)
        parts.append((ids, offs[:, 0], offs[:, 1], np.full(len(ids), doc, np.int64)))
        held += len(ids)
        previous = doc
        while held >= room:
            joined = parts[0] if len(parts) == 1 else tuple(np.concatenate(col) for col in zip(*parts))
            yield wrap.sequence(*(c[:room] for c in joined), seq)
            seq += 1
            held -= room
            parts = [tuple(c[room:] for c in joined)] if held else []
            if windows is not None and seq >= windows:
                return
    if stats is not None:
        stats.packed_tail_tokens = held
    if seq == 0:
        raise InputError(f"--pack: corpus {spec.describe()} gives {held:,} tokens, less than one full window of "
                         f"{room:,} (--max-length {spec.max_length} less the special tokens): give more text or a "
                         "smaller --max-length")


def tokenizer_hashes(tokenizer) -> dict[str, str]:
    """Hashes of the tokenizer's behaviour: its vocabulary, merges, added tokens, and how it
    wraps a text (special tokens), each separately so a mismatch can say what differs."""
    def digest(obj) -> str:
        return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()

    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    model = spec.get("model", {})
    added = sorted((t.get("id"), t.get("content"), t.get("special")) for t in spec.get("added_tokens", []))
    prefix, suffix = special_tokens(tokenizer)
    out = {
        "vocab": digest(model.get("vocab")),
        "merges": digest(model.get("merges")),
        "added_tokens": digest(added),
        "normalizer_pretokenizer": digest([spec.get("normalizer"), spec.get("pre_tokenizer")]),
        "special_wrapping": digest([prefix, suffix]),
    }
    out["all"] = digest(out)
    return out
