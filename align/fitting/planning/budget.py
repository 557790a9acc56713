"""Memory and disk arithmetic of a fit: pure functions of sizes, giving a plan or None (the
caller words the refusal; the live route's refusal is worded here, `pass_refusal`). Bytes
everywhere; d_s, d_t are the two models' widths.

The store route plans blocks of the pair grid per worker (`plan_blocks`, `block_bytes`); the
live route, which holds both models and a batch's activations beside its sums, plans blocks of
target boundaries, one pass over the corpus each (`LiveShape`, `plan_passes`, `pass_bytes`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from align import ridge
from align.fitting.planning.split import FRACTIONS
from align.measures.streamed import sums_bytes
from align.messages import human_bytes  # noqa: F401 (the fit's modules import it from here)
from align.stats.bootstrap import MIN_RESAMPLES
from align.store import footprint

MIN_TASK_TOKENS = 256  # tokens per task are cut down to this before the pair grid is blocked
TASKS_PER_SLOT = 2  # statistics tasks per worker slot the default task size aims at
MIN_GROUP_TOKENS = 2048  # below this a task's accumulators cost more than its products
RESULT_MARGIN = 1.05  # as extraction's disk margin: slack
ALPHA_ROOM = (
    32  # α values val_sse is counted with (--alphas auto: 19 at most; a longer list is rare)
)
ATTRS_ROOM = (
    8192  # bytes of the summary and options a result's attributes hold beyond its provenance
)


def statistics_bytes(nI: int, nJ: int, d_s: int, d_t: int, parts: int = ridge.N_PARTS) -> int:
    """Bytes of one `ridge.Statistics` of nI source × nJ target boundaries (float64).

    8·P·(nI·d_S² + nI·nJ·d_S·d_T + nI·d_S + nJ·d_T + nJ + 1).

    Parameters
    ----------
    nI : int
        Source boundaries.
    nJ : int
        Target boundaries.
    d_s : int
        The source's d_model.
    d_t : int
        The target's d_model.
    parts : int, optional
        P, the parts (2; 6 with --convergence).

    Returns
    -------
    int
        Bytes.
    """
    return 8 * (parts * (nI * d_s * d_s + nI * nJ * d_s * d_t + nI * d_s + nJ * d_t + nJ + 1))


def block_bytes(
    nI: int,
    nJ: int,
    d_s: int,
    d_t: int,
    task_tokens: int,
    chunk_tokens: int = 0,
    n_tasks: int = 1,
    parts: int = ridge.N_PARTS,
) -> int:
    """Peak bytes one worker plans for a block of nI source × nJ target boundaries.

    Beyond its idle footprint, when the statistics come from `n_tasks` tasks:

    - statistics: 3 + ⌈log₂ n_tasks⌉ accumulators (two inputs of a tree sum and their sum,
      plus one partial sum per level of the pairwise tree waiting for its partner), each
      `statistics_bytes`;
    - the maps of the block (W, c and the two means), held by the solve and every held-out
      task, and the solve's per-source factors (two eigenbases and QᵀVxxQ per source boundary
      of the block, kept for the blocks that share them) and temporaries (two scatters:
      2·d_S²);
    - the rows a task holds at once (it reads min(task_tokens, chunk_tokens) tokens at a
      time): float32 as read + the float64 gathered rows + a float32 gathered copy of one
      boundary (16 bytes a value) of nI·d_S + nJ·d_T values per token, plus one decoded store
      chunk of the widest array.

    With --convergence (`parts` 6) the accumulators are three times larger, and the solve adds
    two merged two-part copies for the fractions' fits.

    Parameters
    ----------
    nI : int
        Source boundaries.
    nJ : int
        Target boundaries.
    d_s : int
        The source's d_model.
    d_t : int
        The target's d_model.
    task_tokens : int
        Tokens per task.
    chunk_tokens : int, optional
        The store's tokens per chunk (0: none).
    n_tasks : int, optional
        Tasks whose statistics are summed.
    parts : int, optional
        P, the parts (2; 6 with --convergence).

    Returns
    -------
    int
        Bytes.
    """
    acc = statistics_bytes(nI, nJ, d_s, d_t, parts)
    extra = 2 * statistics_bytes(nI, nJ, d_s, d_t) if parts > ridge.N_PARTS else 0
    maps = 8 * nI * nJ * (d_s * d_t + d_s + 2 * d_t) + 8 * (3 * nI + 2) * d_s * d_s
    read = min(task_tokens, chunk_tokens) if chunk_tokens else task_tokens
    rows = 16 * read * (nI * d_s + nJ * d_t) + 4 * chunk_tokens * max(d_s, d_t)
    return (3 + math.ceil(math.log2(max(n_tasks, 1)))) * acc + maps + rows + extra


def measure_bytes(
    nI: int,
    nJ: int,
    d_s: int,
    d_t: int,
    groups: int,
    copies: int = 3,
    rotations: bool = False,
    grouped: bool = False,
) -> int:
    """Bytes the streamed measures' sums (`measures.streamed.sums_bytes`: every pair's Σxyᵀ,
    every boundary's Σxxᵀ, ...) add to a block of nI × nJ boundaries: `copies` of the
    block's one-group sums (3 on the store route: the two inputs of a held-out tree's add
    and their sum; 2 on the live route: the block's and one batch's), and with the interval
    (`groups` > 1) one more, the block's sums held while one group's are made and
    recomputed at a time (the jackknife's group passes, whatever `groups`); with `grouped`
    (the live route's Dask workers) `copies` of the sums of all `groups` side by side
    instead. With `rotations` (procrustes-heldout) every pair's training rotation, d_S × d_T
    float64 held with the block's maps; 0 without measures (groups 0)."""
    if not groups:
        return 0
    if grouped:
        sums = copies * sums_bytes(nI, nJ, d_s, d_t, groups)
    else:
        sums = (copies + (groups > 1)) * sums_bytes(nI, nJ, d_s, d_t, 1)
    return sums + (8 * nI * nJ * d_s * d_t if rotations else 0)


def task_sizes(most: int, fixed: bool) -> list:
    """Tokens per task to try, largest first: `most`, then powers of two down to MIN_TASK_TOKENS."""
    if fixed:
        return [most]
    return [most] + [
        1 << k for k in range(int(math.log2(most)), -1, -1) if MIN_TASK_TOKENS <= (1 << k) < most
    ]


class PairGrid(NamedTuple):
    """The pairs a fit plans for: boundaries of each side and the two widths.

    Attributes
    ----------
    source_boundaries : tuple of int
        Boundaries 0..L_S of the source.
    target_boundaries : tuple of int
        Boundaries 0..L_T of the target.
    d_s : int
        Values per token and source boundary (the source's d_model).
    d_t : int
        Values per token and target boundary.
    measure_groups : int, optional
        Groups of the streamed measures' sums (0: no measure).
    rotations : bool, optional
        Whether every pair's training rotation is held (`procrustes-heldout`).
    """

    source_boundaries: tuple  # boundaries 0..L_S of the source
    target_boundaries: tuple  # boundaries 0..L_T of the target
    d_s: int  # values per token and source boundary (the source's d_model)
    d_t: int  # values per token and target boundary
    measure_groups: int = 0  # groups of the streamed measures' sums (0: no measure)
    rotations: bool = False  # procrustes-heldout: every pair's training rotation is held


class BlockPlan(NamedTuple):
    """The store route's plan (`plan_blocks`): blocks of the pair grid and tokens per task.

    Attributes
    ----------
    blocks : list
        [(source boundaries, target boundaries), ...], source block by source block.
    task_tokens : int
        Tokens each statistics task reads.
    """

    blocks: list  # [(source boundaries, target boundaries), ...], source block by source block
    task_tokens: int  # tokens each statistics task reads


def plan_blocks(
    grid: PairGrid,
    task_tokens: int,
    budget: int,
    chunk_tokens: int = 0,
    fixed_tokens: bool = False,
    n_tokens: int | None = None,
    parts: int = ridge.N_PARTS,
) -> BlockPlan | None:
    """Split the pair grid into blocks that fit a per-worker memory budget.

    Blocks fit `budget` bytes per worker (`block_bytes`), reading the stores as few times as
    possible: minimise (source reads) + (target reads), in bytes per token, over block shapes;
    ties to the larger block. Tokens per task shrink (powers of two down to MIN_TASK_TOKENS;
    never with fixed_tokens) before blocks do; a block's accumulators count the depth of its
    reduction tree over ⌈n_tokens / tokens⌉ tasks. Blocks are listed source block by source
    block (the solve's factors of a source block serve all its target blocks).

    Parameters
    ----------
    grid : PairGrid
        The source and target boundaries and their widths.
    task_tokens : int
        Tokens per task, at most.
    budget : int
        Bytes per worker.
    chunk_tokens : int, optional
        The store's tokens per chunk (0: none).
    fixed_tokens : bool, optional
        Never shrink `task_tokens`.
    n_tokens : int, optional
        Tokens the fit reads (the depth of the reduction tree).
    parts : int, optional
        Parts of the statistics (fit, validation).

    Returns
    -------
    BlockPlan or None
        The plan, or None when not even one pair fits.
    """
    source_boundaries, target_boundaries, d_s, d_t = grid[:4]
    nI, nJ = len(source_boundaries), len(target_boundaries)
    n_tokens = n_tokens or task_tokens
    sizes = task_sizes(task_tokens, fixed_tokens)

    def fitting(bI, bJ):
        for t in sizes:
            if (
                block_bytes(bI, bJ, d_s, d_t, t, chunk_tokens, math.ceil(n_tokens / t), parts)
                + measure_bytes(bI, bJ, d_s, d_t, grid.measure_groups, rotations=grid.rotations)
                <= budget
            ):
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
    blocks = [
        (tuple(source_boundaries[a : a + bI]), tuple(target_boundaries[b : b + bJ]))
        for a in range(0, nI, bI)
        for b in range(0, nJ, bJ)
    ]
    return BlockPlan(blocks, step)


def least_pair_bytes(
    d_s: int, d_t: int, task_tokens: int, chunk_tokens: int, n_tokens: int, fixed: bool
) -> tuple:
    """(bytes, tokens per task) of the smallest plan for one layer pair: what a worker needs
    at least, beyond its idle footprint."""
    return min(
        (block_bytes(1, 1, d_s, d_t, t, chunk_tokens, math.ceil(n_tokens / t)), t)
        for t in task_sizes(task_tokens, fixed)
    )


def client_bytes(n_tokens: int, n_pairs: int, d_s: int, d_t: int, save_maps: bool) -> int:
    """Bytes the client plans for beyond its idle footprint: per token the doc and pos ids,
    the split, and the graph's copies of it (26 bytes), and with --save-maps every map twice
    (the results and the Dataset)."""
    return 26 * n_tokens + (2 * 8 * n_pairs * (d_s + 1) * d_t if save_maps else 0)


def bootstrap_bytes(resamples: int, n_docs: int, n_source: int, n_target: int, d_t: int) -> dict:
    """Bytes the client holds for the document bootstrap (`fitting.results.uncertainty`) of
    `resamples` over n_docs held-out documents and n_source × n_target pairs, at two peaks:

    - "passes", while the statistics are computed: the (resamples, n_docs) float64 weights
      and every target's ‖Σ_d w_bd c_d‖² (8·B·(K + T)), plus the larger of the weights' draw
      (int64 indices, their offsets and counts: 24·B·K) and one target's (B, d_T) product;
    - "summary", once the statistics are freed: the weights and squares again, and the
      resampled scores and summary statistics, 64 bytes per resample and pair (three score
      arrays, their percentiles and the summary's copies) + 64 per target and 32 per source
      boundary + 256 (the paths, the nulls' draws and Spearman's values): measured with
      tracemalloc at 40–58 bytes per pair, so the plan errs high.
    Both are 0 without a bootstrap; linear in resamples (the nulls' comparisons are sorted,
    never B × B)."""
    B, K, S, T = int(resamples), int(n_docs), int(n_source), int(n_target)
    held = 8 * B * (K + T)
    return {
        "passes": held + max(24 * B * K, 8 * B * (d_t + 1)),
        "summary": held + B * (64 * S * T + 64 * T + 32 * S + 256),
    }


def bootstrap_refusal(
    resamples: int, need: dict, limit: int, n_docs: int, n_pairs: int
) -> str | None:
    """The one line of a --bootstrap whose arrays (`bootstrap_bytes`) exceed the fit's memory
    budget `limit`, naming the value, what it would hold and the most that fits; else None."""
    most = max(need.values())
    if most <= limit:
        return None
    fits = int(resamples * limit / most)  # the arrays are linear in resamples
    todo = (
        f"give `bootstrap` {fits:,} or fewer, or raise `memory_limit`"
        if fits >= MIN_RESAMPLES
        else "raise `memory_limit`, fit fewer `source_boundaries`/`target_boundaries`, or give `bootstrap` 0 (no intervals)"
    )
    return (
        f"`bootstrap` {resamples:,} would hold {human_bytes(most)} of resampled scores for {n_docs:,} held-out documents "
        f"and {n_pairs:,} pairs, more than the fit's memory budget of {human_bytes(limit)}: {todo}"
    )


def heldout_rows_bytes(n_heldout: int, nI: int, nJ: int, d_s: int, d_t: int) -> int:
    """Bytes of the held-out rows of a block kept from the statistics pass for the held-out
    pass (float32), so that the held-out pass reads nothing again."""
    return 4 * n_heldout * (nI * d_s + nJ * d_t)


def default_task_tokens(chunk: int, n_tokens: int, n_slots: int, device: str) -> int:
    """Tokens per task. Each task allocates, returns and adds into the tree one set of
    accumulators, a cost of the size of the statistics whatever the task's tokens, so tasks
    group whole store chunks (read one at a time) into about TASKS_PER_SLOT tasks per worker
    slot, and are never cut below MIN_GROUP_TOKENS; on a GPU at least 65,536 (fewer
    device-to-host copies of the statistics)."""
    if device != "cpu":
        return max(chunk, 1 << 16)
    n_chunks = math.ceil(n_tokens / chunk)
    tasks = TASKS_PER_SLOT * n_slots
    if n_chunks >= tasks:
        return chunk * math.ceil(n_chunks / tasks)
    return min(chunk, max(MIN_GROUP_TOKENS, math.ceil(n_tokens / tasks)))


class ResultShape(NamedTuple):
    """What the size of an alignment result depends on, beside its options.

    Attributes
    ----------
    n_source : int
        Source boundaries.
    n_target : int
        Target boundaries.
    d_s : int
        The source's d_model (values per token).
    d_t : int
        The target's d_model.
    n_heldout_docs : int
        Held-out documents.
    """

    n_source: int  # source boundaries
    n_target: int  # target boundaries
    d_s: int  # the source's d_model (values per token)
    d_t: int  # the target's d_model
    n_heldout_docs: int  # held-out documents


class ResultBytes(NamedTuple):
    """Bytes an alignment result takes on disk at most, by what holds them (`result_bytes`).

    Attributes
    ----------
    scores : int
        Bytes of every array but the maps.
    maps : int
        Bytes of W and c (0 without --save-maps).
    metadata : int
        Bytes of the group's and arrays' metadata and the writer's temporary folder.
    """

    scores: int  # bytes of every array but the maps
    maps: int  # bytes of W and c (0 without --save-maps)
    metadata: int  # bytes of the group's and arrays' metadata and the writer's temporary folder


def result_bytes(
    shape: ResultShape,
    save_maps: bool,
    attrs_bytes: int = 0,
    block: int = footprint.BLOCK,
    n_alphas: int = ALPHA_ROOM,
) -> ResultBytes:
    """Bytes the alignment result of S = n_source × T = n_target pairs takes on disk at most.

    Counted as it is written (align.store.footprint: float64 arrays in the result writer's
    chunks, zstd at its bound for incompressible data, every file and folder in whole
    `block`s). Every array an alignment result can hold is counted (H = n_heldout_docs): the
    five scores, their six bootstrap bounds and p_best (S, T); heldout_doc and doc_n_tokens
    (H); the per-document sums (H, S, T) ×3 and (H, T) ×2; val_sse (S, T, A) and its α grid
    for `n_alphas` = A values; the --convergence fractions' two (F, S, T) arrays; the four
    layer coordinates.

    Parameters
    ----------
    shape : ResultShape
        The result's boundaries, widths and held-out documents.
    save_maps : bool
        Count W and c.
    attrs_bytes : int, optional
        Bytes of the attributes as compact JSON.
    block : int, optional
        The file system's block size in bytes.
    n_alphas : int, optional
        A, the length of the α grid.

    Returns
    -------
    ResultBytes
        scores, those arrays; maps, W (S, T, d_s, d_t) and c (S, T, d_t) with `save_maps`, else
        0; metadata, the group's zarr.json (`attrs_bytes` of compact JSON counted twice, as
        zarr indents it, ATTRS_ROOM for the summary and options written beside them, each
        array's consolidated metadata), and the writer's marked temporary folder.
    """
    S, T, d_s, d_t, H = shape
    A, F = n_alphas, len(FRACTIONS) + 1

    def arrays(*shapes):
        return sum(
            footprint.array_bytes(sh, footprint.result_chunks(sh, 8), 8, "zstd", block)
            for sh in shapes
        )

    shapes = (
        [(S, T)] * 12
        + [(H,)] * 2
        + [(H, S, T)] * 3
        + [(H, T)] * 2
        + [(S, T, A), (A,)]
        + [(F, S, T)] * 2
        + [(F,)]
    )
    shapes += [(S,), (S,), (T,), (T,)]
    maps = arrays((S, T, d_s, d_t), (S, T, d_t)) if save_maps else 0
    attrs = 2 * attrs_bytes + ATTRS_ROOM + 512 * (S + T)
    metadata = (
        footprint.group_bytes(attrs, len(shapes) + (2 if save_maps else 0), True, block)
        + footprint.folder_bytes(2, block)
        + footprint.on_disk(1, block)
    )
    return ResultBytes(arrays(*shapes), maps, metadata)


# -- the live route: the models, a batch and a block of target boundaries per pass -------------


@dataclass(frozen=True)
class LiveShape:
    """What the memory plan needs to know about a job: boundaries and widths of each side,
    the largest batch of either model (positions, padded length), the widest MLP and most
    heads, the itemsize of the compute dtype, held-out rows, the models' bytes (weights and
    buffers), the statistics' parts and, with two tokenizers, the most target rows one
    grouping window holds for its source batches (fitting.live_route.anchors)."""

    n_source: int
    d_s: int
    n_target: int
    d_t: int
    batch_positions: int
    batch_width: int
    inter: int
    heads: int
    itemsize: int
    n_heldout: int
    model_bytes: int
    parts: int = ridge.N_PARTS
    window_rows: int = 0
    measure_groups: int = 0  # groups of the streamed measures' sums (0: no measure)
    rotations: bool = False  # procrustes-heldout: every pair's training rotation is held
    joined_rows: int = 0  # sampled rows a Dask worker joins from two shards (0: none)
    grouped_sums: bool = False  # the measures' groups' sums side by side (Dask workers)
    measure_host: bool = False  # the measures' sums and rows in host memory (a GPU's fit)


def batch_bytes(s: LiveShape, n_target: int) -> int:
    """Peak bytes of one batch beyond the weights: the captured residuals of both forwards,
    a block's transient tensors (four d-wide and two MLP-wide activations, one attention
    matrix per head in float32), the rows ridge gathers (compute dtype twice: selected and
    side by side; float64 twice: converted and shifted) and the squares of the target rows."""
    B = s.batch_positions
    width = s.n_source * s.d_s + n_target * s.d_t
    captured = s.itemsize * B * width
    transient = (
        s.itemsize * B * (4 * max(s.d_s, s.d_t) + 2 * s.inter) + 4 * s.heads * B * s.batch_width
    )
    gathered = (2 * s.itemsize + 16) * B * width + 8 * B * n_target * s.d_t
    return captured + transient + gathered


def pass_bytes(s: LiveShape, n_target: int, keep_heldout: bool) -> dict:
    """Bytes a block of `n_target` target boundaries holds at its peak, by holder: its
    statistics (`statistics_bytes`), the solve (the block's maps, the factors of every
    source boundary kept for the next blocks, 3·d_S² each, two scatters), one batch
    (`batch_bytes`), the held-out sums' temporaries (the maps side by side, the predictions
    of a batch), with `keep_heldout` the block's held-out rows in the compute dtype, with
    two tokenizers a grouping window's target rows of the block (compute dtype), on a
    Dask worker that joins two shards' sampled rows, both shards' rows of the block
    (float64: 16·M·(n_S·d_S + n_block·d_T)), and with streamed measures their float64
    gather of a batch's held-out rows and one pair's product (8·(B·width + d_S·d_T)) and,
    unless `s.measure_host` (a GPU's fit: they are host memory, `measure_host_bytes`),
    their sums and rows."""
    nI, dS, dT = s.n_source, s.d_s, s.d_t
    solve_b = 8 * (nI * n_target * (dS * dT + dS + 2 * dT) + 3 * nI * dS * dS + 2 * dS * dS)
    heldout = 8 * (dS * n_target * dT + 2 * s.batch_positions * n_target * dT)
    kept = s.itemsize * s.n_heldout * (nI * dS + n_target * dT) if keep_heldout else 0
    solve_b += (
        2 * statistics_bytes(nI, n_target, dS, dT) if s.parts > ridge.N_PARTS else 0
    )  # the fractions' merged sums
    return {
        "statistics": statistics_bytes(nI, n_target, dS, dT, s.parts),
        "solve": solve_b,
        "batch": batch_bytes(s, n_target),
        "held-out sums": heldout,
        "held-out rows": kept,
        **({"window rows": s.itemsize * s.window_rows * n_target * dT} if s.window_rows else {}),
        **(
            {"sampled rows": 16 * s.joined_rows * (nI * dS + n_target * dT)}
            if s.joined_rows
            else {}
        ),
        **(
            {"measure gather": 8 * (s.batch_positions * (nI * dS + n_target * dT) + dS * dT)}
            if s.measure_groups
            else {}
        ),
        **(
            {}
            if s.measure_host or not s.measure_groups
            else measure_host_bytes(s, n_target, keep_heldout)
        ),
    }


def host_line(s: LiveShape, n_target: int, keep_heldout: bool) -> str:
    """The plan's words for the measures' host memory of a GPU's fit (`measure_host_bytes`)."""
    need = measure_host_bytes(s, n_target, keep_heldout)
    parts = ", ".join(f"{k} {human_bytes(v)}" for k, v in need.items())
    return f"memory on the host: {parts} = {human_bytes(sum(need.values()))} a block"


def measure_host_bytes(s: LiveShape, n_target: int, keep_heldout: bool) -> dict:
    """Bytes of the streamed measures' sums (`measure_bytes`, float64 numpy: host memory
    on every device) of a block of `n_target` target boundaries, and with the interval
    (the jackknife's group passes, `passes.group_passes`) the block's held-out rows in the
    compute dtype where the pass does not keep them; {} without measures."""
    if not s.measure_groups:
        return {}
    width = s.n_source * s.d_s + n_target * s.d_t
    out = {
        "measure sums": measure_bytes(
            s.n_source, n_target, s.d_s, s.d_t, s.measure_groups, 2, s.rotations, s.grouped_sums
        )
    }
    if s.measure_groups > 1 and not s.grouped_sums and not keep_heldout:
        out["measure held-out rows"] = s.itemsize * s.n_heldout * width
    return out


class PassPlan(NamedTuple):
    """The live route's plan (`plan_passes`): one pass over the corpus per block.

    Attributes
    ----------
    blocks : list
        [target boundaries, ...].
    keep_heldout : bool
        The held-out rows are kept from the statistics pass for the held-out pass.
    bytes : dict
        {holder: bytes} of the largest block (`pass_bytes`).
    """

    blocks: list  # [target boundaries, ...]
    keep_heldout: bool  # the held-out rows are kept from the statistics pass for the held-out pass
    bytes: dict  # {holder: bytes} of the largest block (`pass_bytes`)


def plan_passes(s: LiveShape, target_boundaries, budget: int) -> PassPlan | None:
    """Blocks of target boundaries whose pass fits `budget` bytes with the models: as few
    passes as possible, and at that number the held-out rows kept (no second forward of their
    batches) when they fit. Returns the PassPlan, or None when one target boundary per pass
    does not fit."""
    room, nJ = budget - s.model_bytes, len(target_boundaries)
    for per in range(nJ, 0, -1):
        for keep in (True, False):
            if sum(pass_bytes(s, per, keep).values()) <= room:
                n_blocks = math.ceil(nJ / per)
                size = math.ceil(nJ / n_blocks)  # even blocks: as many passes, less memory
                blocks = [tuple(target_boundaries[k : k + size]) for k in range(0, nJ, size)]
                return PassPlan(blocks, keep, pass_bytes(s, size, keep))
    return None


def least_pass_bytes(s: LiveShape) -> int:
    """The smallest plan: the models and one target boundary per pass, held-out rows not kept."""
    return s.model_bytes + sum(pass_bytes(s, 1, False).values())


def pass_refusal(option: str, limit: int, idle: int, s: LiveShape, where: str) -> str:
    """The one line of a budget that cannot hold one target boundary per pass, naming the minimum."""
    need = pass_bytes(s, 1, False)
    parts = ", ".join(f"{k} {human_bytes(v)}" for k, v in need.items() if v)
    held = f"this process holds {human_bytes(idle)} before loading the models; " if idle else ""
    return (
        f"{option} {human_bytes(limit)} cannot hold one target boundary per pass on {where} ({held}the models need "
        f"{human_bytes(s.model_bytes)}, one target boundary {parts}): the minimum is "
        f"{human_bytes(idle + least_pass_bytes(s))}; raise {option}, or lower `batch_size` or the number of `source_boundaries`"
    )
