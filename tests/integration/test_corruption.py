"""Damaged chunks are detected on read and named, never returned as numbers."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from align.errors import StoreError
from align.store import open_activations


@pytest.fixture
def damaged(extracted, tmp_path):
    """A copy of a complete store with 256-token chunks (crc32c, the default codec)."""
    src = extracted("qwen2", chunk_tokens=256, batch_size=4)
    dst = str(tmp_path / "copy.zarr")
    shutil.copytree(src, dst)
    return dst


def _chunk(store, kind, *key):
    return os.path.join(store, kind, "c", *map(str, key))


def test_flipped_byte_is_named(damaged):
    s = open_activations(damaged)
    clean = s.resid(1, 0, 256).copy()
    path = _chunk(damaged, "resid", 1, 3, 0)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(path, "wb").write(bytes(data))
    np.testing.assert_array_equal(s.resid(1, 0, 256), clean)  # undamaged chunks still read
    with pytest.raises(StoreError) as e:
        s.resid(1)
    msg = str(e.value)
    assert "'resid'" in msg and "(1, 3, 0)" in msg and "resid/c/1/3/0" in msg and "checksum" in msg
    assert "\n" not in msg
    with pytest.raises(StoreError, match=r"\(1, 3, 0\)"):
        s.dask("resid", 1).compute()


def test_truncated_chunk_is_named(damaged):
    path = _chunk(damaged, "resid", 0, 2, 0)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 3])
    with pytest.raises(StoreError, match=r"'resid' chunk \(0, 2, 0\)"):
        open_activations(damaged).resid(0)


def test_missing_chunk_is_named(damaged):
    os.unlink(_chunk(damaged, "resid", 2, 1, 0))
    with pytest.raises(StoreError, match=r"'resid' chunk \(2, 1, 0\).*missing"):
        open_activations(damaged).resid(2, 300, 400)


def test_damaged_token_table_is_named(damaged):
    path = _chunk(damaged, "token_id", 0)
    data = bytearray(open(path, "rb").read())
    data[5] ^= 0xFF
    open(path, "wb").write(bytes(data))
    with pytest.raises(StoreError, match=r"'token_id' chunk \(0,\)"):
        open_activations(damaged).tokens("token_id")
