"""The bootstrap every interval of align shares (the analyses' prompts, the fit's held-out
documents, compare's paired differences): resample with replacement,
recompute the statistic from the resampled prompts, report percentile intervals.

The resampling scheme, exactly: with n prompts (in the result's prompt order),

    idx = numpy.random.default_rng(seed).integers(0, n, size=(resamples, size))

size = n (or N in the equal-n mode of maxima, `Resampling.equal_n`). Resample b takes prompts
idx[b] (a prompt drawn twice counts twice). An analysis that draws several index arrays draws
them one after another from the same generator, in the order its docstring gives. The 95%
interval of a statistic is the 2.5 and 97.5 percentiles (numpy.nanpercentile, linear
interpolation) of its resampled values; resamples where the statistic is undefined (NaN) are
left out, and where fewer than MIN_RESAMPLES (100) define it, the interval is NaN: a
result records that rule (attrs["bootstrap"]["undefined"]).

Means over tokens are ratios of per-prompt sums (Σ_b sums / Σ_b token counts), so a resample
costs one matrix product with its prompt multiplicities, never a pass over tokens.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from align import seeding
from align.errors import InputError
from align.messages import human_bytes

RESAMPLES = 1000
LEVEL = 0.95
SCHEME = "numpy.random.default_rng(seed).integers(0, n, size=(resamples, {size}))"
# The fewest resamples an interval is read from, for every bootstrap in align (the prompt
# bootstrap here, the fit's document bootstrap, compare's paired differences): a 95%
# percentile endpoint sits at rank 0.025·(B − 1) of the sorted resamples, so at B = 100 at
# least two resamples lie beyond each end (below 41 the endpoint falls between the two most
# extreme resamples: one draw decides it; at B = 1 the "interval" is that one resample), and
# the tail's share of 2.5% is known to ±1.6 points (sqrt(0.025·0.975/B)). A --bootstrap
# below it is refused; an interval whose statistic is defined in fewer resamples is NaN
# (`percentile_interval`), with the reason recorded (`UNDEFINED`, `withheld`).
MIN_RESAMPLES = 100
# The most: at 10^6 that tail share is known to ±0.016 points, so more resamples change no
# reported digit, while time (the fit's path statistics take ~0.2 ms a resample: 10^6 is
# minutes) and memory (at least 16 bytes per resample and prompt or document drawn) grow
# linearly, and counts like 10^20 overflow numpy's int64 sizes. Within it, the fit's plan
# refuses a count whose arrays exceed its budget (`fitting.planning.budget.bootstrap_bytes`).
MAX_RESAMPLES = 1_000_000
DRAW_BYTES = 16  # per resample and draw: its int64 index and its float64 multiplicity
UNDEFINED = (
    f"an interval is NaN where its statistic is defined (finite) in fewer than {MIN_RESAMPLES} of the "
    "resamples: too few for its 2.5 and 97.5 percentiles"
)


def check_resamples(resamples, option: str = "`bootstrap`") -> int:
    """A resample count as an int, checked against MIN_RESAMPLES .. MAX_RESAMPLES.

    Parameters
    ----------
    resamples : int
        The count.
    option : str, optional
        The parameter's name in the message.

    Returns
    -------
    int
        `resamples`.

    Raises
    ------
    InputError
        One line for a count that is not a whole number or lies outside MIN_RESAMPLES ..
        MAX_RESAMPLES (naming the value, the bound and, above it, the memory it would take).
    """
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)):
        raise InputError(
            f"{option} {resamples!r}: give a whole number of resamples, {MIN_RESAMPLES:,} to {MAX_RESAMPLES:,}"
        )
    b = int(resamples)
    if b < MIN_RESAMPLES:
        raise InputError(
            f"{option} {b}: a 95% percentile interval needs at least {MIN_RESAMPLES} resamples (fewer leave "
            f"its 2.5% tails to one or two draws): give {MIN_RESAMPLES} or more (default {RESAMPLES:,})"
        )
    if b > MAX_RESAMPLES:
        raise InputError(
            f"{option} {b}: more than the {MAX_RESAMPLES:,} resamples align draws (their indices alone would "
            f"take {human_bytes(DRAW_BYTES * b)} per prompt or document drawn; at {MAX_RESAMPLES:,} a 95% "
            f"endpoint's tail share is known to ±0.02 points already): give {MAX_RESAMPLES:,} or fewer "
            f"(default {RESAMPLES:,})"
        )
    return b


@dataclass(frozen=True)
class Resampling:
    """How a result's intervals are drawn.

    Every function that draws intervals takes one as an argument (default `DEFAULT`); nothing
    is read from global or context state, so two results computed in one process with
    different options cannot leak into each other.

    Parameters
    ----------
    resamples : int, optional
        Bootstrap resamples of prompts.
    seed : int, optional
        The resamples' seed.
    equal_n : int, optional
        Maxima only: draw N prompts per resample instead of n, so that a maximum over prompts is
        one over the same number of prompts for every model.

    Raises
    ------
    InputError
        A resample count outside MIN_RESAMPLES .. MAX_RESAMPLES, a seed out of range, or an
        `equal_n` below 1.
    """

    resamples: int = RESAMPLES
    seed: int = 0
    equal_n: int | None = None

    def __post_init__(self):
        check_resamples(self.resamples)
        seeding.check(self.seed, "bootstrap_seed")
        if self.equal_n is not None and int(self.equal_n) < 1:
            raise InputError(f"`equal_n` {self.equal_n} must be at least 1 prompt")


DEFAULT = (
    Resampling()
)  # 1,000 resamples from seed 0, no equal-n mode: what a caller that names none gets


def draw(rng: np.random.Generator, n: int, resamples: int, size: int | None = None) -> np.ndarray:
    """Resample indices into n prompts: rng.integers(0, n, (resamples, size or n)).

    Parameters
    ----------
    rng : numpy.random.Generator
        The generator drawn from.
    n : int
        The prompts.
    resamples : int
        The resamples.
    size : int, optional
        Prompts per resample (default: n).

    Returns
    -------
    array of shape (resamples, size)
        Prompt indices.
    """
    if n < 1:
        raise InputError("no prompt to resample: a bootstrap needs at least one prompt")
    return rng.integers(0, n, size=(int(resamples), int(size or n)))


def indices(n: int, resampling: Resampling, size: int | None = None) -> np.ndarray:
    """The documented indices: default_rng(seed).integers(0, n, size=(resamples, size or n)).

    Parameters
    ----------
    n : int
        The prompts.
    resampling : Resampling
        Resamples and seed.
    size : int, optional
        Prompts per resample (default: n).

    Returns
    -------
    array of shape (resamples, size)
        Prompt indices.
    """
    return draw(np.random.default_rng(resampling.seed), n, resampling.resamples, size)


def multiplicity(idx: np.ndarray, n: int) -> np.ndarray:
    """How often each resample drew each prompt.

    Parameters
    ----------
    idx : array of shape (resamples, size)
        Prompt indices (`indices`).
    n : int
        The prompts.

    Returns
    -------
    array of shape (resamples, n)
        float64: how often resample b drew prompt p.
    """
    B = idx.shape[0]
    flat = (idx + n * np.arange(B)[:, None]).ravel()
    return np.bincount(flat, minlength=B * n).reshape(B, n).astype(np.float64)


def resampled_sums(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Σ over the prompts of each resample of `values`.

    Parameters
    ----------
    values : array of shape (n_prompts, ...)
        One value a prompt.
    idx : array of shape (resamples, size)
        Prompt indices (`indices`).

    Returns
    -------
    array of shape (resamples, ...)
        The sums.
    """
    values = np.asarray(values, np.float64)
    n = values.shape[0]
    return (multiplicity(idx, n) @ values.reshape(n, -1)).reshape(
        (idx.shape[0],) + values.shape[1:]
    )


def resampled_token_means(sums: np.ndarray, counts: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Token-weighted means of each resample: Σ_b sums / Σ_b counts, from per-prompt sums.

    Parameters
    ----------
    sums : array of shape (n_prompts, ...)
        Per-prompt sums over a prompt's tokens.
    counts : array of shape (n_prompts,)
        Per-prompt token counts.
    idx : array of shape (resamples, size)
        Prompt indices (`indices`).

    Returns
    -------
    array of shape (resamples, ...)
        The means.
    """
    total = resampled_sums(np.asarray(counts, np.float64), idx)
    s = resampled_sums(sums, idx)
    return s / total.reshape((-1,) + (1,) * (s.ndim - 1))


def resampled_means(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Means over the prompts of each resample of `values`.

    Parameters
    ----------
    values : array of shape (n_prompts, ...)
        One value a prompt.
    idx : array of shape (resamples, size)
        Prompt indices (`indices`).

    Returns
    -------
    array of shape (resamples, ...)
        The means.
    """
    return resampled_sums(values, idx) / idx.shape[1]


def resampled_maxima(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Maxima over the prompts of each resample of `values`.

    Per cell, the prompts are ranked by value once; a resample's maximum is the value of the
    highest-ranked prompt it drew. Walking down the ranks resolves most cells in the first few
    steps (a resample misses a given prompt with probability (1 − 1/n)^n ≈ 0.37).

    Parameters
    ----------
    values : array of shape (n_prompts, ...)
        One value a prompt.
    idx : array of shape (resamples, size)
        Prompt indices (`indices`).

    Returns
    -------
    array of shape (resamples, ...)
        The maxima.
    """
    values = np.asarray(values, np.float64)
    n, B = values.shape[0], idx.shape[0]
    flat = values.reshape(n, -1)
    cells = flat.shape[1]
    order = np.argsort(-flat, axis=0, kind="stable")  # (n, cells): prompts by falling value
    drawn = multiplicity(idx, n) > 0  # (B, n)
    out = np.full(B * cells, np.nan)
    rb, rc = np.divmod(np.arange(B * cells), cells)  # the (resample, cell) pairs still open
    for k in range(n):
        p = order[k, rc]
        hit = drawn[rb, p]
        out[rb[hit] * cells + rc[hit]] = flat[p[hit], rc[hit]]
        rb, rc = rb[~hit], rc[~hit]
        if not len(rb):
            break
    return out.reshape((B,) + values.shape[1:])


def percentile_interval(samples: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The (1 − level)/2 and (1 + level)/2 percentiles over axis 0 (resamples).

    NaN samples are left out; NaN where fewer than MIN_RESAMPLES samples are finite
    (`UNDEFINED`).

    Parameters
    ----------
    samples : array of shape (resamples, ...)
        The statistic of each resample.
    level : float, optional
        The interval's coverage.

    Returns
    -------
    low : array of shape (...)
        The lower bound.
    high : array of shape (...)
        The upper bound.
    """
    samples = np.asarray(samples, np.float64)
    tail = 100 * (1 - level) / 2
    finite = np.isfinite(samples)
    if (
        len(samples) >= MIN_RESAMPLES and finite.all()
    ):  # the common case, and numpy's percentile is ~3x faster
        low, high = np.percentile(samples, [tail, 100 - tail], axis=0)
        return low, high
    ok = finite.sum(0) >= MIN_RESAMPLES
    low, high = np.full(samples.shape[1:], np.nan), np.full(samples.shape[1:], np.nan)
    if np.any(ok):
        low[ok] = np.nanpercentile(samples[:, ok], tail, axis=0)
        high[ok] = np.nanpercentile(samples[:, ok], 100 - tail, axis=0)
    return low, high


def defined_fraction(samples: np.ndarray) -> np.ndarray:
    """The fraction of resamples (axis 0) where the statistic is defined (finite).

    Parameters
    ----------
    samples : array of shape (resamples, ...)
        The statistic of each resample.

    Returns
    -------
    array of shape (...)
        The fraction.
    """
    return np.isfinite(np.asarray(samples, np.float64)).mean(0)


def too_few(samples: np.ndarray) -> np.ndarray:
    """Where fewer than MIN_RESAMPLES resamples define the statistic.

    `percentile_interval` gives NaN there.

    Parameters
    ----------
    samples : array of shape (resamples, ...)
        The statistic of each resample.

    Returns
    -------
    array of shape (...)
        bool, per cell.
    """
    return np.isfinite(np.asarray(samples, np.float64)).sum(0) < MIN_RESAMPLES


def withheld(samples, what: str) -> str | None:
    """Why the interval of a scalar statistic is NaN when too few resamples define it, else None.

    E.g. "no interval for <what>: defined in 37 of 1,000 resamples, fewer than the 100 an
    interval needs".

    Parameters
    ----------
    samples : array of shape (resamples,)
        The statistic of each resample.
    what : str
        The statistic's name in the sentence.

    Returns
    -------
    str or None
        The sentence, or None when the interval is defined.
    """
    samples = np.asarray(samples, np.float64)
    n = int(np.isfinite(samples).sum())
    if n >= MIN_RESAMPLES:
        return None
    return (
        f"no interval for {what}: defined in {n:,} of {len(samples):,} resamples, fewer than the {MIN_RESAMPLES} "
        "an interval needs"
    )


def record(n, resampling: Resampling, size=None, **extra) -> dict:
    """What a result records about its intervals (attrs["bootstrap"]).

    Parameters
    ----------
    n : int or dict
        Prompts resampled; a dict when several sets are.
    resampling : Resampling
        Resamples and seed.
    size : int, optional
        Prompts per resample (default: n).
    **extra
        Further entries.

    Returns
    -------
    dict
        The method, n, resamples, seed, level, the index scheme.
    """
    out = {
        "method": "prompt bootstrap, percentile intervals",
        "n": n,
        "resamples": int(resampling.resamples),
        "seed": int(resampling.seed),
        "level": LEVEL,
        "indices": SCHEME.format(size=size or "n"),
        "min_defined": MIN_RESAMPLES,
        "undefined": UNDEFINED,
    }
    out.update(extra)
    return out


def prompts_hash(prompts) -> str:
    """The identity of a list of prompts (token-id sequences, in order).

    sha256 over each prompt's length and ids as little-endian int64. Two results with the same
    hash ran on the same prompts, whatever their corpus files or tokenizers were called.

    Parameters
    ----------
    prompts : list of array of shape (n_prompt_tokens,)
        Token ids, one array a prompt.

    Returns
    -------
    str
        "sha256:" and the hex digest.
    """
    h = hashlib.sha256()
    for p in prompts:
        ids = np.asarray(p, dtype="<i8").ravel()
        h.update(np.asarray([len(ids)], dtype="<i8").tobytes())
        h.update(ids.tobytes())
    return "sha256:" + h.hexdigest()


def prompts_from_tokens(token_id: np.ndarray, seq: np.ndarray, pos: np.ndarray) -> list[np.ndarray]:
    """The prompts of a store's token rows.

    Each sequence's ids in position order, sequences in index order.

    Parameters
    ----------
    token_id : array of shape (n_tokens,)
        The token ids.
    seq : array of shape (n_tokens,)
        Each token's sequence.
    pos : array of shape (n_tokens,)
        Each token's position in its sequence.

    Returns
    -------
    list of array of shape (n_prompt_tokens,)
        One array a sequence.
    """
    order = np.lexsort((np.asarray(pos), np.asarray(seq)))
    seq_sorted = np.asarray(seq)[order]
    cuts = np.flatnonzero(np.diff(seq_sorted)) + 1
    return np.split(np.asarray(token_id)[order], cuts)
