"""The documents of each kind of source: a .txt file's blocks, lines or whole text, a .jsonl
file's lines (a text field or a task format), a `datasets` split, and the files a corpus path
names."""

from __future__ import annotations

import json
import os
from typing import Iterator

from align.corpus.formats import JSON_FORMATS, Item, format_item
from align.corpus.spec import CorpusSpec
from align.errors import InputError


def text_documents(lines: Iterator[str], how: str) -> Iterator[str]:
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


def json_lines(path: str, lines: Iterator[str]) -> Iterator[tuple[str, object]]:
    """(where, value) of each non-blank line of a .jsonl file's `lines`, parsed: the one JSONL
    reader of corpora and prompt files. `where` ("PATH line N") names the line in messages; a
    line that is not JSON is refused in one line naming it."""
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        where = f"{path} line {i + 1}"
        try:
            yield where, json.loads(line)
        except ValueError as e:
            raise InputError(
                f"{where} is not valid JSON ({e.msg}): each line must be one JSON object"
            ) from None


def jsonl_items(path: str, lines: Iterator[str], spec: CorpusSpec) -> Iterator[Item]:
    """The documents of a .jsonl file's `lines` (`path` names it in messages): a task format's
    prompts, or the text in `spec.text_field`; blank lines are skipped."""
    for where, item in json_lines(path, lines):
        if spec.fmt in JSON_FORMATS:
            yield format_item(spec.fmt, item, where)
            continue
        if not isinstance(item, dict) or spec.text_field not in item:
            raise InputError(f"{where} has no field {spec.text_field!r}: pass `text_field` NAME")
        value = item[spec.text_field]
        if not isinstance(value, str):
            raise InputError(
                f"{where}: field {spec.text_field!r} is {type(value).__name__}, not a string"
            )
        yield Item(value)


def dataset_items(spec: CorpusSpec) -> Iterator[Item]:
    """The documents of the `datasets` split `spec.dataset` (NAME[:CONFIG]:SPLIT): a task
    format's prompts, or the text in `spec.text_field`."""
    parts = spec.dataset.split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise InputError(f"`dataset` {spec.dataset!r} must be NAME:SPLIT or NAME:CONFIG:SPLIT")
    name, config, split = (parts[0], None, parts[1]) if len(parts) == 2 else parts
    try:
        import datasets  # noqa: F401
    except ImportError:
        raise InputError(
            "`dataset` needs the `datasets` package: pip install 'align-depth[datasets]', or export the data to jsonl"
        ) from None
    try:
        ds = datasets.load_dataset(name, config, split=split)
    except Exception as e:  # datasets raises many types for unreachable data
        raise InputError(
            f"`dataset` {spec.dataset!r} could not be loaded: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        ) from None
    for i, item in enumerate(ds):
        if spec.fmt in JSON_FORMATS:
            yield format_item(spec.fmt, item, f"{spec.dataset} item {i}")
        else:
            if spec.text_field not in item:
                raise InputError(
                    f"{spec.dataset} item {i} has no field {spec.text_field!r}: pass `text_field` NAME"
                )
            yield Item(item[spec.text_field])


def source_files(spec: CorpusSpec) -> list[str]:
    """The files a corpus path names: the file itself, or a folder's .txt files in sorted name
    order; a one-line InputError for a missing path, an empty folder or another file type."""
    path = spec.path
    if not os.path.exists(path):
        raise InputError(f"corpus {path} does not exist")
    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".txt"))
        if not files:
            raise InputError(f"corpus folder {path} holds no .txt files")
        return files
    if not path.endswith((".txt", ".jsonl")):
        raise InputError(
            f"corpus {path} is neither a .txt nor a .jsonl file nor a folder of .txt files"
        )
    return [path]
