"""`align fit`: ridge maps from every boundary of a source store to every boundary of a
target store, scored on held-out documents (METHODS.md §1), on Dask.

The run is: check -o, open and cross-check both stores (tokens, windows) → split documents
(seeded) → check room for the result and the α grid → size the workers → choose a block
shape of the pair grid that fits the memory budget → per block, one Dask graph:

    stats(chunk) ─┬─ fixed pairwise tree ─► solve (α per pair, refit) ─► heldout(chunk) ─► tree ─► result
    stats(chunk) ─┘

Every chunk task reads its token range of the stores itself, so only statistics and maps
travel. The tree is fixed by chunk index and BLAS runs with a fixed thread count inside each
task, so the statistics are the same bits under any scheduler. The math is in align.ridge;
where the graph runs (local cluster, scheduler address, this process), with its memory,
logs and signals, is align.cluster.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field

import numpy as np

import align
from align import ridge
from align.cluster import (  # noqa: F401  (_no_memory_guard, _warm_rss: bench/fit.py reads them here)
    PLAN_FRACTION, _no_memory_guard, _warm_rss, blas_limit, cpu_cores, default_memory_limit, executor,
    human_bytes, local_workers, refuse_memory, worker_budget_of,
)
from align.errors import DiskSpaceError, InputError, NonFiniteError, OutputRefused, StoreError
from align.faults import fault_point
from align.layers import parse_layers

PART_NAMES = {ridge.FIT: "fit", ridge.VAL: "validation"}
TEST = 2  # part code of held-out rows; -1: not used (position 0, or excluded)
TOKENIZER_PARTS = ("vocab", "merges", "added_tokens", "normalizer_pretokenizer", "special_wrapping")
GPU_FRACTION = 0.5  # of a GPU's free memory the accumulators may plan for
MIN_TASK_TOKENS = 256  # tokens per task are cut down to this before the pair grid is blocked


@dataclass
class FitReport:
    path: str | None
    dataset: object  # the xarray.Dataset written
    seconds: float
    blocks: list
    statistics: dict = field(default_factory=dict)  # {(I, J): reduced statistics}, when asked for
    workers: set = field(default_factory=set)  # addresses of the workers that ran tasks
    task_seconds: dict = field(default_factory=dict)  # compute seconds summed by task kind (stats, solve, ...)
    plan: dict = field(default_factory=dict)  # memory plan: budget, idle footprint, per-worker bytes, tokens per task


# -- checks -------------------------------------------------------------------------------

WINDOWING = ("max_length", "overflow", "doc_split")  # corpus options that cut documents into sequences


def open_pair(source: str, target: str, storage_options: dict | None = None):
    """Open both activation stores and refuse a pair that cannot be fitted, with one line
    naming what differs: the tokenizers, the token count, and per token (block by block) its
    id and its place (doc, seq, pos). Two stores of the same token ids cut into different
    windows (another --max-length or --doc-split) saw each token in another context: a map
    between them is wrong, so the first token whose place differs is named, with the
    windowing options of the two stores' provenance that differ. Windowing options that
    differ while every token sits in the same place (documents shorter than both windows)
    change nothing and pass."""
    from align import store as st

    stores = []
    for role, path in (("source", source), ("target", target)):
        _check_reachable(path, role.upper(), storage_options)
        s = st.open_activations(path, storage_options)
        s.require_complete()
        stores.append(s)
    S, T = stores
    hs, ht = S.provenance.get("tokenizer_hash", {}), T.provenance.get("tokenizer_hash", {})
    differ = [k for k in TOKENIZER_PARTS if hs.get(k) != ht.get(k)]
    if differ:
        names = {"vocab": "vocabulary", "merges": "merges", "added_tokens": "added tokens",
                 "normalizer_pretokenizer": "normalizer/pre-tokenizer", "special_wrapping": "special-token wrapping"}
        raise StoreError(
            f"the tokenizers of source {S.path} ({S.provenance.get('model')}) and target {T.path} "
            f"({T.provenance.get('model')}) differ in {', '.join(names[k] for k in differ)}: "
            "a map between models needs one token stream; fit models that share a tokenizer"
        )
    windowing = _windowing_difference(S, T)
    if S.n_tokens != T.n_tokens:
        raise StoreError(
            f"target store {T.path} has {T.n_tokens:,} tokens, source {S.path} has {S.n_tokens:,}{windowing}: both must be "
            "extracted from the same corpus with the same tokenizer and options (run `align extract` again)"
        )
    block = 1 << 20
    for b0 in range(0, S.n_tokens, block):
        b1 = min(S.n_tokens, b0 + block)
        a, b = S.tokens("token_id", b0, b1), T.tokens("token_id", b0, b1)
        bad = np.flatnonzero(a != b)
        if len(bad):
            t = b0 + int(bad[0])
            raise StoreError(
                f"token {t:,} is id {int(a[bad[0]])} in source {S.path} but {int(b[bad[0]])} in target {T.path} "
                f"({len(bad):,} of tokens {b0:,}..{b1 - 1:,} differ){windowing}: both stores must hold the same token stream "
                "(extract both from the same corpus with the same --max-length/--max-tokens)"
            )
        place = {name: (S.tokens(name, b0, b1), T.tokens(name, b0, b1)) for name in ("doc", "seq", "pos")}
        moved = np.zeros(b1 - b0, dtype=bool)
        for x, y in place.values():
            moved |= x != y
        bad = np.flatnonzero(moved)
        if len(bad):
            k, t = int(bad[0]), b0 + int(bad[0])
            where = lambda side: ", ".join(f"{n} {int(place[n][side][k])}" for n in place)  # noqa: E731
            raise StoreError(
                f"token {t:,} is at ({where(0)}) in source {S.path} but at ({where(1)}) in target {T.path} "
                f"({int(moved.sum()):,} of tokens {b0:,}..{b1 - 1:,} differ){windowing}: the stores hold the same tokens "
                "cut into different sequences, so each model saw another context; extract both with the same "
                "--max-length, --overflow and --doc-split"
            )
    return S, T


def _windowing_difference(S, T) -> str:
    """' (corpus max_length 512 in source, 64 in target; ...)' for the windowing options the
    two stores' provenance records differently, or ''."""
    cs, ct = S.provenance.get("corpus") or {}, T.provenance.get("corpus") or {}
    differ = [f"{k} {cs.get(k)} in source, {ct.get(k)} in target" for k in WINDOWING if cs.get(k) != ct.get(k)]
    return f" (corpus {'; '.join(differ)})" if differ else ""


def _check_reachable(path: str, role: str, storage_options: dict | None) -> None:
    """A store URL whose protocol is unknown, or whose endpoint cannot be reached, is one
    line naming it (fsspec raises many exception types for the second: any of them is)."""
    from align import store as st

    st.check_protocol(path, role)
    if st.local_path(path) is not None:
        return
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
        fs.exists(root.rstrip("/") + "/zarr.json")
    except Exception as e:  # noqa: BLE001  (an unreachable endpoint, refused credentials, ...)
        raise InputError(f"{role} {path} cannot be reached: {type(e).__name__}: {' '.join(str(e).split())[:200]} "
                         "(check the endpoint, e.g. AWS_ENDPOINT_URL, and the credentials)") from None


# -- the split ----------------------------------------------------------------------------

def split_documents(doc: np.ndarray, test_fraction: float, val_fraction: float, seed: int, need_val: bool):
    """Seeded split of the document ids: (fit, validation, test) sorted arrays.

    The unique ids are permuted by numpy's default_rng(seed); the first round(test_fraction
    · n_docs) (at least 1) are held out, then round(val_fraction · rest) (at least 1 when a
    validation part is needed) of the rest validate α."""
    _check_seed(seed)
    docs = np.unique(doc)
    if not 0 < test_fraction < 1:
        raise InputError(f"--test-fraction {test_fraction} must be between 0 and 1 (exclusive)")
    if need_val and not 0 < val_fraction < 1:
        raise InputError(f"--val-fraction {val_fraction} must be between 0 and 1 (exclusive) to choose among several --alphas")
    need = 3 if need_val else 2
    if len(docs) < need:
        raise InputError(
            f"the stores hold {len(docs)} document(s): a split by document needs at least {need} "
            "(fit, validation and held-out); extract a larger corpus"
        )
    perm = np.random.default_rng(seed).permutation(docs)
    n_test = min(max(1, round(test_fraction * len(docs))), len(docs) - (need - 1))
    rest = perm[n_test:]
    n_val = min(max(1, round(val_fraction * len(rest))), len(rest) - 1) if need_val else 0
    return np.sort(rest[n_val:]), np.sort(rest[:n_val]), np.sort(perm[:n_test])


def _check_seed(seed) -> None:
    # numpy's generators take whole numbers >= 0 only; a negative one was "internal error"
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"--seed {seed}: the seed of the document split must be a whole number >= 0, e.g. --seed 0")


def token_parts(doc, pos, fit_docs, val_docs, test_docs, include_first_token: bool) -> np.ndarray:
    """(n_tokens,) int8: ridge.FIT, ridge.VAL, TEST, or -1 (position 0 unless included)."""
    part = np.full(len(doc), -1, dtype=np.int8)
    part[np.isin(doc, fit_docs)] = ridge.FIT
    part[np.isin(doc, val_docs)] = ridge.VAL
    part[np.isin(doc, test_docs)] = TEST
    if not include_first_token:
        part[pos == 0] = -1
    return part


# -- memory plan --------------------------------------------------------------------------

def block_bytes(nI: int, nJ: int, d_s: int, d_t: int, task_tokens: int, chunk_tokens: int = 0, n_tasks: int = 1) -> int:
    """Peak bytes one worker plans for a block of nI source × nJ target boundaries, beyond
    its idle footprint, when the statistics come from `n_tasks` tasks:

    - statistics: 3 + ⌈log₂ n_tasks⌉ accumulators (two inputs of a tree sum and their sum,
      plus one partial sum per level of the pairwise tree waiting for its partner), each
      8·P·(nI·d_S² + nI·nJ·d_S·d_T + nI·d_S + nJ·d_T + nJ + 1) bytes;
    - the maps of the block (W, c and the two means), held by the solve and every held-out task,
      and the solve's per-source temporaries (two scatters, two eigenbases, one more: 5·d_S²);
    - one task's rows: float32 as read + float64 shifted copy + per-part copy (20 bytes a value)
      of nI·d_S + nJ·d_T values per token, plus one decoded store chunk of the widest array."""
    acc = 8 * (ridge.N_PARTS * (nI * d_s * d_s + nI * nJ * d_s * d_t + nI * d_s + nJ * d_t + nJ + 1))
    maps = 8 * nI * nJ * (d_s * d_t + d_s + 2 * d_t) + 8 * 5 * d_s * d_s
    rows = 20 * task_tokens * (nI * d_s + nJ * d_t) + 4 * chunk_tokens * max(d_s, d_t)
    return (3 + math.ceil(math.log2(max(n_tasks, 1)))) * acc + maps + rows


def _task_sizes(most: int, fixed: bool) -> list:
    """Tokens per task to try, largest first: `most`, then powers of two down to MIN_TASK_TOKENS."""
    if fixed:
        return [most]
    sizes = [most] + [1 << k for k in range(int(math.log2(most)), -1, -1) if MIN_TASK_TOKENS <= (1 << k) < most]
    return sizes


def plan_blocks(source_layers, target_layers, d_s: int, d_t: int, task_tokens: int, budget: int,
                chunk_tokens: int = 0, fixed_tokens: bool = False, n_tokens: int | None = None):
    """Split the pair grid into blocks that fit `budget` bytes per worker (`block_bytes`),
    reading the stores as few times as possible: minimise (source reads) + (target reads), in
    bytes per token, over block shapes; ties to the larger block. Tokens per task shrink
    (powers of two down to MIN_TASK_TOKENS; never with fixed_tokens) before blocks do; a
    block's accumulators count the depth of its reduction tree over ⌈n_tokens / tokens⌉ tasks.

    Returns ([(I, J), ...], tokens per task), or None when not even one pair fits."""
    nI, nJ = len(source_layers), len(target_layers)
    n_tokens = n_tokens or task_tokens
    sizes = _task_sizes(task_tokens, fixed_tokens)

    def fitting(bI, bJ):
        for t in sizes:
            if block_bytes(bI, bJ, d_s, d_t, t, chunk_tokens, math.ceil(n_tokens / t)) <= budget:
                return t
        return None

    best = None
    for bI in range(1, nI + 1):
        for bJ in range(1, nJ + 1):
            reads = math.ceil(nJ / bJ) * nI * d_s + math.ceil(nI / bI) * nJ * d_t
            key = (reads, -bI * bJ)
            if best is not None and key >= best[0]:
                continue
            t = fitting(bI, bJ)
            if t is not None:
                best = (key, bI, bJ, t)
    if best is None:
        return None
    _, bI, bJ, step = best
    blocks = [(tuple(source_layers[a:a + bI]), tuple(target_layers[b:b + bJ]))
              for a in range(0, nI, bI) for b in range(0, nJ, bJ)]
    return blocks, step


def client_bytes(n_tokens: int, n_pairs: int, d_s: int, d_t: int, save_maps: bool) -> int:
    """Bytes the client plans for beyond its idle footprint: per token the doc and pos ids,
    the split, and the graph's copies of it (26 bytes), and with --save-maps every map twice
    (the results and the Dataset)."""
    return 26 * n_tokens + (2 * 8 * n_pairs * (d_s + 1) * d_t if save_maps else 0)


# -- before computing: room for the result, worker processes ------------------------------

RESULT_MARGIN = 1.05  # as align.extract's DISK_MARGIN: file-system blocks and slack
METADATA_BYTES = 4096  # per array: its zarr.json, and its copy in the consolidated metadata


def result_bytes(n_source: int, n_target: int, d_s: int, d_t: int, n_heldout_docs: int, save_maps: bool,
                 attrs_bytes: int = 0) -> dict:
    """Bytes the alignment result of n_source × n_target pairs takes at most (float64,
    uncompressed): {"scores": the five (n_source, n_target) matrices, the coordinates and the
    held-out document ids; "maps": W (n_source, n_target, d_s, d_t) and c (…, d_t) with
    save_maps, else 0; "metadata": METADATA_BYTES per array plus the attributes
    (`attrs_bytes` of JSON, counted twice: the group's and the consolidated copy)}."""
    pairs = n_source * n_target
    scores = 8 * (5 * pairs + 2 * (n_source + n_target) + n_heldout_docs)
    maps = 8 * pairs * (d_s + 1) * d_t if save_maps else 0
    n_arrays = 5 + 4 + 1 + (2 if save_maps else 0)
    return {"scores": scores, "maps": maps, "metadata": n_arrays * METADATA_BYTES + 2 * attrs_bytes}


def check_room(output: str, sizes: dict) -> None:
    """Refuse, before any computing, a local `output` that cannot be written (no folder to
    write in, no permission: a probe file is created and removed in the folder the result
    will go to, or its nearest existing ancestor) or whose file system has less free space
    than `sizes` (`result_bytes`) × RESULT_MARGIN. Object stores give no free-space figure;
    `check_output` has already reached them."""
    from align import store as st

    lp = st.local_path(output)
    if lp is None:
        return
    folder = os.path.dirname(os.path.abspath(os.path.expanduser(lp)))
    existing = folder
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise OutputRefused(f"-o {output}: {existing} is a file, not a folder, so nothing can be written under it: "
                            "choose another -o")
    try:
        fd, probe = tempfile.mkstemp(prefix=".align-write-probe-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputRefused(f"-o {output}: cannot write in {existing} ({e.strerror or e}): "
                            "choose a folder you can write to (nothing was computed)") from None
    need = sum(sizes.values())
    free = st.free_bytes(existing)
    if need * RESULT_MARGIN > free:
        maps = f", {human_bytes(sizes['maps'])} of it the maps of --save-maps" if sizes.get("maps") else ""
        raise DiskSpaceError(
            f"-o {output}: the alignment result needs up to {human_bytes(need * RESULT_MARGIN)}{maps}, but only {human_bytes(free)} "
            f"is free in {existing}: free some space or choose another -o{' (or drop --save-maps)' if maps else ''}; "
            "nothing was computed")


# -- tasks (run on workers) ---------------------------------------------------------------

@functools.lru_cache(maxsize=8)
def _open(path: str, storage_options_key: str | None = None):
    from align import store as st
    import json

    return st.open_activations(path, json.loads(storage_options_key) if storage_options_key else None)


def _read(path, so, I, start, stop, rows=None):
    s = _open(path, so)
    out = {}
    for i in I:
        a = s.resid(i, start, stop)
        out[i] = a if rows is None else a[rows]
    return out


def _stats_task(src, tgt, so, I, J, start, stop, part, shifts, device, threads):
    x_shift, y_shift = shifts
    with blas_limit(threads):
        xs, ys = _read(src, so, I, start, stop), _read(tgt, so, J, start, stop)
        fault_point("fit_statistics_chunk")  # crash tests: killed mid-way through the statistics
        return ridge.chunk_statistics(xs, ys, part, x_shift, y_shift, ridge.Backend(device))


def _add_task(a, b):
    return ridge.add_statistics(a, b)


def _solve_task(stats, alphas, shifts, threads):
    with blas_limit(threads):
        return ridge.solve_block(stats, alphas, *shifts)


def _heldout_task(src, tgt, so, I, J, start, stop, rows, fitted, device, threads):
    with blas_limit(threads):
        xs, ys = _read(src, so, I, start, stop, rows), _read(tgt, so, J, start, stop, rows)
        return ridge.heldout_sums(xs, ys, fitted, ridge.Backend(device))


def _add_heldout_task(a, b):
    return ridge.add_heldout(a, b)


def _collect_task(fitted, heldout, stats, save_maps):
    """What the client needs of a block: α, maps if asked, held-out sums (statistics if asked)."""
    keep = ("alpha_rel", "alpha", "val_sse") + (("W", "c") if save_maps else ())
    return {"fitted": {k: {f: v[f] for f in keep} for k, v in fitted.items()}, "heldout": heldout, "stats": stats}


def _tree(dsk: dict, name: str, keys: list, add) -> tuple:
    """Add a fixed pairwise reduction of `keys` to the graph; returns the root key."""
    level = 0
    while len(keys) > 1:
        nxt = []
        for k in range(0, len(keys), 2):
            if k + 1 < len(keys):
                key = (name, level, k // 2)
                dsk[key] = (add, keys[k], keys[k + 1])
                nxt.append(key)
            else:
                nxt.append(keys[k])
        keys, level = nxt, level + 1
    return keys[0]


def block_graph(b: int, I, J, src: str, tgt: str, so, ranges, part, shifts, alphas, device, threads,
                save_maps: bool, keep_stats: bool, solve_threads: int | None = None):
    """The Dask graph (a dict) of block `b`: returns (graph, result key). The solve is the
    only task running then (every other waits on it), so it may use `solve_threads` BLAS
    threads (default `threads`); the statistics use `threads`, whatever the cluster."""
    dsk = {}
    x_shift = {i: shifts[0][i] for i in I}
    y_shift = {j: shifts[1][j] for j in J}
    sk = ("shifts", b)
    dsk[sk] = (x_shift, y_shift)
    stat_keys, held_keys = [], []
    for c, (start, stop) in enumerate(ranges):
        p = part[start:stop]
        if np.any((p == ridge.FIT) | (p == ridge.VAL)):
            key = ("stats", b, c)
            dsk[key] = (_stats_task, src, tgt, so, I, J, start, stop, p.copy(), sk, device, threads)
            stat_keys.append(key)
    if not stat_keys:
        raise InputError("no training token is left after the split (and position 0 excluded): extract a larger corpus")
    root = _tree(dsk, f"stats-sum-{b}", stat_keys, _add_task)
    fk = ("solve", b)
    dsk[fk] = (_solve_task, root, list(alphas), sk, solve_threads or threads)
    for c, (start, stop) in enumerate(ranges):
        rows = np.flatnonzero(part[start:stop] == TEST)
        if len(rows):
            key = ("heldout", b, c)
            dsk[key] = (_heldout_task, src, tgt, so, I, J, start, stop, rows, fk, device, threads)
            held_keys.append(key)
    if not held_keys:
        raise InputError("no held-out token is left after the split (and position 0 excluded): raise --test-fraction")
    hroot = _tree(dsk, f"heldout-sum-{b}", held_keys, _add_heldout_task)
    rk = ("result", b)
    dsk[rk] = (_collect_task, fk, hroot, root if keep_stats else None, save_maps)
    return dsk, rk


# -- the entry point ----------------------------------------------------------------------

def fit(
    source: str,
    target: str,
    output: str | None,
    *,
    test_fraction: float = 0.2,
    val_fraction: float = 0.2,
    seed: int = 0,
    alphas=None,
    include_first_token: bool = False,
    source_layers: str | None = None,
    target_layers: str | None = None,
    scheduler: str | None = None,
    n_workers: int | None = None,
    memory_limit=None,
    device: str = "cpu",
    save_maps: bool = False,
    overwrite: bool = False,
    task_tokens: int | None = None,
    blas_threads: int | None = 1,
    keep_statistics: bool = False,
    storage_options: dict | None = None,
    worker_budget: int | None = None,
    log=None,
) -> FitReport:
    """Fit a ridge map from every chosen boundary of `source` to every chosen boundary of
    `target` (activation stores of the same token stream) and score it on held-out documents.

    Writes the alignment result to `output` (skip writing with output=None) and returns a
    FitReport whose `dataset` is the result. `scheduler`: None starts a LocalCluster of
    `n_workers` processes (default, and at most: one per CPU core, `local_workers`),
    "synchronous" runs in this process, any other value is a Dask scheduler address.
    `memory_limit` (bytes or "8GB") is the budget of the whole fit (per worker with an
    address): the idle footprint of this process and the workers is estimated before any
    worker starts, measured once they are up and subtracted, the rest is planned
    (`plan_blocks`). `worker_budget` (bytes) replaces that per-worker figure (tests).

    Before anything is computed: `output` is checked (`store.check_output`: never one of the
    inputs, never a folder holding anything but an alignment result, which only `overwrite`
    replaces), the two stores are cross-checked (`open_pair`), the folder of `output` must
    be writable with room for the result (`check_room`), and every α_rel must give a usable
    absolute α for these data (`check_alphas`). Raises AlignError for every bad input, and
    NonFiniteError rather than a result holding or summarised over a non-finite score."""
    import json

    from align import store as st

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.time()
    alphas = tuple(sorted(float(a) for a in (alphas if alphas is not None else ridge.DEFAULT_ALPHAS)))
    if not alphas or any(not (a > 0 and math.isfinite(a)) for a in alphas):
        raise InputError(f"--alphas {','.join(map(str, alphas)) or '(empty)'}: every α_rel must be a positive finite number")
    _check_seed(seed)
    if device != "cpu":
        _check_device(device)
    # a file:// URL is a local path: the checked reads name chunk files by path
    source, target = (st.local_path(p) or p for p in (source, target))
    if output is not None:
        st.check_output(output, "alignment", inputs={"source": source, "target": target}, overwrite=overwrite,
                        storage_options=storage_options)

    S, T = open_pair(source, target, storage_options)
    so = json.dumps(storage_options, sort_keys=True) if storage_options else None
    src_layers = _layers(source_layers, S, "--source-layers")
    tgt_layers = _layers(target_layers, T, "--target-layers")

    doc, pos = S.tokens("doc"), S.tokens("pos")
    need_val = len(alphas) > 1
    fit_docs, val_docs, test_docs = split_documents(doc, test_fraction, val_fraction, seed, need_val)
    part = token_parts(doc, pos, fit_docs, val_docs, test_docs, include_first_token)
    counts = {name: int((part == code).sum()) for code, name in ((ridge.FIT, "fit"), (ridge.VAL, "validation"), (TEST, "heldout"))}
    for name, n in counts.items():
        if n == 0 and (name != "validation" or need_val):
            raise InputError(f"the {name} part of the split has no token (position 0 excluded): extract a larger corpus or change the fractions")
    split = {"fit_docs": fit_docs.tolist(), "validation_docs": val_docs.tolist(), "heldout_docs": test_docs.tolist()}
    if output is not None:
        attrs = len(json.dumps(_jsonable({"source": S.provenance, "target": T.provenance, "split": split})))
        check_room(output, result_bytes(len(src_layers), len(tgt_layers), S.d_model, T.d_model, len(test_docs),
                                        save_maps, attrs))

    if save_maps:
        size = len(src_layers) * len(tgt_layers) * (S.d_model + 1) * T.d_model * 8
        log(f"align fit: --save-maps stores W and c for {len(src_layers) * len(tgt_layers)} pairs: {human_bytes(size)} (float64)")

    check_alphas(alphas, _scale(S, src_layers, part), counts["fit"] if need_val else counts["fit"] + counts["validation"],
                 counts["fit"] + counts["validation"])

    results, statistics, blocks = {}, {}, []
    n_pairs = len(src_layers) * len(tgt_layers)
    client_extra = client_bytes(S.n_tokens, n_pairs, S.d_model, T.d_model, save_maps)
    if isinstance(memory_limit, str):
        from dask.utils import parse_bytes

        memory_limit = parse_bytes(memory_limit)
    if scheduler is None:
        limit = memory_limit if memory_limit is not None else default_memory_limit()
        n_workers = local_workers(n_workers, limit, _least_pair_bytes(S, T, task_tokens or _task_tokens(
            S.chunk_tokens, S.n_tokens, n_workers or cpu_cores(), device), task_tokens is not None), client_extra, log)
        memory_limit = limit
    with executor(scheduler, n_workers, memory_limit, log) as ex:
        step = task_tokens or _task_tokens(S.chunk_tokens, S.n_tokens, ex.n_workers, device)
        if step < 1:
            raise InputError(f"task_tokens {step} must be at least 1")
        budget = worker_budget if worker_budget is not None else worker_budget_of(ex, client_extra)
        if device != "cpu":
            budget = min(budget, _device_budget(device))
        plan = plan_blocks(src_layers, tgt_layers, S.d_model, T.d_model, step, budget, S.chunk_tokens,
                           fixed_tokens=task_tokens is not None, n_tokens=S.n_tokens)
        if plan is None:
            least = min(_task_sizes(step, task_tokens is not None),
                        key=lambda t: block_bytes(1, 1, S.d_model, T.d_model, t, S.chunk_tokens, math.ceil(S.n_tokens / t)))
            refuse_memory(ex, client_extra, block_bytes(1, 1, S.d_model, T.d_model, least, S.chunk_tokens,
                                                         math.ceil(S.n_tokens / least)), S.d_model, T.d_model, least)
        blocks, step = plan
        plan_info = {"mode": ex.mode, "limit": ex.limit, "idle": ex.idle, "client_extra": client_extra,
                     "worker_budget": budget, "n_workers": ex.n_workers, "task_tokens": step, "blocks": len(blocks),
                     "block_bytes": block_bytes(len(blocks[0][0]), len(blocks[0][1]), S.d_model, T.d_model, step, S.chunk_tokens,
                                                math.ceil(S.n_tokens / step))}
        ranges = [(a, min(S.n_tokens, a + step)) for a in range(0, S.n_tokens, step)]
        shifts = (_shifts(S, src_layers, part, ranges), _shifts(T, tgt_layers, part, ranges))
        log(f"align fit: {len(src_layers)}x{len(tgt_layers)} pairs in {len(blocks)} block(s) of at most "
            f"{len(blocks[0][0])}x{len(blocks[0][1])} ({human_bytes(plan_info['block_bytes'])} "
            f"per worker of {human_bytes(budget)} planned), {len(ranges)} tasks of {step:,} tokens, "
            f"{counts['fit']:,} fit / {counts['validation']:,} validation / {counts['heldout']:,} held-out tokens")
        for b, (I, J) in enumerate(blocks):
            dsk, key = block_graph(b, I, J, S.path, T.path, so, ranges, part, shifts, alphas, device, blas_threads,
                                   save_maps, keep_statistics,
                                   solve_threads=blas_threads and blas_threads * (ex.n_workers if ex.mode == "local" else 1))
            out = ex.run(dsk, key)
            fault_point("fit_after_block")
            results.update(_scores(out))
            if keep_statistics:
                statistics[(I, J)] = out["stats"]
    ds = _dataset(results, src_layers, tgt_layers, S, T, test_docs, split, save_maps, dict(
        test_fraction=test_fraction, val_fraction=val_fraction, seed=seed, alphas=list(alphas),
        include_first_token=include_first_token, source_layers=source_layers, target_layers=target_layers,
        device=device, save_maps=save_maps, task_tokens=step, n_tokens=counts))
    if output is not None:
        st.write_result(output, ds, "alignment", overwrite=overwrite, storage_options=storage_options,
                        inputs={"source": source, "target": target})
        log(f"align fit: wrote {output} ({len(src_layers)}x{len(tgt_layers)} pairs) in {time.time() - t0:.1f} s")
    return FitReport(output, ds, time.time() - t0, blocks, statistics, ex.seen, ex.task_seconds, plan_info)


def _least_pair_bytes(S, T, step: int, fixed: bool) -> int:
    """Bytes per worker the plan needs for one layer pair at the smallest task size it may
    choose, over PLAN_FRACTION (the share of the budget the plan fills)."""
    need = min(block_bytes(1, 1, S.d_model, T.d_model, t, S.chunk_tokens, math.ceil(S.n_tokens / t))
               for t in _task_sizes(step, fixed))
    return math.ceil(need / PLAN_FRACTION)


def check_alphas(alphas, scale: dict, n_select: int, n_train: int) -> None:
    """Refuse, before the statistics pass, an α_rel whose absolute α is no usable float64 for
    these data. α = α_rel · trace(C)/d_source with C the centred scatter of the n training
    rows, and trace(C)/d_source ≈ n · `scale[b]` (the mean variance per dimension of source
    boundary b in the first chunk's training rows, `_first_moments`); α must be finite,
    positive and have a finite reciprocal (1/(λ+α) is taken), for n = n_select (the rows
    that choose α) and n_train (the final refit). The exact check runs again in the solve."""
    for b, v in scale.items():
        if not (v > 0 and math.isfinite(v)):
            continue  # a constant first chunk says nothing about the scale
        for a in alphas:
            for n in sorted({n_select, n_train}):
                x = a * n * v
                if not (math.isfinite(x) and x > 0 and math.isfinite(1.0 / x)):
                    how = "overflows" if not math.isfinite(x) or x > 1 else "underflows"
                    raise InputError(
                        f"--alphas {a:g}: the absolute penalty α_rel · trace(XcᵀXc)/d_source ≈ {a:g} × {n * v:.3g} for "
                        f"source boundary {b} {how} float64: choose α_rel values nearer 1 (the default grid is "
                        f"{ridge.DEFAULT_ALPHAS[0]:g} to {ridge.DEFAULT_ALPHAS[-1]:g}); nothing was computed")


def _task_tokens(chunk: int, n_tokens: int, n_slots: int, device: str) -> int:
    """Tokens per task: the store's chunk (each chunk read once), split when that leaves
    fewer than four tasks per worker (small stores), and grouped to >= 65,536 on a GPU
    (fewer device-to-host copies of the statistics)."""
    if device != "cpu":
        return max(chunk, 1 << 16)
    if math.ceil(n_tokens / chunk) >= 4 * n_slots:
        return chunk
    return max(256, min(chunk, math.ceil(n_tokens / (4 * n_slots))))


def _layers(spec, store, option):
    chosen = parse_layers(spec, store.n_layers, option)
    missing = [b for b in chosen if b not in store.boundaries]
    if missing:
        raise InputError(f"{option} {spec or 'all'} asks for boundaries {missing} that store {store.path} does not hold "
                         f"(it holds {list(store.boundaries)}): choose among those")
    return chosen


def _shifts(store, layers, part, ranges) -> dict:
    """Per boundary, the float64 mean of the training rows of the first chunk that has any:
    the shift that keeps the float64 sums well conditioned (any value gives the same fit)."""
    for start, stop in ranges:
        rows = np.flatnonzero((part[start:stop] == ridge.FIT) | (part[start:stop] == ridge.VAL))
        if len(rows):
            return {b: store.resid(b, start, stop)[rows].astype(np.float64).mean(0) for b in layers}
    return {b: np.zeros(store.d_model) for b in layers}


def _scale(store, layers, part) -> dict:
    """Per boundary, the mean variance per dimension of the training rows of the first store
    chunk that has any (float64): the scale of trace(XcᵀXc)/(n·d) that `check_alphas` uses."""
    C = store.chunk_tokens
    for start in range(0, store.n_tokens, C):
        p = part[start:start + C]
        rows = np.flatnonzero((p == ridge.FIT) | (p == ridge.VAL))
        if len(rows) > 1:
            return {b: float(store.resid(b, start, start + C)[rows].astype(np.float64).var(0).mean()) for b in layers}
    return {}


def _scores(out) -> dict:
    h = out["heldout"]
    res = {}
    for (i, j), f in out["fitted"].items():
        res[(i, j)] = {**f, **ridge.scores(h["pair"][(i, j)], h["target"][j], h["centred"][j])}
    return res


def _check_device(device: str) -> None:
    try:
        import torch
    except ImportError:
        raise InputError(f"--device {device} needs torch") from None
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise InputError(f"--device {device!r} is not a device: use cpu, cuda or cuda:N") from None
    if dev.type != "cuda":
        raise InputError(f"--device {device!r}: align fit runs on cpu or a CUDA GPU (cuda, cuda:N)")
    if not torch.cuda.is_available():
        raise InputError(f"--device {device}: torch sees no CUDA GPU here; use --device cpu")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise InputError(f"--device {device}: torch sees {torch.cuda.device_count()} CUDA GPU(s)")


def _device_budget(device: str) -> int:
    import torch

    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return int(free * GPU_FRACTION)


def _dataset(results, src_layers, tgt_layers, S, T, test_docs, split, save_maps, options):
    import xarray as xr

    L_S, L_T = S.n_layers, T.n_layers
    shape = (len(src_layers), len(tgt_layers))
    arrays = {name: np.full(shape, np.nan) for name in ("relative_error", "norm_error", "r2", "alpha", "alpha_rel")}
    for a, i in enumerate(src_layers):
        for b, j in enumerate(tgt_layers):
            for name in arrays:
                arrays[name][a, b] = results[(i, j)][name]
    refuse_non_finite(arrays, src_layers, tgt_layers)
    dims = ("source_layer", "target_layer")
    data = {name: (dims, v) for name, v in arrays.items()}
    data["heldout_doc"] = (("heldout_doc",), np.asarray(test_docs, dtype=np.int64))
    if save_maps:
        data["W"] = (dims + ("d_source", "d_target"),
                     np.stack([np.stack([results[(i, j)]["W"] for j in tgt_layers]) for i in src_layers]))
        data["c"] = (dims + ("d_target",), np.stack([np.stack([results[(i, j)]["c"] for j in tgt_layers]) for i in src_layers]))
    coords = {
        "source_layer": ("source_layer", np.asarray(src_layers, dtype=np.int64)),
        "target_layer": ("target_layer", np.asarray(tgt_layers, dtype=np.int64)),
        "source_depth": ("source_layer", np.asarray(src_layers, dtype=np.float64) / L_S),
        "target_depth": ("target_layer", np.asarray(tgt_layers, dtype=np.float64) / L_T),
    }
    summ = ridge.summary(arrays["relative_error"], src_layers, tgt_layers, L_S, L_T)
    attrs = {
        "summary": summ, "source": S.provenance, "target": T.provenance,
        "source_model": S.provenance.get("model"), "target_model": T.provenance.get("model"),
        "source_path": S.path, "target_path": T.path,
        "n_layers_source": L_S, "n_layers_target": L_T, "options": options, "split": split, "align_version": align.__version__,
    }
    ds = xr.Dataset(data, coords=coords, attrs=_jsonable(attrs))
    ds["relative_error"].attrs["description"] = "mean over held-out tokens of ||x W + c - y|| / max(||y||, 1e-12)"
    ds["norm_error"].attrs["description"] = "sum of ||x W + c - y|| over sum of ||y|| (held-out tokens)"
    ds["r2"].attrs["description"] = "1 - sum ||e||^2 / sum ||y - mean(y)||^2 (held-out; variance-weighted)"
    ds["alpha"].attrs["description"] = "absolute ridge penalty of the final fit: alpha_rel * trace(XcT Xc) / d_source"
    ds["alpha_rel"].attrs["description"] = "ridge penalty in units of the mean eigenvalue, chosen on validation documents"
    return ds


def refuse_non_finite(arrays: dict, src_layers, tgt_layers) -> None:
    """No result holds, and no summary is computed over, a non-finite score: raise
    NonFiniteError naming the pairs (source boundary, target boundary) and the scores.
    arrays: {score name: (len(src_layers), len(tgt_layers))}."""
    bad = {}
    for name, v in arrays.items():
        for a, b in zip(*np.nonzero(~np.isfinite(v))):
            bad.setdefault((src_layers[a], tgt_layers[b]), []).append(f"{name} {v[a, b]}")
    if bad:
        shown = "; ".join(f"source {i} -> target {j}: {', '.join(what)}" for (i, j), what in list(bad.items())[:4])
        more = f" (and {len(bad) - 4} more pairs)" if len(bad) > 4 else ""
        targets = sorted({j for _, j in bad})
        raise NonFiniteError(
            f"{len(bad)} layer pair(s) have non-finite held-out scores ({shown}{more}): the held-out activations of "
            f"target boundary {', '.join(map(str, targets))} have no variance or overflow float64, so no map can be "
            "scored there; nothing was written (fit other --target-layers, or re-extract the stores)")


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


class _CallableModule(types.ModuleType):
    """`align.fit(...)` calls the function even after `import align.fit`."""

    def __call__(self, *args, **kwargs):
        return fit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
