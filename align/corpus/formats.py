"""Task formats (`items(spec)` gives each prompt's text, where its answer starts, and its
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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from align.errors import InputError

GSM8K_INSTRUCTION = (
    "Given the following problem, reason and give a final answer to the problem.\n"
    "Problem: {question}\n"
    'Your response should end with "The final answer is [answer]" where [answer] is the response to the problem.'
)
FORMATS = (
    "plain",
    "gsm8k",
    "mquake",
    "math",
    "hellaswag",
    "aime",
    "addition:N",
    "multiplication:N",
)
JSON_FORMATS = ("gsm8k", "mquake", "math", "hellaswag", "aime")
GENERATED = {"addition": "+", "multiplication": "*"}
GENERATED_COUNT = 100  # problems of a generated format without --max-docs
MAX_DIGITS = 18  # a and b stay within int64
AIME_MAX_TOKENS = 400  # P2 keeps AIME prompts of at most 400 tokens
ANSWER_MARKERS = {
    "gsm8k": "The final answer is",
    "mquake": "\nAnswer:",
    "math": "\nSolution:",
    "aime": "\nAnswer:",
    "addition": " =",
    "multiplication": " =",
}


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
    raise InputError(
        f"{where}: `format` {fmt} needs a field {wanted}; check the file is in that data set's layout"
    )


def _string(value, name: str, fmt: str, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(
            f"{where}: `format` {fmt} needs {name!r} to be a string, not {type(value).__name__}"
        )
    return str(value)


def _qa(prefix: str, question: str, marker: str, answer: str, level=None) -> Item:
    head = f"{prefix}{question}{marker}"
    return Item(head + answer, len(head), level)


def format_item(fmt: str, item, where: str) -> Item:
    """The prompt of one data-set item in a task format (module docstring)."""
    if fmt == "gsm8k":
        try:
            question, answer = item["question"], item["answer"]
        except (KeyError, TypeError):
            raise InputError(
                f"{where}: `format` gsm8k needs 'question' and 'answer' fields"
            ) from None
        if not isinstance(question, str) or not isinstance(answer, str) or "####" not in answer:
            raise InputError(
                f"{where}: a GSM8K answer must be a string containing '#### <final answer>'"
            )
        reasoning, _, final = answer.partition("####")
        if reasoning and not reasoning.endswith("\n"):
            reasoning += "\n"
        head = (
            GSM8K_INSTRUCTION.format(question=question)
            + "\n\n"
            + reasoning
            + "The final answer is "
        )
        return Item(head + final.strip(), len(head))
    if fmt == "mquake":
        questions = _field(item, ("questions",), fmt, where)
        if not isinstance(questions, list) or not questions or not isinstance(questions[0], str):
            raise InputError(
                f"{where}: `format` mquake needs 'questions' to be a non-empty list of strings"
            )
        answer = _string(_field(item, ("answer",), fmt, where), "answer", fmt, where)
        hops = item.get("single_hops")
        if hops is None and isinstance(item.get("orig"), dict):
            hops = item["orig"].get("triples")
        if not isinstance(hops, list) or not hops:
            raise InputError(
                f"{where}: `format` mquake needs 'single_hops' (or 'orig.triples') to count the hops"
            )
        return _qa("Question: ", questions[0], "\nAnswer: ", answer, len(hops))
    if fmt == "math":
        problem = _string(_field(item, ("problem",), fmt, where), "problem", fmt, where)
        solution = _string(_field(item, ("solution",), fmt, where), "solution", fmt, where)
        raw = _field(item, ("level",), fmt, where)
        text = str(raw).strip()
        digits = text[len("Level") :].strip() if text.startswith("Level") else text
        if isinstance(raw, bool) or not digits.isdigit() or not 1 <= int(digits) <= 5:
            raise InputError(
                f"{where}: `format` math needs 'level' like \"Level 3\" (1 to 5), got {raw!r}"
            )
        return _qa("Problem: ", problem, "\nSolution: ", solution, int(digits))
    if fmt == "hellaswag":
        ctx = _string(_field(item, ("ctx",), fmt, where), "ctx", fmt, where)
        endings = _field(item, ("endings",), fmt, where)
        label = _field(item, ("label",), fmt, where)
        ok = (
            isinstance(endings, list)
            and str(label).strip().isdigit()
            and not isinstance(label, bool)
        )
        if not ok or not int(label) < len(endings) or not isinstance(endings[int(label)], str):
            raise InputError(
                f"{where}: `format` hellaswag needs 'endings' (a list of strings) and 'label' (the gold "
                f"ending's index), got label {label!r}; a test split without labels cannot be used"
            )
        return Item(f"{ctx} {endings[int(label)]}", len(ctx) + 1)
    if fmt == "aime":
        problem = _string(_field(item, ("Problem", "problem"), fmt, where), "problem", fmt, where)
        answer = _string(_field(item, ("Answer", "answer"), fmt, where), "answer", fmt, where)
        return _qa("Problem: ", problem, "\nAnswer: ", answer)
    raise InputError(f"`format` {fmt!r} is not one of {', '.join(FORMATS)}")


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
    ok = (
        len(parts) in (1, 2)
        and all(p.isdigit() for p in parts)
        and 1 <= int(parts[0]) <= MAX_DIGITS
    )
    if not ok:
        raise InputError(
            f"`format` {fmt!r}: write {name}:N or {name}:N:SEED with N digits from 1 to {MAX_DIGITS} "
            f"and a seed >= 0, e.g. {name}:3"
        )
    return GENERATED[name], int(parts[0]), int(parts[1]) if len(parts) == 2 else 0


def generated_items(fmt: str, max_docs: int | None) -> Iterator[Item]:
    """The problems of a generated format (`generated_format`), `max_docs` of them (default
    GENERATED_COUNT), each with its level N."""
    op, n, seed = generated_format(fmt)
    lo, hi = (0 if n == 1 else 10 ** (n - 1)), 10**n  # N-digit integers, [lo, hi)
    rng = np.random.default_rng([seed, n])
    for _ in range(max_docs if max_docs is not None else GENERATED_COUNT):
        a, b = (int(x) for x in rng.integers(lo, hi, size=2))
        item = arithmetic_problem(op, a, b)
        yield Item(item.text, item.answer_start, n)
