"""A text file that is not UTF-8 is one line through the CLI, the same for every reader of
text: corpora (.txt, .jsonl, a folder), the prompt and answer files of `align erase` and
`align igrad`, erase's reference corpus, and a model folder's config.json, tokenizer.json and
tokenizer_config.json. The line names the file, the first byte that is not UTF-8, its offset
from the file's start and its line; the offsets are found here in the bytes the test wrote."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers.assertions import one_line_error

LATIN1 = "café au lait".encode("latin-1")  # é is byte 0xe9, not UTF-8


def expected(what: str, path, raw: bytes) -> str:
    """The one message, from the bytes of the file: the first 0xe9, its offset and line."""
    at = raw.index(b"\xe9")
    line = raw.count(b"\n", 0, at) + 1
    return (
        f"{what} {path} is not UTF-8 (byte 0xe9 at offset {at:,}, line {line}): convert it to UTF-8, "
        "e.g. iconv -f latin1 -t utf-8"
    )


def write(path, raw: bytes):
    path.write_bytes(raw)
    return path


def jsonl(*rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")


@pytest.fixture
def good_prompts(tmp_path):
    return write(
        tmp_path / "good.jsonl", jsonl({"text": "the model reads every layer =", "answer": " 19"})
    )


def corpus_case(tmp_path, kind):
    """(CORPUS argument, the file that is not UTF-8, its bytes) of each corpus kind."""
    if kind == "txt":
        raw = b"first document here\n\nsecond one, " + LATIN1 + b"\n"
        p = write(tmp_path / "docs.txt", raw)
        return p, p, raw
    if kind == "jsonl":
        raw = jsonl({"text": "fine"}, {"text": "also fine"}) + b'{"text": "' + LATIN1 + b'"}\n'
        p = write(tmp_path / "docs.jsonl", raw)
        return p, p, raw
    folder = tmp_path / "docs"
    folder.mkdir()
    write(folder / "a.txt", b"the first file is fine\n")
    raw = b"the second file\nis " + LATIN1 + b"\n"
    return folder, write(folder / "b.txt", raw), raw


@pytest.mark.parametrize("kind", ["txt", "jsonl", "folder"])
def test_extract_names_a_corpus_file_that_is_not_utf8(cli, zoo, tmp_path, kind):
    corpus, bad, raw = corpus_case(tmp_path, kind)
    out = tmp_path / "o.zarr"
    code, _, err = cli("extract", zoo("qwen2"), corpus, "-o", out)
    one_line_error(code, err, expected("corpus file", bad, raw))
    assert not out.exists()


@pytest.mark.parametrize(
    "filename,what",
    [
        ("config.json", "model config"),
        ("tokenizer.json", "tokenizer file"),
        ("tokenizer_config.json", "tokenizer file"),
    ],
)
def test_extract_names_a_model_file_that_is_not_utf8(
    cli, zoo, corpus_file, tmp_path, filename, what
):
    """One byte 0xe9 put inside the first string value of the file (the JSON stays well formed
    but for its encoding): the loaders used to say "not a valid JSON file", "stream did not
    contain valid UTF-8" or the codec's own words, with no offset."""
    model = tmp_path / "model"
    shutil.copytree(zoo("qwen2"), model)
    good = (model / filename).read_bytes()
    k = good.index(b'": "') + 4
    raw = good[:k] + b"\xe9" + good[k:]
    write(model / filename, raw)
    out = tmp_path / "o.zarr"
    code, _, err = cli("extract", model, corpus_file, "-o", out)
    one_line_error(code, err, expected(what, model / filename, raw))
    assert not out.exists()


def test_erase_names_a_prompt_file_that_is_not_utf8(cli, zoo, corpus_file, tmp_path):
    """An --answer-field prompt file (.jsonl) with a latin-1 line: it used to end with
    "internal error: UnicodeDecodeError"."""
    raw = (
        jsonl({"text": "the model reads every layer =", "answer": " 19"})
        + b'{"text": "'
        + LATIN1
        + b' =", "answer": " 7"}\n'
    )
    prompts = write(tmp_path / "p.jsonl", raw)
    out = tmp_path / "e.zarr"
    code, _, err = cli("erase", zoo("qwen2"), prompts, "--reference", corpus_file, "-o", out)
    one_line_error(code, err, expected("corpus file", prompts, raw))
    assert not out.exists()


@pytest.mark.parametrize("how", ["answer-field", "answer-marker"])
def test_igrad_names_a_prompt_file_that_is_not_utf8(cli, zoo, tmp_path, how):
    if how == "answer-field":
        raw = b'{"text": "' + LATIN1 + b' =", "answer": " 7"}\n'
        prompts, extra = write(tmp_path / "p.jsonl", raw), ()
    else:
        raw = b"the model reads every layer = 19\n\n" + LATIN1 + b" = 7\n"
        prompts, extra = write(tmp_path / "p.txt", raw), ("--answer-marker", "=")
    out = tmp_path / "g.zarr"
    code, _, err = cli("igrad", zoo("qwen2"), prompts, *extra, "--steps", 2, "-o", out)
    one_line_error(code, err, expected("corpus file", prompts, raw))
    assert not out.exists()


def test_erase_names_a_reference_corpus_that_is_not_utf8(cli, zoo, good_prompts, tmp_path):
    raw = b"the first reference document\n\nthe second, " + LATIN1 + b"\n"
    reference = write(tmp_path / "ref.txt", raw)
    out = tmp_path / "e.zarr"
    code, _, err = cli(
        "erase",
        zoo("qwen2"),
        good_prompts,
        "--reference",
        reference,
        "--reference-docs",
        2,
        "-o",
        out,
    )
    one_line_error(code, err, expected("corpus file", reference, raw))
    assert not out.exists()
