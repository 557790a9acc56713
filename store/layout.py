"""The shape of an activation store (`schema: activations`), fixed when it is created.

Layout (ARCHITECTURE.md): a Zarr v3 group with

    resid       (boundary, token, d_model)   raw residual at the kept boundaries
    attn, mlp   (layer, token, d_model)      what each sublayer adds (optional)
    token_id, doc, seq, pos, char_start, char_end   (token,)
    boundary    (boundary,)  which residual boundaries 0..L are kept
    layer       (layer,)     which blocks' sublayer outputs are kept

Group attributes: `align` (schema, version), `provenance` (model, revision, hashes, corpus,
options, align version), `layout` (shapes, dtype, codec, chunking) and `progress`
(planned, committed_tokens, committed_sequences, complete).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align.store.codecs import physical_dtype

SCHEMA = "activations"
VERSION = 1
TOKEN_FIELDS = {
    "token_id": np.int32,
    "doc": np.int64,
    "seq": np.int64,
    "pos": np.int32,
    "char_start": np.int64,
    "char_end": np.int64,
}
TOKEN_CHUNK = 1 << 16
# Measured in bench/store_layout.py: 4 MiB chunks write as fast as larger ones and keep the
# writer's buffer small (49 boundaries x 4 MiB for Qwen2.5-14B).
CHUNK_BYTES = 4 << 20


def chunk_tokens_for(d_model: int, itemsize: int, target: int = CHUNK_BYTES) -> int:
    """Tokens per chunk: the power of two nearest `target` bytes per (boundary, chunk)."""
    n = max(1, target // (d_model * itemsize))
    p = 1 << int(round(np.log2(n)))
    return int(min(max(p, 64), 1 << 16))


@dataclass(frozen=True)
class Layout:
    """The shape of an activation store, fixed when it is created."""

    n_tokens: int
    n_sequences: int
    n_layers: int
    d_model: int
    boundaries: tuple[int, ...]
    layers: tuple[int, ...]  # blocks whose sublayer outputs are kept (empty: none)
    store_dtype: str
    codec: str
    chunk_tokens: int

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["boundaries"], d["layers"] = list(self.boundaries), list(self.layers)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Layout":
        d = dict(d)
        d["boundaries"], d["layers"] = tuple(d["boundaries"]), tuple(d["layers"])
        return cls(**d)

    def bytes_per_array(self) -> dict[str, int]:
        item = physical_dtype(self.store_dtype).itemsize
        out = {"resid": len(self.boundaries) * self.n_tokens * self.d_model * item}
        for name in ("attn", "mlp") if self.layers else ():
            out[name] = len(self.layers) * self.n_tokens * self.d_model * item
        for name, dt in TOKEN_FIELDS.items():
            out[name] = self.n_tokens * np.dtype(dt).itemsize
        return out
