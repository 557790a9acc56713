"""The corpus hash a store or a result records describes the very text its tokens came from,
even when a corpus file is replaced while align runs.

Each test replaces a file of a folder corpus (os.replace of a new file, as an editor, rsync or
a sync client does) at a named moment of a run: right after one of the reads of the corpus
that the run makes, by wrapping the function that makes it. The expected hash is sha256
computed here over the bytes of the files (names and contents, in order, after the options
as JSON), never by align."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from tests.helpers.assertions import one_line_error

# One document per line of each file (--doc-split line), each with an answer after " =".
OLD = {
    "a.txt": "the model reads every layer = 19\nso we fit linear maps from each layer = 12\n"
    "a deeper network spreads the same computation = 7\n",
    "b.txt": "the shallow one finishes early in its depth = 3\nand we look at the errors of every map = 40\n"
    "each layer is a point of the residual stream = 8\n",
}
NEW_B = "another text entirely = 1\nwith other words in it = 2\nand a third line of it = 5\n"
OPTIONS = {
    "dataset": None,
    "text_field": "text",
    "fmt": "plain",
    "doc_split": "line",
    "max_length": 64,
    "overflow": "split",
    "max_tokens": None,
    "max_docs": None,
}  # CorpusSpec's recorded options
CORPUS_ARGS = ["--doc-split", "line", "--max-length", "64"]


def reference_hash(files: dict, options: dict = OPTIONS) -> str:
    """sha256 of the options (JSON, sorted keys), then each file's name, a zero byte and its
    bytes, in name order: the corpus hash, computed without align."""
    h = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name].encode("utf-8"))
    return h.hexdigest()


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    for name, text in OLD.items():
        (d / name).write_text(text, encoding="utf-8")
    return d


def replace_b(folder) -> None:
    tmp = folder / ".b.txt.new"
    tmp.write_text(NEW_B, encoding="utf-8")
    os.replace(tmp, folder / "b.txt")


def after(module, name: str, folder, monkeypatch) -> list:
    """Wrap module.name so that b.txt is replaced right after it returns; returns the list of
    calls made (so a test can check the moment was reached)."""
    real, calls = getattr(module, name), []

    def wrapped(*args, **kwargs):
        out = real(*args, **kwargs)
        if not calls:
            replace_b(folder)
        calls.append(name)
        return out

    monkeypatch.setattr(module, name, wrapped)
    return calls


@pytest.mark.parametrize("max_tokens", [None, 100])
def test_live_fit_records_the_hash_of_the_text_it_tokenized(
    zoo, folder, cli, tmp_path, monkeypatch, max_tokens
):
    """b.txt replaced right after --live has tokenized the corpus (its token table): the result
    records the hash of the old bytes, those its tokens came from (it used to hash the corpus
    again afterwards, recording the new text's hash). With --max-tokens 100 the tokens stop
    in b.txt's first line (a.txt's lines have 16, 23 and 34 tokens): the hash still covers
    every byte of both files, as a store's identity always has."""
    from align.fitting.live_route import pipeline as live
    from align.store import open_result

    calls = after(live, "token_table", folder, monkeypatch)
    out = tmp_path / "r.zarr"
    cut = ["--max-tokens", str(max_tokens)] if max_tokens else []
    code, _, err = cli(
        "fit",
        "--live",
        zoo("qwen2"),
        zoo("qwen2"),
        folder,
        "-o",
        out,
        *CORPUS_ARGS,
        *cut,
        "--bootstrap",
        "0",
    )
    assert code == 0, err
    assert calls == ["token_table"]
    attrs = open_result(str(out), "alignment").attrs
    assert (
        attrs["options"]["n_tokens"]["fit"]
        + attrs["options"]["n_tokens"]["validation"]
        + attrs["options"]["n_tokens"]["heldout"]
    ) < (100 if max_tokens else 10**6)
    for side in ("source", "target"):
        assert attrs[side]["corpus"]["hash"] == reference_hash(
            OLD, {**OPTIONS, "max_tokens": max_tokens}
        ), side
    assert reference_hash(OLD) != reference_hash({**OLD, "b.txt": NEW_B})


@pytest.mark.parametrize(
    "module,name", [("align.corpus", "corpus_hash"), ("align.extraction.plan", "count")]
)
def test_extract_refuses_a_corpus_replaced_between_its_reads(
    zoo, folder, cli, tmp_path, monkeypatch, module, name
):
    """b.txt replaced after the identity's hash (before the tokens are counted), or after the
    count (before the token table is written): the run stops in one line naming the corpus,
    and no complete store is left (it used to finish a store holding the tokens of the new
    text under the hash of the old)."""
    import importlib

    from align.store import open_activations

    calls = after(importlib.import_module(module), name, folder, monkeypatch)
    out = tmp_path / "s.zarr"
    code, _, err = cli("extract", zoo("qwen2"), folder, "-o", out, *CORPUS_ARGS)
    line = one_line_error(
        code,
        err,
        f"corpus {folder} changed while align read it",
        reference_hash(OLD)[:12],
        reference_hash({**OLD, "b.txt": NEW_B})[:12],
        progress=("align extract: ",),
    )
    assert calls == [name]
    if name == "corpus_hash":
        assert not out.exists()  # refused by the count, before the store is created
    else:
        assert f"the store {out} was left unfinished" in line
        assert not open_activations(str(out)).progress["complete"]


def test_contrib_records_the_hash_of_the_prompts_it_read(zoo, folder, cli, tmp_path, monkeypatch):
    """An analysis of a live model: b.txt replaced right after the prompts are tokenized; the
    result records the old bytes' hash."""
    from align.analyses import prompts
    from align.store import open_result

    calls = after(prompts, "load_prompts", folder, monkeypatch)
    out = tmp_path / "c.zarr"
    code, _, err = cli("contrib", zoo("qwen2"), folder, "-o", out, *CORPUS_ARGS)
    assert code == 0, err
    assert calls == ["load_prompts"]
    assert open_result(str(out), "contributions").attrs["corpus"]["hash"] == reference_hash(OLD)


def test_erase_records_the_hashes_of_the_prompts_and_reference_it_read(
    zoo, folder, cli, tmp_path, monkeypatch
):
    """`align erase` with a folder of marked prompts and the same folder as its reference:
    b.txt replaced right after the prompts are read, then (the reference read) right after
    the reference prompts; both hashes are the old bytes'."""
    from align.analyses import answers
    from align.store import open_result

    calls = after(answers, "load_answer_prompts", folder, monkeypatch)
    out = tmp_path / "e.zarr"
    code, _, err = cli(
        "erase",
        zoo("qwen2"),
        folder,
        "--answer-marker",
        " =",
        "--reference",
        folder,
        "--reference-docs",
        2,
        *CORPUS_ARGS,
        "-o",
        out,
    )
    assert code == 0, err
    assert calls == ["load_answer_prompts"]
    attrs = open_result(str(out), "erasure").attrs
    assert attrs["corpus"]["hash"] == reference_hash(OLD)
    # The reference is read after the replacement: its hash is the new bytes', with its own options.
    ref_options = {**OPTIONS, "doc_split": None, "overflow": "truncate", "max_docs": 2}
    assert attrs["reference"]["hash"] == reference_hash({**OLD, "b.txt": NEW_B}, ref_options)


def test_skip_with_answer_splits_records_the_hash_of_the_prompts_it_read(
    zoo, folder, cli, tmp_path, monkeypatch
):
    """`align skip --split answer-start` reads its prompts with their answers: b.txt replaced
    right after that read; the result records the old bytes' hash, the text its tokens are."""
    from align.analyses import answers
    from align.store import open_result

    calls = after(answers, "load_answer_prompts", folder, monkeypatch)
    out = tmp_path / "s.zarr"
    code, _, err = cli(
        "skip",
        zoo("qwen2"),
        folder,
        "--answer-marker",
        " =",
        "--split",
        "answer-start",
        "--settings",
        "current",
        "--bootstrap",
        100,
        *CORPUS_ARGS,
        "-o",
        out,
    )
    assert code == 0, err
    assert calls[0] == "load_answer_prompts"
    assert open_result(str(out), "skipping").attrs["corpus"]["hash"] == reference_hash(OLD)
