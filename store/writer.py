"""Writing an activation store: the group created with its empty arrays, then token metadata
(the plan) and activations appended in whole chunks. `progress` is rewritten AFTER the data it
covers, so a killed run leaves a store that resumes and is marked incomplete."""

from __future__ import annotations

import warnings

import numpy as np

from align.errors import StoreError
from align.faults import fault_point
from align.store.codecs import compressors, physical_dtype
from align.store.group import open_group
from align.store.layout import SCHEMA, TOKEN_CHUNK, TOKEN_FIELDS, VERSION, Layout
from align.store.reader import ActivationStore


def create_activations(path: str, layout: Layout, attrs: dict, storage_options: dict | None = None):
    """Create (or recreate) the group and its arrays, empty, with progress = nothing planned."""
    import zarr

    # Mode "a" and per-array overwrite: mode "w" would wipe the folder, lock file included.
    g = open_group(path, "a", storage_options)
    comp = compressors(layout.codec, physical_dtype(layout.store_dtype).itemsize)
    pdt = physical_dtype(layout.store_dtype)
    C, N, d = layout.chunk_tokens, layout.n_tokens, layout.d_model
    extra = {"logical_dtype": layout.store_dtype}
    g.create_array(
        "resid",
        shape=(len(layout.boundaries), N, d),
        chunks=(1, C, d),
        dtype=pdt,
        compressors=comp,
        fill_value=0,
        dimension_names=("boundary", "token", "d_model"),
        overwrite=True,
        attributes=extra,
    )
    if layout.layers:
        for name in ("attn", "mlp"):
            g.create_array(
                name,
                shape=(len(layout.layers), N, d),
                chunks=(1, C, d),
                dtype=pdt,
                compressors=comp,
                fill_value=0,
                dimension_names=("layer", "token", "d_model"),
                overwrite=True,
                attributes=extra,
            )
    for name, dt in TOKEN_FIELDS.items():
        g.create_array(
            name,
            shape=(N,),
            chunks=(min(TOKEN_CHUNK, max(N, 1)),),
            dtype=dt,
            compressors=compressors("crc32c"),
            fill_value=-1,
            dimension_names=("token",),
            overwrite=True,
        )
    g.create_array(
        "boundary",
        data=np.asarray(layout.boundaries, dtype=np.int32),
        dimension_names=("boundary",),
        overwrite=True,
    )
    if layout.layers:
        g.create_array(
            "layer",
            data=np.asarray(layout.layers, dtype=np.int32),
            dimension_names=("layer",),
            overwrite=True,
        )
    g.attrs.update(
        {
            "align": {"schema": SCHEMA, "version": VERSION},
            "provenance": attrs,
            "layout": layout.to_json(),
            "progress": {
                "planned": False,
                "committed_tokens": 0,
                "committed_sequences": 0,
                "complete": False,
            },
        }
    )
    del zarr
    return g


class ActivationWriter:
    """Appends activations to a planned store in whole chunks and commits at batch ends.

    `append` takes one batch (already encoded to the storage dtype) and the number of
    sequences completed by it. Tokens go into a preallocated chunk buffer; when it fills, it
    and the whole chunks that follow in the same append (written straight from the caller's
    array, no copy) are written: one flush per append. With `threads` > 1 a flush's chunk
    writes (encoding and checksum included) run concurrently in a pool while the caller
    fills the next buffer; the next flush, `drain` or `finish` first waits for every chunk
    of the flush before it, and only then rewrites `progress`: a commit never covers a chunk
    that is not written. A resumed writer starts at the committed point and re-reads the
    partly covered chunk into its buffer, so it never rewrites a chunk it has not fully
    buffered.
    """

    def __init__(self, store: ActivationStore, threads: int = 1):
        self.store = store
        self.g = store.group
        self.C = store.chunk_tokens
        self.kinds = ["resid"] + (["attn", "mlp"] if store.layers else [])
        p = store.progress
        self.committed = (p["committed_tokens"], p["committed_sequences"])
        self.buf_start = (p["committed_tokens"] // self.C) * self.C
        self.buf_len = p["committed_tokens"] - self.buf_start
        # Two chunk buffers: one filled by `append` while the other's chunks are written.
        self._bufs = []
        for _ in range(2):
            self._bufs.append(
                {
                    k: np.empty(
                        (self.g[k].shape[0], self.C, self.g[k].shape[2]), dtype=self.g[k].dtype
                    )
                    for k in self.kinds
                }
            )
        self._cur = 0
        for k in self.kinds:
            if self.buf_len:
                self._bufs[0][k][:, : self.buf_len] = self.g[k][
                    :, self.buf_start : p["committed_tokens"]
                ]
        self.pending: list[tuple[int, int]] = []
        self.threads = max(1, int(threads))
        self._pool = None
        if self.threads > 1:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="align-chunk-writer")
        self._inflight: tuple[list, tuple[int, int] | None] | None = None
        self.flushes = 0

    def append(self, arrays: dict[str, np.ndarray], seq_end: int) -> None:
        """arrays[kind]: (n_kept, n_batch_tokens, d_model) in the physical storage dtype."""
        n = arrays["resid"].shape[1]
        self.pending.append((self.buf_start + self.buf_len + n, seq_end))
        C, buf = self.C, self._bufs[self._cur]
        m = min(C - self.buf_len, n)
        for k in self.kinds:
            buf[k][:, self.buf_len : self.buf_len + m] = arrays[k][:, :m]
        if self.buf_len + m < C:
            self.buf_len += m
            return
        # The buffer is full: it, and the whole chunks that follow in this append, are written.
        whole = ((n - m) // C) * C
        pieces = [(self.buf_start, buf, 0, C)]
        if whole:
            pieces.append((self.buf_start + C, arrays, m, m + whole))
        stop = self.buf_start + C + whole
        self._flush(pieces, stop)
        rest = n - m - whole
        nbuf = self._bufs[self._cur]
        for k in self.kinds:
            if rest:
                nbuf[k][:, :rest] = arrays[k][:, m + whole :]
        self.buf_start, self.buf_len = stop, rest

    def drain(self) -> None:
        """Wait for the chunk writes in flight and commit what they complete."""
        if self._inflight is None:
            return
        futures, commit = self._inflight
        self._inflight = None
        for f in futures:
            f.result()  # re-raises a failed write: nothing after it is committed
        if commit is not None:
            self.committed = commit
            self._progress(commit, complete=False)

    def close(self) -> None:
        """Drain and stop the writer threads."""
        try:
            self.drain()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def finish(self) -> None:
        """Write what remains (the last, partial chunk) and mark the store complete."""
        if self.buf_len:
            stop = self.buf_start + self.buf_len
            self._flush([(self.buf_start, self._bufs[self._cur], 0, self.buf_len)], stop)
            self.buf_start, self.buf_len = stop, 0
        self.close()
        if self.committed[0] != self.store.n_tokens:
            raise StoreError(
                f"store {self.store.path}: wrote {self.committed[0]:,} tokens but the plan has {self.store.n_tokens:,}"
            )
        import zarr

        fault_point("final_metadata")
        # Consolidated metadata lets xarray.open_zarr(STORE) open the group in one read.
        with warnings.catch_warnings():
            # zarr warns that consolidated metadata is not yet in the v3 spec, and about the
            # lock file beside the arrays; both are expected here.
            warnings.simplefilter("ignore")
            zarr.consolidate_metadata(
                self.g.store_path.store, self.g.store_path.path or None, zarr_format=3
            )
        self.g = zarr.open_group(self.g.store_path, mode="r+", zarr_format=3)
        self._progress(self.committed, complete=True)

    def _flush(self, pieces: list, stop: int) -> None:
        """Write `pieces` (store token start, {kind: array}, first, last token in the array),
        which cover the store's tokens up to `stop`, after the previous flush is written and
        committed. Each (kind, row, piece) is one task: whole chunks, contiguous in memory."""
        self.drain()
        done = [c for c in self.pending if c[0] <= stop]
        commit = done[-1] if done else None
        self.pending = [c for c in self.pending if c[0] > stop]
        self.flushes += 1
        futures = []
        for i, k in enumerate(self.kinds):
            arr = self.g[k]
            for r in range(arr.shape[0]):
                for start, src, a, b in pieces:
                    task = (arr, r, start, start + (b - a), src[k][r, a:b])
                    if self._pool is None:
                        _write_rows(*task)
                    else:
                        futures.append(self._pool.submit(_write_rows, *task))
            if i == 0:
                fault_point("mid_chunk_write")
        # The buffer just handed over is in use until this flush is drained: fill the other.
        if pieces[0][1] is self._bufs[self._cur]:
            self._cur = 1 - self._cur
        self._inflight = (futures, commit)
        if self._pool is None:
            self.drain()

    def _progress(self, committed: tuple[int, int], complete: bool) -> None:
        self.g.attrs["progress"] = {
            "planned": True,
            "committed_tokens": int(committed[0]),
            "committed_sequences": int(committed[1]),
            "complete": bool(complete),
        }


def _write_rows(arr, row: int, start: int, stop: int, data: np.ndarray) -> None:
    """One row's tokens [start, stop) of a chunked array: whole chunks (the array's last may
    be partial), so no chunk is read back; zarr encodes and checksums them in this thread's
    call."""
    arr[row, start:stop] = data


class PlanWriter:
    """Writes the token table (token_id, doc, seq, pos, char spans) in whole chunks, then
    marks the store planned. Runs before any activation is computed."""

    def __init__(self, store: ActivationStore):
        self.g = store.group
        self.store = store
        self.buf: dict[str, list[np.ndarray]] = {k: [] for k in TOKEN_FIELDS}
        self.start = 0
        self.n = 0

    def append(self, fields: dict[str, np.ndarray]) -> None:
        for k, dt in TOKEN_FIELDS.items():
            self.buf[k].append(np.asarray(fields[k], dtype=dt))
        self.n += len(fields["token_id"])
        if self.n >= TOKEN_CHUNK:
            self._flush((self.n // TOKEN_CHUNK) * TOKEN_CHUNK)

    def _flush(self, n: int) -> None:
        for k in TOKEN_FIELDS:
            data = np.concatenate(self.buf[k])
            self.g[k][self.start : self.start + n] = data[:n]
            self.buf[k] = [data[n:]]
        self.start += n
        self.n -= n

    def finish(self) -> None:
        if self.n:
            self._flush(self.n)
        if self.start != self.store.n_tokens:
            raise StoreError(
                f"store {self.store.path}: planned {self.start:,} tokens, expected {self.store.n_tokens:,}"
            )
        self.g.attrs["progress"] = {
            "planned": True,
            "committed_tokens": 0,
            "committed_sequences": 0,
            "complete": False,
        }
