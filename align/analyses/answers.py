"""Prompts with answers, for the analyses that measure what a model does to its answer
(`align erase`, `align igrad`).

Each prompt is one text whose end is the answer, given in one of two ways:

- answer field (default): a .jsonl file whose items hold the prompt in `text_field` and the
  answer in `answer_field`; the text is prompt + answer, concatenated as they are (give the
  answer its leading space, e.g. {"text": "12+7=", "answer": "19"} or {"text": "The capital
  of France is", "answer": " Paris"}).
- answer marker: any corpus align reads (.txt, .jsonl, folder, --dataset); the answer is
  everything after the LAST occurrence of the marker in each non-blank document.
- a task format (`--format gsm8k`, `mquake`, `math`, `hellaswag`, `aime`, `addition:N`,
  `multiplication:N`): the format says where each prompt's answer starts (`align.corpus.items`;
  for gsm8k, after "The final answer is").

The answer's characters are its span without leading whitespace. A token is an answer token
when its character span (from the tokenizer's offsets) overlaps the answer's; the
answer-predicting positions are the positions t whose next token t+1 is an answer token (the
logits at t predict it). Special tokens the tokenizer adds (Llama's BOS) are never answer
tokens. A prompt is tokenized whole with the tokenizer's special tokens, as `align.corpus`
does; one longer than --max-length is refused (cutting it would cut the answer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align import corpus
from align.errors import InputError


@dataclass
class AnswerPrompt:
    """One prompt: token ids (T,), per-token label strings, the (T,) boolean mask of
    answer-predicting positions, and its source document and answer text."""

    token_id: np.ndarray
    tokens: list
    predicts_answer: np.ndarray
    doc: int
    answer: str

    def __len__(self) -> int:
        return len(self.token_id)


def _jsonl_items(spec: corpus.CorpusSpec, reading: corpus.Reading, answer_field: str):
    """(where, prompt text, answer text) of each item of a .jsonl file, read through `reading`."""
    path, text_field, max_docs = spec.path, spec.text_field, spec.max_docs
    if not str(path).endswith(".jsonl"):
        raise InputError(
            f"prompts {path} are not a .jsonl file: an `answer_field` needs a .jsonl file with "
            f"{text_field!r} and {answer_field!r} fields; for other corpora give `answer_marker` TEXT"
        )
    n = 0
    if max_docs == 0:
        return
    for path, lines in reading.files():
        for where, item in corpus.json_lines(path, lines):
            if not isinstance(item, dict) or text_field not in item:
                raise InputError(f"{where} has no field {text_field!r}: pass `text_field` NAME")
            if answer_field not in item:
                raise InputError(
                    f"{where} has no answer field {answer_field!r}: give each item an answer, "
                    f"or pass `answer_field` NAME or `answer_marker` TEXT"
                )
            text, answer = item[text_field], item[answer_field]
            if not isinstance(text, str) or not isinstance(answer, str):
                raise InputError(
                    f"{where}: fields {text_field!r} and {answer_field!r} must be strings"
                )
            n += 1
            yield where, text + answer, len(text)
            if max_docs is not None and n >= max_docs:
                return


def _format_items(spec: corpus.CorpusSpec, reading: corpus.Reading):
    """A task format's prompts (`--format`): each knows where its answer starts."""
    for i, item in enumerate(corpus.items(spec, reading)):
        if not item.text.strip():
            continue
        where = f"{spec.describe()} document {i}"
        if item.answer_start is None:
            raise InputError(
                f"{where} (`format` {spec.fmt}) has no answer: give `answer_marker` TEXT"
            )
        yield where, item.text, item.answer_start


def _marked_items(spec: corpus.CorpusSpec, marker: str, reading: corpus.Reading):
    for i, text in enumerate(corpus.documents(spec, reading)):
        if not text.strip():
            continue  # as in align.corpus: a document without text is no prompt (its index is still consumed)
        where = f"{spec.describe()} document {i}"
        k = text.rfind(marker)
        if k < 0:
            raise InputError(
                f"{where} has no answer marker {marker!r}: every prompt needs it (the answer is the text "
                f"after its last occurrence); check `answer_marker`"
            )
        yield where, text, k + len(marker)


def _label(tokenizer, text: str, tid: int, start: int, end: int) -> str:
    return text[start:end] if start >= 0 else str(tokenizer.convert_ids_to_tokens(int(tid)))


def tokenize_answer(
    tokenizer, text: str, answer_start: int, max_length: int, where: str, prefix=None, suffix=None
) -> tuple[np.ndarray, list, np.ndarray, str]:
    """(token ids (T,), labels, answer-predicting mask (T,), answer) of one text whose
    answer is text[answer_start:] without leading whitespace."""
    if prefix is None or suffix is None:
        prefix, suffix = corpus.special_tokens(tokenizer)
    a0 = answer_start + (len(text[answer_start:]) - len(text[answer_start:].lstrip()))
    a1 = len(text)
    if a0 >= a1:
        raise InputError(f"{where} has an empty answer: give each prompt a non-blank answer")
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = np.asarray(enc["input_ids"], np.int64)
    offs = np.asarray(enc["offset_mapping"], np.int64).reshape(-1, 2)
    pre, suf = np.asarray(prefix, np.int64), np.asarray(suffix, np.int64)
    ids = np.concatenate([pre, ids, suf])
    offs = np.concatenate([np.full((len(pre), 2), -1), offs, np.full((len(suf), 2), -1)]).astype(
        np.int64
    )
    if len(ids) > max_length:
        raise InputError(
            f"{where} has {len(ids)} tokens, more than `max_length` {max_length}: cutting it would cut "
            f"its answer; raise `max_length` or shorten the prompt"
        )
    is_answer = (
        (offs[:, 0] >= 0) & (offs[:, 0] < a1) & (offs[:, 1] > a0) & (offs[:, 1] > offs[:, 0])
    )
    predicts = np.zeros(len(ids), bool)
    predicts[:-1] = is_answer[1:]
    if not predicts.any():
        raise InputError(
            f"{where}: no token predicts its answer {text[a0:a1]!r} (the answer must follow at least one token)"
        )
    labels = [_label(tokenizer, text, t, s, e) for t, (s, e) in zip(ids, offs)]
    return ids, labels, predicts, text[a0:a1]


def load_answer_prompts(
    spec: corpus.CorpusSpec,
    tokenizer,
    answer_field: str = "answer",
    answer_marker: str | None = None,
    reading: corpus.Reading | None = None,
) -> list[AnswerPrompt]:
    """Every prompt of the corpus with its answer (module docstring), in order.

    With `answer_marker`, any corpus; with a task format (`spec.fmt` not "plain"), where the
    format puts the answer; else a .jsonl file whose items hold `spec.text_field` and
    `answer_field`.

    Parameters
    ----------
    spec : CorpusSpec
        The corpus.
    tokenizer : transformers tokenizer
        The model's tokenizer.
    answer_field : str, optional
        The .jsonl field of the answer.
    answer_marker : str, optional
        The text that separates prompt and answer in each document.
    reading : Reading, optional
        The corpus is read through it (its hash: of the bytes these prompts came from).

    Returns
    -------
    list of AnswerPrompt
        Token ids (T,), per-token labels, the (T,) mask of answer-predicting positions, the
        document and the answer text.

    Raises
    ------
    InputError
        A prompt without its field, an empty answer, or an answer cut off by `max_length`.
    """
    corpus.validate(spec)
    marker = answer_marker
    if marker is not None and not marker:
        raise InputError("`answer_marker` is empty: give the text after which the answer starts")
    if marker is None and spec.fmt == "plain" and spec.path is None:
        raise InputError(
            "`dataset` prompts need `answer_marker` TEXT (an `answer_field` reads a .jsonl file)"
        )
    own = reading is None
    reading = reading or corpus.Reading(spec)
    if marker is not None:
        items = _marked_items(spec, marker, reading)
    elif spec.fmt != "plain":
        items = _format_items(spec, reading)
    else:
        items = _jsonl_items(spec, reading, answer_field)
    prefix, suffix = corpus.special_tokens(tokenizer)
    out = []
    try:
        for doc, (where, text, start) in enumerate(items):
            ids, labels, predicts, answer = tokenize_answer(
                tokenizer, text, start, spec.max_length, where, prefix, suffix
            )
            out.append(AnswerPrompt(ids, labels, predicts, doc, answer))
    finally:
        if own:
            reading.close()
    if not out:
        raise InputError(
            f"prompts {spec.describe()} hold no prompt: give at least one prompt with an answer"
        )
    return out
