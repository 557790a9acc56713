"""Corpus readers, windows and the layer-spec parser, against hand-worked cases."""

from __future__ import annotations

import json

import numpy as np
import pytest
from transformers import AutoTokenizer

from align.boundaries import parse_boundaries
from align.corpus import CorpusSpec, documents, sequences
from align.errors import InputError


def test_txt_file_folder_and_jsonl(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("one\ntwo\n\n\nthree\n\nfour five\n")
    assert list(documents(CorpusSpec(str(f)))) == ["one\ntwo", "three", "four five"]
    assert list(documents(CorpusSpec(str(f), doc_split="line"))) == [
        "one",
        "two",
        "",
        "",
        "three",
        "",
        "four five",
    ]
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "b.txt").write_text("bee\n")
    (folder / "a.txt").write_text("ay\nay\n")
    (folder / "skip.md").write_text("not text")
    assert list(documents(CorpusSpec(str(folder)))) == ["ay\nay", "bee"]
    j = tmp_path / "c.jsonl"
    j.write_text(json.dumps({"body": "x y"}) + "\n\n" + json.dumps({"body": "z"}) + "\n")
    assert list(documents(CorpusSpec(str(j), text_field="body"))) == ["x y", "z"]


def test_gsm8k_prompt_format(tmp_path):
    item = {
        "question": "Tom has 3 apples and buys 2 more. How many?",
        "answer": "He has 3 + 2 = <<3+2=5>>5 apples.\n#### 5",
    }
    j = tmp_path / "gsm.jsonl"
    j.write_text(json.dumps(item) + "\n")
    want = (
        "Given the following problem, reason and give a final answer to the problem.\n"
        "Problem: Tom has 3 apples and buys 2 more. How many?\n"
        'Your response should end with "The final answer is [answer]" where [answer] is the response to the problem.\n'
        "\n"
        "He has 3 + 2 = <<3+2=5>>5 apples.\n"
        "The final answer is 5"
    )
    assert list(documents(CorpusSpec(str(j), fmt="gsm8k"))) == [want]
    j.write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(InputError, match="'question' and 'answer'"):
        list(documents(CorpusSpec(str(j), fmt="gsm8k")))


def test_windows_spans_and_budget(zoo, tmp_path):
    tok = AutoTokenizer.from_pretrained(zoo("llama"))  # prepends BOS
    text = " ".join(["the model reads every layer"] * 40)
    f = tmp_path / "long.txt"
    f.write_text(text + "\n\nshort one\n")
    ids = tok(text, add_special_tokens=False)["input_ids"]
    room = 32 - 1  # one BOS per window
    seqs = list(sequences(CorpusSpec(str(f), max_length=32), tok))
    n_windows = -(-len(ids) // room)
    assert len(seqs) == n_windows + 1
    for k, s in enumerate(seqs[:n_windows]):
        assert s.doc == 0 and s.seq == k and len(s) <= 32
        assert s.token_id[0] == tok.bos_token_id and s.char_start[0] == -1
        np.testing.assert_array_equal(s.token_id[1:], ids[k * room : (k + 1) * room])
        for t in range(1, len(s)):
            assert tok.decode([int(s.token_id[t])]) == text[s.char_start[t] : s.char_end[t]]
    assert seqs[-1].doc == 1 and seqs[-1].seq == n_windows
    trunc = list(sequences(CorpusSpec(str(f), max_length=32, overflow="truncate"), tok))
    assert [s.doc for s in trunc] == [0, 1] and len(trunc[0]) == 32
    budget = list(sequences(CorpusSpec(str(f), max_length=32, max_tokens=40), tok))
    assert sum(len(s) for s in budget) == 40 and [len(s) for s in budget] == [32, 8]


def test_dataset_without_the_datasets_package():
    try:
        import datasets  # noqa: F401

        pytest.skip("the datasets package is installed here")
    except ImportError:
        pass
    with pytest.raises(InputError, match="needs the `datasets` package"):
        list(documents(CorpusSpec(dataset="gsm8k:main:test")))
    with pytest.raises(InputError, match="NAME:SPLIT"):
        list(documents(CorpusSpec(dataset="gsm8k")))


@pytest.mark.parametrize(
    "spec,n,want",
    [
        (None, 4, [0, 1, 2, 3, 4]),
        ("all", 2, [0, 1, 2]),
        ("0,4,8", 12, [0, 4, 8]),
        ("::2", 6, [0, 2, 4, 6]),
        ("1:", 3, [1, 2, 3]),
        ("-1", 5, [5]),
        ("-2:", 5, [4, 5]),
        ("8,0,4,4", 8, [0, 4, 8]),
        (" 1 , 2 ", 3, [1, 2]),
    ],
)
def test_parse_boundaries(spec, n, want):
    assert parse_boundaries(spec, n) == want
