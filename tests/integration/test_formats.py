"""Task formats of P1 and P2 (`--format mquake|math|hellaswag|aime|addition:N|multiplication:N`):
each template against hand-written expected strings, the level each prompt carries, where its
answer starts, and one-line errors for missing fields and a bad generated format."""

from __future__ import annotations

import json
import re

import pytest
from transformers import AutoTokenizer

from align.corpus import (
    CorpusSpec,
    TokenizeStats,
    arithmetic_problem,
    document_levels,
    documents,
    items,
    sequences,
)
from align.errors import InputError
from tests.helpers.assertions import one_line_error

# One item per data set, in that data set's own field layout (abridged).
MQUAKE = {
    "case_id": 1561,
    "requested_rewrite": [
        {
            "prompt": "{} is associated with the sport of",
            "subject": "Dudley Town F.C.",
            "target_new": {"str": "cricket"},
            "target_true": {"str": "association football"},
        }
    ],
    "questions": [
        "Which country is the sport of Dudley Town F.C. from?",
        "From which country does it come?",
    ],
    "answer": "England",
    "answer_alias": ["ENG"],
    "new_answer": "India",
    "single_hops": [
        {"question": "Which sport?", "cloze": "x", "answer": "association football"},
        {"question": "Which country?", "cloze": "y", "answer": "England"},
    ],
}
MATH = {
    "problem": "What is $1+1$?",
    "level": "Level 3",
    "type": "Algebra",
    "solution": "It is $\\boxed{2}$.",
}
HELLASWAG = {
    "ind": 4,
    "activity_label": "Roof shingle removal",
    "ctx_a": "A man is sitting on a roof.",
    "ctx_b": "he",
    "ctx": "A man is sitting on a roof. he",
    "endings": [
        "is using wrap to wrap a pair of skis.",
        "is ripping level tiles off.",
        "is holding a rubik's cube.",
        "starts pulling up roofing on a roof.",
    ],
    "label": "3",
}
AIME = {
    "ID": "2024-I-2",
    "Problem": "Find $xy$ when $x = 2$ and $y = 3$.",
    "Answer": 6,
    "Solution": "...",
}


def _jsonl(tmp_path, name, *rows):
    p = tmp_path / f"{name}.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(p)


@pytest.mark.parametrize(
    "fmt, item, text, answer, level",
    [
        (
            "mquake",
            MQUAKE,
            "Question: Which country is the sport of Dudley Town F.C. from?\nAnswer: England",
            "England",
            2,
        ),
        (
            "math",
            MATH,
            "Problem: What is $1+1$?\nSolution: It is $\\boxed{2}$.",
            "It is $\\boxed{2}$.",
            3,
        ),
        (
            "hellaswag",
            HELLASWAG,
            "A man is sitting on a roof. he starts pulling up roofing on a roof.",
            "starts pulling up roofing on a roof.",
            None,
        ),
        ("aime", AIME, "Problem: Find $xy$ when $x = 2$ and $y = 3$.\nAnswer: 6", "6", None),
        ("aime", {"problem": "Find 7.", "answer": "7"}, "Problem: Find 7.\nAnswer: 7", "7", None),
        (
            "hellaswag",
            {**HELLASWAG, "label": 0},
            "A man is sitting on a roof. he is using wrap to wrap a pair of skis.",
            "is using wrap to wrap a pair of skis.",
            None,
        ),
        (
            "mquake",
            {
                "questions": ["Q?"],
                "answer": "A",
                "orig": {"triples": [[1, 2, 3], [3, 4, 5], [5, 6, 7]]},
            },
            "Question: Q?\nAnswer: A",
            "A",
            3,
        ),
    ],
)
def test_template(tmp_path, fmt, item, text, answer, level):
    spec = CorpusSpec(_jsonl(tmp_path, fmt, item), fmt=fmt)
    (got,) = list(items(spec))
    assert got.text == text
    assert got.text[got.answer_start :] == answer
    assert got.level == level
    assert list(documents(spec)) == [text] and document_levels(spec) == [level]


def test_arithmetic_template():
    add, mul = arithmetic_problem("+", 12, 34), arithmetic_problem("*", 12, 34)
    assert (add.text, add.text[add.answer_start :]) == ("12 + 34 = 46", "46")
    assert (mul.text, mul.text[mul.answer_start :]) == ("12 * 34 = 408", "408")


@pytest.mark.parametrize(
    "fmt, n, op", [("addition:3", 3, "+"), ("multiplication:2:7", 2, "*"), ("addition:1", 1, "+")]
)
def test_generated_problems(fmt, n, op):
    spec = CorpusSpec(fmt=fmt, max_docs=40)
    got = list(items(spec))
    assert len(got) == 40
    low = 0 if n == 1 else 10 ** (n - 1)
    for it in got:
        a, b, c = map(int, re.fullmatch(rf"(\d+) \{op} (\d+) = (\d+)", it.text).groups())
        assert low <= a < 10**n and low <= b < 10**n
        assert c == (a + b if op == "+" else a * b)
        assert it.text[it.answer_start :] == str(c) and it.level == n
    assert [i.text for i in items(spec)] == [
        i.text for i in got
    ]  # seeded: the same problems every time
    assert len({i.text for i in got}) > 30  # not one problem repeated
    assert len(list(items(CorpusSpec(fmt=fmt.split(":")[0] + f":{n}")))) == 100  # default count
    other = CorpusSpec(fmt=f"{fmt.split(':')[0]}:{n}:99", max_docs=40)
    assert [i.text for i in items(other)] != [i.text for i in got]


def test_sequences_carry_levels_and_aime_keeps_400_tokens(zoo, tmp_path):
    tok = AutoTokenizer.from_pretrained(zoo("llama"))
    path = _jsonl(tmp_path, "math", {**MATH, "level": "Level 1"}, {**MATH, "level": "Level 5"})
    assert [s.level for s in sequences(CorpusSpec(path, fmt="math"), tok)] == [1, 5]
    long_problem = " ".join(["seven"] * 500)
    assert len(tok(long_problem, add_special_tokens=False)["input_ids"]) > 400
    path = _jsonl(tmp_path, "aime", AIME, {"Problem": long_problem, "Answer": 1}, AIME)
    stats = TokenizeStats()
    seqs = list(sequences(CorpusSpec(path, fmt="aime", max_length=2048), tok, stats))
    assert [s.doc for s in seqs] == [0, 2] and stats.over_format_limit == 1
    assert "over_format_limit" in stats.to_json()
    assert "over_format_limit" not in TokenizeStats().to_json()


@pytest.mark.parametrize(
    "fmt, item, needle",
    [
        ("mquake", {"answer": "A", "single_hops": [{}]}, "'questions'"),
        ("mquake", {"questions": ["Q?"], "answer": "A"}, "single_hops"),
        ("math", {"problem": "p", "solution": "s"}, "'level'"),
        ("math", {**MATH, "level": "Level ?"}, "Level ?"),
        ("hellaswag", {"ctx": "c", "endings": ["a"], "label": ""}, "label ''"),
        ("hellaswag", {"ctx": "c", "label": "0"}, "'endings'"),
        ("aime", {"Problem": "p"}, "'Answer' or 'answer'"),
    ],
)
def test_missing_fields_are_one_line_errors(cli, zoo, tmp_path, fmt, item, needle):
    path = _jsonl(tmp_path, fmt, item)
    with pytest.raises(InputError, match=re.escape(needle)):
        list(documents(CorpusSpec(path, fmt=fmt)))
    code, _, err = cli("extract", zoo("qwen2"), path, "-o", tmp_path / "s", "--format", fmt)
    one_line_error(code, err, needle, f"{fmt}.jsonl line 1", progress=("align extract: ",))
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    "fmt",
    [
        "addition:0",
        "addition:x",
        "multiplication:",
        "addition:3:-1",
        "addition:19",
        "subtraction:3",
    ],
)
def test_bad_generated_format(cli, zoo, tmp_path, fmt):
    path = _jsonl(tmp_path, "any", {"text": "x"})
    code, _, err = cli("extract", zoo("qwen2"), path, "-o", tmp_path / "s", "--format", fmt)
    one_line_error(code, err, repr(fmt))
    with pytest.raises(InputError, match="give no CORPUS"):
        list(documents(CorpusSpec(path, fmt="addition:2")))


def test_dataset_path_uses_the_same_templates(monkeypatch):
    """--dataset NAME:SPLIT reads the data set's items through the same templates (a stand-in
    `datasets` module returns HF-shaped rows: no network, no download)."""
    import sys
    import types

    rows = {
        "hendrycks/math": [MATH],
        "Rowan/hellaswag": [HELLASWAG],
        "Maxwell-Jia/AIME_2024": [AIME],
    }
    calls = []

    def load_dataset(name, config, split):
        calls.append((name, config, split))
        return rows[name]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    got = list(items(CorpusSpec(dataset="hendrycks/math:test", fmt="math")))
    assert [(i.text, i.level) for i in got] == [
        ("Problem: What is $1+1$?\nSolution: It is $\\boxed{2}$.", 3)
    ]
    assert list(documents(CorpusSpec(dataset="Rowan/hellaswag:validation", fmt="hellaswag"))) == [
        "A man is sitting on a roof. he starts pulling up roofing on a roof."
    ]
    assert list(documents(CorpusSpec(dataset="Maxwell-Jia/AIME_2024:train", fmt="aime"))) == [
        "Problem: Find $xy$ when $x = 2$ and $y = 3$.\nAnswer: 6"
    ]
    assert calls == [
        ("hendrycks/math", None, "test"),
        ("Rowan/hellaswag", None, "validation"),
        ("Maxwell-Jia/AIME_2024", None, "train"),
    ]


def test_generated_format_from_the_command_line(cli, zoo, tmp_path):
    """`align extract MODEL --format addition:3` needs no CORPUS: every stored document,
    decoded by the tokenizers library, is a correct 3-digit sum."""
    import os

    import zarr
    from tokenizers import Tokenizer

    out = tmp_path / "add.zarr"
    code, _, err = cli(
        "extract", zoo("qwen2"), "--format", "addition:3", "--max-docs", "6", "-o", out
    )
    assert code == 0, err
    g = zarr.open_group(str(out), mode="r")
    ids, doc = g["token_id"][...], g["doc"][...]
    tok = Tokenizer.from_file(os.path.join(zoo("qwen2"), "tokenizer.json"))
    texts = [tok.decode(ids[doc == d].tolist()) for d in range(6)]
    for t in texts:
        m = re.fullmatch(r"(\d{3}) \+ (\d{3}) = (\d+)", t)
        assert m and int(m[1]) + int(m[2]) == int(m[3]), t
    assert g.attrs["provenance"]["corpus"]["levels"] == [3]  # N digits is the level


@pytest.mark.parametrize(
    "fmt, item, answer",
    [
        ("math", MATH, "It is $\\boxed{2}$."),
        ("hellaswag", HELLASWAG, "starts pulling up roofing on a roof."),
    ],
)
def test_answer_prompts_of_a_format(zoo, tmp_path, fmt, item, answer):
    """erase/igrad read a format's answer where the format puts it (hellaswag has no marker):
    the answer-predicting positions are those whose next token overlaps the answer's characters,
    by the tokenizers library's offsets."""
    import os

    from tokenizers import Tokenizer

    from align.analyses.answers import load_answer_prompts
    from align.models import ModelSpec, load_tokenizer

    spec = CorpusSpec(_jsonl(tmp_path, fmt, item), fmt=fmt)
    (p,) = load_answer_prompts(spec, load_tokenizer(ModelSpec(zoo("qwen2"))))
    (text,) = list(documents(spec))
    start = text.rindex(answer)
    enc = Tokenizer.from_file(os.path.join(zoo("qwen2"), "tokenizer.json")).encode(text)
    assert p.token_id.tolist() == enc.ids and p.answer == answer
    n = len(enc.ids)
    # position t predicts the answer when token t+1 has characters and ends past the answer's start
    want = [
        t + 1 < n and enc.offsets[t + 1][1] > max(start, enc.offsets[t + 1][0]) for t in range(n)
    ]
    assert p.predicts_answer.tolist() == want
