"""Storage dtypes and codecs of activation stores.

Zarr has no bfloat16: its bits are stored as uint16 and the logical dtype is recorded in the
array's attributes. float16 storage checks for overflow (|x| > 65504) and refuses, naming
the boundary and the largest value, instead of saturating to inf.
"""

from __future__ import annotations

import numpy as np

from align.errors import InputError, OverflowError16

STORE_DTYPES = ("float32", "float16", "bfloat16")
FLOAT16_MAX = 65504.0

# Measured in bench/store_layout.py (docs/performance.md, the store layout): activations compress 1.0-1.2x,
# so compression buys little and costs write speed; a crc32c checksum costs almost nothing and
# turns a flipped byte or a truncated chunk into an error instead of wrong numbers.
CODECS = ("crc32c", "none", "zstd", "blosc-lz4", "zstd+crc32c")
DEFAULT_CODEC = "crc32c"


def physical_dtype(store_dtype: str) -> np.dtype:
    if store_dtype not in STORE_DTYPES:
        raise InputError(f"`store_dtype` {store_dtype!r} is not one of {', '.join(STORE_DTYPES)}")
    return np.dtype(np.uint16) if store_dtype == "bfloat16" else np.dtype(store_dtype)


def compressors(codec: str, itemsize: int = 2):
    """Zarr v3 bytes-to-bytes codecs for a codec name (`itemsize`: bytes per stored value,
    for blosc's shuffle)."""
    from zarr.codecs import BloscCodec, Crc32cCodec, ZstdCodec

    table = {
        "none": [],
        "crc32c": [Crc32cCodec()],
        "zstd": [ZstdCodec(level=1)],
        "blosc-lz4": [BloscCodec(cname="lz4", clevel=1, shuffle="bitshuffle", typesize=itemsize)],
        "zstd+crc32c": [ZstdCodec(level=1), Crc32cCodec()],
    }
    if codec not in table:
        raise InputError(f"`codec` {codec!r} is not one of {', '.join(CODECS)}")
    return table[codec]


def encode(x, store_dtype: str, what: str = "values") -> np.ndarray:
    """A torch tensor or numpy array (any float dtype) to the stored representation.

    bfloat16: the bits as uint16 (a float32 input is rounded to nearest-even by torch, as
    `tensor.to(torch.bfloat16)` does). float16: refuses values beyond ±65504.
    """
    import torch

    t = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x))
    t = t.detach()
    if store_dtype == "bfloat16":
        return t.to(torch.bfloat16).contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
    if store_dtype == "float16":
        if t.numel():
            amax = float(t.abs().max())
            if not np.isfinite(amax) or amax > FLOAT16_MAX:
                raise OverflowError16(
                    f"{what} has a value of magnitude {amax:.6g}, beyond float16's {FLOAT16_MAX:g}: "
                    "use `store_dtype` bfloat16 or float32"
                )
        return t.to(torch.float16).cpu().numpy()
    return t.to(torch.float32).cpu().numpy()


def decode(a: np.ndarray, store_dtype: str) -> np.ndarray:
    """Stored representation to float32 (exact for every storage dtype)."""
    if store_dtype == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32, copy=False)
