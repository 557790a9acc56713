"""The held-out rows the row measures and every measure's calibration use (both routes): M
tokens drawn from the held-out documents before the pass (`measures.rows.sample_rows`, the
split's seed), their rows of every boundary gathered (from the stores, from the live
held-out pass, or from the live held-out shards of a Dask cluster), then
`measures.rows.row_measures` once for the whole grid, its numbers kept per pair
(`PairResult.sampled`). procrustes-heldout's value and null on the sample need each pair's
training rotation, so they are computed block by block, right after the block's held-out pass
completes its sampled rows (`heldout_null`), and only their K + 1 scalars per pair are kept
until `attach` summarises them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from align.errors import InputError
from align.fitting.measuring.rows_tasks import device_backend, row_measures_tasks
from align.fitting.planning.sample_budget import (
    SampleShape,
    neighbours_refusal,
    row_measures_bytes,
    sample_bytes,
    sample_refusal,
)
from align.fitting.planning.split import TEST, Split
from align.fitting.runtime.cluster import default_memory_limit
from align.fitting.runtime.tasks import blas_limit, cpu_cores
from align.measures import MEASURES, ROW_ONLY, SAMPLE_ROWS, STREAMED, calibration, rows
from align.measures.streamed import MEASURE_GROUPS
from align.messages import human_bytes
from align.ridge.backend import CPU, Backend
from align.stats import bootstrap
from align.stats.bootstrap import MIN_RESAMPLES, Resampling


@dataclass
class Sample:
    """M held-out tokens (sorted token indices of the source's stream) and their held-out
    document index, with the rows gathered so far: {boundary: (M, d) float64}; with
    procrustes-heldout calibrated, the K permutations of its null (drawn once, before the
    passes, exactly as `rows.row_measures` draws them), their scheme, and per pair of the
    blocks done its value on the sample and its K null values ({(i, j): (K + 1,)},
    `heldout_null`)."""

    tokens: np.ndarray
    docs: np.ndarray
    xs: dict = field(default_factory=dict)
    ys: dict = field(default_factory=dict)
    perms: np.ndarray | None = None  # (K, M): calibration.draw_permutations(docs, K, seed)
    scheme: str | None = None  # the permutations' scheme ("documents" or "rows")
    heldout: dict = field(default_factory=dict)  # {(i, j): (K + 1,) procrustes-heldout}

    def take(self, xs: dict, ys: dict, tokens: np.ndarray) -> None:
        """Keep the rows of one chunk of held-out rows whose token is sampled: xs[i] (n, d_S),
        ys[j] (n, d_T) numpy or tensors, row r from token tokens[r]."""
        self.put(found(xs, ys, tokens, self.tokens))

    def put(self, rows_: dict | None) -> None:
        """Keep rows of sampled tokens (`found`, or several `joined`), each at its token's
        place in the sample."""
        if rows_ is None:
            return
        at = np.searchsorted(self.tokens, rows_["tokens"])
        for store, side in ((self.xs, rows_["xs"]), (self.ys, rows_["ys"])):
            for b, got in side.items():
                if b not in store:
                    store[b] = np.zeros((len(self.tokens), got.shape[1]))
                store[b][at] = got


def found(xs: dict, ys: dict, tokens: np.ndarray, sample_tokens: np.ndarray) -> dict | None:
    """The rows of one chunk of held-out rows whose token is among `sample_tokens` (sorted):
    {"tokens": (h,), "xs": {i: (h, d_S)}, "ys": {j: (h, d_T)}} float64 numpy, from xs[i]
    (n, d_S) and ys[j] (n, d_T) numpy or tensors, row r from token tokens[r]; None when no
    token is sampled. What a Dask shard returns of the sample (`Sample.put` keeps it)."""
    tokens = np.asarray(tokens)
    hit = np.flatnonzero(np.isin(tokens, sample_tokens))
    if not len(hit):
        return None
    return {
        "tokens": tokens[hit],
        "xs": {b: _numpy(v, hit) for b, v in xs.items()},
        "ys": {b: _numpy(v, hit) for b, v in ys.items()},
    }


def joined(a: dict | None, b: dict | None) -> dict | None:
    """Two `found` results of other tokens as one (rows concatenated; None is empty)."""
    if a is None or b is None:
        return a if b is None else b
    return {
        "tokens": np.concatenate([a["tokens"], b["tokens"]]),
        **{
            side: {k: np.concatenate([a[side][k], b[side][k]]) for k in a[side]}
            for side in ("xs", "ys")
        },
    }


def _numpy(v, rows_: np.ndarray) -> np.ndarray:
    """Rows `rows_` of a numpy array or a torch tensor, as float64 numpy."""
    if isinstance(v, np.ndarray):
        return v[rows_].astype(np.float64)
    import torch

    return v.index_select(0, torch.from_numpy(rows_).to(v.device)).double().cpu().numpy()


def draw(split: Split, spec) -> Sample | None:
    """The sample of a fit (`FitSpec`): None without a measure beyond ridge; else
    spec.sample_rows (None: SAMPLE_ROWS, or every held-out row when fewer) tokens drawn among
    the held-out ones by `rows.sample_rows` with the split's seed (a count beyond the
    held-out rows is refused in one line there)."""
    if not spec.sampled and not spec.heldout_calibrated:
        return None
    held = np.flatnonzero(split.part == TEST)
    doc = split.heldout_index[held]
    m = spec.sample_rows if spec.sample_rows is not None else min(SAMPLE_ROWS, len(held))
    pick = rows.sample_rows(doc, m, spec.seed)
    said = more = None
    if spec.sample_rows is None:  # every held-out row, fewer than SAMPLE_ROWS
        said = f"all {m:,} held-out rows sampled"
        more = "more held-out rows (a larger `test_fraction` or corpus)"
    why = neighbours_refusal(int(spec.neighbours), m, spec.sampled, said, more)
    if why:  # before the passes and any memory arithmetic
        raise InputError(why)
    sample = Sample(held[pick], doc[pick])
    if spec.heldout_calibrated:
        sample.perms, sample.scheme = calibration.draw_permutations(
            sample.docs, spec.draws, spec.seed
        )
    return sample


def heldout_null(sample: Sample | None, fitted: dict, backend: Backend = CPU) -> dict:
    """procrustes-heldout on the sample for every pair of a block whose map carries its
    training rotation R (`measured.with_rotations`), kept in `sample.heldout`; returns
    `fitted` with the rotations dropped (only these K + 1 scalars a pair outlive the block).
    Called once the block's held-out pass has gathered the sampled rows of its target
    boundaries and of every source boundary. With X̂, Ŷ the pair's sampled rows centred by
    their own means and scaled to unit Frobenius norm (as the held-out value takes the
    held-out rows), the value on the sample is sqrt(2 − 2⟨X̂R, Ŷ⟩) and null draw k's is
    sqrt(2 − 2⟨X̂R, Ŷ_k⟩), Ŷ_k the target's rows re-paired by permutation k (row r of the
    source with row perm_k[r] of the target; centring and norms are unchanged by it). Each
    ⟨X̂R, Ŷ_k⟩ = Σ_r G[r, perm_k[r]] of G = (X̂R)Ŷᵀ (M × M), computed once a pair through the
    narrower width (G = X̂(ŶRᵀ)ᵀ when d_S ≤ d_T): 2·M·d_S·d_T + 2·M²·min(d_S, d_T) flops,
    then M additions a draw, on `backend` (the fit's device: on a GPU at 14B widths the
    products are seconds, where the host's float64 takes hours). Without a sample, its
    permutations or a rotation, `fitted` is returned unchanged but for the rotations."""
    out = {}
    for (i, j), m in fitted.items():
        R = getattr(m, "rotation", None)
        if R is not None and sample is not None and sample.perms is not None:
            sample.heldout[(i, j)] = _heldout_values(sample, i, j, R, backend)
        out[(i, j)] = m if R is None else replace(m, rotation=None)
    return out


def heldout_null_tasks(run, sample: Sample | None, fitted: dict, backend_of, name: str) -> dict:
    """`heldout_null` as Dask tasks of a cluster's workers (or of this process's threads):
    one task per target boundary of the block, with the sampled rows of its source
    boundaries and of its target, the permutations and its pairs' rotations, computed on the
    fit's device there (`backend_of()`, a picklable callable run on the worker, gives its
    `ridge.backend.Backend`); `run(graph, key)` runs a graph (`cluster.executor`'s). The
    values are kept in `sample.heldout`; returns `fitted` with the rotations dropped."""
    rotated = {k: m.rotation for k, m in fitted.items() if getattr(m, "rotation", None) is not None}
    if rotated and sample is not None and sample.perms is not None:
        # each array a key of its own: sent once to a worker, whatever its tasks
        dsk, keys = {(f"perms-{name}",): sample.perms}, []
        for i in sorted({i for i, _ in rotated}):
            dsk[(f"sample-x-{name}", i)] = sample.xs[i]
        for j in sorted({j for _, j in rotated}):
            dsk[(f"sample-y-{name}", j)] = sample.ys[j]
            part = {(i, jj): R for (i, jj), R in rotated.items() if jj == j}
            sources = sorted({i for i, _ in part})
            keys.append((f"null-{name}", j))
            dsk[keys[-1]] = (
                null_task,
                sources,
                [(f"sample-x-{name}", i) for i in sources],
                j,
                (f"sample-y-{name}", j),
                (f"perms-{name}",),
                part,
                backend_of,
            )
        dsk[(f"nulls-{name}",)] = (_merged, *keys)
        sample.heldout.update(run(dsk, (f"nulls-{name}",)))
    return {k: m if k not in rotated else replace(m, rotation=None) for k, m in fitted.items()}


def null_task(sources, xs: list, j, y: np.ndarray, perms: np.ndarray, rotations: dict, backend_of):
    """On a worker: {(i, j): (K + 1,)} procrustes-heldout of each pair of `rotations` on the
    sampled rows xs[k] of source boundary sources[k] and y of target boundary j (float64
    (M, d)), and on each of the K re-pairings `perms` (`_heldout_values`), on the backend
    `backend_of()` gives there."""
    rows_ = dict(zip(sources, xs))
    sample = Sample(np.arange(len(y)), np.zeros(len(y)), rows_, {j: y}, perms)
    backend = backend_of()
    return {(i, j): _heldout_values(sample, i, j, R, backend) for (i, j), R in rotations.items()}


def _merged(*parts: dict) -> dict:
    return {k: v for part in parts for k, v in part.items()}


def _heldout_values(sample: Sample, i, j, R: np.ndarray, backend: Backend = CPU) -> np.ndarray:
    """(K + 1,): procrustes-heldout of pair (i, j) on the sample, then on each re-pairing."""
    x, y = backend.put(sample.xs[i]), backend.put(sample.ys[j])
    xc, yc = x - x.mean(0), y - y.mean(0)
    nx, ny = float((xc * xc).sum()) ** 0.5, float((yc * yc).sum()) ** 0.5
    if not (np.isfinite(nx) and np.isfinite(ny)) or nx == 0 or ny == 0:
        raise InputError(
            f"source boundary {i} × target boundary {j}: procrustes-heldout is undefined on "
            f"the {len(x):,} sampled rows (a side without variance, or non-finite); sample "
            "more rows or leave the boundary out"
        )
    R = backend.put(R)
    xh, yh = xc / nx, yc / ny
    a, b = (xh, yh @ R.T) if x.shape[1] <= y.shape[1] else (xh @ R, yh)
    G = a @ b.T  # G[r, s] = ⟨(X̂R)_r, Ŷ_s⟩
    drawn = G[backend.mask(np.arange(G.shape[0])), backend.mask(sample.perms)].sum(1)
    inner = np.concatenate([[float(G.diagonal().sum())], backend.get(drawn)])
    return np.sqrt(np.maximum(2.0 - 2.0 * inner, 0.0))


def resampling_of(spec) -> Resampling:
    """The row bootstrap's resampling: the fit's, or MIN_RESAMPLES from its seed without one."""
    return spec.resampling or Resampling(MIN_RESAMPLES, spec.bootstrap_seed)


# How ties are broken on the sampled rows: the result records it (attrs["options"]
# ["sampled_rows"]["ties"]), because at boundary 0 a repeated token's embedding is one row
# and most sampled rows can have an exact copy (docs/measures-rows.md, Ties).
TIE_RULE = (
    "cosines and correlation distances computed once per distinct row, so copies tie exactly; "
    "mknn, cknna: tied neighbours in increasing row index (a stable descending sort); rsa: "
    "tied distances share their average rank (scipy.stats.rankdata), two copies at distance 0; "
    "a bootstrap resample lists the sampled rows in order, each as often as its document was "
    "drawn, a copy of a row being neither its neighbour nor in a pair with it"
)
MOSTLY_COPIES = 0.5  # a cell whose sampled rows are mostly exact copies: ties decide it
# Up to this width the row measures' products are small (M × d by d × d): BLAS threads gain
# nothing on them, and on a busy 2-core host OpenBLAS's threads took 5x the CPU time of one
# (66 s against 14 s for the row measures of a 3 × 3 grid at M 297, d 64), so they run on one.
SMALL_WIDTH = 1024


def attach(
    results: dict,
    sample: Sample,
    spec,
    src_boundaries,
    tgt_boundaries,
    device: str = "cpu",
    runner=None,
) -> dict:
    """`rows.row_measures` of the sample for every pair of the grid, on the fit's `device`
    (torch on a GPU: "cuda..."; numpy on "cpu"), in this process or, with `runner`
    (`rows_tasks.runner`: a cluster's), as tasks of its workers, with the same numbers; each
    pair's `PairResult.sampled` = {measure: its `rows.RowMeasure` cell}. Only mknn, cknna and
    rsa get the sample's interval (`row_interval`: `spec.measure_interval` under
    `--bootstrap` N > 0; a streamed measure's interval is the jackknife's over all held-out
    rows). Returns the record of the sample the result's
    summary keeps, with the tie rule and each cell's fraction of sampled rows that have an
    exact copy (`rows.duplicated_rows`). procrustes-heldout's calibration
    (`spec.heldout_calibrated`) is `calibration.summarise` of the values `heldout_null` kept
    (a distance, ideal 0), with the same fields (its interval, "low" and "high", is the
    streamed one: NaN here)."""
    out = {}
    if spec.sampled:
        widest = max(x.shape[1] for x in (*sample.xs.values(), *sample.ys.values()))
        threads = 1 if widest <= SMALL_WIDTH else None
        with blas_limit(threads):
            where = runner and runner._replace(threads=threads)  # the same count in its tasks
            out = _row_measures(sample, spec, (src_boundaries, tgt_boundaries), device, where)
    if spec.heldout_calibrated:
        out[HELDOUT] = _heldout_summary(sample, src_boundaries, tgt_boundaries)
    names = tuple(out)
    for a, i in enumerate(src_boundaries):
        for b, j in enumerate(tgt_boundaries):
            results[(i, j)].sampled = {n: out[n].cell(a, b) for n in names}
    record = {
        "rows": int(len(sample.tokens)),
        "seed": int(spec.seed),
        "permutations": int(spec.draws),
        "neighbours": int(spec.neighbours),
        "null_scheme": out[names[0]].null_scheme,
        "interval": row_interval(spec),
        "ties": TIE_RULE,
    }
    if row_interval(spec) == rows.BOOTSTRAP:
        record["bootstrap_resamples"] = int(resampling_of(spec).resamples)
    copies = next((v.duplicated for v in out.values() if v.duplicated is not None), None)
    if copies is not None:
        record["duplicated_rows"] = {
            "fraction": np.round(copies, 6).tolist(),
            "about": "per (source boundary, target boundary): the fraction of the sampled rows "
            "equal to another sampled row at either boundary; where above "
            f"{MOSTLY_COPIES}, ties decide mknn, cknna and rsa",
            "mostly_copies": int(np.sum(copies > MOSTLY_COPIES)),
        }
    return record


def _row_measures(sample: Sample, spec, grid: tuple, device: str, runner) -> dict:
    """`rows.row_measures` of the sample as `attach` asks it (grid: the source and the target
    boundaries), in this process or as `runner`'s tasks (`rows_tasks.row_measures_tasks`)."""
    xs = {i: sample.xs[i] for i in grid[0]}
    ys = {j: sample.ys[j] for j in grid[1]}
    scheme = row_interval(spec)
    widest = max(x.shape[1] for x in (*xs.values(), *ys.values()))
    draws = rows.Draws(
        spec.draws,
        spec.seed,
        resampling_of(spec),
        scheme or rows.JACKKNIFE,
        row_threads(widest, device),
    )
    kw = dict(k=spec.neighbours, draws=draws, intervals=ROW_ONLY if scheme else ())
    if runner is not None:
        return row_measures_tasks(runner, xs, ys, sample.docs, spec.sampled, **kw)
    return rows.row_measures(
        xs, ys, sample.docs, spec.sampled, **kw, backend=device_backend(device)
    )


def row_threads(widest: int, device: str) -> int:
    """The threads of this process the row measures' preparations, draws and recomputations
    are cut among (`rows.Draws.threads`; a cluster's tasks cut them themselves): the cores
    where BLAS runs on one thread (rows up to SMALL_WIDTH wide, `attach`), else 1, not beside
    BLAS's own threads or a device's parallelism (the numbers do not depend on it)."""
    return cpu_cores() if device == "cpu" and widest <= SMALL_WIDTH else 1


def row_interval(spec) -> str | None:
    """The row measures' interval scheme of a fit: `spec.measure_interval` (rows.JACKKNIFE or
    rows.BOOTSTRAP) under `--bootstrap` N > 0, as the streamed measures' jackknife; None
    without."""
    return spec.measure_interval if spec.bootstrap else None


def log_measures(
    log, command: str, spec, sample: Sample | None, split: Split, shape=None, seconds=None
) -> None:
    """Log `measures_line` as `command`'s first plan line when measures beyond ridge are
    asked."""
    if len(spec.measures) > 1:
        log(f"{command}: {measures_line(spec, sample, split, shape, seconds)}")


def measures_line(spec, sample: Sample | None, split: Split, shape=None, seconds=None) -> str:
    """The plan's first line of a fit with measures beyond ridge: what it will compute (each
    measure, on which rows, with which interval and calibration) and, with the sample's
    `shape` (`shape_of`), the bytes its rows and `row_measures` will hold; the seconds are
    `--dry-run`'s, which times the work."""
    heldout_rows = int(split.counts["heldout"])
    streamed_ = [m for m in spec.measures if m in STREAMED]
    row_only = [m for m in spec.measures if m in ROW_ONLY]
    parts = []
    if streamed_:
        interval = " with their jackknife interval" if spec.bootstrap else ""
        parts.append(f"{', '.join(streamed_)} on the {heldout_rows:,} held-out rows{interval}")
    if row_only:
        scheme = row_interval(spec)
        interval = {
            rows.JACKKNIFE: f" with their jackknife interval ({MEASURE_GROUPS} recomputations)",
            rows.BOOTSTRAP: f" with a {resampling_of(spec).resamples:,}-resample document "
            "bootstrap",
            None: "",
        }[scheme]
        parts.append(f"{', '.join(row_only)} on the {len(sample.tokens):,} sampled rows{interval}")
    if spec.calibrated:
        left = [m for m in spec.measures if m != "ridge" and m not in spec.calibrated]
        which = ", ".join(spec.calibrated) if left else "every measure"
        parts.append(
            f"{which} calibrated against {spec.draws:,} permutations of the "
            f"{len(sample.tokens):,} sampled rows"
        )
        if left:
            parts.append(
                f"{', '.join(left)} not calibrated (give `permutations` to calibrate them too)"
            )
    else:
        parts.append("no calibration (`permutations` 0)")
    cost = ""
    if shape is not None:
        held = human_bytes(sample_bytes(shape) + row_measures_bytes(shape))
        cost = f"; the sampled rows and `row_measures` hold {held}" + (
            ", `dry_run` times the seconds"
            if seconds is None
            else f" and take {_duration(seconds)} on this machine, `dry_run` times the whole fit"
        )
    return "measures: ridge, " + "; ".join(parts) + cost


def _duration(seconds: float) -> str:
    """ "~45 s", "~12 min", or "over an hour (~3.1 h)"."""
    if seconds >= 3600:
        return f"over an hour (~{seconds / 3600:,.1f} h)"
    return f"~{seconds / 60:,.0f} min" if seconds >= 120 else f"~{seconds:,.0f} s"


HELDOUT = "procrustes-heldout"


def _heldout_summary(sample: Sample, src_boundaries, tgt_boundaries) -> rows.RowMeasure:
    """procrustes-heldout's row of `rows.row_measures`' answer, from `sample.heldout`."""
    shape = (len(src_boundaries), len(tgt_boundaries))
    k = len(sample.perms)
    value, null = np.full(shape, np.nan), np.full((k, *shape), np.nan)
    for a, i in enumerate(src_boundaries):
        for b, j in enumerate(tgt_boundaries):
            got = sample.heldout[(i, j)]
            value[a, b], null[:, a, b] = got[0], got[1:]
    nan = np.full(shape, np.nan)
    return rows.RowMeasure(
        value,
        nan,
        nan,
        **calibration.summarise(value, null, MEASURES[HELDOUT], 0.0)._asdict(),
        duplicated=None,
        direction=MEASURES[HELDOUT],
        null_scheme=sample.scheme,
    )


def shape_of(sample: Sample, spec, sides: tuple, itemsize: int = 8) -> SampleShape:
    """The memory plan's view of a fit's sample (`sample_budget.SampleShape`): sides
    ((n_source, d_S), (n_target, d_T)); the interval's recomputations (`row_interval`): under
    the jackknife its MEASURE_GROUPS groups, none larger than the sample; under the bootstrap
    its resamples, the largest counted from the sample's documents and the resampling
    `row_measures` will draw (a document drawn twice counts twice); its phases once a thread
    of the host's (`row_threads`: on a device they run on one, so this bounds them)."""
    largest, runs = len(sample.tokens), 0
    if row_interval(spec) == rows.JACKKNIFE:
        runs = MEASURE_GROUPS
    elif row_interval(spec) == rows.BOOTSTRAP:
        ids, per_doc = np.unique(sample.docs, return_counts=True)
        resampling = resampling_of(spec)
        drawn = bootstrap.indices(len(ids), resampling)
        largest = int(per_doc[drawn].sum(axis=1).max()) if drawn.size else largest
        runs = int(resampling.resamples)
    (n_s, d_s), (n_t, d_t) = sides
    return SampleShape(
        len(sample.tokens),
        n_s,
        d_s,
        n_t,
        d_t,
        tuple(spec.sampled),
        int(spec.neighbours),
        int(spec.draws) + runs,
        largest,
        itemsize,
        threads=row_threads(max(d_s, d_t), "cpu"),  # the host's; a device's is fewer
    )


def check_room(shape: SampleShape, room: int, where: str, option: str) -> None:
    """Refuse in one line, before any work, a budget (`room` bytes left `where`) that cannot
    hold the sampled rows and `row_measures`' working memory (`sample_budget.sample_refusal`)."""
    why = sample_refusal(shape, room, where, option)
    if why:
        raise InputError(why)


def plan_line(shape: SampleShape, held: str) -> str:
    """The plan's line of the sample: its rows' bytes, where they are `held`, and
    `row_measures`' working memory."""
    kind = "float64" if shape.itemsize == 8 else "float32"
    return (
        f"sampled rows: {shape.rows:,} held-out rows of {shape.n_source}+{shape.n_target} "
        f"boundaries, {human_bytes(sample_bytes(shape))} ({kind}) {held}, then "
        f"{human_bytes(row_measures_bytes(shape))} of working memory in `row_measures`"
    )


def host_share(options, rows: SampleShape, where: str, room: int) -> dict:
    """The sample's refusal and its share of the plan: on the CPU its rows share the budget
    with the passes and, after them, `row_measures` runs beside the models (`room`: the
    budget less this process and the models); on a GPU they are host memory, against
    --memory-limit (fitting.runtime.cluster's default without one)."""
    if where != "cpu":
        room = options.run.memory_limit or default_memory_limit()
    check_room(rows, room, f"left on the host ({where})", "`memory_limit`")
    return {"sampled rows": sample_bytes(rows)} if where == "cpu" else {}
