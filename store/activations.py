"""Activation stores (`schema: activations`): create, append in committed batches, open.

Layout (ARCHITECTURE.md): a Zarr v3 group with

    resid       (boundary, token, d_model)   raw residual at the kept boundaries
    attn, mlp   (layer, token, d_model)      what each sublayer adds (optional)
    token_id, doc, seq, pos, char_start, char_end   (token,)
    boundary    (boundary,)  which residual boundaries 0..L are kept
    layer       (layer,)     which blocks' sublayer outputs are kept

Group attributes: `align` (schema, version), `provenance` (model, revision, hashes, corpus,
options, align version), `layout` (shapes, dtype, codec, chunking) and `progress`
(planned, committed_tokens, committed_sequences, complete). Token metadata is written first
(the plan); activations are appended in whole chunks and `progress` is rewritten AFTER the
data it covers, so a killed run leaves a store that resumes and is marked incomplete.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass

import numpy as np

from align.errors import AlignError, NonFiniteError, StoreError
from align.faults import fault_point
from align.store.codecs import compressors, decode, physical_dtype
from align.store.outputs import local_path
from align.version import __version__

SCHEMA = "activations"
VERSION = 1
# The schema versions this release reads (`attrs["align"]["version"]`), of activation stores and
# of results (version 1 named the alignment's boundary dims source_layer/target_layer, renamed
# when read: align.store.results); any other is refused by read_attrs, naming the version and
# the align that wrote it.
READABLE_VERSIONS = {"activations": (1,), "result": (1, 2)}
TOKEN_FIELDS = {
    "token_id": np.int32,
    "doc": np.int64,
    "seq": np.int64,
    "pos": np.int32,
    "char_start": np.int64,
    "char_end": np.int64,
}
TOKEN_CHUNK = 1 << 16


def configure_zarr() -> None:
    """Every chunk is written, even one equal to the fill value, so that a missing chunk file
    always means damage (checked on read) rather than "all zeros"."""
    import zarr

    zarr.config.set({"array.write_empty_chunks": True})
# Measured in bench/store_layout.py: 4 MiB chunks write as fast as larger ones and keep the
# writer's buffer small (49 boundaries x 4 MiB for Qwen2.5-14B).
CHUNK_BYTES = 4 << 20


def chunk_tokens_for(d_model: int, itemsize: int, target: int = CHUNK_BYTES) -> int:
    """Tokens per chunk: the power of two nearest `target` bytes per (boundary, chunk)."""
    n = max(1, target // (d_model * itemsize))
    p = 1 << int(round(np.log2(n)))
    return int(min(max(p, 64), 1 << 16))


def is_local(path: str) -> bool:
    return "://" not in str(path) or str(path).startswith("file://")


def _open_group(path: str, mode: str, storage_options: dict | None = None):
    import zarr

    configure_zarr()
    path = local_path(str(path)) or path
    kwargs = {"storage_options": storage_options} if storage_options and not is_local(path) else {}
    return zarr.open_group(str(path), mode=mode, zarr_format=3, **kwargs)


def exists(path: str, storage_options: dict | None = None) -> bool:
    if is_local(path):
        return os.path.exists(os.path.join(local_path(str(path)), "zarr.json"))
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(str(path), **(storage_options or {}))
        return fs.exists(root.rstrip("/") + "/zarr.json")
    except Exception as e:  # an unreachable endpoint, refused credentials, an unknown protocol
        raise StoreError(f"{path} cannot be reached: {type(e).__name__}: {' '.join(str(e).split())[:200]}") from None


def read_attrs(path: str, storage_options: dict | None = None) -> dict:
    """The group attributes of any align store, or a StoreError saying why not."""
    if not exists(path, storage_options):
        raise StoreError(f"{path} is not a store: it has no zarr.json (make it with `align extract` or `align fit`)")
    try:
        g = _open_group(path, "r", storage_options)
    except Exception as e:  # zarr raises many types for a damaged group
        raise StoreError(f"{path} cannot be opened as a Zarr v3 group: {type(e).__name__}: {e}") from None
    attrs = g.attrs.asdict()
    if not isinstance(attrs.get("align"), dict) or "schema" not in attrs["align"]:
        raise StoreError(f"{path} is a Zarr group but not an align store (no align.schema attribute)")
    marker = attrs["align"]
    readable = READABLE_VERSIONS["activations" if marker["schema"] == SCHEMA else "result"]
    if marker.get("version") not in readable:
        raise StoreError(
            f"{path} is an align {marker['schema']} store of schema version {marker.get('version')!r}, written by align "
            f"{marker.get('align_version', attrs.get('align_version', 'unknown'))}; align {__version__} reads version "
            f"{', '.join(map(str, readable))}: open it with the align release that wrote it")
    return attrs


def clean_partial_writes(path: str) -> int:
    """Remove the temporary files a killed write left behind (zarr writes `*.partial` and
    renames it into place). Returns how many were removed."""
    if not is_local(path):
        return 0
    removed = 0
    for root, _, files in os.walk(str(path)):
        for f in files:
            if f.endswith(".partial"):
                os.unlink(os.path.join(root, f))
                removed += 1
    return removed


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


def create_activations(path: str, layout: Layout, attrs: dict, storage_options: dict | None = None):
    """Create (or recreate) the group and its arrays, empty, with progress = nothing planned."""
    import zarr

    # Mode "a" and per-array overwrite: mode "w" would wipe the folder, lock file included.
    g = _open_group(path, "a", storage_options)
    comp = compressors(layout.codec, physical_dtype(layout.store_dtype).itemsize)
    pdt = physical_dtype(layout.store_dtype)
    C, N, d = layout.chunk_tokens, layout.n_tokens, layout.d_model
    extra = {"logical_dtype": layout.store_dtype}
    g.create_array("resid", shape=(len(layout.boundaries), N, d), chunks=(1, C, d), dtype=pdt,
                   compressors=comp, fill_value=0, dimension_names=("boundary", "token", "d_model"), overwrite=True,
                   attributes=extra)
    if layout.layers:
        for name in ("attn", "mlp"):
            g.create_array(name, shape=(len(layout.layers), N, d), chunks=(1, C, d), dtype=pdt,
                           compressors=comp, fill_value=0, dimension_names=("layer", "token", "d_model"), overwrite=True,
                           attributes=extra)
    for name, dt in TOKEN_FIELDS.items():
        g.create_array(name, shape=(N,), chunks=(min(TOKEN_CHUNK, max(N, 1)),), dtype=dt,
                       compressors=compressors("crc32c"), fill_value=-1, dimension_names=("token",), overwrite=True)
    g.create_array("boundary", data=np.asarray(layout.boundaries, dtype=np.int32), dimension_names=("boundary",), overwrite=True)
    if layout.layers:
        g.create_array("layer", data=np.asarray(layout.layers, dtype=np.int32), dimension_names=("layer",), overwrite=True)
    g.attrs.update({
        "align": {"schema": SCHEMA, "version": VERSION},
        "provenance": attrs,
        "layout": layout.to_json(),
        "progress": {"planned": False, "committed_tokens": 0, "committed_sequences": 0, "complete": False},
    })
    del zarr
    return g


class ActivationStore:
    """Read access to an activation store. Boundaries and layers are addressed by their model
    index (boundary 0..L, layer 0..L-1), whatever subset the store keeps."""

    def __init__(self, path: str, storage_options: dict | None = None, mode: str = "r"):
        attrs = read_attrs(path, storage_options)
        if attrs["align"]["schema"] != SCHEMA:
            raise StoreError(f"{path} is an align store of schema {attrs['align']['schema']!r}, not an activation store")
        self.path = local_path(str(path)) or str(path)
        self.storage_options = storage_options
        self.group = _open_group(path, mode, storage_options)
        self.attrs = attrs
        try:
            self.layout = Layout.from_json(attrs["layout"])
            physical_dtype(self.layout.store_dtype)
        except (KeyError, TypeError, ValueError, AlignError) as e:
            raise StoreError(f"store {path} has a damaged layout attribute ({type(e).__name__}: {e}): re-extract the store") from None
        self.provenance = attrs["provenance"]
        key = self._metadata_key()
        if key is None or key not in _checked:
            self._check_arrays()
            if key is not None:
                _checked.add(key)

    def _metadata_key(self):
        """What identifies this store's metadata as checked, so that a process opening it once
        per task (the fit) checks it once: locally the size and mtime of every zarr.json (an
        edit changes them), on an object store the URL and options (one command's lifetime)."""
        if not is_local(self.path):
            return (self.path, _freeze(self.storage_options), json.dumps(self.attrs["layout"], sort_keys=True))
        stats = []
        for name in ("", *self._expected_arrays()):
            try:
                st = os.stat(os.path.join(self.path, name, "zarr.json"))
            except OSError:
                return None
            stats.append((name, st.st_size, st.st_mtime_ns, st.st_ino))
        return (os.path.realpath(self.path), tuple(stats))

    def _expected_arrays(self) -> dict[str, tuple[tuple, np.dtype, tuple]]:
        """array name -> (shape, dtype, chunk shape) that the layout prescribes."""
        L = self.layout
        pdt, N, d = physical_dtype(L.store_dtype), L.n_tokens, L.d_model
        out = {"resid": ((len(L.boundaries), N, d), pdt, (1, L.chunk_tokens, d)),
               "boundary": ((len(L.boundaries),), np.dtype(np.int32), None)}
        if L.layers:
            for name in ("attn", "mlp"):
                out[name] = ((len(L.layers), N, d), pdt, (1, L.chunk_tokens, d))
            out["layer"] = ((len(L.layers),), np.dtype(np.int32), None)
        for name, dt in TOKEN_FIELDS.items():
            out[name] = ((N,), np.dtype(dt), (min(TOKEN_CHUNK, max(N, 1)),))
        return out

    def _check_arrays(self) -> None:
        """Refuse a store whose arrays' metadata (data type, shape, chunking, logical dtype)
        disagrees with its `layout`: an edited or damaged zarr.json would otherwise be read
        as garbage. Both what readers use (the consolidated metadata, when present) and each
        array's own zarr.json are checked."""
        views = [self.group]
        if getattr(self.group.metadata, "consolidated_metadata", None) is not None:
            import zarr

            kwargs = {"storage_options": self.storage_options} if self.storage_options and not is_local(self.path) else {}
            views.append(zarr.open_group(self.path, mode="r", zarr_format=3, use_consolidated=False, **kwargs))
        fix = "its metadata was edited or damaged: re-extract the store (or restore it from a copy)"
        for name, (shape, dtype, chunks) in self._expected_arrays().items():
            for view in views:
                try:
                    arr = view[name]
                except Exception as e:  # KeyError, or zarr's errors for unreadable metadata
                    raise StoreError(f"store {self.path}: array {name!r} cannot be opened ({type(e).__name__}: {e}); {fix}") from None
                found = [("data type", dtype, arr.dtype), ("shape", shape, tuple(arr.shape))]
                if chunks is not None:
                    found.append(("chunk shape", chunks, tuple(arr.chunks)))
                if name in ("resid", "attn", "mlp"):
                    found.append(("logical_dtype", self.layout.store_dtype, arr.attrs.get("logical_dtype")))
                for what, want, got in found:
                    if want != got:
                        want_s = str(want) if not isinstance(want, np.dtype) else want.name
                        got_s = str(got) if not isinstance(got, np.dtype) else got.name
                        raise StoreError(f"store {self.path}: array {name!r} has {what} {got_s}, expected {want_s} "
                                         f"(from the store's layout: {self._layout_summary()}); {fix}")
        kept = tuple(int(b) for b in self.group["boundary"][:])
        if kept != tuple(self.layout.boundaries):
            raise StoreError(f"store {self.path}: array 'boundary' holds {list(kept)}, expected {list(self.layout.boundaries)} "
                             f"(from the store's layout); {fix}")

    def _layout_summary(self) -> str:
        L = self.layout
        return (f"{len(L.boundaries)} boundaries, {L.n_tokens:,} tokens, d_model {L.d_model}, "
                f"store_dtype {L.store_dtype}, {L.chunk_tokens} tokens per chunk")

    # -- what it holds
    @property
    def progress(self) -> dict:
        return self.group.attrs["progress"]

    @property
    def complete(self) -> bool:
        return bool(self.progress["complete"])

    @property
    def n_tokens(self) -> int:
        return self.layout.n_tokens

    @property
    def d_model(self) -> int:
        return self.layout.d_model

    @property
    def n_layers(self) -> int:
        return self.layout.n_layers

    @property
    def boundaries(self) -> tuple[int, ...]:
        return self.layout.boundaries

    @property
    def layers(self) -> tuple[int, ...]:
        return self.layout.layers

    @property
    def chunk_tokens(self) -> int:
        return self.layout.chunk_tokens

    def require_complete(self) -> "ActivationStore":
        if not self.complete:
            p = self.progress
            raise StoreError(
                f"store {self.path} is incomplete ({p['committed_tokens']:,} of {self.n_tokens:,} tokens committed): "
                "re-run the same `align extract` command to finish it"
            )
        return self

    def _index(self, kind: str, index: int) -> int:
        keep = self.boundaries if kind == "resid" else self.layers
        if index not in keep:
            what = "boundary" if kind == "resid" else "layer"
            raise StoreError(f"store {self.path} does not hold {kind} at {what} {index}: it holds {list(keep)}")
        return keep.index(index)

    # -- numpy access
    def read(self, kind: str, index: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        """float32 (n_tokens, d_model): `kind` is resid (by boundary) or attn/mlp (by layer).
        Refuses NaN and ±inf (NonFiniteError naming the array, row, chunk and token)."""
        x = decode(self.raw(kind, index, start, stop), self.layout.store_dtype)
        check_finite(x, self.group, self.path, kind, index, start)
        return x

    def resid(self, boundary: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        return self.read("resid", boundary, start, stop)

    def attn(self, layer: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        return self.read("attn", layer, start, stop)

    def mlp(self, layer: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        return self.read("mlp", layer, start, stop)

    def raw(self, kind: str, index: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        """The stored values without decoding (uint16 bits for bfloat16)."""
        i = self._index(kind, index)
        stop = self.n_tokens if stop is None else min(stop, self.n_tokens)
        return checked_read(self.group, self.path, kind, start, stop, row=i)

    def tokens(self, name: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        if name not in TOKEN_FIELDS:
            raise StoreError(f"{name!r} is not a token field: one of {', '.join(TOKEN_FIELDS)}")
        stop = self.n_tokens if stop is None else min(stop, self.n_tokens)
        return checked_read(self.group, self.path, name, start, stop)

    # -- dask access
    def dask(self, kind: str, index: int):
        """Lazy float32 (n_tokens, d_model) dask array, one block per store chunk. Each block
        is read by path (picklable: workers of a distributed cluster open the store
        themselves) through the same checked read as `read`."""
        import dask.array as da

        i = self._index(kind, index)
        C, n, d = self.chunk_tokens, self.n_tokens, self.d_model
        chunks = (tuple(min(C, n - s) for s in range(0, n, C)), (d,))
        return da.map_blocks(_read_block, self.path, kind, i, C, self.layout.store_dtype,
                             _freeze(self.storage_options), chunks=chunks, dtype=np.float32,
                             name=f"align-read-{kind}-{i}-{abs(hash((self.path, self.progress['committed_tokens'])))}")

    def resid_dask(self, boundary: int):
        return self.dask("resid", boundary)

    def nbytes_stored(self) -> int:
        if not is_local(self.path):
            return -1
        total = 0
        for root, _, files in os.walk(self.path):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        return total


def _freeze(options: dict | None) -> str:
    return json.dumps(options or {}, sort_keys=True)


_groups: dict = {}
_checked: set = set()  # metadata keys of stores whose arrays were checked against their layout


def _read_block(path: str, kind: str, row: int, C: int, store_dtype: str, options: str, block_info=None) -> np.ndarray:
    """One dask block: token chunk block_info[None]["chunk-location"][0] of row `row`."""
    c = block_info[None]["chunk-location"][0]
    key = (path, options)
    if key not in _groups:
        _groups[key] = _open_group(path, "r", json.loads(options) or None)
    g = _groups[key]
    n = g[kind].shape[1]
    x = decode(checked_read(g, path, kind, c * C, min(n, (c + 1) * C), row=row), store_dtype)
    if not _all_finite(x):
        index = int(g["boundary" if kind == "resid" else "layer"][row])
        check_finite(x, g, path, kind, index, c * C)
    return x


def _all_finite(x: np.ndarray) -> bool:
    """True when every value of x is finite (one vectorised pass: ~0.5 ms for a 512 x 1536
    float32 block, measured; cheaper than reading the block; see docs/reliability.md)."""
    return bool(np.isfinite(x).all())


def check_finite(x: np.ndarray, group, path: str, kind: str, index: int, start: int) -> None:
    """Raise NonFiniteError if the block x (tokens start.., d_model) of array `kind` at model
    boundary/layer `index` holds NaN or ±inf: named by array, row, chunk, first token (with
    its document and position) and count."""
    if _all_finite(x):
        return
    bad = ~np.isfinite(x.reshape(len(x), -1))
    rows = np.flatnonzero(bad.any(axis=1))
    t = start + int(rows[0])
    C = group[kind].chunks[1]
    try:
        where = f" (doc {int(group['doc'][t])}, pos {int(group['pos'][t])})"
    except Exception:  # the token table is itself unreadable: the token index still names it
        where = ""
    what = "boundary" if kind == "resid" else "layer"
    raise NonFiniteError(
        f"store {path}: array {kind!r} at {what} {index} holds {int(bad.sum()):,} non-finite value(s) (NaN or ±inf) "
        f"in {len(rows):,} token(s) of tokens {start:,}..{start + len(x) - 1:,}; the first is token {t:,}{where} "
        f"in chunk {t // C}: re-extract the store from a model that gives finite activations")


def checked_read(group, path: str, kind: str, start: int, stop: int, row: int | None = None) -> np.ndarray:
    """Read tokens [start, stop) of array `kind` (row `row` of a 3-D array), refusing to
    return numbers from a damaged chunk: a checksum mismatch, a truncated or a missing chunk
    file raises a StoreError naming the array and the chunk."""
    arr = group[kind]
    C = arr.chunks[1] if row is not None else arr.chunks[0]
    first, last = start // C, max(start, stop - 1) // C
    local = is_local(path)
    for c in range(first, last + 1) if local and stop > start else ():
        key = (row, c, 0) if row is not None else (c,)
        fname = os.path.join(str(path), kind, "c", *map(str, key))
        if not os.path.exists(fname):
            raise StoreError(_damaged(path, kind, key, "its chunk file is missing"))
    try:
        return arr[row, start:stop] if row is not None else arr[start:stop]
    except (ValueError, OSError, RuntimeError) as e:
        for c in range(first, last + 1):
            key = (row, c, 0) if row is not None else (c,)
            try:
                arr[row, c * C:(c + 1) * C] if row is not None else arr[c * C:(c + 1) * C]
            except (ValueError, OSError, RuntimeError) as e2:
                raise StoreError(_damaged(path, kind, key, str(e2).split(".")[0])) from None
        raise StoreError(_damaged(path, kind, (row, first, 0) if row is not None else (first,), str(e).split(".")[0])) from None


def _damaged(path: str, kind: str, key: tuple, why: str) -> str:
    where = "/".join(map(str, key))
    return (f"store {path} is damaged: array {kind!r} chunk {key} (file {kind}/c/{where}): {why}; "
            "re-extract the store (or restore it from a copy)")


def open_activations(path: str, storage_options: dict | None = None, mode: str = "r") -> ActivationStore:
    """Open an activation store (complete or not; see `require_complete`). mode "r+" is for
    the writer."""
    return ActivationStore(path, storage_options, mode)


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
            self._bufs.append({k: np.empty((self.g[k].shape[0], self.C, self.g[k].shape[2]), dtype=self.g[k].dtype)
                               for k in self.kinds})
        self._cur = 0
        for k in self.kinds:
            if self.buf_len:
                self._bufs[0][k][:, :self.buf_len] = self.g[k][:, self.buf_start:p["committed_tokens"]]
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
            buf[k][:, self.buf_len:self.buf_len + m] = arrays[k][:, :m]
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
                nbuf[k][:, :rest] = arrays[k][:, m + whole:]
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
            zarr.consolidate_metadata(self.g.store_path.store, self.g.store_path.path or None, zarr_format=3)
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
            self.g[k][self.start:self.start + n] = data[:n]
            self.buf[k] = [data[n:]]
        self.start += n
        self.n -= n

    def finish(self) -> None:
        if self.n:
            self._flush(self.n)
        if self.start != self.store.n_tokens:
            raise StoreError(f"store {self.store.path}: planned {self.start:,} tokens, expected {self.store.n_tokens:,}")
        self.g.attrs["progress"] = {"planned": True, "committed_tokens": 0, "committed_sequences": 0, "complete": False}
