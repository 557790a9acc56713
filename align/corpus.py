"""Text sources → tokenized sequences with document ids, positions and character spans.

Sources (`CorpusSpec`):
- a `.txt` file: documents are separated by blank lines (`doc_split="blank"`), or one per
  line (`"line"`), or the whole file is one document (`"file"`);
- a `.jsonl` file: one document per line, text in `text_field` (default `text`);
- a folder of `.txt` files: one document per file, in sorted name order;
- `dataset="NAME[:CONFIG]:SPLIT"`: a split of a `datasets` data set (when installed and
  reachable);
- `fmt="gsm8k"` on a GSM8K-shaped jsonl (`question`/`answer`): the prompts of METHODS.md.

Sequences: each document is tokenized whole (no special tokens), then cut into windows of at
most `max_length` tokens including the special tokens the tokenizer adds (Llama's BOS,
recorded in the store); `overflow="split"` (default) keeps every window, `"truncate"` only the
first. Documents with no tokens are skipped (their index is still consumed, so `doc` always
points back to the source). Special tokens have char_start = char_end = -1.

What tokenizing changes in the text is counted (`TokenizeStats`), never silent:
- characters outside the tokenizer's vocabulary that it drops (a tokenizer without byte
  fallback or an unknown token drops them: a document of emoji becomes no tokens at all) are
  the non-whitespace characters covered by no token's character span. Whitespace is not
  counted: byte-level tokenizers that trim offsets leave the space a token carries outside
  its span, so an uncovered space is no evidence of loss.
- literal special-token text in a document ("<|endoftext|>", "<s>") is parsed as the special
  token, as the model's own tokenizer does by default (and as a chat template relies on):
  align keeps that behaviour, so its token ids equal the tokenizer's, and counts and reports
  each occurrence (a token id among the special ones with a non-empty character span).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from align.errors import InputError

GSM8K_INSTRUCTION = (
    "Given the following problem, reason and give a final answer to the problem.\n"
    "Problem: {question}\n"
    'Your response should end with "The final answer is [answer]" where [answer] is the response to the problem.'
)
DOC_SPLITS = ("blank", "line", "file")
OVERFLOWS = ("split", "truncate")
FORMATS = ("plain", "gsm8k")


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

    def describe(self) -> str:
        return self.dataset and f"dataset {self.dataset}" or str(self.path)

    def options(self) -> dict:
        d = dict(self.__dict__)
        d.pop("path")
        return d


@dataclass
class Sequence:
    """One model input: token ids and, per token, its document, position and char span."""

    token_id: np.ndarray  # (n,) int
    doc: int
    seq: int
    char_start: np.ndarray  # (n,) int, -1 for special tokens
    char_end: np.ndarray

    def __len__(self) -> int:
        return len(self.token_id)

    def fields(self) -> dict[str, np.ndarray]:
        n = len(self)
        return {
            "token_id": self.token_id,
            "doc": np.full(n, self.doc, np.int64),
            "seq": np.full(n, self.seq, np.int64),
            "pos": np.arange(n, dtype=np.int32),
            "char_start": self.char_start,
            "char_end": self.char_end,
        }


# ------------------------------------------------------------------------------- sources


def _lines(path: str) -> Iterator[str]:
    """The lines of a UTF-8 file without their line ends, streamed (memory stays flat)."""
    try:
        f = open(path, "rb")
    except IsADirectoryError:
        raise InputError(f"corpus file {path} is a folder, not a file") from None
    except OSError as e:
        raise InputError(f"cannot read corpus file {path}: {e.strerror or e}") from None
    with f:
        offset = 0
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(
                    f"corpus file {path} is not UTF-8 (byte 0x{raw[e.start]:02x} at offset {offset + e.start}, "
                    f"line {number}): convert it to UTF-8"
                ) from None
            offset += len(raw)
            yield line.rstrip("\r\n") if line.endswith("\n") else line


def _text_docs(path: str, how: str) -> Iterator[str]:
    """Documents of a .txt file: the whole file, each line, or blocks between blank lines."""
    if how == "file":
        yield "\n".join(_lines(path))
        return
    if how == "line":
        yield from _lines(path)
        return
    cur: list[str] = []
    for line in _lines(path):
        if line.strip():
            cur.append(line)
        elif cur:
            yield "\n".join(cur)
            cur = []
    if cur:
        yield "\n".join(cur)


def _gsm8k_prompt(item: dict, where: str) -> str:
    try:
        question, answer = item["question"], item["answer"]
    except (KeyError, TypeError):
        raise InputError(f"{where}: --format gsm8k needs 'question' and 'answer' fields") from None
    if not isinstance(question, str) or not isinstance(answer, str) or "####" not in answer:
        raise InputError(f"{where}: a GSM8K answer must be a string containing '#### <final answer>'")
    reasoning, _, final = answer.partition("####")
    if reasoning and not reasoning.endswith("\n"):
        reasoning += "\n"
    return GSM8K_INSTRUCTION.format(question=question) + "\n\n" + reasoning + "The final answer is " + final.strip()


def _jsonl_docs(path: str, spec: CorpusSpec) -> Iterator[str]:
    for i, line in enumerate(_lines(path)):
        if not line.strip():
            continue
        where = f"{path} line {i + 1}"
        try:
            item = json.loads(line)
        except ValueError as e:
            raise InputError(f"{where} is not valid JSON ({e.msg}): each line must be one JSON object") from None
        if spec.fmt == "gsm8k":
            yield _gsm8k_prompt(item, where)
            continue
        if not isinstance(item, dict) or spec.text_field not in item:
            raise InputError(f"{where} has no field {spec.text_field!r}: pass --text-field NAME")
        value = item[spec.text_field]
        if not isinstance(value, str):
            raise InputError(f"{where}: field {spec.text_field!r} is {type(value).__name__}, not a string")
        yield value


def _dataset_docs(spec: CorpusSpec) -> Iterator[str]:
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
        if spec.fmt == "gsm8k":
            yield _gsm8k_prompt(item, f"{spec.dataset} item {i}")
        else:
            if spec.text_field not in item:
                raise InputError(f"{spec.dataset} item {i} has no field {spec.text_field!r}: pass --text-field NAME")
            yield item[spec.text_field]


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
    if spec.fmt not in FORMATS:
        raise InputError(f"--format {spec.fmt!r} is not one of {', '.join(FORMATS)}")
    if spec.overflow not in OVERFLOWS:
        raise InputError(f"--overflow {spec.overflow!r} is not one of {', '.join(OVERFLOWS)}")
    if spec.doc_split is not None and spec.doc_split not in DOC_SPLITS:
        raise InputError(f"--doc-split {spec.doc_split!r} is not one of {', '.join(DOC_SPLITS)}")
    if spec.max_length < 2:
        raise InputError(f"--max-length {spec.max_length} is too small: it must be at least 2")
    if spec.max_tokens is not None and spec.max_tokens < 1:
        raise InputError(f"--max-tokens {spec.max_tokens} must be positive")
    if (spec.path is None) == (spec.dataset is None):
        raise InputError("give either a CORPUS path or --dataset NAME[:CONFIG]:SPLIT, not both or neither")
    if spec.fmt == "gsm8k" and spec.path is not None and not spec.path.endswith(".jsonl"):
        raise InputError(f"--format gsm8k needs a GSM8K-shaped .jsonl file, not {spec.path}")


def documents(spec: CorpusSpec) -> Iterator[str]:
    """The documents of a corpus, in order; raises InputError for unreadable input."""
    validate(spec)
    count = 0
    if spec.dataset is not None:
        it = _dataset_docs(spec)
    else:
        def files():
            for f in _source_files(spec):
                if f.endswith(".jsonl"):
                    yield from _jsonl_docs(f, spec)
                else:
                    how = spec.doc_split or ("file" if os.path.isdir(spec.path) else "blank")
                    yield from _text_docs(f, how)
        it = files()
    for d in it:
        if spec.max_docs is not None and count >= spec.max_docs:
            return
        count += 1
        yield d


def corpus_hash(spec: CorpusSpec) -> str:
    """sha256 of the source bytes (file names and contents in order) and the cutting options."""
    h = hashlib.sha256(json.dumps(spec.options(), sort_keys=True).encode())
    if spec.dataset is not None:
        h.update(spec.dataset.encode())
        return h.hexdigest()
    validate(spec)
    for f in _source_files(spec):
        h.update(os.path.basename(f).encode() + b"\0")
        try:
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        except OSError as e:
            raise InputError(f"cannot read corpus file {f}: {e.strerror or e}") from None
    return h.hexdigest()


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

    def to_json(self) -> dict:
        return dict(self.__dict__)

    def add(self, doc: int, text: str, ids: np.ndarray, offs: np.ndarray, special: np.ndarray) -> None:
        n = uncovered_characters(text, offs)
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


def uncovered_characters(text: str, offsets: np.ndarray) -> int:
    """Non-whitespace characters of `text` inside no token's character span [start, end).

    offsets: (n_tokens, 2) character offsets into `text`, as fast tokenizers return them."""
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
    return int(np.count_nonzero(uncovered & ~np.isin(codes, _WHITESPACE)))


def special_ids(tokenizer) -> np.ndarray:
    """Ids of the tokenizer's special tokens (named ones and added tokens marked special)."""
    ids = set(getattr(tokenizer, "all_special_ids", None) or [])
    for i, t in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
        if getattr(t, "special", False):
            ids.add(int(i))
    return np.asarray(sorted(ids), np.int64)


def sequences(spec: CorpusSpec, tokenizer, stats: TokenizeStats | None = None) -> Iterator[Sequence]:
    """Tokenized sequences in corpus order, at most `spec.max_tokens` tokens in all. With
    `stats`, counts what tokenizing dropped or parsed as special tokens in each document read."""
    prefix, suffix = special_tokens(tokenizer)
    room = spec.max_length - len(prefix) - len(suffix)
    if room < 1:
        raise InputError(f"--max-length {spec.max_length} leaves no room after the tokenizer's {len(prefix) + len(suffix)} special tokens")
    pre, suf = np.asarray(prefix, np.int64), np.asarray(suffix, np.int64)
    pad = lambda k: np.full(k, -1, np.int64)  # noqa: E731
    budget = spec.max_tokens
    special = special_ids(tokenizer) if stats is not None else None
    seq = 0
    for doc, text in enumerate(documents(spec)):
        if not text:
            continue
        if budget is not None and budget <= 0:
            return
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = np.asarray(enc["input_ids"], np.int64)
        offs = np.asarray(enc["offset_mapping"], np.int64).reshape(-1, 2)
        if stats is not None:
            stats.add(doc, text, ids, offs, special)
        if not len(ids):
            continue
        starts = range(0, len(ids), room) if spec.overflow == "split" else [0]
        for s in starts:
            body = slice(s, s + room)
            tok = np.concatenate([pre, ids[body], suf])
            cs = np.concatenate([pad(len(pre)), offs[body, 0], pad(len(suf))])
            ce = np.concatenate([pad(len(pre)), offs[body, 1], pad(len(suf))])
            if budget is not None:
                if budget <= 0:
                    return
                tok, cs, ce = tok[:budget], cs[:budget], ce[:budget]
                budget -= len(tok)
            yield Sequence(tok.astype(np.int32), doc, seq, cs, ce)
            seq += 1


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
