"""Prompts for the analyses: the corpus options of `align extract`, cut into sequences by
`align.corpus`, batched with right padding.

A prompt is one sequence of `corpus.sequences` (one window of one document, special tokens
included). Padding is on the right and masked; position ids come from the mask, so a padded
prompt runs exactly as it would alone, up to the rounding of a different batch shape.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from align import corpus
from align.errors import InputError


def load_prompts(
    spec: corpus.CorpusSpec, tokenizer, reading: corpus.Reading | None = None
) -> list[np.ndarray]:
    """Token ids of every prompt of the corpus, in corpus order.

    Parameters
    ----------
    spec : CorpusSpec
        The corpus.
    tokenizer : transformers tokenizer
        The model's tokenizer.
    reading : Reading, optional
        The corpus is read through it (its hash: of the bytes these prompts came from).

    Returns
    -------
    list of array of shape (n_prompt_tokens,)
        int64 token ids, one array a prompt.

    Raises
    ------
    InputError
        A corpus with no text.
    """
    prompts = [
        np.asarray(sq.token_id, np.int64)
        for sq in corpus.sequences(spec, tokenizer, reading=reading)
    ]
    if not prompts:
        raise InputError(
            f"corpus {spec.describe()} has no text to tokenize: give a corpus with at least one non-empty document"
        )
    return prompts


def batches(prompts: list[np.ndarray], batch_size: int) -> Iterator[list[np.ndarray]]:
    """Consecutive groups of at most `batch_size` prompts."""
    if batch_size < 1:
        raise InputError(f"`batch_size` {batch_size} must be at least 1")
    for i in range(0, len(prompts), batch_size):
        yield prompts[i : i + batch_size]


def pad(batch: list[np.ndarray], device=None):
    """Right-padded (input_ids, attention_mask, position_ids), each a long tensor (B, T_max).

    Padding slots hold token 0 and mask 0; position ids count real tokens from 0."""
    import torch

    T = max(len(x) for x in batch)
    ids = torch.zeros((len(batch), T), dtype=torch.long)
    mask = torch.zeros((len(batch), T), dtype=torch.long)
    for i, x in enumerate(batch):
        ids[i, : len(x)] = torch.as_tensor(np.asarray(x, np.int64))
        mask[i, : len(x)] = 1
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    if device is not None:
        ids, mask, position_ids = ids.to(device), mask.to(device), position_ids.to(device)
    return ids, mask, position_ids
