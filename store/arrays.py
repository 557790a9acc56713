"""Activation stores from arrays already in memory (or made chunk by chunk), without a model.

For known-answer tests and benchmarks of `align fit`: a store whose residuals are chosen
(an exact affine function of another store, independent noise, a size that takes minutes)
goes through the same writer and layout as one made by `align extract`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from align.store.codecs import encode, physical_dtype
from align.store.layout import Layout, chunk_tokens_for
from align.store.reader import open_activations
from align.store.writer import ActivationWriter, PlanWriter, create_activations


class StoreShape(NamedTuple):
    """What a written store says of its model, where the arrays do not say it (None: from them).

    Attributes
    ----------
    n_layers : int, optional
        Blocks L (None: the largest boundary).
    d_model : int, optional
        Values per token (None: resid's last axis).
    boundaries : tuple of int, optional
        The boundaries of resid's first axis (None: 0..n_boundaries-1).
    """

    n_layers: int | None = None  # blocks L (None: the largest boundary)
    d_model: int | None = None  # values per token (None: resid's last axis)
    boundaries: tuple | None = (
        None  # the boundaries of resid's first axis (None: 0..n_boundaries-1)
    )


class StoreFormat(NamedTuple):
    """How a written store keeps its residuals."""

    store_dtype: str = "float32"  # float32, float16 or bfloat16
    codec: str = "none"  # one of store.codecs.CODECS
    chunk_tokens: int | None = None  # tokens per chunk (None: ~4 MiB chunks)


def write_activations(
    path: str,
    resid: np.ndarray | Callable[[int, int], np.ndarray],
    tokens: dict,
    provenance: dict,
    shape: StoreShape = StoreShape(),
    fmt: StoreFormat = StoreFormat(),
    complete: bool = True,
) -> str:
    """Write an activation store at `path`, of `shape`, in `fmt`.

    Parameters
    ----------
    path : str
        Where the store is written.
    resid : array of shape (n_boundaries, n_tokens, d_model) or callable
        float32 residuals, or a function (start, stop) -> that block of tokens, of shape
        (n_boundaries, stop - start, d_model), for stores larger than memory.
    tokens : dict
        token_id, doc, seq, pos, each of shape (n_tokens,) (char_start/char_end default to -1).
    provenance : dict
        The store's provenance dict (tokenizer_hash, model, ...).
    shape : StoreShape, optional
        The model's blocks, width and the boundaries of `resid`'s first axis (None: from the
        arrays).
    fmt : StoreFormat, optional
        The store's dtype, codec and chunking.
    complete : bool, optional
        With False the store is left planned but without activations, as a killed extraction
        leaves it.

    Returns
    -------
    str
        `path`.
    """
    n_layers, d_model, boundaries = shape
    store_dtype, codec, chunk_tokens = fmt
    n = len(tokens["token_id"])
    if callable(resid):
        first = resid(0, min(n, 1))
        nb, d = first.shape[0], first.shape[2]
    else:
        nb, _, d = resid.shape
    d = d_model or d
    boundaries = tuple(boundaries if boundaries is not None else range(nb))
    n_layers = n_layers if n_layers is not None else max(boundaries)
    C = chunk_tokens or min(chunk_tokens_for(d, physical_dtype(store_dtype).itemsize), n)
    layout = Layout(
        n, int(np.max(tokens["seq"])) + 1, n_layers, d, boundaries, (), store_dtype, codec, C
    )
    prov = {"n_layers": n_layers, "d_model": d, **provenance}
    create_activations(path, layout, prov)
    store = open_activations(path, mode="r+")
    pw = PlanWriter(store)
    fields = {k: np.asarray(tokens[k]) for k in ("token_id", "doc", "seq", "pos")}
    for k in ("char_start", "char_end"):
        fields[k] = np.asarray(tokens.get(k, np.full(n, -1)))
    pw.append(fields)
    pw.finish()
    if not complete:
        return path
    writer = ActivationWriter(open_activations(path, mode="r+"))
    seq = fields["seq"]
    for start in range(0, n, C):
        stop = min(n, start + C)
        block = resid(start, stop) if callable(resid) else resid[:, start:stop]
        # commit at whole sequences: the last sequence that ends inside this block
        writer.append(
            {
                "resid": np.ascontiguousarray(block, dtype=np.float32)
                if store_dtype == "float32"
                else encode(np.ascontiguousarray(block, dtype=np.float32), store_dtype)
            },
            int(seq[stop - 1]) + (1 if stop == n else 0),
        )
    writer.finish()
    return path
