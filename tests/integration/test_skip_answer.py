"""`align skip --split answer-start` (one future split point per prompt: its first answer
token) against a split computed here from the `tokenizers` library's offsets and a plain-hook
reference loop, and the per-prompt maxima and levels the skip result keeps. The references
never import align."""

from __future__ import annotations

import json
import os

import numpy as np

from tests.helpers.assertions import one_line_error
from tests.helpers.fixtures_analyses import hf_load, ref_forward, ref_skip_one

CASES = [  # (question, answer, hops): --format mquake's fields
    ("Who wrote the book about the layers of the network?", "the shallow model", 2),
    ("Where was the deeper network trained before it read every document?", "in the corpus", 3),
    ("Which map fits?", "a linear one", 2),
]


def _mquake_file(path):
    with open(path, "w", encoding="utf-8") as f:
        for q, a, hops in CASES:
            f.write(json.dumps({"questions": [q], "answer": a, "single_hops": [{}] * hops}) + "\n")
    return str(path)


def _ref_split(model_dir, text, answer_start):
    """(ids, t): the tokens of `text` with the tokenizer's special tokens, and the first token
    whose character span overlaps the answer [answer_start, len(text)), from `tokenizers`."""
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    enc = tk.encode(text)  # with the post-processor's special tokens (Llama's BOS)
    for i, ((s, e), special) in enumerate(zip(enc.offsets, enc.special_tokens_mask)):
        if not special and e > s and s < len(text) and e > answer_start:
            return list(enc.ids), i
    raise AssertionError("no answer token")


def _ref_cases(model_dir):
    out = []
    for q, a, _ in CASES:
        head = f"Question: {q}\nAnswer: "
        out.append(_ref_split(model_dir, head + a, len(head)))
    return out


def test_answer_start_matches_reference(zoo, cli, tmp_path):
    """Split positions and per-prompt R, O of --split answer-start (future setting) on Llama
    (BOS prepended), vs a one-prompt float32 plain-hook loop intervening at 1..t−1 and
    measuring t..T−1, rtol 1e-4 / atol 1e-5; levels are the hop counts; per-prompt maxima
    aggregate back to the stored max and mean_over_prompts exactly."""
    from align.store import open_result

    path = zoo("llama")
    corpus = _mquake_file(tmp_path / "mq.jsonl")
    out = tmp_path / "skip"
    code, _, err = cli(
        "skip",
        path,
        corpus,
        "--format",
        "mquake",
        "--split",
        "answer-start",
        "--settings",
        "current,future",
        "--parts",
        "layer,attn",
        "--batch-size",
        "2",
        "-o",
        out,
    )
    assert code == 0, err
    ds = open_result(str(out), "skipping")
    assert ds.attrs["options"]["split"] == "answer-start"
    assert list(ds["level"].values) == [h for _, _, h in CASES]
    model, _ = hf_load(path)
    L = len(model.model.layers)
    refs = _ref_cases(path)
    assert all(t > 1 for _, t in refs)
    for i, (ids, t) in enumerate(refs):
        T = len(ids)
        clean = ref_forward(model, "llama", ids)
        for pi, part in enumerate(("layer", "attn")):
            for s in range(L):
                r, o = ref_skip_one(model, "llama", ids, part, s, range(1, t), range(t, T), clean)
                got_r = ds["R_prompt"].sel(prompt=i, setting="future", part=part, skipped=s).values
                got_o = float(ds["O_prompt"].sel(prompt=i, setting="future", part=part, skipped=s))
                np.testing.assert_allclose(got_r, r, rtol=1e-4, atol=1e-5)
                np.testing.assert_allclose(got_o, o, rtol=1e-4, atol=1e-5)
    assert (
        float(ds["O_prompt"].sel(setting="future", part="layer", skipped=0).max()) > 1e-3
    )  # not trivially 0
    for setting in ("current", "future"):
        Rp = ds["R_prompt"].sel(setting=setting).values
        Op = ds["O_prompt"].sel(setting=setting).values
        assert np.isfinite(Rp).all() and np.isfinite(Op).all()
        R, O = ds["R"].sel(setting=setting), ds["O"].sel(setting=setting)
        np.testing.assert_array_equal(R.sel(agg="max").values, Rp.max(0))
        np.testing.assert_array_equal(R.sel(agg="mean_over_prompts").values, Rp.mean(0))
        np.testing.assert_array_equal(O.sel(agg="max").values, Op.max(0))
        np.testing.assert_array_equal(O.sel(agg="mean_over_prompts").values, Op.mean(0))


MATH_CASES = [  # (problem, solution): --format math's fields, all of level 2
    ("What is 3 plus 4?", "Add the two numbers: 3 plus 4 makes 7, so the answer is 7."),
    ("What is 5 plus 1?", "It is 6."),
    ("What is 2 plus 2?", "6."),  # an answer of at most 4 tokens: no point, counted short
]


def _math_file(path):
    with open(path, "w", encoding="utf-8") as f:
        for problem, solution in MATH_CASES:
            f.write(
                json.dumps({"problem": problem, "solution": solution, "level": "Level 2"}) + "\n"
            )
    return str(path)


def _ref_answer_points(answer_tokens, seed, index):
    """P1's MATH split points (skip_max_depth.py, `main`): with the answer's tokens a..b
    (n = b - a + 1), a + k for k in range(0, n - 4, 4), shuffled, the first 4; shuffled here
    by numpy's default_rng([seed, index]), the seeding align documents."""
    a, n = answer_tokens[0], answer_tokens[-1] - answer_tokens[0] + 1
    offsets = list(range(0, n - 4, 4))
    order = np.random.default_rng([seed, index]).permutation(len(offsets))
    return [a + offsets[i] for i in order[:4]]


def _ref_answer_tokens(model_dir, text, answer_start):
    """(ids, answer token positions) of `text` with the tokenizer's special tokens, from `tokenizers`."""
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    enc = tk.encode(text)
    pos = [
        i
        for i, ((s, e), special) in enumerate(zip(enc.offsets, enc.special_tokens_mask))
        if not special and e > s and s < len(text) and e > answer_start
    ]
    return list(enc.ids), pos


def test_answer_points_hand_worked():
    """Answers of 4, 5, 14 and 30 tokens: none, the first answer token, {a, a+4, a+8}, and 4 of
    the 7 points a + 0, 4, ..., 24 in the order default_rng([seed, prompt]) gives."""
    from align.analyses.skip import answer_points

    def mask(T, a, b):  # predicts_answer: position t-1 marks answer token t, for t in a..b
        m = np.zeros(T, bool)
        m[a - 1 : b] = True
        return m

    assert answer_points(mask(10, 5, 8), 0, 0) == []
    assert answer_points(mask(10, 5, 9), 0, 0) == [5]
    assert sorted(answer_points(mask(20, 6, 19), 0, 1)) == [6, 10, 14]
    got = answer_points(mask(40, 3, 32), 7, 2)
    assert got == _ref_answer_points(list(range(3, 33)), 7, 2)
    assert len(got) == 4 and set(got) <= {3, 7, 11, 15, 19, 23, 27}


def test_answer_points_matches_reference(zoo, cli, tmp_path):
    """--split answer-points on MATH-format prompts (Llama, BOS prepended): the split points
    recorded in attrs are those picked here from the tokenizers library's answer span as P1's
    code picks them, and per-prompt R, O are the max over those points of a one-prompt float32
    plain-hook loop intervening at 1..t-1 and measuring t..T-1 (rtol 1e-4, atol 1e-5); the
    prompt whose answer has at most 4 tokens is counted short and NaN."""
    from align.store import open_result

    path = zoo("llama")
    corpus = _math_file(tmp_path / "math.jsonl")
    out = tmp_path / "skip"
    seed = 3
    code, _, err = cli(
        "skip",
        path,
        corpus,
        "--format",
        "math",
        "--split",
        "answer-points",
        "--split-seed",
        seed,
        "--settings",
        "future",
        "--parts",
        "layer,attn",
        "--batch-size",
        "3",
        "-o",
        out,
    )
    assert code == 0, err
    ds = open_result(str(out), "skipping")
    assert (
        ds.attrs["options"]["split"] == "answer-points"
        and ds.attrs["options"]["split_seed"] == seed
    )
    model, _ = hf_load(path)
    L = len(model.model.layers)
    want = []
    for i, (problem, solution) in enumerate(MATH_CASES):
        head = f"Problem: {problem}\nSolution: "
        ids, answer = _ref_answer_tokens(path, head + solution, len(head))
        want.append((ids, _ref_answer_points(answer, seed, i)))
    assert [len(p) for _, p in want] == [4, 1, 0]  # 11 candidate points, 1, none
    assert ds.attrs["split_points"] == [p for _, p in want]
    assert (
        ds.attrs["n_prompts_too_short"] == 1 and np.isnan(ds["R_prompt"].sel(prompt=2).values).all()
    )
    for i, (ids, points) in enumerate(want[:2]):
        T = len(ids)
        clean = ref_forward(model, "llama", ids)
        for part in ("layer", "attn"):
            for s in range(L):
                refs = [
                    ref_skip_one(model, "llama", ids, part, s, range(1, t), range(t, T), clean)
                    for t in points
                ]
                got = ds.sel(prompt=i, setting="future", part=part, skipped=s)
                np.testing.assert_allclose(
                    got["R_prompt"].values, np.max([r for r, _ in refs], 0), rtol=1e-4, atol=1e-5
                )
                np.testing.assert_allclose(
                    float(got["O_prompt"]), max(o for _, o in refs), rtol=1e-4, atol=1e-5
                )
    assert (
        float(ds["O_prompt"].sel(prompt=0, setting="future", part="layer", skipped=0)) > 1e-3
    )  # not trivially 0


def test_random_split_keeps_per_prompt_values(hf_models):
    """The random future split: prompts too short for it are NaN in R_prompt, and the used
    prompts' maxima aggregate back to R and O exactly."""
    from align.analyses.skip import skipping, to_dataset

    model, tok = hf_models("qwen2")
    ids = tok("the model reads every layer and writes into the residual stream of the network")[
        "input_ids"
    ]
    prompts = [np.array(ids[:10]), np.array(ids[:20]), np.array(ids)]
    assert len(ids) >= 13
    res = skipping(model, prompts, settings=("current", "future"), parts=("layer",), batch_size=2)
    ds = to_dataset(res, {}, seed=0)
    fut = ds["R_prompt"].sel(setting="future").values
    assert np.isnan(fut[0]).all() and np.isfinite(fut[1:]).all()  # prompt 0 has 10 < 13 tokens
    np.testing.assert_array_equal(ds["R"].sel(setting="future", agg="max").values, fut[1:].max(0))
    np.testing.assert_array_equal(
        ds["R"].sel(setting="future", agg="mean_over_prompts").values, fut[1:].mean(0)
    )
    cur = ds["O_prompt"].sel(setting="current").values
    np.testing.assert_array_equal(
        ds["O"].sel(setting="current", agg="mean_over_prompts").values, cur.mean(0)
    )
    assert "level" not in ds


def test_answer_at_start_is_counted_short():
    """A prompt whose answer starts at token 0 or 1 has nothing to skip: counted as too short."""
    from align.analyses.skip import rows_for

    prompts = [np.arange(6), np.arange(6), np.arange(6)]
    rows, short = rows_for(prompts, "future", splits=[1, 3, 0])
    assert short == 2 and len(rows) == 1
    r = rows[0]
    assert r.prompt == 1
    assert r.intervene.tolist() == [False, True, True, False, False, False]
    assert r.measure.tolist() == [False, False, False, True, True, True]


def test_no_token_before_any_answer_is_one_line_error(zoo, cli, tmp_path):
    """Every answer starts at token 1 (qwen2 adds no BOS): one line, nothing written."""
    corpus = tmp_path / "p.jsonl"
    corpus.write_text(
        json.dumps({"text": "a", "answer": "bc"})
        + "\n"
        + json.dumps({"text": "x", "answer": "y"})
        + "\n"
    )
    out = tmp_path / "skip"
    code, _, err = cli(
        "skip", zoo("qwen2"), corpus, "--split", "answer-start", "--settings", "future", "-o", out
    )
    one_line_error(code, err, "--split answer-start", "before its first answer token")
    assert not out.exists()


def test_no_answer_long_enough_for_points_is_one_line_error(zoo, cli, tmp_path):
    """--split answer-points where every answer has at most 4 tokens: one line naming the
    split and the rule, nothing written."""
    corpus = tmp_path / "p.jsonl"
    corpus.write_text(json.dumps({"text": "the model reads ", "answer": "ab"}) + "\n")
    out = tmp_path / "skip"
    code, _, err = cli(
        "skip", zoo("qwen2"), corpus, "--split", "answer-points", "--settings", "future", "-o", out
    )
    one_line_error(code, err, "--split answer-points", "an answer of at least 5 tokens")
    assert not out.exists()


def test_bad_split_is_one_line_error(zoo, cli, tmp_path):
    corpus = tmp_path / "p.txt"
    corpus.write_text("some text here\n")
    code, _, err = cli("skip", zoo("qwen2"), corpus, "--split", "answer", "-o", tmp_path / "skip")
    one_line_error(code, err, "--split 'answer'", "random, answer-start, answer-points")


def test_random_split_stores_levels(zoo, cli, tmp_path):
    """Without --split answer-start each prompt (Sequence.doc) still gets its document's level."""
    from align.store import open_result

    corpus = _mquake_file(tmp_path / "mq.jsonl")
    out = tmp_path / "skip"
    code, _, err = cli(
        "skip",
        zoo("qwen2"),
        corpus,
        "--format",
        "mquake",
        "--settings",
        "current",
        "--parts",
        "layer",
        "-o",
        out,
    )
    assert code == 0, err
    ds = open_result(str(out), "skipping")
    assert list(ds["level"].values) == [h for _, _, h in CASES]
    assert ds.sizes["prompt"] == len(CASES)


def test_answer_points_stream_draws_p1s_stream(zoo, cli, tmp_path):
    """--split answer-points-stream --split-seed 12345: the recorded split points are those of
    P1's loop (skip_max_depth.py, `main`: Python's `random` seeded once, `random.shuffle` of
    each answer's offsets prompt after prompt), from the tokenizers library's answer span."""
    import random

    from align.store import open_result

    path = zoo("llama")
    corpus = _math_file(tmp_path / "math.jsonl")
    out = tmp_path / "skip"
    code, _, err = cli(
        "skip",
        path,
        corpus,
        "--format",
        "math",
        "--split",
        "answer-points-stream",
        "--split-seed",
        "12345",
        "--settings",
        "future",
        "--parts",
        "layer",
        "-o",
        out,
    )
    assert code == 0, err
    ds = open_result(str(out), "skipping")
    assert ds.attrs["options"]["split"] == "answer-points-stream"
    rng, want = random.Random(12345), []
    for problem, solution in MATH_CASES:
        head = f"Problem: {problem}\nSolution: "
        _, answer = _ref_answer_tokens(path, head + solution, len(head))
        pos = list(range(0, answer[-1] - answer[0] + 1 - 4, 4))
        rng.shuffle(pos)
        want.append([answer[0] + x for x in pos[:4]])
    assert ds.attrs["split_points"] == want and len(want[0]) == 4


def test_the_stream_continues_after_the_earlier_levels(zoo, cli, tmp_path):
    """--split-stream-after FILE: the earlier file's prompts draw from P1's stream first, so this
    file's points are those P1's loop draws for it after them; without the stream split the
    option is refused in one line."""
    import random

    from align.store import open_result

    path = zoo("llama")
    first = _math_file(tmp_path / "level1.jsonl")
    second = tmp_path / "level2.jsonl"
    with open(second, "w", encoding="utf-8") as f:
        for problem, solution in reversed(MATH_CASES):
            f.write(
                json.dumps({"problem": problem, "solution": solution, "level": "Level 3"}) + "\n"
            )
    out = tmp_path / "skip"
    args = ["skip", path, second, "--format", "math", "--settings", "future", "--parts", "layer"]
    code, _, err = cli(
        *args,
        "--split",
        "answer-points-stream",
        "--split-seed",
        "12345",
        "--split-stream-after",
        first,
        "-o",
        out,
    )
    assert code == 0, err
    rng, want = random.Random(12345), []
    for cases in (MATH_CASES, list(reversed(MATH_CASES))):
        for problem, solution in cases:
            head = f"Problem: {problem}\nSolution: "
            _, answer = _ref_answer_tokens(path, head + solution, len(head))
            pos = list(range(0, answer[-1] - answer[0] + 1 - 4, 4))
            rng.shuffle(pos)
            want.append([answer[0] + x for x in pos[:4]])
    got = open_result(str(out), "skipping").attrs["split_points"]
    assert got == want[len(MATH_CASES) :] and got != want[: len(MATH_CASES)][::-1]
    code, _, err = cli(*args, "--split-stream-after", first, "-o", tmp_path / "no")
    one_line_error(code, err, "--split-stream-after", "--split answer-points-stream, not 'random'")
