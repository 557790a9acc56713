"""Similarity measures on rows sampled from the held-out documents (pure functions on arrays):
mutual nearest neighbours, CKNNA and RSA, which need rows rather than sums, and row versions
of the streamed measures (linear CKA, debiased CKA, Procrustes, CCA, SVCCA) so that every
measure gets the same null (docs/measures-rows.md).

The interface the fit calls:

    sample_rows(doc_of_row, n_sample, seed) -> (n_sample,) sorted indices of held-out rows
    row_measures(xs, ys, docs, measures, *, k, draws, intervals, backend)
        -> {measure: RowMeasure}

Every measure is computed from a record of each boundary's rows (`prepared.Prepared`: its
centred rows' SVD, its neighbour orders, its sorted distances and ranks), built once per
boundary; a null draw reads them under the permutation, without a record a draw (mknn's and
cknna's relabel the neighbour lists, `neighbour_null`; rsa's read the ranks in batches,
`nulls`; the spectral measures' take one product a target, `spectral_null`). The interval is, by default, the delete-a-group jackknife of every other measure (`JACKKNIFE`: the
measure recomputed without each group of documents, group = document index mod
`streamed.MEASURE_GROUPS`, `jackknife.interval`), or, as an option, the percentile document
bootstrap (`BOOTSTRAP`). Both are a recomputation on the sampled rows written w_r times
(w_r 0 or 1 for the jackknife, a document's count in the resample for the bootstrap), which
re-reads the records under the weights (`cells.weighted_grid`) for mknn, cknna and rsa; the
spectral measures' recomputations are decomposed afresh.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np

from align.errors import InputError, NonFiniteError
from align.measures import calibration, cells, nulls, prepared
from align.measures.neighbour_null import NEIGHBOUR_NULL, neighbour_null
from align.measures.registry import REGISTRY, parts_of, reweighted, rows_forms
from align.measures.spectral_null import SPECTRAL, spectral_null
from align.measures.streamed import MEASURE_GROUPS
from align.ridge.backend import CPU, Backend
from align.stats import bootstrap, jackknife
from align.threads import side_by_side

# Each row measure's direction and ideal value (what a model compared with itself scores): a
# view of the registry's records that have a rows form, those with no sums form first.
ROW_MEASURES = {
    n: (m.direction, m.ideal)
    for n, m in sorted(REGISTRY.items(), key=lambda item: item[1].sums is not None)
    if m.rows
}
K_NEIGHBOURS = 10  # platonic-rep's default topk
# The row measures' interval schemes (`--measure-interval`): the delete-a-group jackknife of
# every measure (the default), or the percentile document bootstrap.
JACKKNIFE, BOOTSTRAP = "jackknife", "bootstrap"
INTERVALS = (JACKKNIFE, BOOTSTRAP)


def sample_rows(doc_of_row: np.ndarray, n_sample: int, seed: int) -> np.ndarray:
    """The held-out rows the row measures use: n_sample of them drawn without replacement,
    sorted, numpy.random.default_rng(seed).choice(n_rows, n_sample, replace=False).

    doc_of_row: (n_rows,) int, the document of each held-out row (only its length is read:
    every row is equally likely). n_sample: M. seed: recorded with the result."""
    n = len(np.asarray(doc_of_row))
    if isinstance(n_sample, bool) or not isinstance(n_sample, (int, np.integer)) or n_sample < 1:
        raise InputError(f"`sample_rows` {n_sample!r}: give a whole number of rows, 1 or more")
    if n_sample > n:
        raise InputError(
            f"`sample_rows` {n_sample:,}: more than the {n:,} held-out rows; give {n:,} or fewer"
        )
    return np.sort(np.random.default_rng(seed).choice(n, int(n_sample), replace=False))


def _measure(name: str, x, y, k: int = K_NEIGHBOURS) -> float:
    """One measure of two arrays of rows, checked as `row_measures` checks a cell (the two
    named source and target boundary 0)."""
    _check_rows(x, y, k, (name,))
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    _check_boundary(x, "source", 0, (name,))
    _check_boundary(y, "target", 0, (name,))
    return float(observed_values({0: x}, {0: y}, (name,), k)[name][0, 0])


def mknn(x: np.ndarray, y: np.ndarray, k: int = K_NEIGHBOURS) -> float:
    """Mutual k-nearest-neighbour alignment (Huh et al. 2024, platonic-rep's mutual_knn).

        mknn = (1/M) Σ_r |N_x(r) ∩ N_y(r)| / k

    N_x(r): the k rows with the largest cosine to row r of x (unit-normalised rows, r itself
    left out, ties to the lower row index).

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.
    k : int, optional
        Neighbours, 1 ≤ k < n_rows.

    Returns
    -------
    float
        mknn, in [0, 1].
    """
    return _measure("mknn", x, y, k)


def neighbours(x: np.ndarray, k: int = K_NEIGHBOURS) -> np.ndarray:
    """N_x(r) of `mknn`: each row's neighbours by falling cosine.

    Parameters
    ----------
    x : array of shape (n_rows, d)
        The rows.
    k : int, optional
        Neighbours.

    Returns
    -------
    array of shape (n_rows, k)
        int, row indices.
    """
    _check_rows(x, x, k, ("mknn",))
    return prepared.prepare(x, parts_of(("mknn",)), k).order[:, :k]


def cknna(x: np.ndarray, y: np.ndarray, k: int = K_NEIGHBOURS) -> float:
    """CKNNA (platonic-rep's cknna, unbiased, distance-aware).

    With K, L the cosine kernels of the unit-normalised rows, A_x, A_y the 0/1 masks of each
    row's k nearest rows (as in `mknn`) and A = A_x∘A_y,

        cknna = HSIC_u(A∘K, A∘L) / sqrt(HSIC_u(A_x∘K, A_x∘K) · HSIC_u(A_y∘L, A_y∘L))

    HSIC_u: Song et al. (2012)'s unbiased estimator as platonic-rep writes it (its 1e-6 in the
    denominator left out).

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.
    k : int, optional
        Neighbours, 2 ≤ k < n_rows.

    Returns
    -------
    float
        cknna.
    """
    return _measure("cknna", x, y, k)


def rsa(x: np.ndarray, y: np.ndarray) -> float:
    """Representational similarity (Kriegeskorte et al. 2008), as rsatoolbox computes it.

    The Spearman correlation of the two representational dissimilarity matrices' upper
    triangles, each entry the correlation distance 1 − corr(x_a, x_b) of two rows (a row
    centred over its features).

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.

    Returns
    -------
    float
        rsa.
    """
    return _measure("rsa", x, y)


def cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA (Kornblith et al. 2019) on the centred rows Xc, Yc.

        cka = ‖Xcᵀ Yc‖²_F / (‖Xcᵀ Xc‖_F ‖Ycᵀ Yc‖_F)

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.

    Returns
    -------
    float
        cka, in [0, 1].
    """
    return _measure("cka", x, y)


def cka_debiased(x: np.ndarray, y: np.ndarray) -> float:
    """Debiased linear CKA (platonic-rep's unbiased_cka, its 1e-6 left out).

    HSIC_u(K, L) / sqrt(HSIC_u(K, K) HSIC_u(L, L)) with K = XXᵀ, L = YYᵀ and HSIC_u Song et
    al. (2012)'s unbiased estimator (`cknna`), computed from sums over rows.

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.
        n_rows ≥ 4.

    Returns
    -------
    float
        The debiased CKA.
    """
    return _measure("cka-debiased", x, y)


def procrustes(x: np.ndarray, y: np.ndarray) -> float:
    """Procrustes angular distance (netrep's LinearMetric(alpha=1, score_method="angular")).

    With Xc, Yc the centred rows scaled to unit Frobenius norm (the narrower side zero-padded,
    which changes nothing below),

        procrustes = arccos(max_Q ⟨Xc Q, Yc⟩) = arccos(‖Xcᵀ Yc‖_*)

    over orthogonal Q; ‖·‖_* the nuclear norm (the Procrustes similarity).

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.

    Returns
    -------
    float
        0 when y is a rotation of x, π/2 at most.
    """
    return _measure("procrustes", x, y)


def cca(x: np.ndarray, y: np.ndarray) -> float:
    """Mean squared canonical correlation (Kornblith et al. 2019's R²_CCA) of the centred rows.

    As align.measures.streamed.cca defines it from sums:

        cca = ‖(Cxx + λ_x I)^(−1/2) Cxy (Cyy + λ_y I)^(−1/2)‖²_F / min(d_source, d_target)

    Cxx = XcᵀXc, Cxy = XcᵀYc, λ = CCA_RIDGE·tr(C)/d (a singular covariance stays invertible).

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.

    Returns
    -------
    float
        cca; it nears 1 as the widths near n_rows, so read it with n_rows well above them.
    """
    return _measure("cca", x, y)


def svcca(x: np.ndarray, y: np.ndarray) -> float:
    """SVCCA (Raghu et al. 2017): canonical correlation of the leading SVD directions.

    Each side's centred rows are reduced by SVD to the fewest leading directions holding 99%
    of its variance, then the mean canonical correlation of the two reductions,
    (1/min(k_x, k_y)) Σ ρ_i.

    Parameters
    ----------
    x, y : array of shape (n_rows, d_source), (n_rows, d_target)
        The source's and the target's rows, row r of both from one token.

    Returns
    -------
    float
        svcca.
    """
    return _measure("svcca", x, y)


def _check_rows(x, y, k, measures, where: str = "") -> None:
    """The one-line refusals shared by every entry point: unknown measures, shapes, k."""
    bad = [m for m in measures if m not in ROW_MEASURES]
    if bad:
        raise InputError(
            f"`measures` {', '.join(map(str, bad))}: not a row measure; the row measures are "
            f"{', '.join(ROW_MEASURES)}"
        )
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise InputError(
            f"rows of shapes {x.shape} and {y.shape}{where}: give two (n_rows, width) arrays "
            "with one row per token in both"
        )
    m = x.shape[0]
    low = max(REGISTRY[n].neighbours for n in measures)
    if low:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not low <= k < m:
            raise InputError(
                f"`k` {k!r}: the nearest neighbours must be fewer than the {m:,} sampled rows "
                f"(a row is not its own neighbour): give {low} to {m - 1:,}"
            )
    short = [n for n in measures if m < REGISTRY[n].min_rows]
    if short:
        least = max(REGISTRY[n].min_rows for n in short)
        raise InputError(
            f"{m} sampled rows: {', '.join(short)} need at least {least} (the unbiased "
            "HSIC's m(m − 3)); sample more"
        )


def _check_boundary(x: np.ndarray, side: str, b, measures) -> None:
    """Refuse rows that give no measure: non-finite values, no variance, a row of zero norm
    (no cosine) or of constant features (no correlation distance), each named."""
    if not np.isfinite(x).all():
        r = int(np.argwhere(~np.isfinite(x))[0, 0])
        raise NonFiniteError(f"{side} boundary {b}: non-finite value in sampled row {r}")
    if np.all(x == x[:1]):
        raise InputError(
            f"{side} boundary {b} has no variance over the {len(x):,} sampled rows (every row "
            "is the same): no measure is defined; leave the boundary out"
        )
    parts = parts_of(measures)
    if "order" in parts and not np.linalg.norm(x, axis=1).all():
        r = int(np.flatnonzero(np.linalg.norm(x, axis=1) == 0)[0])
        raise InputError(f"{side} boundary {b}: sampled row {r} is all zeros, so it has no cosine")
    constant = np.all(x == x[:, :1], axis=1)
    if "ranks" in parts and constant.any():
        r = int(np.flatnonzero(constant)[0])
        raise InputError(
            f"{side} boundary {b}: sampled row {r} is constant over its features, so its "
            "correlation distance is undefined"
        )


def prepare_all(xs: dict, ys: dict, measures, k: int, backend: Backend = CPU, threads: int = 1):
    """({source boundary: Prepared}, {target boundary: Prepared}): every boundary's record,
    prepared once (`prepared.prepare`) for the values, the null and the bootstrap, the
    boundaries on `threads` threads of this process (each record as one thread makes it)."""
    parts = parts_of(measures)
    rows_ = [*xs.values(), *ys.values()]
    made = side_by_side(lambda x: prepared.prepare(x, parts, k, backend), rows_, threads)
    return dict(zip(xs, made[: len(xs)], strict=True)), dict(zip(ys, made[len(xs) :], strict=True))


def observed_values(xs: dict, ys: dict, measures, k: int = K_NEIGHBOURS, records=None) -> dict:
    """{measure: (n_source, n_target)} on the sampled rows, in the dicts' key order; a cell
    whose measure is undefined (a denominator of 0) is refused, named. `records`: the
    boundaries' records (`prepare_all`), prepared here without."""
    px, py = records or prepare_all(xs, ys, measures, k)
    out = cells.grid(px, py, rows_forms(measures), k)
    refuse_undefined(out, list(xs), list(ys))
    return out


def refuse_undefined(values: dict, sources: list, targets: list) -> None:
    """The one-line refusal of the first cell (in measure, then row-major order) whose value
    in values {measure: (n_source, n_target)} is not finite; sources, targets: the grid's
    boundaries."""
    for name, grid in values.items():
        if not np.isfinite(grid).all():
            a, b = np.argwhere(~np.isfinite(grid))[0]
            raise InputError(
                f"source boundary {sources[a]} × target boundary {targets[b]}: {name} is "
                "undefined on the sampled rows (a side without variance in its denominator); "
                "sample more rows or leave the boundary out"
            )


def null_values(
    xs: dict, ys: dict, perms, measures, k: int = K_NEIGHBOURS, records=None, backend=CPU
) -> dict:
    """{measure: (K, n_source, n_target)}: each measure with the target's rows re-paired by
    each permutation (row r of the source with row perms[q, r] of the target), the same
    permutation for every target boundary. perms: (K, n_rows) from
    `calibration.draw_permutations`. mknn's and cknna's draws relabel the prepared neighbour
    lists (`neighbour_null`); RSA's are read in batches from the ranks (`nulls.rsa_null`); the
    spectral measures' from one product a draw and target boundary (`spectral_null`, on
    `backend`). With `records`, xs and ys are read for their keys alone."""
    px, py = records or prepare_all(xs, ys, measures, k)
    out = {n: np.empty((len(perms), len(px), len(py))) for n in measures}
    if "rsa" in measures:
        out["rsa"] = nulls.rsa_null(list(px.values()), list(py.values()), perms, _backend_of(py))
    out.update(spectral_null(list(px.values()), list(py.values()), perms, measures, backend))
    near = [n for n in measures if n in NEIGHBOUR_NULL]
    if near:
        out.update(neighbour_null(list(px.values()), list(py.values()), perms, k, near))
    missing = [n for n in measures if n not in ("rsa", *near, *SPECTRAL)]
    if missing:  # a measure registered without a null of its own
        raise ValueError(f"no permutation null reads {', '.join(missing)}")
    return out


def _backend_of(records: dict) -> Backend:
    """The backend RSA's ranks of `records` live on (numpy's without them)."""
    ranks = next(iter(records.values())).ranks
    if ranks is None or isinstance(ranks, np.ndarray):
        return CPU
    return Backend(str(ranks.device), use_torch=True)


def multiplicities(docs, resampling) -> np.ndarray:
    """(resamples, M) int: how often resample b draws sampled row r, w_r = the count of r's
    document among default_rng(seed).integers(0, n, (resamples, n))[b] (`bootstrap.indices`
    over the sampled rows' n documents in increasing id)."""
    ids, where = np.unique(np.asarray(docs), return_inverse=True)
    idx = bootstrap.indices(len(ids), resampling)
    return bootstrap.multiplicity(idx, len(ids)).astype(np.int64)[:, where]


def jackknife_weights(docs) -> tuple[np.ndarray, tuple]:
    """The delete-a-group jackknife's recomputations as multiplicities: (weights, groups),
    weights (G', M) int with w_r = 0 for the rows of group groups[g] in row g and 1 for every
    other row, groups the G' groups holding sampled rows in increasing order, a row's group
    its document index mod MEASURE_GROUPS (the streamed measures' groups, `streamed`).

    Parameters
    ----------
    docs : array of shape (n_rows,)
        int, the held-out document index of each sampled row.

    Returns
    -------
    weights : array of shape (G', n_rows)
        int64, 0 or 1.
    groups : tuple of int
        G' groups.
    """
    group = np.asarray(docs).astype(np.int64) % MEASURE_GROUPS
    present = np.unique(group)
    return (group[None, :] != present[:, None]).astype(np.int64), tuple(int(g) for g in present)


def bootstrap_values(
    xs: dict, ys: dict, docs, measures, k: int, resampling, records=None, threads: int = 1
) -> dict:
    """{measure: (resamples, n_source, n_target)}: each measure on the rows of documents
    drawn with replacement (`multiplicities`): the sampled rows in their order, row r w_r
    times. A copy of a row is not that row's neighbour and their pair is out of RSA; NaN
    where a resample leaves a measure undefined (a drawn row with fewer than k other rows'
    copies for mknn and cknna, fewer than 4 rows for the unbiased HSIC). mknn, cknna and
    rsa are read from the sampled rows' records under the weights (`cells.weighted_grid`:
    no sort and no neighbour search a resample); the spectral measures are recomputed on
    the resampled rows. `threads`: as `recomputations`."""
    weights = multiplicities(docs, resampling)
    return recomputations(xs, ys, weights, measures, k, records, threads)


def jackknife_values(xs: dict, ys: dict, docs, measures, k: int, records=None, threads: int = 1):
    """({measure: (G', n_source, n_target)}, groups): θ_(g), each measure on the sampled rows
    whose documents are not in group g, for each of the G' groups holding sampled rows
    (`jackknife_weights`): `weighted_values` with 0/1 multiplicities, the rows left in their
    order (NaN where the rows left do not define a measure). `threads`: as `recomputations`."""
    weights, groups = jackknife_weights(docs)
    return recomputations(xs, ys, weights, measures, k, records, threads), groups


def recomputations(xs: dict, ys: dict, weights, measures, k: int, records, threads: int) -> dict:
    """`weighted_values` of every row of weights (R, M), the rows cut among `threads` threads
    (`split`: the numbers of one thread), from records (`prepare_all`; prepared here on
    numpy where None)."""
    records = records or prepare_all(xs, ys, measures, k, CPU, threads)
    return split(lambda w: weighted_values(xs, ys, w, measures, k, records), weights, threads)


def weighted_values(xs: dict, ys: dict, weights: np.ndarray, measures, k: int, records) -> dict:
    """{measure: (len(weights), n_source, n_target)}: each measure on the sampled rows written
    w_r times, for each row w of weights (R, M) int (a bootstrap resample's multiplicities,
    `bootstrap_values`, or a jackknife's 0/1, `jackknife_values`), from the boundaries'
    records (`prepare_all`); xs and ys (the sampled rows) are read only where a spectral
    measure is asked (recomputed on each recomputation's rows)."""
    px, py = records
    m = np.shape(weights)[1]
    read = reweighted(measures)
    ranked = cells.BY_RANKS in read.values()
    scratch = cells.Scratch.of(m, read, _backend_of(py) if ranked else CPU)
    spectral = [n for n in measures if n not in read]
    out = {n: np.full((len(weights), len(px), len(py)), np.nan) for n in measures}
    for q, w in enumerate(weights):
        with np.errstate(invalid="ignore", divide="ignore"):
            values = cells.weighted_grid(px, py, read, k, w, scratch) if read else {}
            if spectral:
                origin = np.repeat(np.arange(m), w)
                parts = parts_of(spectral)
                rx = {i: prepared.prepare(x[origin], parts, k) for i, x in xs.items()}
                ry = {j: prepared.prepare(y[origin], parts, k) for j, y in ys.items()}
                values.update(cells.grid(rx, ry, rows_forms(spectral), k))
        for n in measures:
            out[n][q] = values[n]
    return out


class Draws(NamedTuple):
    """What `row_measures` draws: the permutation null's K draws of the target's documents
    and their seed (`calibration.draw_permutations`), the document bootstrap's resamples
    (`align.stats.bootstrap.Resampling`, read under `BOOTSTRAP` alone), and the interval's
    scheme, JACKKNIFE (the groups of documents left out in turn) or BOOTSTRAP, and the threads
    of this process the boundaries' preparations, the null's draws and the interval's
    recomputations are cut among (each computed as one thread computes it: the numbers do not
    depend on them)."""

    permutations: int
    seed: int
    resampling: object
    interval: str = JACKKNIFE
    threads: int = 1  # threads of the preparations, the draws and the recomputations (`split`)


@dataclass(frozen=True, eq=False)
class RowMeasure:
    """One measure of `row_measures`' answer: every field over the grid, an array of shape
    (n_source, n_target) (or, `cell`, one pair's float), but the strings and `left_out`.

    value: the measure on the M sampled rows; low, high: its 95% interval (NaN without one);
    null_mean, null_std, critical, calibrated, p, p_family: `calibration.Calibration` of its
    permutation null; duplicated: the fraction of the sampled rows with an exact copy at
    either boundary (`duplicated_rows`); direction: "similarity" or "distance"; null_scheme:
    "documents" or "rows" (`calibration.draw_permutations`); interval: JACKKNIFE, BOOTSTRAP or
    None (no interval); left_out: θ_(g), the measure without group groups[g]'s rows, of
    shape (G', n_source, n_target) ((G',) for a cell), under JACKKNIFE alone (else None);
    groups: the G' groups of held-out documents (document index mod MEASURE_GROUPS) holding
    sampled rows."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    null_mean: np.ndarray
    null_std: np.ndarray
    critical: np.ndarray
    calibrated: np.ndarray
    p: np.ndarray
    p_family: np.ndarray
    duplicated: np.ndarray
    direction: str
    null_scheme: str
    interval: str | None = None
    left_out: np.ndarray | None = None
    groups: tuple | None = None

    def cell(self, a: int, b: int) -> "RowMeasure":
        """The record of the pair in row a, column b of the grid: floats, left_out (G',)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "left_out":
                out[f.name] = None if v is None else np.asarray(v, np.float64)[:, a, b]
            elif isinstance(v, np.ndarray):
                out[f.name] = float(v[a, b])
            else:
                out[f.name] = v
        return RowMeasure(**out)


def row_measures(
    xs: dict,
    ys: dict,
    docs: np.ndarray,
    measures: tuple,
    *,
    k: int = K_NEIGHBOURS,
    draws: Draws,
    intervals: tuple | None = None,
    backend: Backend = CPU,
) -> dict:
    """Every measure of `measures` for every (source, target) boundary pair on the M sampled
    rows, with its interval and its permutation null: {measure: RowMeasure}.

    value: the measure (`mknn`, `cknna`, `rsa`, `cka`, `cka_debiased`, `procrustes`, `cca`,
    `svcca`); low, high, NaN for a measure not in `intervals`: under JACKKNIFE the 95%
    delete-a-group jackknife t interval `jackknife.interval` of the value and its G'
    recomputations without each group of documents (`jackknife_values`), clipped to the
    measure's range (`registry.Measure.range`); under BOOTSTRAP the 2.5 and 97.5 percentiles
    over `bootstrap_values` (bootstrap.percentile_interval); the null's fields:
    calibration.summarise over `null_values` with calibration.draw_permutations(docs,
    permutations, seed); duplicated: `duplicated_rows` (where it is large, ties decide mknn,
    cknna and rsa).

    xs: {source boundary: (n_rows, d_source)}; ys: {target boundary: (n_rows, d_target)},
    row r of each from one token; docs: (n_rows,) int, each row's held-out document index;
    measures: names in ROW_MEASURES; k: the neighbours of mknn and cknna; draws: the null's K
    permutations, their seed, the bootstrap's resampling and the interval's scheme, JACKKNIFE
    or BOOTSTRAP (`Draws`); intervals: the measures that get an interval (None: all); backend:
    where the cosines, the distances, their sorts and RSA's null and recomputations run (the
    fit's device)."""
    interval = draws.interval
    if interval not in INTERVALS:
        raise InputError(
            f"`measure_interval` {interval!r}: give {' or '.join(INTERVALS)} (the row "
            "measures' interval scheme)"
        )
    measures = tuple(measures)
    intervals = measures if intervals is None else tuple(n for n in measures if n in intervals)
    xs, ys, docs = checked_rows(xs, ys, docs, measures, k)
    records = prepare_all(xs, ys, measures, k, backend, draws.threads)
    value = observed_values(xs, ys, measures, k, records)
    perms, scheme = calibration.draw_permutations(docs, draws.permutations, draws.seed)
    null = split(
        lambda p: null_values(xs, ys, p, measures, k, records, backend), perms, draws.threads
    )
    recomputed = Recomputed(None, {}, None)
    if intervals and interval == JACKKNIFE:
        left = jackknife_values(xs, ys, docs, intervals, k, records, draws.threads)
        recomputed = Recomputed(interval, *left)
    elif intervals:
        resampled = (xs, ys, docs, intervals, k, draws.resampling, records, draws.threads)
        recomputed = Recomputed(interval, bootstrap_values(*resampled), None)
    return summarised(measures, value, null, recomputed, duplicated_rows(xs, ys), scheme)


def split(f, items: np.ndarray, threads: int) -> dict:
    """f(items) ({measure: (len(items), ...)}) with the rows of `items` (the null's draws, the
    recomputations' weights) cut into `threads` pieces, each f of its piece on a thread of
    this process (numpy's products, sorts and LAPACK release the GIL), the answers joined
    in order: the numbers of f(items) itself."""
    pieces = min(threads, len(items))
    if pieces <= 1:
        return f(items)
    parts = side_by_side(f, np.array_split(items, pieces), pieces)
    return {n: np.concatenate([p[n] for p in parts]) for n in parts[0]}


class Recomputed(NamedTuple):
    """The recomputations behind the row measures' intervals: the scheme (JACKKNIFE,
    BOOTSTRAP, or None: no interval), {measure: (R, n_source, n_target)} (the measures with an
    interval; R = G' jackknife groups or the bootstrap's resamples) and, under JACKKNIFE, the
    G' groups left out in turn (else None)."""

    scheme: str | None
    values: dict
    groups: tuple | None


def checked_rows(xs: dict, ys: dict, docs, measures, k: int) -> tuple:
    """(xs, ys, docs) as `row_measures` computes on them (the rows float64), or the one-line
    refusal of the first thing that gives no measure: no boundary, unknown measures, shapes,
    k, a boundary's rows (`_check_boundary`), the documents' shape."""
    if not xs or not ys:
        raise InputError("no boundary to measure: give at least one source and one target")
    first = next(iter(xs.values()))
    _check_rows(first, next(iter(ys.values())), k, measures)
    xs = {i: np.asarray(x, np.float64) for i, x in xs.items()}
    ys = {j: np.asarray(y, np.float64) for j, y in ys.items()}
    docs = np.asarray(docs)
    for side, grid in (("source", xs), ("target", ys)):
        for b, x in grid.items():
            _check_rows(first, x, k, measures, f" at {side} boundary {b}")
            _check_boundary(x, side, b, measures)
    if docs.shape != (len(first),):
        raise InputError(
            f"`docs` of shape {docs.shape}: give one document id per sampled row ({len(first):,})"
        )
    return xs, ys, docs


def summarised(
    measures, value: dict, null: dict, recomputed: Recomputed, copies, scheme: str
) -> dict:
    """`row_measures`' answer, {measure: RowMeasure}, from its parts: value {measure:
    (n_source, n_target)}, null {measure: (K, n_source, n_target)}, the recomputations of the
    measures with an interval (`Recomputed`), copies (`duplicated_rows`) and the null's
    scheme."""
    out = {}
    for n in measures:
        direction, ideal = ROW_MEASURES[n]
        nan = np.full(value[n].shape, np.nan)
        low, high, left, how = nan, nan, None, None
        if n in recomputed.values and recomputed.scheme == JACKKNIFE:
            left, how = recomputed.values[n], JACKKNIFE
            low, high = jackknife.grid(value[n], left, REGISTRY[n].range)
        elif n in recomputed.values:
            low, high = bootstrap.percentile_interval(recomputed.values[n])
            how = BOOTSTRAP
        out[n] = RowMeasure(
            value[n],
            low,
            high,
            **calibration.summarise(value[n], null[n], direction, ideal)._asdict(),
            duplicated=copies,
            direction=direction,
            null_scheme=scheme,
            interval=how,
            left_out=left,
            groups=recomputed.groups if left is not None else None,
        )
    return out


def duplicated_rows(xs: dict, ys: dict) -> np.ndarray:
    """(n_source, n_target): the fraction of the M sampled rows that equal another sampled row
    exactly (every value) at the source boundary or at the target boundary of the cell. A
    repeated token's embedding is one row, so at boundary 0 most rows can have a copy; their
    cosines and correlation distances tie, and the tie rule (the lower row index first; tied
    distances share their average rank) decides mknn, cknna and rsa there."""

    def copied(x):
        _, inverse, counts = np.unique(x, axis=0, return_inverse=True, return_counts=True)
        return counts[np.ravel(inverse)] > 1

    cx = [copied(x) for x in xs.values()]
    cy = [copied(y) for y in ys.values()]
    return np.array([[float(np.mean(a | b)) for b in cy] for a in cx])
