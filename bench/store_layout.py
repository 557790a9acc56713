"""How activation stores should be chunked and compressed: write/read speed and size.

Data: real residuals, not noise: boundaries 0..2 of a Qwen2 with Qwen2.5-1.5B's widths (two
layers, random weights) over 8,192 tokens of text, stored as float32 and as bfloat16 bits.
For each codec and chunk size the array is written the way `align extract` writes it (whole
chunks along the token axis, one boundary per chunk row) and read back per boundary, as
`align fit` reads it.

    .venv/bin/python bench/store_layout.py            # codecs and chunk sizes
    .venv/bin/python bench/store_layout.py --writer   # the extraction writer vs raw Zarr

Writes bench/results/store_layout.json, and with --writer bench/results/store_writer.json:
the real writer path of `align extract` (its queue, writer thread, chunk buffer and chunk
writer threads 1, 2, 4) against a raw Zarr write of the same chunks with the same codec, in
the same run, at Qwen2.5-14B's chunk shape (512 tokens x 5,120, bfloat16 as uint16,
crc32c) and Qwen2.5-1.5B's (1,024 x 1,536). Not run in CI.
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

    from align.hooks import capture

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
    arr = zarr.create_array(
        path,
        shape=data.shape,
        chunks=(1, C, d),
        dtype=data.dtype,
        compressors=compressors(codec, data.dtype.itemsize),
        fill_value=0,
        zarr_format=3,
    )
    t = time.perf_counter()
    for s in range(0, n, C):
        arr[:, s : s + C] = data[:, s : s + C]
    write = time.perf_counter() - t
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)
    t = time.perf_counter()
    for b in range(nb):
        got = arr[b]
    read = time.perf_counter() - t
    assert np.array_equal(got, data[-1])
    shutil.rmtree(path)
    mb = data.nbytes / 2**20
    return {
        "codec": codec,
        "chunk_MiB": chunk_bytes / 2**20,
        "chunk_tokens": C,
        "write_MiB_s": mb / write,
        "read_MiB_s": mb / read,
        "ratio": data.nbytes / size,
    }


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
        json.dump(
            {
                "config": {
                    "data": "resid boundaries 0..2, qwen2 1.5B widths, 2 layers, random weights, 8192 tokens",
                    "bytes_float32": int(f32.nbytes),
                },
                "results": rows,
            },
            f,
            indent=2,
        )


def _writer_data(nb: int, n: int, d: int) -> np.ndarray:
    """bfloat16 bits of Gaussian values (the checksum does not care what they are)."""
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn((nb, n, d), generator=g)
        .to(torch.bfloat16)
        .view(torch.int16)
        .numpy()
        .view(np.uint16)
    )


def raw_write(data: np.ndarray, C: int, path: str) -> float:
    """Seconds to write `data` with Zarr directly: the same array metadata, chunks and codec
    as an activation store's resid, each chunk row written as whole chunks (zarr writes a
    call's chunks concurrently)."""
    import zarr

    from align.store.codecs import compressors

    nb, n, d = data.shape
    arr = zarr.create_array(
        path,
        shape=data.shape,
        chunks=(1, C, d),
        dtype=data.dtype,
        compressors=compressors("crc32c", 2),
        fill_value=0,
        zarr_format=3,
    )
    t = time.perf_counter()
    for s in range(0, n, C):
        arr[:, s : s + C] = data[:, s : s + C]
    return time.perf_counter() - t


def writer_write(data: np.ndarray, C: int, path: str, threads: int, seq_len: int) -> dict:
    """Seconds to write `data` through the extraction writer as `align extract` drives it:
    sequences of `seq_len` tokens handed over in items of 4 to the background writer thread
    (bounded queue), appended to the chunk buffer and written by `threads` chunk writers,
    committed, finished (consolidated metadata). The store is planned first (untimed)."""
    from align.extraction import pipeline as ex
    from align.store import writer as act
    from align.store.arrays import StoreFormat, write_activations
    from align.store.reader import open_activations

    nb, n, d = data.shape
    seq = np.arange(n) // seq_len
    tokens = {
        "token_id": np.zeros(n, np.int32),
        "doc": seq,
        "seq": seq,
        "pos": np.arange(n) % seq_len,
    }
    write_activations(
        path,
        lambda a, b: np.zeros((nb, b - a, d), np.float32),
        tokens,
        {"tokenizer_hash": "bench"},
        fmt=StoreFormat("bfloat16", "crc32c", C),
        complete=False,
    )
    store = open_activations(path, mode="r+")
    t = time.perf_counter()
    w = act.ActivationWriter(store, threads=threads)
    bg = ex._BackgroundWriter(w)
    item = []
    for s in range(0, n, seq_len):
        item.append(({"resid": data[:, s : s + seq_len]}, int(seq[s]) + 1))
        if len(item) == 4:
            bg.put(item)
            item = []
    if item:
        bg.put(item)
    bg.close()
    w.finish()
    dt = time.perf_counter() - t
    assert open_activations(path).complete
    return {"seconds": dt, "queue_blocked_s": bg.blocked_s}


def writer_bench(reps: int = 5) -> None:
    shapes = [("Qwen2.5-14B", 5120, 512, 8, 8192), ("Qwen2.5-1.5B", 1536, 1024, 16, 16384)]
    all_boundaries = {"Qwen2.5-14B": 49, "Qwen2.5-1.5B": 29}  # what a full extraction keeps
    root = tempfile.mkdtemp(prefix="align-bench-writer-")
    rows = []
    try:
        for model, d, C, nb, n in shapes:
            data = _writer_data(nb, n, d)
            mib = data.nbytes / 2**20
            for rep in range(
                reps
            ):  # interleaved, so a neighbour's load falls on every variant alike
                p = os.path.join(root, "raw.zarr")
                sec = raw_write(data, C, p)
                shutil.rmtree(p)
                rows.append(
                    {
                        "model": model,
                        "path": "raw zarr",
                        "threads": None,
                        "rep": rep,
                        "seconds": sec,
                    }
                )
                for threads in (1, 2, 4):
                    p = os.path.join(root, "w.zarr")
                    r = writer_write(data, C, p, threads, seq_len=384)
                    shutil.rmtree(p)
                    rows.append(
                        {
                            "model": model,
                            "path": "align writer",
                            "threads": threads,
                            "rep": rep,
                            **r,
                        }
                    )
            for r in rows:
                if r["model"] == model:
                    r.update(
                        {
                            "MiB": mib,
                            "tokens": n,
                            "MiB_s": mib / r["seconds"],
                            "tokens_s": n / r["seconds"],
                            "chunk": f"{C} x {d}",
                            "boundaries": nb,
                        }
                    )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = []
    for model, d, C, nb, n in shapes:
        raw = sorted(r["MiB_s"] for r in rows if r["model"] == model and r["path"] == "raw zarr")
        raw_med = raw[len(raw) // 2]
        per_token = {
            "tokens_s_median": nb * d * 2,
            "tokens_s_all_boundaries": all_boundaries[model] * d * 2,
        }
        summary.append(
            {
                "model": model,
                "path": "raw zarr",
                "threads": None,
                "MiB_s_median": raw_med,
                **{k: raw_med * 2**20 / v for k, v in per_token.items()},
                "of_raw": 1.0,
            }
        )
        for threads in (1, 2, 4):
            got = sorted(
                r["MiB_s"] for r in rows if r["model"] == model and r["threads"] == threads
            )
            med = got[len(got) // 2]
            summary.append(
                {
                    "model": model,
                    "path": "align writer",
                    "threads": threads,
                    "MiB_s_median": med,
                    **{k: med * 2**20 / v for k, v in per_token.items()},
                    "of_raw": med / raw_med,
                }
            )
    for r in summary:
        print(json.dumps(r))
    out = os.path.join(os.path.dirname(__file__), "results", "store_writer.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(
            {
                "config": {
                    "data": "bfloat16 bits of Gaussian values, codec crc32c, 640 MiB (14B: 8 boundaries x 8,192 tokens) and 768 MiB (1.5B: 16 x 16,384); sequences of "
                    "384 tokens handed to the writer in items of 4",
                    "reps": reps,
                    "cpus": os.cpu_count(),
                    "note": "2 CPU cores shared with other jobs",
                },
                "summary": summary,
                "runs": rows,
            },
            f,
            indent=2,
        )


if __name__ == "__main__":
    writer_bench() if "--writer" in sys.argv[1:] else main()
