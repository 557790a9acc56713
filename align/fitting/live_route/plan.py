"""The live route's plan, made before any model is loaded: `Prepared`, everything known before
the first forward; the memory each side needs (`model_bytes`, `shape_of`) and the budget it has
(`budget_of`); the blocks of target boundaries, one pass over the corpus each (`make_plan`, a
`LivePlan`), or the one-line refusal of a budget that holds no pass; and the refusal of a
document bootstrap whose arrays exceed this process's budget (`refuse_bootstrap`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from align.errors import InputError
from align.fitting.fit_options import FitRequest, LiveJob
from align.fitting.live_route.batches import TokenTable
from align.fitting.measuring import sampled
from align.fitting.measuring.measured import HELDOUT_PROCRUSTES, measure_groups_of
from align.fitting.planning.budget import (
    LiveShape,
    bootstrap_bytes,
    bootstrap_refusal,
    host_line,
    pass_refusal,
    plan_passes,
)
from align.fitting.planning.split import Split
from align.fitting.runtime.cluster import default_memory_limit
from align.messages import human_bytes

GPU_FRACTION = 0.9  # of a GPU's free memory a live fit plans for without --device-memory


# -- memory ---------------------------------------------------------------------------------


def model_bytes(config, dtype: str) -> int:
    """Bytes of a model's weights and buffers in `dtype`, from its config alone (the
    architecture built on torch's meta device: no memory, no weights read)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(config)
    item = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    return item * (sum(p.numel() for p in net.parameters()) + sum(b.numel() for b in net.buffers()))


def budget_of(job: LiveJob, options: FitRequest, device_memory: int | None) -> tuple:
    """(device, budget, bytes already held there, the option that sets the budget). On a GPU
    (the models and the sums live there): --device-memory, default GPU_FRACTION of its free
    memory. On the CPU: --memory-limit (default fitting.runtime.cluster's: 60% of the available
    memory), of which this process holds its resident size now (before any model loads).
    options.hooks.worker_budget replaces both (the plan's room itself: tests)."""
    import psutil
    import torch

    gpu = job.target.device == "cuda" or (job.target.device == "auto" and torch.cuda.is_available())
    if options.hooks.worker_budget is not None:
        return ("cuda" if gpu else "cpu"), int(options.hooks.worker_budget), 0, "`memory_limit`"
    if gpu:
        if device_memory is None:
            free, _ = torch.cuda.mem_get_info()
            device_memory = int(GPU_FRACTION * free)
        return "cuda", int(device_memory), 0, "`device_memory`"
    limit = (
        options.run.memory_limit if options.run.memory_limit is not None else default_memory_limit()
    )
    return "cpu", int(limit), psutil.Process().memory_info().rss, "`memory_limit`"


@dataclass
class Prepared:
    """Everything known before the first forward: configs, tokenizers, the token table, the
    split, the batches and the chosen boundaries of each side. With two tokenizers
    (`pairing` char-anchors) `table` and `batches` are the source's, `target_table` the
    target's, `anchored` the pairs (fitting.pairing.anchors.Anchored) and `stream` what the passes
    forward (live_anchors.AnchoredStream); with one, `stream` is the token table, or with
    `--control shuffle` an AnchoredStream of the table against itself."""

    job: LiveJob
    configs: tuple
    tokenizers: tuple
    table: TokenTable
    split: Split
    batches: list
    source_boundaries: list
    target_boundaries: list
    pairing: tuple = ("tokens", "one tokenizer")  # (mode, why): fitting.pairing.partners.resolve
    target_table: TokenTable | None = None
    anchored: object = None
    stream: object = None
    sample: object = (
        None  # the held-out rows of the row measures (fitting.measuring.sampled.Sample)
    )

    def __post_init__(self):
        if self.target_table is None:
            self.target_table = self.table
        if self.stream is None:
            self.stream = self.table

    @property
    def apart(self) -> bool:
        """Whether the target is forwarded in batches of its own (`stream` an AnchoredStream:
        two tokenizers, or `--control shuffle`), not in the source's."""
        return self.stream is not self.table

    @property
    def target_batches(self) -> list:
        """The batches the target forwards (the source's with one token stream)."""
        return self.stream.target_batches if self.apart else self.batches


def shape_of(p: Prepared) -> LiveShape:
    """The memory plan's view of a prepared job (the models' bytes from their configs)."""
    cs, ct = p.configs
    dts = p.job.source.resolved_dtype(), p.job.target.resolved_dtype()
    both = p.batches + p.target_batches
    positions, width = (
        max(b.positions for b in both),
        max(b.width for b in both),
    )  # each bounds its term
    inter = max(getattr(c, "intermediate_size", None) or 4 * c.hidden_size for c in (cs, ct))
    held = p.stream.most_held(p.batches) if p.apart else 0
    return LiveShape(
        len(p.source_boundaries),
        cs.hidden_size,
        len(p.target_boundaries),
        ct.hidden_size,
        positions,
        width,
        inter,
        max(cs.num_attention_heads, ct.num_attention_heads),
        4 if "float32" in dts else 2,
        p.split.counts["heldout"],
        model_bytes(cs, dts[0]) + model_bytes(ct, dts[1]),
        p.split.n_parts,
        held,
    )


@dataclass
class LivePlan:
    """The plan printed before the first forward."""

    device: str
    budget: int
    blocks: list
    keep_heldout: bool
    bytes: dict
    n_tokens: int
    counts: dict
    batches: int
    positions: int
    sample_line: str = ""  # the sampled rows' bytes and row_measures' (sampled.plan_line)

    @property
    def passes(self) -> int:
        return len(self.blocks)

    def lines(self, n_source: int, n_target: int, batch_size: int) -> list:
        c = self.counts
        held = (
            "kept from the first forward"
            if self.keep_heldout
            else "scored by a second forward of their batches"
        )
        return [
            f"align fit --live: {self.n_tokens:,} tokens ({c['fit']:,} fit / {c['validation']:,} validation / "
            f"{c['heldout']:,} held-out) in {self.batches:,} batches of up to {batch_size} sequences",
            f"align fit --live: {n_source}x{n_target} pairs in {self.passes} block(s) of up to "
            f"{max(len(b) for b in self.blocks)} target boundaries, one pass over the corpus each; held-out rows {held}",
            f"align fit --live: memory on {self.device}: "
            + ", ".join(f"{k} {human_bytes(v)}" for k, v in self.bytes.items())
            + f" = {human_bytes(sum(self.bytes.values()))} of {human_bytes(self.budget)} planned",
        ] + ([f"align fit --live: {self.sample_line}"] if self.sample_line else [])

    def record(self) -> dict:
        return {
            "device": self.device,
            "budget": self.budget,
            "blocks": [list(b) for b in self.blocks],
            "passes": self.passes,
            "keep_heldout": self.keep_heldout,
            "bytes": dict(self.bytes),
            "n_tokens": self.n_tokens,
            "counts": dict(self.counts),
            "batches": self.batches,
            "positions": self.positions,
        }


def make_plan(
    p: Prepared, options: FitRequest, device_memory: int | None, per_worker: tuple | None = None
) -> LivePlan:
    """The blocks and memory of the run, or the one-line refusal of a budget that cannot
    hold one target boundary per pass (naming the minimum). `per_worker` (limit, idle
    footprint) plans for a Dask worker instead, which keeps no held-out rows between tasks."""
    s = replace(
        shape_of(p),
        measure_groups=measure_groups_of(options.spec),
        rotations=HELDOUT_PROCRUSTES in options.spec.measures,
    )
    if per_worker is not None:
        joined = len(p.sample.tokens) if p.sample is not None else 0
        s = replace(s, n_heldout=0, joined_rows=joined, grouped_sums=True)
        where, (limit, idle), option = "each worker", per_worker, "`memory_limit` (per worker)"
    else:
        where, limit, idle, option = budget_of(p.job, options, device_memory)
        s = replace(s, measure_host=where != "cpu")  # a GPU's fit: the measures' sums on the host
    # on the CPU the document bootstrap's weights share the budget with the passes
    boot = (
        {"document bootstrap": _bootstrap_bytes(p, options)["passes"]}
        if where == "cpu" and per_worker is None
        else {}
    )
    if p.sample is not None and per_worker is None:  # float64 on the host, through the passes
        rows = sampled.shape_of(p.sample, options.spec, sides_shape(p))
        boot.update(sampled.host_share(options, rows, where, limit - idle - s.model_bytes))
    planned = plan_passes(s, p.target_boundaries, limit - idle - sum(boot.values()))
    if planned is None:
        raise InputError(pass_refusal(option, limit, idle, s, where))
    blocks, keep, need = planned
    if per_worker is not None:
        keep = False
        need.pop("held-out rows")
    return LivePlan(
        where,
        limit - idle,
        blocks,
        keep,
        {"models": s.model_bytes, **need, **boot},
        p.table.n_tokens,
        p.split.counts,
        len(p.batches),
        sum(b.positions for b in p.batches),
        "; ".join(
            (
                [sampled.plan_line(rows, "on the host")]
                if p.sample is not None and per_worker is None
                else []
            )
            + ([host_line(s, len(blocks[0]), keep)] if s.measure_host and s.measure_groups else [])
        ),
    )


def sides_shape(p: Prepared) -> tuple:
    """((n_source, d_S), (n_target, d_T)) of the sample's rows."""
    widths = (c.hidden_size for c in p.configs)
    return tuple(zip((len(p.source_boundaries), len(p.target_boundaries)), widths))


def _bootstrap_bytes(p: Prepared, options: FitRequest) -> dict:
    """`budget.bootstrap_bytes` of this run's document bootstrap."""
    return bootstrap_bytes(
        options.spec.bootstrap,
        len(p.split.test_docs),
        len(p.source_boundaries),
        len(p.target_boundaries),
        p.configs[1].hidden_size,
    )


def refuse_bootstrap(p: Prepared, options: FitRequest) -> None:
    """The one-line refusal of a --bootstrap whose arrays exceed this process's budget
    (--memory-limit, unless that is per worker of a cluster; else fitting.runtime.cluster's default)."""
    own = options.run.memory_limit is not None and options.run.scheduler in (
        None,
        "synchronous",
        "sync",
    )
    why = bootstrap_refusal(
        options.spec.bootstrap,
        _bootstrap_bytes(p, options),
        options.run.memory_limit if own else default_memory_limit(),
        len(p.split.test_docs),
        len(p.source_boundaries) * len(p.target_boundaries),
    )
    if why:
        raise InputError(why)
