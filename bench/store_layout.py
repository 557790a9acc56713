"""How activation stores should be chunked and compressed: write/read speed and size.

Data: real residuals, not noise: boundaries 0..2 of a Qwen2 with Qwen2.5-1.5B's widths (two
layers, random weights) over 8,192 tokens of text, stored as float32 and as bfloat16 bits.
For each codec and chunk size the array is written the way `align extract` writes it (whole
chunks along the token axis, one boundary per chunk row) and read back per boundary, as
`align fit` reads it.

    .venv/bin/python bench/store_layout.py

Writes bench/results/store_layout.json. Not run in CI.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))


def activations(n_tokens: int = 8192) -> np.ndarray:
    from extract import build  # the bench model of bench/extract.py
    from transformers import AutoModelForCausalLM

    from align import capture

    root = tempfile.mkdtemp()
    try:
        path = build(root)
        model = AutoModelForCausalLM.from_pretrained(path).eval()
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(0, 4096, (n_tokens // 512, 512), generator=g)
        out = capture.run(model, ids, torch.ones_like(ids), [0, 1, 2])
        return torch.stack([out["resid"][b].reshape(-1, 1536) for b in (0, 1, 2)]).numpy()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(data: np.ndarray, codec: str, C: int, root: str) -> dict:
    import zarr

    from align.store.codecs import compressors

    nb, n, d = data.shape
    chunk_bytes = C * d * data.dtype.itemsize
    path = os.path.join(root, f"{codec}-{C}.zarr")
    arr = zarr.create_array(path, shape=data.shape, chunks=(1, C, d), dtype=data.dtype, compressors=compressors(codec, data.dtype.itemsize),
                            fill_value=0, zarr_format=3)
    t = time.perf_counter()
    for s in range(0, n, C):
        arr[:, s:s + C] = data[:, s:s + C]
    write = time.perf_counter() - t
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)
    t = time.perf_counter()
    for b in range(nb):
        got = arr[b]
    read = time.perf_counter() - t
    assert np.array_equal(got, data[-1])
    shutil.rmtree(path)
    mb = data.nbytes / 2**20
    return {"codec": codec, "chunk_MiB": chunk_bytes / 2**20, "chunk_tokens": C, "write_MiB_s": mb / write,
            "read_MiB_s": mb / read, "ratio": data.nbytes / size}


def main() -> None:
    f32 = activations()
    b16 = torch.from_numpy(f32).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    root = tempfile.mkdtemp(prefix="align-bench-layout-")
    rows = []
    try:
        for name, data in (("float32", f32), ("bfloat16", b16)):
            for codec in ("none", "crc32c", "zstd", "blosc-lz4", "zstd+crc32c"):
                for chunk in (256, 1024, 4096):  # tokens: divide the 8,192 tokens evenly
                    r = measure(data, codec, chunk, root)
                    r["dtype"] = name
                    rows.append(r)
                    print(json.dumps(r))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out = os.path.join(os.path.dirname(__file__), "results", "store_layout.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"config": {"data": "resid boundaries 0..2, qwen2 1.5B widths, 2 layers, random weights, 8192 tokens",
                              "bytes_float32": int(f32.nbytes)}, "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
