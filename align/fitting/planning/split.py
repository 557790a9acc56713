"""Documents → parts: the seeded split of a fit into fit, validation and held-out documents,
and each token's part. Pure: arrays in, arrays out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align import seeding
from align.errors import InputError
from align.ridge.statistics import FIT, N_PARTS, VAL

TEST = 2  # part code of held-out rows; -1: not used (position 0, or excluded)
PART_NAMES = {FIT: "fit", VAL: "validation", TEST: "heldout"}


def check_seed(seed) -> None:
    """numpy's generators take whole numbers >= 0 only (a negative one was "internal error"),
    and align takes none beyond `seeding.MAX_SEED`."""
    seeding.check(seed, "seed")


@dataclass(frozen=True)
class Origin:
    """Where a split's documents come from, as its refusals say it: what holds them ("the
    stores hold", "corpus X gives") and how to get more."""

    holds: str = "the stores hold"
    more: str = "extract a larger corpus"


STORES = Origin()


def check_fractions(test_fraction: float, val_fraction: float, need_val: bool) -> None:
    """Refuse, in one line, a held-out share outside (0, 1), or a validation share outside it
    when a validation part is needed (`need_val`: several α to choose among)."""
    if not 0 < test_fraction < 1:
        raise InputError(f"`test_fraction` {test_fraction} must be between 0 and 1 (exclusive)")
    if need_val and not 0 < val_fraction < 1:
        raise InputError(
            f"`val_fraction` {val_fraction} must be between 0 and 1 (exclusive) to choose among several `alphas`"
        )


def split_documents(
    doc: np.ndarray,
    test_fraction: float,
    val_fraction: float,
    seed: int,
    need_val: bool,
    origin: Origin = STORES,
):
    """Seeded split of the document ids into (fit, validation, test) sorted arrays.

    The unique ids are permuted by numpy's default_rng(seed); the first round(test_fraction ·
    n_docs) (at least 1) are held out, then round(val_fraction · rest) (at least 1 when a
    validation part is needed) of the rest validate α.

    Parameters
    ----------
    doc : array of shape (n_tokens,)
        Each token's document id.
    test_fraction : float
        The held-out share of the documents, in (0, 1).
    val_fraction : float
        The validation share of the rest.
    seed : int
        The permutation's seed.
    need_val : bool
        Whether a validation part is needed (more than one α to choose from).
    origin : Origin, optional
        Where the documents come from, in the refusal's words.

    Returns
    -------
    fit, val, test : array
        The sorted document ids of each part.

    Raises
    ------
    InputError
        A fraction out of range, or too few documents, in `origin`'s words.
    """
    check_seed(seed)
    docs = np.unique(doc)
    check_fractions(test_fraction, val_fraction, need_val)
    need = 3 if need_val else 2
    if len(docs) < need:
        raise InputError(
            f"{origin.holds} {len(docs)} document(s): a split by document needs at least {need} "
            f"({'fit, validation and held-out' if need_val else 'fit and held-out'}); {origin.more}"
        )
    perm = np.random.default_rng(seed).permutation(docs)
    n_test = min(max(1, round(test_fraction * len(docs))), len(docs) - (need - 1))
    rest = perm[n_test:]
    n_val = min(max(1, round(val_fraction * len(rest))), len(rest) - 1) if need_val else 0
    return np.sort(rest[n_val:]), np.sort(rest[:n_val]), np.sort(perm[:n_test])


def token_parts(doc, pos, fit_docs, val_docs, test_docs, include_first_token: bool) -> np.ndarray:
    """Each token's part: FIT, VAL, TEST, or -1 (position 0 unless included).

    Parameters
    ----------
    doc : array of shape (n_tokens,)
        Each token's document id.
    pos : array of shape (n_tokens,)
        Each token's position in its sequence.
    fit_docs, val_docs, test_docs : array
        The document ids of each part (`split_documents`).
    include_first_token : bool
        Keep position 0 of every sequence.

    Returns
    -------
    array of shape (n_tokens,)
        int8, the part of each token.
    """
    part = np.full(len(doc), -1, dtype=np.int8)
    part[np.isin(doc, fit_docs)] = FIT
    part[np.isin(doc, val_docs)] = VAL
    part[np.isin(doc, test_docs)] = TEST
    if not include_first_token:
        part[pos == 0] = -1
    return part


FRACTIONS = (0.25, 0.5)  # of the training documents: the fits `--convergence` adds to the full one
# statistics parts with --convergence: (fit, validation) × (the rest, the first quarter, the
# second quarter of each part's documents); a fraction's fit takes the parts of its groups
CONVERGENCE_PARTS = 6
PART_GROUPS = {1.0: ((0, 2, 4), (1, 3, 5)), 0.25: ((2,), (3,)), 0.5: ((2, 4), (3, 5))}


def fraction_groups(fit_docs: np.ndarray, val_docs: np.ndarray, seed: int) -> dict:
    """{document id: group} for `--convergence`: the fit documents, then the validation
    documents, are each permuted by one rng = numpy.random.default_rng([seed, 2]) (in that
    order); of each, the first k1 = max(1, round(n/4)) are group 1 and the next up to
    k2 = max(k1, round(n/2)) group 2; the rest are group 0. The ¼ fraction fits groups 1, the
    ½ fraction groups 1 and 2, so each has fit and validation documents in those shares."""
    rng = np.random.default_rng([seed, 2])
    out = {}
    for docs in (fit_docs, val_docs):
        perm = rng.permutation(np.asarray(docs))
        n = len(perm)
        k1 = max(1, round(n / 4)) if n else 0
        k2 = max(k1, round(n / 2))
        for k, d in enumerate(perm.tolist()):
            out[d] = 1 if k < k1 else 2 if k < k2 else 0
    return out


def statistics_parts(
    doc: np.ndarray, part: np.ndarray, fit_docs, val_docs, seed: int
) -> np.ndarray:
    """(n_tokens,) int8 for `--convergence`: a training token's statistics part, its part
    (ridge.FIT or ridge.VAL) + 2 · its document's group (`fraction_groups`); -1 elsewhere."""
    groups = fraction_groups(fit_docs, val_docs, seed)
    out = np.full(len(part), -1, dtype=np.int8)
    train = (part == FIT) | (part == VAL)
    ids, inv = np.unique(np.asarray(doc)[train], return_inverse=True)
    g = np.array([groups.get(int(d), 0) for d in ids], dtype=np.int8)[inv]
    out[train] = part[train] + 2 * g
    return out


CONTROLS = ("shuffle",)


def shuffle_partners(doc: np.ndarray, seq: np.ndarray, pos: np.ndarray, seed: int) -> np.ndarray:
    """(n_tokens,) int64 for `--control shuffle`: the token whose target row is paired with
    each token, at the same position of a sequence of another document; -1 where that
    sequence is shorter (the token is left out).

    Sequences are permuted by numpy's default_rng([seed, 3]) and each is paired with the next
    in that order (the last with the first); a pair within one document is then swapped with
    the first later pair that makes both cross documents. A corpus of one document has no
    partner: InputError."""
    doc, seq, pos = (np.asarray(a) for a in (doc, seq, pos))
    ids, start, length = np.unique(seq, return_index=True, return_counts=True)
    sdoc = doc[start]
    if len(np.unique(sdoc)) < 2:
        raise InputError(
            "`control` shuffle pairs tokens of different documents: the stores hold one document; "
            "extract a corpus of several"
        )
    order = np.random.default_rng([seed, 3]).permutation(len(ids))
    partner = np.empty(len(ids), dtype=np.int64)
    partner[order] = np.roll(order, -1)
    for k, s in enumerate(order):
        if sdoc[partner[s]] != sdoc[s]:
            continue
        for t in np.r_[order[k + 1 :], order[:k]]:
            if sdoc[partner[t]] != sdoc[s] and sdoc[partner[s]] != sdoc[t]:
                partner[s], partner[t] = partner[t], partner[s]
                break
    where = np.searchsorted(ids, seq)  # each token's sequence
    p = partner[where]
    out = start[p] + pos
    out[pos >= length[p]] = -1
    out[sdoc[p] == doc] = -1  # a pairing no swap could mend (a document holding most sequences)
    return out.astype(np.int64)


@dataclass
class Split:
    """The split of one token stream: document ids per part, each token's part, counts.

    Parameters
    ----------
    fit_docs : array
        The fit part's document ids, sorted.
    val_docs : array
        The validation part's.
    test_docs : array
        The held-out part's.
    part : array of shape (n_tokens,)
        int8: FIT, VAL, TEST or -1.
    counts : dict
        {"fit": tokens, "validation": tokens, "heldout": tokens}.
    heldout_index : array of shape (n_tokens,), optional
        int32: a held-out token's index in test_docs, else -1.
    stat_part : array of shape (n_tokens,), optional
        int8 with --convergence: each training token's statistics part.
    partner : array of shape (n_tokens,), optional
        int64 with --control shuffle: the target token paired with each.
    """

    fit_docs: np.ndarray
    val_docs: np.ndarray
    test_docs: np.ndarray
    part: np.ndarray  # (n_tokens,) int8: FIT, VAL, TEST or -1
    counts: dict  # {"fit": tokens, "validation": tokens, "heldout": tokens}
    heldout_index: np.ndarray | None = (
        None  # (n_tokens,) int32: a held-out token's index in test_docs, else -1
    )
    stat_part: np.ndarray | None = (
        None  # (n_tokens,) int8 with --convergence: each training token's statistics part
    )
    partner: np.ndarray | None = (
        None  # (n_tokens,) int64 with --control shuffle: the target token paired with each
    )

    @property
    def n_parts(self) -> int:
        """Parts of the statistics: N_PARTS, or CONVERGENCE_PARTS with --convergence."""
        return CONVERGENCE_PARTS if self.stat_part is not None else N_PARTS

    def statistics_part(self, start: int, stop: int) -> np.ndarray:
        """The parts tokens [start, stop) add to.

        ridge.FIT / ridge.VAL (held-out and unused tokens -1), or their `stat_part` with
        --convergence.

        Parameters
        ----------
        start : int
            The first token.
        stop : int
            The token after the last.

        Returns
        -------
        array of shape (stop - start,)
            int8 parts.
        """
        if self.stat_part is not None:
            return self.stat_part[start:stop]
        p = self.part[start:stop]
        return np.where(p == TEST, -1, p)

    def record(self) -> dict:
        """The document ids of each part, as the result records them.

        Returns
        -------
        dict
            {"fit_docs", "validation_docs", "heldout_docs"}: lists of ids.
        """
        return {
            "fit_docs": self.fit_docs.tolist(),
            "validation_docs": self.val_docs.tolist(),
            "heldout_docs": self.test_docs.tolist(),
        }

    @property
    def n_select(self) -> int:
        """Tokens whose statistics choose α (the fit part when a validation part exists)."""
        return (
            self.counts["fit"]
            if len(self.val_docs)
            else self.counts["fit"] + self.counts["validation"]
        )

    @property
    def n_train(self) -> int:
        """Tokens of the final refit: fit + validation."""
        return self.counts["fit"] + self.counts["validation"]


def make_split(
    doc: np.ndarray,
    pos: np.ndarray,
    options,
    seq: np.ndarray | None = None,
    origin: Origin = STORES,
    partner: np.ndarray | None = None,
) -> Split:
    """The `Split` of tokens with document ids `doc` and positions `pos`.

    Parameters
    ----------
    doc : array of shape (n_tokens,)
        Each token's document id.
    pos : array of shape (n_tokens,)
        Each token's position in its sequence.
    options : FitSpec
        Fractions, seed, α grid, include_first_token, convergence, control.
    seq : array of shape (n_tokens,), optional
        The sequence ids, for --control shuffle.
    origin : Origin, optional
        Where the documents come from, in the refusal's words.
    partner : array of shape (n_tokens,), optional
        The target token paired with each (−1: none), when the pairing is not token for token
        (`anchors`: it already holds the control's shuffle).

    Returns
    -------
    Split
        Document ids per part, each token's part, the counts.

    Raises
    ------
    InputError
        Too few documents, or a part left without any token, in one line in `origin`'s words.
    """
    need_val = options.need_validation
    fit_docs, val_docs, test_docs = split_documents(
        doc, options.test_fraction, options.val_fraction, options.seed, need_val, origin
    )
    part = token_parts(doc, pos, fit_docs, val_docs, test_docs, options.include_first_token)
    anchored = partner is not None
    if partner is None and getattr(options, "control", None) == "shuffle":
        partner = shuffle_partners(doc, seq, pos, options.seed)
    if partner is not None:
        part[
            partner < 0
        ] = -1  # no partner (no anchor, or no token of another document there): left out
    counts = {name: int((part == code).sum()) for code, name in PART_NAMES.items()}
    for name, n in counts.items():
        if n == 0 and (name != "validation" or need_val):
            raise InputError(
                f"the {name} part of the split has no token (position 0 excluded"
                f"{'; anchored tokens only' if anchored else ''}): change the fractions, "
                f"or {origin.more}"
            )
    stat = (
        statistics_parts(doc, part, fit_docs, val_docs, options.seed)
        if getattr(options, "convergence", False)
        else None
    )
    return Split(
        fit_docs,
        val_docs,
        test_docs,
        part,
        counts,
        heldout_index(doc, part, test_docs),
        stat,
        partner,
    )


def heldout_index(doc: np.ndarray, part: np.ndarray, test_docs: np.ndarray) -> np.ndarray:
    """(n_tokens,) int32: for a held-out token the index of its document in `test_docs`
    (sorted), -1 for every other token: the unit of the document bootstrap."""
    index = np.full(len(doc), -1, dtype=np.int32)
    test = part == TEST
    index[test] = np.searchsorted(test_docs, np.asarray(doc)[test])
    return index
