"""Memory arithmetic of the sampled rows (pure): the M held-out rows of every boundary the row
measures and every measure's calibration keep (`fitting.measuring.sampled`), and the peak working memory
of `measures.rows.row_measures` on them, derived from its code; and the one-line refusal of a
budget that cannot hold them (both routes). Bytes everywhere."""

from __future__ import annotations

from typing import NamedTuple

from align.measures.cells import TARGETS
from align.measures.nulls import BATCH, exact_in_float32, piece_of
from align.measures.prepared import BLOCK, depth
from align.measures.registry import NEIGHBOURS, REGISTRY, SPECTRAL
from align.messages import human_bytes

WORK_MARGIN = 1.25  # row_measures' working memory over its itemised arrays (row_measures_bytes)


class SampleShape(NamedTuple):
    """What the sampled rows and `measures.rows.row_measures` hold, beside the fit's options.

    Attributes
    ----------
    rows : int
        M, the sampled held-out rows.
    n_source, n_target : int
        Source and target boundaries.
    d_s, d_t : int
        The two widths.
    measures : tuple
        The measures `row_measures` computes (`FitSpec.sampled`).
    neighbours : int
        k of mknn and cknna.
    draws : int
        Permutations plus the interval's recomputations (jackknife groups or bootstrap
        resamples; each adds a value per pair and measure).
    resample_rows : int
        The rows of the largest document-bootstrap resample (M on average; a document drawn
        twice counts twice).
    itemsize : int
        Bytes a value of the kept rows: 8 (float64, the live route) or 4 (float32 as the
        stores are read; `row_measures` then makes its own float64 copy).
    spectral_intervals : bool
        The spectral measures get the sample's bootstrap too (a fit asks it of mknn, cknna
        and rsa only: `sampled.attach`).
    threads : int
        The threads `row_measures` runs its preparations, draws and recomputations on, each
        holding its own phase's temporaries (`sampled.row_threads`).
    """

    rows: int  # M
    n_source: int  # source boundaries
    d_s: int  # the source's width
    n_target: int  # target boundaries
    d_t: int  # the target's width
    measures: tuple  # FitSpec.sampled
    neighbours: int  # k
    draws: int  # permutations + the interval's recomputations
    resample_rows: int  # rows of the largest bootstrap resample
    itemsize: int = 8  # bytes a value of the kept rows
    spectral_intervals: bool = False  # the spectral measures resampled too (not on a fit)
    threads: int = 1  # threads of row_measures' phases side by side (`rows.Draws.threads`)


def sample_bytes(s: SampleShape) -> int:
    """Bytes of the kept sampled rows: itemsize·M·(n_S·d_S + n_T·d_T)."""
    return s.itemsize * s.rows * (s.n_source * s.d_s + s.n_target * s.d_t)


def _prepared_bytes(s: SampleShape, m: int, d: int) -> int:
    """One boundary's `prepared.Prepared` of m rows of width d: the SVD's u (m, r), s and the
    squared norms (r = min(m, d)) with a spectral measure; the neighbour orders and their
    cosines (m, L) and the distinct unit rows (at most m, d) and their index (m); rsa's
    centred ranks (P = m(m − 1)/2, float64), the pairs' order and their tie groups (int32),
    the pairs' rows in that order (2 × int16)."""
    spectral, near, rsa = _kinds(s.measures)
    r, L = min(m, d), depth(s.neighbours, m)
    pairs = m * (m - 1) // 2
    return 8 * spectral * (m * r + r + m) + 8 * near * (2 * m * L + m * d + m) + rsa * 20 * pairs


def _kinds(measures) -> tuple:
    """(any spectral measure, any neighbour measure, rsa) among `measures`."""
    return (
        any(n in SPECTRAL for n in measures),
        any(n in NEIGHBOURS for n in measures),
        "rsa" in measures,
    )


def _prepare_temporaries(s: SampleShape, m: int, d: int) -> int:
    """The peak of `prepared.prepare`'s temporaries for one boundary of m rows beyond its
    record, the largest of
    - the SVD: the centred rows, LAPACK's copy of them and its workspace (7·r²), its u and
      vᵀ and the products u·s and their squares: 3·m·d + 3·m·r + 2·r·d + 7·r² values;
    - the neighbours: the unit rows and their sort for the distinct ones (3·m·d), then a
      block of B = min(BLOCK, m) rows' cosines, expanded, negated, partitioned and compared
      (4·B·m);
    - rsa: the centred rows and their sort (4·m·d), the distinct rows' products (m²), the
      pairs' rows and their distances (3P/2 + P), the sort's order and the sorted
      distances (2P), the pairs' rows kept to the sort's end and read in its order (P):
      6P + 4·m·d with m² = 2P."""
    spectral, near, rsa = _kinds(s.measures)
    r, block = min(m, d), min(BLOCK, m)
    pairs = m * (m - 1) // 2
    peaks = [
        spectral * (3 * m * d + 3 * m * r + 2 * r * d + 7 * r * r),
        near * (3 * m * d + 4 * block * m),
        rsa * (4 * m * d + 6 * pairs),
    ]
    return 8 * max(peaks)


def _grid_temporaries(s: SampleShape, m: int) -> int:
    """The peak of one cell's measure (its rows form in `cells`): u·s of both sides and the products of
    their SVD directions (procrustes' SVD, cca's whitened product); the neighbour lists side
    by side and sorted (mknn) or intersected (cknna)."""
    spectral, near, _ = _kinds(s.measures)
    rx, ry = min(m, s.d_s), min(m, s.d_t)
    return 8 * max(spectral * (m * (rx + ry) + 3 * rx * ry), near * 8 * m * s.neighbours)


def _null_temporaries(s: SampleShape, m: int) -> int:
    """A null draw beyond the records: the largest of its three parts, which run one after
    the other (`rows.null_values`): rsa's (`nulls.rsa_null`, every draw in batches: the
    gathered side's ranks as squares, m² each (float32 where exact), min(n_S, n_T) of them, the pairs' rows (int64:
    2P) and a square's places while it is laid out (2P), and a piece's places, gathered ranks
    and the other side's ranks); the spectral measures' one product (`spectral_null`: the
    sources' Z side by side, M × n_S·r_S; the target's permuted u, M × r_T; B, B∘B and the
    cells' stack, each n_S·r_S × r_T; their Grams, n_S·r²); the neighbour measures' relabelled
    orders and their copies with one cell's temporaries."""
    spectral, near, rsa = _kinds(s.measures)
    r, L, pairs = min(m, s.d_t), depth(s.neighbours, m), m * (m - 1) // 2
    rs = min(m, s.d_s)
    product = s.n_source * rs * (m + 3 * r) + m * r + s.n_source * min(rs, r) ** 2
    piece = piece_of(pairs)
    # the gathered side's squares, float32 where that holds the ranks (`nulls`), each laid
    # out in float64 first
    wide = 4 if exact_in_float32(m) else 8
    squares = wide * min(s.n_source, s.n_target) * m * m + 8 * (m * m + 4 * pairs)
    pieces = 8 * piece * (4 * BATCH + max(s.n_source, s.n_target))
    return max(
        rsa * (squares + pieces),
        8 * spectral * product,
        8 * near * 6 * m * L + _grid_temporaries(s, m),
    )


def _bootstrap_temporaries(s: SampleShape, m: int) -> int:
    """A resample beyond the records of the sampled rows:
    - rsa: the pairs' rows (int32, P), the pairs' weights (P), the stacks of scaled ranks
      under them (`cells._scaled`: every source boundary's and TARGETS target boundaries',
      (n_S + TARGETS)·P) and `ranks_weighted`'s temporaries (3P);
    - mknn, cknna: the scratch of entries (4·m² bytes), every target boundary's entries
      and one source's (6 values of at most m·k each) and the walk of the orders (6·m·L);
    - the spectral measures: every boundary's record of the resampled rows
      (resample_rows) and the temporaries of preparing one."""
    spectral, near, rsa = _kinds(s.measures)
    m2, L, pairs = max(s.resample_rows, 1), depth(s.neighbours, m), m * (m - 1) // 2
    ranks = 8 * rsa * (5 + s.n_source + TARGETS) * pairs
    entries = near * (4 * m * m + 8 * (6 * (s.n_target + 1) * m * s.neighbours + 6 * m * L))
    records = s.n_source * _spectral_bytes(m2, s.d_s) + s.n_target * _spectral_bytes(m2, s.d_t)
    again = max(_spectral_temporaries(m2, d) for d in (s.d_s, s.d_t))
    return ranks + entries + (spectral and s.spectral_intervals) * (records + again)


def _spectral_bytes(m: int, d: int) -> int:
    r = min(m, d)
    return 8 * (m * r + r + m)


def _spectral_temporaries(m: int, d: int) -> int:
    r = min(m, d)
    return 8 * (m * d + 3 * m * d + 3 * m * r + 2 * r * d + 7 * r * r)


def row_measures_bytes(s: SampleShape) -> int:
    """Peak bytes `measures.rows.row_measures` holds beyond the kept sampled rows (derived from
    its code; tests/unit/test_budget_sampled.py measures it with tracemalloc).

    The float64 copy of the rows when they are kept as float32 (the store route), the
    value, null and bootstrap arrays (8·(draws + 2)·n_S·n_T per measure), every boundary's
    record (`_prepared_bytes`, kept from the values to the bootstrap), and the largest of
    three phases: preparing one record (`_prepare_temporaries`) and a cell's values; a null
    draw (`_null_temporaries`); a bootstrap resample (`_bootstrap_temporaries`), once a
    thread (`threads`).
    """
    m, S, T = s.rows, s.n_source, s.n_target
    records = S * _prepared_bytes(s, m, s.d_s) + T * _prepared_bytes(s, m, s.d_t)
    phases = (
        max(_prepare_temporaries(s, m, d) for d in (s.d_s, s.d_t)) + _grid_temporaries(s, m),
        _null_temporaries(s, m),
        _bootstrap_temporaries(s, m),
    )
    # the itemised arrays came to 0.86-0.98 of tracemalloc's peak on small grids (the
    # records' Python objects and the temporaries not itemised): WORK_MARGIN covers the rest
    float64 = 8 * m * (S * s.d_s + T * s.d_t) if s.itemsize != 8 else 0
    arrays = 8 * (s.draws + 2) * S * T * len(s.measures)
    return float64 + int(WORK_MARGIN * (arrays + records + max(1, s.threads) * max(phases)))


def sample_refusal(s: SampleShape, room: int, where: str, option: str) -> str | None:
    """The one line of a budget (`room` bytes left for them `where`) that cannot hold the
    sampled rows and `row_measures`' working memory, naming both, the most rows that fit and
    what to do; None when they fit."""
    rows_b, work = sample_bytes(s), row_measures_bytes(s)
    if rows_b + work <= room:
        return None
    fits = s.rows
    while fits > 1 and _with_rows(s, fits) > room:
        fits = fits * 3 // 4
    todo = (
        f"give `sample_rows` {fits:,} or fewer, or raise {option}"
        if _with_rows(s, fits) <= room and fits >= 4
        else f"raise {option}, or lower `sample_rows` and fit fewer `source_boundaries`/`target_boundaries`"
    )
    return (
        f"the {s.rows:,} sampled rows of `measures` ({', '.join(s.measures)}) need "
        f"{human_bytes(rows_b)} of rows and {human_bytes(work)} of working memory in "
        f"`row_measures`, {human_bytes(rows_b + work)} in all, more than the "
        f"{human_bytes(max(room, 0))} {where}: {todo}"
    )


def _with_rows(s: SampleShape, m: int) -> int:
    grown = max(1, s.resample_rows * m // max(s.rows, 1))
    t = s._replace(rows=m, resample_rows=grown)
    return sample_bytes(t) + row_measures_bytes(t)


def neighbours_refusal(
    k: int, m: int, measures, rows_said: str | None = None, more: str | None = None
) -> str | None:
    """The one line of a k (`neighbours`) that mknn or cknna among `measures` cannot take
    from m sampled rows, or None. Each row's k nearest rows are drawn from the other m − 1
    (a row is not its own neighbour: `measures.rows.neighbours`), so 1 ≤ k ≤ m − 1; cknna's
    unbiased HSIC of the masked kernels needs k ≥ 2 (each record's `neighbours`). Checked before any memory arithmetic:
    a k no sample can hold is not a budget's fault. `rows_said` names where m came from
    (default: `sample_rows` m), `more` how to sample more rows (default: a `sample_rows`
    above k)."""
    near = [n for n in measures if n in NEIGHBOURS]
    low = max((REGISTRY[n].neighbours for n in near), default=1)  # each record's fewest k
    if not near or low <= k <= m - 1:
        return None
    names = " and ".join(near)
    if k < low:
        who = " and ".join(n for n in near if REGISTRY[n].neighbours == low)
        return f"`neighbours` {k:,}: {who} needs {low} or more nearest neighbours; give `neighbours` {low} or more"
    fewer = f"give `neighbours` {m - 1:,} or fewer, or " if m - 1 >= low else ""
    more = more or f"`sample_rows` {k + 1:,} or more (at most the held-out rows)"
    return (
        f"`neighbours` {k:,} with {rows_said or f'`sample_rows` {m:,}'}: {names} "
        f"{'take' if len(near) > 1 else 'takes'} each "
        f"sampled row's k nearest among the other {m - 1:,} sampled rows (a row is not its own "
        f"neighbour), so k is at most {m - 1:,}: {fewer}{more}"
    )
