"""The permutation null of mknn and CKNNA (pure functions on arrays): every draw of every cell
read from the boundaries' prepared neighbour lists (`prepared.Prepared`: `order`, `near`,
`knn_self`), without a permuted record per draw.

Draw π re-pairs row r of the source with row π(r) of the target, so the target's rows are
y[π]. With π⁻¹ its inverse, row r of y[π] is row π(r) of y, and its k nearest rows are

    N'_y(r) = π⁻¹(N_y(π(r)))

the target's entries (s, c) relabelled (π⁻¹ s, π⁻¹ c), with their cosines, wherever row s's
k-th cosine is above its (k+1)-th: there the k nearest are one set, whatever the labels. Where
they tie (the k-th place falls within a group of equal cosines: copies of a row, as at boundary
0), the rule of the records (ties to the lower row index) takes the group's members of lowest
new label, so those rows' last places are chosen again each draw from their group, kept once
(`Ties`). A relabelling leaves HSIC_u(A_y∘L, A_y∘L) as the record's; on a boundary with such
rows it is computed again for the draw (`_self_hsic`: which tied rows are taken changes the
mirrors and the column sums where the tie mixes directions).

Each source boundary's entries (r, c) are marked in one dense M·M slot, one bit a boundary
(SLOT_BITS boundaries a slot), so one gather of a draw's relabelled target keys r·M + c
answers every source boundary at once:

    mknn_π = |A_x ∩ A'_y| / (M·k)

CKNNA's cross HSIC reads only the shared entries e = (r, c), with x's cosine kv (found in r's
list), y's cosine lv (at its place) and whether the mirror (c, r) is shared too (x: the slot's
bit; y: r in c's new list), in `prepared.hsic_counted`'s sums with every count 1:

    Σ K̃∘L̃ᵀ = Σ_e kv_e · lv_(c,r),  Σ K̃ = Σ_e kv_e,  Σ L̃ = Σ_e lv_e,
    1ᵀK̃L̃1 = Σ_e kv_e · Σ_{e': r_e' = c_e} lv_e'
    cknna_π = HSIC_u(A∘K, A∘L') / sqrt(knn_self_x · knn_self_y')

A draw then costs a few gathers of n_target·M·k and work on the shared entries alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align.measures import formulas
from align.measures import prepared as P

SLOT_BITS = 32  # source boundaries a slot (uint32: the M·M int32 slot a resample holds)
NEIGHBOUR_NULL = ("mknn", "cknna")  # the measures whose null this module reads
ROW_SUMS = 1 << 20  # values of a dense sum over (source, row, target): 8 MiB
DEEP_BLOCK = 128  # tied rows whose cosines to every row are computed at once (128 × M)


def neighbour_null(px: list, py: list, perms: np.ndarray, k: int, measures) -> dict:
    """{measure: (K, n_source, n_target)} for measures among mknn and cknna: each cell with
    row r of the source paired with row perms[q, r] of the target, for each of the K draws
    perms (K, M) int (`calibration.draw_permutations`). px, py: the source's and the target's
    records (`prepared.Prepared` with `order`, `near` and, for cknna, `knn_self`); k: the
    neighbours (1 ≤ k < M). Equal to `cells.mknn` and `cells.cknna` of the records of
    (x, y[perm]) (to rounding: the sums run in another order)."""
    perms = np.asarray(perms)
    out = {n: np.empty((len(perms), len(px), len(py))) for n in measures}
    targets = Targets.of(py, k)
    inverses = np.argsort(perms, axis=1).astype(np.int32)  # int32 gathers: a third the time
    for lo in range(0, len(px), SLOT_BITS):
        sources = Sources.of(px[lo : lo + SLOT_BITS], k)
        for q, (perm, inverse) in enumerate(zip(perms, inverses, strict=True)):
            values = _draw(sources, targets, perm, inverse, measures)
            for n in measures:
                out[n][q, lo : lo + SLOT_BITS] = values[n]
    return out


@dataclass(frozen=True)
class Ties:
    """The target rows whose k-th cosine ties the (k+1)-th, over every target boundary, one
    group g each: such a row keeps its places above the tie (the larger cosines, `Targets`)
    and fills its last need[g] places with the need[g] members of lowest new label of its
    group members[start[g]:start[g + 1]] (original labels: every row at the k-th cosine).
    place_boundary, place_row (original label), place_at (Σ need,): where each chosen
    member goes, group after group."""

    members: np.ndarray
    start: np.ndarray
    need: np.ndarray
    place_boundary: np.ndarray
    place_row: np.ndarray
    place_at: np.ndarray

    def chosen(self, inverse: np.ndarray) -> np.ndarray:
        """(Σ need,) the new labels each tied row takes under a draw whose inverse is
        `inverse` (M,): the need[g] lowest new labels of its group, in increasing order."""
        m = len(inverse)
        group = np.repeat(np.arange(len(self.need)), np.diff(self.start))
        key = np.sort(group * m + inverse[self.members])
        within = np.arange(len(key)) - self.start[group]
        return key[within < self.need[group]] % m


@dataclass(frozen=True)
class Targets:
    """The target boundaries' k-nearest lists stacked row-major (a draw gathers whole rows):
    cols (M, n_target, k) int, each row's neighbours in the original labels (a tied row's
    last places filled per draw, `Ties`); near (M, n_target, k) their cosines; knn_self
    (n_target,) the records' HSIC_u(A_y∘L, A_y∘L) (NaN without); tied (n_target,) bool, the
    boundaries with a tied row; ties the `Ties`."""

    cols: np.ndarray
    near: np.ndarray
    knn_self: np.ndarray
    tied: np.ndarray
    ties: Ties

    @classmethod
    def of(cls, records: list, k: int) -> "Targets":
        """The stacked lists of the target records, with their ties found (`_tied`)."""
        cols = np.stack([p.order[:, :k] for p in records], axis=1).astype(np.int32)
        near = np.stack([p.near[:, :k] for p in records], axis=1)
        self_ = np.array([np.nan if p.knn_self is None else p.knn_self for p in records])
        groups = []
        for j, p in enumerate(records):
            for s, above, above_near, members, value in _tied(p, k):
                cols[s, j, : len(above)], near[s, j, : len(above)] = above, above_near
                near[s, j, len(above) :] = value
                groups.append((j, s, len(above), members))
        tied = np.zeros(len(records), bool)
        tied[[g[0] for g in groups]] = True
        return cls(cols, near, self_, tied, _ties(groups, k))


def _tied(p: P.Prepared, k: int):
    """(row, above, above_near, members, value) of each row of record p whose k-th cosine
    `value` ties its (k+1)-th: the rows of larger cosine (its first places) with their
    cosines, and every row at `value`; read from the L kept, or, where the tie runs to the
    end of them, from the row's cosines to every row (`_cosines`, as `P.full_order` reads
    them)."""
    m, L = p.order.shape
    if L <= k:  # every other row is a neighbour: nothing straddles the k-th place
        return
    rows = np.flatnonzero(p.near[:, k - 1] == p.near[:, k])
    deep = (p.near[rows, -1] == p.near[rows, k - 1]) & (L < m - 1)
    for s in rows[~deep]:
        order, near = p.order[s], p.near[s]
        at = np.flatnonzero(near == near[k - 1])
        yield int(s), order[: at[0]], near[: at[0]], order[at[0] : at[-1] + 1], near[k - 1]
    for lo in range(0, int(deep.sum()), DEEP_BLOCK):
        block = rows[deep][lo : lo + DEEP_BLOCK]
        g = _cosines(p, block)
        value = -np.partition(-g, k - 1, axis=1)[:, k - 1]
        for s, row, v in zip(block, g, value, strict=True):
            above, members = np.flatnonzero(row > v), np.flatnonzero(row == v)
            yield int(s), above, row[above], members, v


def _cosines(p: P.Prepared, rows: np.ndarray) -> np.ndarray:
    """(len(rows), M): the cosines of `rows` of record p to every row, −inf to itself, from
    the distinct unit rows (copies tie exactly), in one product."""
    g = (p.unit[p.copy[rows]] @ p.unit.T)[:, p.copy]
    g[np.arange(len(rows)), rows] = -np.inf
    return g


def _ties(groups: list, k: int) -> Ties:
    """`Ties` of groups [(boundary, row, above, members)]."""
    sizes = [len(g[3]) for g in groups]
    need = np.array([k - g[2] for g in groups], np.int64)
    at = [np.arange(g[2], k) for g in groups]
    empty = np.zeros(0, np.int64)
    return Ties(
        members=np.concatenate([empty, *(g[3] for g in groups)]).astype(np.int64),
        start=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]),
        need=need,
        place_boundary=np.repeat([g[0] for g in groups], need).astype(np.int64),
        place_row=np.repeat([g[1] for g in groups], need).astype(np.int64),
        place_at=np.concatenate([empty, *at]),
    )


@dataclass(frozen=True)
class Sources:
    """A group of at most SLOT_BITS source boundaries: slot (M·M,) uint, bit i of slot[r·M +
    c] set when c is among row r's k nearest at boundary i of the group; cols, near (n, M, k)
    the lists and their cosines; knn_self (n,) (NaN without)."""

    slot: np.ndarray
    cols: np.ndarray
    near: np.ndarray
    knn_self: np.ndarray

    @classmethod
    def of(cls, records: list, k: int) -> "Sources":
        """The slot and the stacked lists of `records` (at most SLOT_BITS)."""
        m = len(records[0].order)
        kind = next(t for t in (np.uint8, np.uint16, np.uint32) if np.iinfo(t).bits >= len(records))
        slot = np.zeros(m * m, kind)
        rows = np.arange(m)[:, None] * m
        for i, p in enumerate(records):
            slot[(rows + p.order[:, :k]).ravel()] |= kind(1 << i)
        cols = np.stack([p.order[:, :k] for p in records]).astype(np.int32)
        near = np.stack([p.near[:, :k] for p in records])
        self_ = np.array([np.nan if p.knn_self is None else p.knn_self for p in records])
        return cls(slot, cols, near, self_)


def relabelled(targets: Targets, perm: np.ndarray, inverse: np.ndarray) -> np.ndarray:
    """(M, n_target, k): the k nearest rows of every row of y[perm] at every target boundary,
    in the new labels: inverse[cols[perm[r]]], the tied rows' last places chosen by the new
    labels (`Ties.chosen`)."""
    lists = inverse[targets.cols[perm]]
    t = targets.ties
    if len(t.need):
        lists[inverse[t.place_row], t.place_boundary, t.place_at] = t.chosen(inverse)
    return lists


@dataclass(frozen=True)
class Shared:
    """The entries of a draw's target lists that a source boundary's lists hold too, in the
    order of (source, row, target): source i, target j, row r, column c (new labels), the
    target list's place t, x's cosine kv (None for mknn alone)."""

    i: np.ndarray
    j: np.ndarray
    r: np.ndarray
    c: np.ndarray
    t: np.ndarray
    kv: np.ndarray | None


def shared(sources: Sources, lists: np.ndarray, cosines: bool) -> Shared:
    """Every (source, entry) pair of a draw's target `lists` (M, n_target, k) found in the
    source's slot; x's cosine read from row r's list where `cosines`."""
    m, n_target, k = lists.shape
    keys = (np.arange(m, dtype=np.int64)[:, None, None] * m + lists).ravel()
    found = np.take(sources.slot, keys)
    at = np.flatnonzero(found)
    found = found[at]
    e = [at[(found & found.dtype.type(1 << i)) != 0] for i in range(len(sources.cols))]
    i = np.repeat(np.arange(len(e)), [len(v) for v in e])
    e = np.concatenate(e)
    r, j, t = e // (n_target * k), (e // k) % n_target, e % k
    c = np.take(lists, e)
    kv = None
    if cosines:
        place = np.nonzero(_rows(sources.cols, i, r) == c[:, None])[1]  # one a row
        kv = np.take(sources.near, (i * m + r) * k + place)
    return Shared(i, j, r, c, t, kv)


def _rows(lists: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(E, k): lists[a[e], b[e]] of lists (A, B, k), through one index (a fancy index of two
    arrays took 5 times as long)."""
    return np.take(lists.reshape(-1, lists.shape[2]), a * lists.shape[1] + b, axis=0)


def _draw(sources: Sources, targets: Targets, perm, inverse, measures) -> dict:
    """{measure: (n_source, n_target)} of one draw for one group of source boundaries."""
    lists = relabelled(targets, perm, inverse)
    m, n_target, k = lists.shape
    found = shared(sources, lists, "cknna" in measures)
    cell = found.i * n_target + found.j
    cells = len(sources.cols) * n_target
    out = {}
    if "mknn" in measures:
        count = np.bincount(cell, minlength=cells)
        out["mknn"] = (count / (m * k)).reshape(len(sources.cols), n_target)
    if "cknna" in measures:
        cross = _cross_hsic(sources, targets, lists, perm, found)
        self_y = targets.knn_self.copy()
        for j in np.flatnonzero(targets.tied):
            self_y[j] = _self_hsic(lists[:, j], targets.near[perm, j])
        product = sources.knn_self[:, None] * self_y[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            value = cross.reshape(product.shape) / np.sqrt(product)
        out["cknna"] = np.where(product > 0, value, np.nan)  # `formulas.ratio`
    return out


def _cross_hsic(sources, targets, lists, perm, found: Shared) -> np.ndarray:
    """(n_source·n_target,) HSIC_u(A∘K, A∘L') of every cell (source-major) from its shared
    entries (the module's sums; `prepared.hsic_counted` with every count 1)."""
    m, n_target, k = lists.shape
    i, j, r, c, kv = found.i, found.j, found.r, found.c, found.kv
    lv = np.take(targets.near, (perm[r] * n_target + j) * k + found.t)
    in_x = (np.take(sources.slot, c * m + r) >> i.astype(sources.slot.dtype)) & 1
    e, place = np.nonzero(_rows(lists, c, j) == r[:, None])  # r in c's new list: y's mirror
    mirror_lv = np.take(targets.near, (perm[c[e]] * n_target + j[e]) * k + place)
    both = np.zeros(len(kv))
    both[e] = np.where(in_x[e] > 0, kv[e] * mirror_lv, 0.0)
    outer = kv * _row_sums(found, lv, m, n_target, len(sources.cols))
    cell, cells = i * n_target + j, len(sources.cols) * n_target
    sums = [np.bincount(cell, v, minlength=cells) for v in (both, kv, lv, outer)]
    return formulas.hsic_unbiased(float(m), *sums)


def _row_sums(found: Shared, lv: np.ndarray, m: int, n_target: int, n_source: int):
    """(E,) for each shared entry e = (r, c) of cell (i, j), Σ lv over the cell's shared
    entries of row c, summed densely over (row, target) for ROW_SUMS values of sources at a
    time (found's entries come in source order)."""
    i, out = found.i, np.empty(len(lv))
    per = max(1, min(n_source, ROW_SUMS // (m * n_target)))
    bounds = np.searchsorted(i, np.arange(0, n_source + per, per))
    for lo, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        base = (i[a:b] - lo * per) * m
        sums = np.bincount(
            (base + found.r[a:b]) * n_target + found.j[a:b], lv[a:b], per * m * n_target
        )
        out[a:b] = np.take(sums, (base + found.c[a:b]) * n_target + found.j[a:b])
    return out


def _self_hsic(lists: np.ndarray, near: np.ndarray) -> float:
    """HSIC_u(A_y∘L, A_y∘L) of one target boundary's lists (M, k) in a draw's labels and
    their cosines near (M, k) (`prepared.hsic_masked` of every entry)."""
    m, k = lists.shape
    back = lists[lists] == np.arange(m)[:, None, None]  # (M, k, k): r in c's list
    mirror = near[lists, np.argmax(back, axis=2)]
    both = float(np.sum(np.where(back.any(axis=2), near * mirror, 0.0)))
    total = float(near.sum())
    outer = P.dot(np.bincount(lists.ravel(), near.ravel(), m), near.sum(axis=1))
    return float(formulas.hsic_unbiased(float(m), both, total, total, outer))
