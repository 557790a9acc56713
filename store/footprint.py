"""What a Zarr v3 store takes on a local disk, counted as zarr writes it: pure arithmetic on
shapes and sizes, in bytes, for the disk checks that run before anything is computed.

- Every chunk is written whole: where a chunk shape does not divide the array's, the last
  chunk along that axis is padded to the full chunk shape (`chunk_grid`), so an array of
  N tokens in chunks of C takes ⌈N / C⌉ · C tokens.
- A chunk's bytes pass through the codec: a checksum adds 4 bytes; a compressor is counted
  at its bound for data it cannot compress (activations compress 1.0–1.2x).
- Each chunk is a file `c/i/j/...` below the array's folder, with a folder per level of its
  key; each array has its `zarr.json`, the group one holding its attributes (indented
  JSON, as zarr writes it) and, once consolidated, a copy of every array's metadata.
- Every file takes whole blocks of the file system, and so does every folder (ext4, xfs;
  tmpfs counts none for a folder, so there this errs high by a block a folder).
"""

from __future__ import annotations

import json
import math

BLOCK = 4096  # bytes of a file-system block, when the file system does not say
METADATA_BYTES = (
    2048  # one array's zarr.json at most (measured 650-1,000 bytes), and its consolidated copy
)
ENTRY_BYTES = 32  # a folder entry (ext4: 8 bytes + the name rounded up to 4; names here are short)
GROUP_EXTRA = 512  # the group zarr.json's own fields around its attributes
# One chunk of a result at most: zarr's own ceiling for a chunk it chooses. Results are
# written with these chunks (align.store.results), so their size is known before the write.
RESULT_CHUNK_BYTES = 64 << 20


def on_disk(n_bytes: int, block: int = BLOCK) -> int:
    """Bytes a file of `n_bytes` takes: whole blocks (an empty file takes none)."""
    return block * math.ceil(max(int(n_bytes), 0) / block)


def encoded_bytes(raw: int, codec: str) -> int:
    """Bytes one chunk of `raw` bytes takes once encoded by `codec` (align.store.codecs'
    names; "zstd" also for the result writer's default), at most: "none" adds nothing,
    "crc32c" 4 bytes; a compressor its bound for incompressible data, raw + raw/256 + 64
    (zstd's ZSTD_COMPRESSBOUND; blosc adds a 16-byte header and never more than that)."""
    out = raw
    if codec in ("zstd", "blosc-lz4", "zstd+crc32c"):
        out += raw // 256 + 64
    if codec in ("crc32c", "zstd+crc32c"):
        out += 4
    return out


def folder_bytes(entries: int, block: int = BLOCK) -> int:
    """Bytes a folder of `entries` entries takes (a block at least)."""
    return max(block, on_disk(ENTRY_BYTES * (entries + 2), block))


def chunk_grid(shape, chunks) -> tuple:
    """Chunks along each axis: ⌈shape_k / chunks_k⌉ (one for an empty axis, as zarr counts)."""
    return tuple(max(1, math.ceil(s / c)) for s, c in zip(shape, chunks))


def array_bytes(shape, chunks, itemsize: int, codec: str, block: int = BLOCK) -> int:
    """Bytes an array of `shape` in `chunks` of `itemsize`-byte values takes when every chunk
    is written: its chunk files (each of the full chunk shape, encoded), the folders of its
    chunk keys (`c`, then one per key prefix), its own folder and its zarr.json."""
    shape, chunks = tuple(shape), tuple(chunks)
    grid = chunk_grid(shape, chunks)
    raw = itemsize * math.prod(chunks)
    files = math.prod(grid) * on_disk(encoded_bytes(raw, codec), block)
    if not shape:  # a 0-d array's one chunk is the file `c` beside its zarr.json
        return files + folder_bytes(2, block) + on_disk(METADATA_BYTES, block)
    folders = folder_bytes(2, block) + folder_bytes(grid[0], block)
    for k in range(1, len(grid)):
        folders += math.prod(grid[:k]) * folder_bytes(grid[k], block)
    return files + folders + on_disk(METADATA_BYTES, block)


def json_bytes(obj) -> int:
    """Bytes of `obj` as zarr writes attributes: JSON indented by 2."""
    return len(json.dumps(obj, indent=2).encode())


def group_bytes(attrs_bytes: int, n_arrays: int, consolidated: bool, block: int = BLOCK) -> int:
    """Bytes of a group's zarr.json holding `attrs_bytes` of attributes (as `json_bytes`
    counts them) and, `consolidated`, a copy of each of its `n_arrays` arrays' metadata,
    with its folder."""
    text = GROUP_EXTRA + attrs_bytes + (n_arrays * METADATA_BYTES if consolidated else 0)
    return on_disk(text, block) + folder_bytes(n_arrays + 2, block)


def result_chunks(shape, itemsize: int, limit: int = RESULT_CHUNK_BYTES) -> tuple:
    """The chunks a result's array of `shape` is written in: the whole array when it takes
    at most `limit` bytes, else the leading axes cut so that a chunk does (trailing axes
    whole, as long as they fit)."""
    chunks = [max(1, int(s)) for s in shape]
    for k in range(len(chunks)):
        if itemsize * math.prod(chunks[k:]) <= limit:
            break
        rest = itemsize * math.prod(chunks[k + 1 :])
        chunks[k] = max(1, limit // rest)
    return tuple(chunks)
