"""The live route's passes over the corpus: both models' forwards of a batch, the rows of each
part (in part order, as ridge.chunk_statistics gathers them), and per block of target
boundaries a statistics pass, the shared solve and a held-out pass (`run_blocks`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from align import models
from align.extraction.batches import pad
from align.faults import fault_point
from align.fitting.fit_options import FitRequest, LiveJob
from align.fitting.live_route.batches import Batch, TokenTable
from align.fitting.live_route.progress import Progress
from align.fitting.measuring.measured import left_out_values, with_rotations
from align.fitting.measuring.sampled import heldout_null
from align.fitting.planning.split import CONVERGENCE_PARTS, TEST, Split
from align.fitting.results.dataset import pair_results
from align.fitting.results.solver import Solving, check_alphas, solve_all
from align.fitting.store_route.graph import add_heldout_all, heldout_of, measure_sums
from align.hooks import capture
from align.measures.streamed import MEASURE_GROUPS, HeldSums, add_sums
from align.ridge.backend import Backend
from align.ridge.statistics import N_PARTS, Statistics, chunk_statistics

# -- forwards and rows ----------------------------------------------------------------------


@dataclass(frozen=True)
class Role:
    """Which model of the pair a forward runs, as a refusal names it: its side ("source" or
    "target") and its folder or hub id."""

    side: str
    name: str


ROLES = (
    Role("source", "SOURCE"),
    Role("target", "TARGET"),
)  # where the models' names are not known


def forward(model, table: TokenTable, batch: Batch, boundaries, role: Role = ROLES[0]) -> dict:
    """Residuals {boundary: (len(members) · T, d_model)} of one batch (padding included), the
    forward stopped after the highest of `boundaries` (capture.run), refused when not finite
    (capture.check_finite, as extract does), naming the model (`role`), the boundary, and the
    document, position and token of the first non-finite value."""
    ids, mask = pad([table.sequences[s] for s in batch.members], models.input_device(model))
    out = capture.run(model, ids, mask, boundaries)
    capture.check_finite(
        out,
        mask.bool(),
        locator(table, batch),
        f"the {role.side} model {role.name}",
        "the fit stopped and wrote nothing",
        f"compute it in float32 (`{role.side}_dtype` float32)",
    )
    return {b: t.reshape(-1, t.shape[-1]) for b, t in out["resid"].items()}


def locator(table: TokenTable, batch: Batch):
    """locate(k) for a batch: its k-th real token (sequence after sequence) as "document d,
    position p (token g)", g its index in the token table (a store's token index)."""
    cum = np.cumsum([0] + [len(table.sequences[s]) for s in batch.members])

    def locate(k: int) -> str:
        j = int(np.searchsorted(cum, k, side="right")) - 1
        g = int(table.start[batch.members[j]]) + (k - int(cum[j]))
        return f"document {int(table.doc[g])}, position {int(table.pos[g])} (token {g:,})"

    return locate


def rows(resid: dict, boundaries, flat: np.ndarray, device) -> dict:
    """{boundary: (len(flat), d)} the rows `flat` of each boundary, in the compute dtype, on
    `device` (new tensors: the forward's activations can go)."""
    import torch

    idx = torch.from_numpy(flat).to(device)
    return {b: resid[b].to(device).index_select(0, idx) for b in boundaries}


def model_rows(model, table: TokenTable, batches, boundaries, device="cpu"):
    """Yields (batch, {boundary: (n_used, d)}) for every batch: the rows the statistics and
    the held-out sums see, in part order (what a test compares with a store)."""
    for b in batches:
        yield b, rows(forward(model, table, b, boundaries), boundaries, b.flat, device)


def training_shift(resid: dict, boundaries, batch: Batch) -> dict:
    """{boundary: float64 (d,)}: the mean of a batch's training rows, the shift that keeps
    the float64 sums well conditioned (any fixed vector gives the same fit)."""
    got = rows(resid, boundaries, batch.flat[: batch.n_train], next(iter(resid.values())).device)
    return {b: t.double().mean(0).cpu().numpy() for b, t in got.items()}


def training_scale(resid: dict, boundaries, batch: Batch) -> dict:
    """{boundary: mean per-dimension variance of a batch's training rows} (check_alphas)."""
    got = rows(resid, boundaries, batch.flat[: batch.n_train], next(iter(resid.values())).device)
    return {b: float(t.double().var(0, correction=0).mean()) for b, t in got.items()}


# -- passes ---------------------------------------------------------------------------------


@dataclass
class Models:
    """Both models, where the sums accumulate (the target's GPU, else the CPU), and how a
    refusal names each (`Role`)."""

    source: object
    target: object
    device: object
    roles: tuple = ROLES

    @property
    def backend(self) -> Backend:
        """torch where the target's input lives (its GPU, or the CPU: MKL's float64 products
        run ~10% faster than numpy's OpenBLAS there, release the GIL, and the forwards'
        tensors need no conversion)."""
        return Backend(str(self.device), use_torch=True)


def load_models(job: LiveJob) -> Models:
    import torch

    src, _ = models.load_model(job.source)
    tgt, _ = models.load_model(job.target)
    dev = models.input_device(tgt)
    roles = (Role("source", job.source.name), Role("target", job.target.name))
    return Models(src, tgt, dev if dev.type == "cuda" else torch.device("cpu"), roles)


def forwards(
    net: Models, table: TokenTable, b: Batch, source_boundaries, block, progress: Progress | None
):
    """Both forwards of one batch, timed for the progress line."""
    t = time.perf_counter()
    xs = forward(net.source, table, b, source_boundaries, net.roles[0])
    t1 = time.perf_counter()
    ys = forward(net.target, table, b, block, net.roles[1])
    t2 = time.perf_counter()
    if progress is not None:
        progress.forward("source", b.positions, t1 - t)
        progress.forward("target", b.positions, t2 - t1)
    return xs, ys


def paired(
    net: Models,
    stream,
    batches,
    source_boundaries,
    block,
    progress: Progress | None,
    rows: str = "used",
):
    """Yields (batch, xs, ys) for every batch of `batches`: both models' residuals, laid out
    like the batch's forward. `stream`: the token table of one token stream (both models
    forward the batch), or a live_anchors.AnchoredStream (the target forwarded in its own
    batches, each position of the batch's `rows` holding its partner's row)."""
    if isinstance(stream, TokenTable):
        for b in batches:
            xs, ys = forwards(net, stream, b, source_boundaries, block, progress)
            yield b, xs, ys
            del xs, ys  # before the next forward
    else:
        yield from stream.forwards(net, batches, source_boundaries, block, progress, rows)


@dataclass
class Shifts:
    """The fixed shifts of the sums ({boundary: float64 (d,)}): the source's are taken once
    and serve every block (so its factors serve them all), the target's once per block."""

    x: dict | None = None
    y: dict = field(default_factory=dict)


class PassInputs(NamedTuple):
    """What every pass of a live fit reads: the models, what they forward (`paired`: the
    token table, or the anchored stream), the source's batches, the source boundaries and
    the progress line."""

    net: Models
    table: object
    batches: list
    source_boundaries: tuple
    progress: Progress


def statistics_pass(
    inputs: PassInputs,
    block,
    shifts: Shifts,
    keep_heldout: bool,
    label: str,
    alphas_check=None,
    stat_part=None,
):
    """One pass over `inputs.batches` for one block: (ridge.Statistics on the device, kept
    held-out rows [({i: rows}, {j: rows})] or None). `alphas_check(scale)` runs on the first
    batch with training rows (the α grid against the data's scale, before any sum).
    `stat_part` (n_tokens,): each token's statistics part with --convergence (`Split.stat_part`)."""
    net, table, batches, source_boundaries, progress = inputs
    d_s, d_t = net.source.config.hidden_size, net.target.config.hidden_size
    backend = net.backend
    parts = N_PARTS if stat_part is None else CONVERGENCE_PARTS
    stats = Statistics.zeros(source_boundaries, block, d_s, d_t, backend, parts)
    kept = [] if keep_heldout else None
    work: dict = {}  # the gather's buffers, reused batch after batch
    todo = [b for b in batches if b.n_train or (keep_heldout and b.n_test)]
    for _ in range(len(batches) - len(todo)):
        progress.step(label)
    for b, xs, ys in paired(
        net, table, todo, source_boundaries, block, progress, "used" if keep_heldout else "train"
    ):
        fault_point("fit_live_batch")
        if b.n_train:
            if shifts.x is None:
                if alphas_check is not None:
                    alphas_check(training_scale(xs, source_boundaries, b))
                shifts.x = training_shift(xs, source_boundaries, b)
            if block not in shifts.y:
                shifts.y[block] = training_shift(ys, block, b)
            part = np.where(b.part == TEST, -1, b.part)
            if stat_part is not None:  # the positions' statistics parts, from their tokens'
                part = np.full(len(b.part), -1, dtype=np.int8)
                part[b.flat[: b.n_train]] = stat_part[b.tokens[: b.n_train]]
            chunk_statistics(
                xs, ys, part, (shifts.x, shifts.y[block]), backend, into=stats, work=work
            )
        if keep_heldout and b.n_test:
            held = b.flat[b.n_train :]
            kept.append(
                (
                    rows(xs, source_boundaries, held, net.device),
                    rows(ys, block, held, net.device),
                    b.tokens[b.n_train :],
                )
            )
        del xs, ys
        progress.step(label)
    return stats, kept


def heldout_pass(
    inputs: PassInputs,
    block,
    solved: dict,
    kept,
    label: str,
    hdoc: np.ndarray | None = None,
    measures: tuple = (),
) -> dict:
    """The held-out sums (ridge.heldout_sums, added batch after batch) of every pair of the
    block: from the kept rows, or a second forward of the batches with held-out rows (the
    same batches, the same bits). `solved`: {"fitted": maps, "fractions": maps of
    --convergence}. `hdoc` (n_tokens,): each token's held-out document index, for the
    per-document sums of the document bootstrap (None: pooled sums only). `measures`: the
    streamed measures whose sums are added too (`graph.heldout_of`)."""
    net, table, batches, source_boundaries, progress = inputs
    backend = net.backend
    sums = None
    jackknife = bool(measures) and hdoc is not None
    held = [] if jackknife and kept is None else None  # the rows again for the group passes

    def add(xh, yh, tokens):
        nonlocal sums
        if solved.get("sample") is not None:
            solved["sample"].take(xh, yh, tokens)
        docs = None if hdoc is None else hdoc[tokens]
        s = heldout_of(xh, yh, solved, backend, docs, measures, grouped=False)
        sums = s if sums is None else add_heldout_all(sums, s)
        if held is not None:  # host memory: on a GPU the device keeps only a batch's rows
            held.append((_host(xh), _host(yh), tokens))

    if kept is not None:
        for xh, yh, tokens in kept:
            add(xh, yh, tokens)
    else:
        for b, xs, ys in paired(
            net,
            table,
            [b for b in batches if b.n_test],
            source_boundaries,
            block,
            progress,
            "heldout",
        ):
            fault_point("fit_live_heldout_batch")
            flat = b.flat[b.n_train :]
            add(
                rows(xs, source_boundaries, flat, net.device),
                rows(ys, block, flat, net.device),
                b.tokens[b.n_train :],
            )
            del xs, ys
            progress.step(label)
    if jackknife:
        left_out = group_passes(
            kept if held is None else held, solved["fitted"], backend, hdoc, sums["measures"]
        )
        sums["measures"] = sums["measures"]._replace(left_out=left_out)
    return sums


def _host(rows_: dict) -> dict:
    """{boundary: tensor} moved to the host (the same tensors when they are there)."""
    return {k: v.cpu() for k, v in rows_.items()}


def group_passes(held: list, fitted: dict, backend: Backend, hdoc: np.ndarray, total: HeldSums):
    """The measures' jackknife from the block's held-out rows (`held`: [(xs, ys, tokens)],
    each chunk's rows of every boundary and their tokens), one group of held-out documents
    (index mod MEASURE_GROUPS) at a time: the group's sums (`graph.measure_sums`, its rows
    moved to the backend's device) and its recomputation from `total`, the block's one-group
    sums (`measured.left_out_values`). Returns the recomputations of the groups holding
    rows, in group order."""
    import torch

    present = np.unique(np.concatenate([hdoc[t] for _, _, t in held]) % MEASURE_GROUPS)
    out = []
    for g in present:
        group = None
        for xh, yh, tokens in held:
            pick = np.flatnonzero(hdoc[tokens] % MEASURE_GROUPS == g)
            if not len(pick):
                continue

            def take(side):
                idx = torch.from_numpy(pick)
                return {
                    k: backend.put(v.index_select(0, idx.to(v.device))) for k, v in side.items()
                }

            s = measure_sums(take(xh), take(yh), fitted, backend)
            group = s if group is None else add_sums(group, s)
        out.append(left_out_values(total, group))
    return out


def run_blocks(
    inputs: PassInputs,
    blocks,
    keep_heldout: bool,
    options: FitRequest,
    split: Split,
    sample=None,
) -> tuple:
    """Every block in turn: statistics pass, solve (the shared solver, the source's factors
    shared by all blocks), held-out pass. Returns ({(i, j): fitted + scores}, {block:
    numpy statistics} when options.hooks.keep_statistics). `sample` (fitting.measuring.sampled.Sample):
    the held-out rows it keeps, gathered by the held-out passes."""
    net = inputs.net
    results, kept_stats, factors, shifts = {}, {}, {}, Shifts()
    solve_device = str(
        net.device
    )  # where the sums are: the target's input device ("cuda:1" too), or the CPU

    def alphas_check(scale):
        check_alphas(options.spec.alphas, scale, split.n_select, split.n_train)

    for k, block in enumerate(blocks):
        label = f"pass {k + 1} of {len(blocks)}"
        stats, kept = statistics_pass(
            inputs,
            block,
            shifts,
            keep_heldout,
            label,
            alphas_check if k == 0 else None,
            split.stat_part,
        )
        reduced = stats.numpy(net.backend)
        del stats
        solving = Solving(
            options.spec.alphas,
            shifts.x,
            shifts.y[block],
            solve_device,
            factors,
            options.spec.extend_alphas,
        )
        fitted, fractions = solve_all(reduced, solving)
        fitted = with_rotations(fitted, reduced, options.spec.streamed)
        if options.hooks.keep_statistics:
            kept_stats[block] = reduced
        del reduced
        sums = heldout_pass(
            inputs,
            block,
            {"fitted": fitted, "fractions": fractions, "sample": sample},
            kept,
            label + ", held-out",
            split.heldout_index if options.spec.bootstrap else None,
            options.spec.streamed,
        )
        fitted = heldout_null(sample, fitted, inputs.net.backend)  # sampled rows complete
        results.update(pair_results(fitted, sums, split, options.spec.resampling, fractions))
        del kept, fitted
    return results, kept_stats
