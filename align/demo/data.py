"""A generated arithmetic corpus in the style of DeepMind Mathematics' `arithmetic__add_sub_multiple`
and `arithmetic__mixed` modules: one problem per line, `expression=answer`, integers, the
operators + - *, and a controllable number of operations per problem.

Everything is drawn from a seeded `random.Random`, so the same arguments give the same text on
every machine; nothing is downloaded and no text is copied from anywhere.
"""

from __future__ import annotations

import random

from align.errors import InputError

# A document is a few problems: well under max_length, so one sequence per document.
MAX_LENGTH = 512

OPERATORS = "+-*"
# The characters a problem can contain; the demo's tokenizer has exactly these plus its
# special token (see align/demo/tokenizer.py).
ALPHABET = "0123456789+-*=()\n"


def problem(rng: random.Random, n_ops: int, max_operand: int = 99) -> str:
    """One problem of exactly `n_ops` operations, as `expression=answer` (no newline).

    Operands are integers in 0..max_operand; with probability 1/3 one pair of operands is put
    in parentheses (when n_ops >= 2), as DeepMind Mathematics' mixed-arithmetic problems do.
    The answer is exact integer arithmetic with the usual precedence (`value`).
    """
    if n_ops < 1:
        raise InputError(f"number of operations {n_ops} must be at least 1")
    numbers = [rng.randint(0, max_operand) for _ in range(n_ops + 1)]
    operands = [str(x) for x in numbers]
    ops = [rng.choice(OPERATORS) for _ in range(n_ops)]
    paren = rng.randrange(n_ops) if n_ops >= 2 and rng.random() < 1 / 3 else None
    parts = []
    for k, x in enumerate(operands):
        if paren is not None and k == paren:
            x = "(" + x
        if paren is not None and k == paren + 1:
            x = x + ")"
        parts.append(x)
        if k < n_ops:
            parts.append(ops[k])
    return f"{''.join(parts)}={value(numbers, ops, paren)}"


def _apply(a: int, op: str, b: int) -> int:
    return a * b if op == "*" else a + b if op == "+" else a - b


def value(numbers: list[int], ops: list[str], paren: int | None = None) -> int:
    """The value of numbers[0] ops[0] numbers[1] ... with * before + and -, left to right,
    where the pair (numbers[paren] ops[paren] numbers[paren+1]) is parenthesised."""
    nums, ops = list(numbers), list(ops)
    if paren is not None:
        nums[paren : paren + 2] = [_apply(nums[paren], ops[paren], nums[paren + 1])]
        del ops[paren]
    i = 0
    while i < len(ops):
        if ops[i] == "*":
            nums[i : i + 2] = [nums[i] * nums[i + 1]]
            del ops[i]
        else:
            i += 1
    total = nums[0]
    for op, x in zip(ops, nums[1:]):
        total = _apply(total, op, x)
    return total


def document(rng: random.Random, n_lines: int, min_ops: int, max_ops: int) -> str:
    """`n_lines` problems, one per line, each with a number of operations drawn uniformly
    from min_ops..max_ops."""
    return "\n".join(problem(rng, rng.randint(min_ops, max_ops)) for _ in range(n_lines))


def check_ops(min_ops: int, max_ops: int) -> None:
    if not 1 <= min_ops <= max_ops:
        raise InputError(
            f"operations per problem {min_ops}..{max_ops} must satisfy 1 <= min <= max"
        )


def training_text(n_chars: int, seed: int, min_ops: int = 1, max_ops: int = 4) -> str:
    """A stream of at least `n_chars` characters of problems separated by newlines (the
    training text; one character is one token)."""
    check_ops(min_ops, max_ops)
    rng = random.Random(f"train-{seed}")
    out, n = [], 0
    while n < n_chars:
        line = problem(rng, rng.randint(min_ops, max_ops)) + "\n"
        out.append(line)
        n += len(line)
    return "".join(out)


def heldout_documents(
    n_docs: int, seed: int, lines_per_doc: int = 6, min_ops: int = 1, max_ops: int = 4
) -> list[str]:
    """`n_docs` documents of `lines_per_doc` problems each, from a random stream distinct from
    the training one (another seed string), for extraction and the analyses."""
    check_ops(min_ops, max_ops)
    rng = random.Random(f"heldout-{seed}")
    return [document(rng, lines_per_doc, min_ops, max_ops) for _ in range(n_docs)]


def write_corpus(path: str, docs: list[str]) -> str:
    """Write documents as a .txt corpus (documents separated by one blank line)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join(docs) + "\n")
    return path
