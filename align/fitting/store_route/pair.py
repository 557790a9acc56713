"""The pair of stores a fit reads: `open_pair` opens and cross-checks them (one token stream,
or anchors on the text; the windows, the paths reachable), `select_boundaries` the boundaries a
fit maps, and what the store route reads of the training rows before the pass: the shift of its
sums (`shifts_of`) and the scale the α check uses (`scale_of`)."""

from __future__ import annotations

import numpy as np

from align import store as st
from align.boundaries import parse_boundaries
from align.errors import InputError, StoreError
from align.fitting.pairing.partners import check_same_text, check_tokenizers, resolve
from align.ridge.statistics import FIT, VAL

WINDOWING = (
    "max_length",
    "overflow",
    "doc_split",
)  # corpus options that cut documents into sequences


def open_pair(
    source: str, target: str, storage_options: dict | None = None, pairing: str = "tokens"
):
    """Open both activation stores and refuse a pair that cannot be fitted.

    Token for token: the tokenizers, the token count, and per token (block by block) its id
    and its place (doc, seq, pos). Two stores of the same token ids cut into different windows
    (another --max-length or --doc-split) saw each token in another context: a map between
    them is wrong, so the first token whose place differs is named, with the windowing options
    of the two stores' provenance that differ. Windowing options that differ while every token
    sits in the same place (documents shorter than both windows) change nothing and pass.
    Anchored on the text: the same corpus, unpacked (`pairing.check_same_text`; the windows and
    the coverage are checked with the anchors).

    Parameters
    ----------
    source : str
        The source store.
    target : str
        The target store.
    storage_options : dict, optional
        fsspec options of remote stores.
    pairing : str, optional
        "tokens", "char-anchors" or "auto" (`pairing.resolve`).

    Returns
    -------
    S, T : ActivationStore
        The two stores.
    mode : str
        The pairing it resolves to ("tokens" or "char-anchors").
    why : str
        The words the log gives for it.

    Raises
    ------
    StoreError
        A pair that cannot be fitted, in one line naming what differs.
    """
    stores = []
    for role, path in (("source", source), ("target", target)):
        _check_reachable(path, role.upper(), storage_options)
        s = st.open_activations(path, storage_options)
        s.require_complete()
        stores.append(s)
    S, T = stores
    hs, ht = S.provenance.get("tokenizer_hash", {}), T.provenance.get("tokenizer_hash", {})
    mode, why = resolve(pairing, hs, ht)
    if mode == "char-anchors":
        check_same_text(S, T)
        return S, T, mode, why
    check_tokenizers(
        hs, ht, f"{S.path} ({S.provenance.get('model')})", f"{T.path} ({T.provenance.get('model')})"
    )
    _check_one_stream(S, T)
    return S, T, mode, why


def _check_one_stream(S, T) -> None:
    """Refuse two stores whose token streams differ: count, ids, places (`open_pair`)."""
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
                "(extract both from the same corpus with the same `max_length`/`max_tokens`)"
            )
        place = {
            name: (S.tokens(name, b0, b1), T.tokens(name, b0, b1)) for name in ("doc", "seq", "pos")
        }
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
                "`max_length`, `overflow` and `doc_split`"
            )


def _windowing_difference(S, T) -> str:
    """' (corpus max_length 512 in source, 64 in target; ...)' for the windowing options the
    two stores' provenance records differently, or ''."""
    cs, ct = S.provenance.get("corpus") or {}, T.provenance.get("corpus") or {}
    differ = [
        f"{k} {cs.get(k)} in source, {ct.get(k)} in target"
        for k in WINDOWING
        if cs.get(k) != ct.get(k)
    ]
    return f" (corpus {'; '.join(differ)})" if differ else ""


def _check_reachable(path: str, role: str, storage_options: dict | None) -> None:
    """A store URL whose protocol is unknown, or whose endpoint cannot be reached, is one
    line naming it (fsspec raises many exception types for the second: any of them is)."""
    st.check_protocol(path, role)
    if st.local_path(path) is not None:
        return
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
        fs.exists(root.rstrip("/") + "/zarr.json")
    except Exception as e:  # noqa: BLE001  (an unreachable endpoint, refused credentials, ...)
        raise InputError(
            f"{role} {path} cannot be reached: {type(e).__name__}: {' '.join(str(e).split())[:200]} "
            "(check the endpoint, e.g. AWS_ENDPOINT_URL, and the credentials)"
        ) from None


def select_boundaries(spec, store, option: str) -> list:
    """The boundaries `spec` ("0,4,8", "::2") names, each held by `store`; None, "" or "all"
    is every boundary the store holds (a store extracted with `--boundaries ::2` fits as it
    is), not every boundary of its model."""
    if spec is None or spec.strip() in ("", "all"):
        return sorted(int(b) for b in store.boundaries)
    chosen = parse_boundaries(spec, store.n_layers, option)
    missing = [b for b in chosen if b not in store.boundaries]
    if missing:
        raise InputError(
            f"{option} {spec or 'all'} asks for boundaries {missing} that store {store.path} does not hold "
            f"(it holds {list(store.boundaries)}): choose among those"
        )
    return chosen


def first_training_rows(store, part: np.ndarray, step: int, least: int = 1):
    """(start, stop, rows) of the first `step`-token range whose training rows (fit or
    validation) number at least `least`, or None."""
    for start in range(0, store.n_tokens, step):
        p = part[start : start + step]
        rows = np.flatnonzero((p == FIT) | (p == VAL))
        if len(rows) >= least:
            return start, min(store.n_tokens, start + step), rows
    return None


def shifts_of(store, boundaries, part, step: int) -> dict:
    """Per boundary, the float64 mean of the training rows of the first task range that has
    any: the shift that keeps the float64 sums well conditioned (any value gives the same fit)."""
    first = first_training_rows(store, part, step)
    if first is None:
        return {b: np.zeros(store.d_model) for b in boundaries}
    start, stop, rows = first
    return {b: store.resid(b, start, stop)[rows].astype(np.float64).mean(0) for b in boundaries}


def scale_of(store, boundaries, part) -> dict:
    """Per boundary, the mean variance per dimension of the training rows of the first store
    chunk that has two (float64): the scale of trace(XcᵀXc)/(n·d) that `check_alphas` uses."""
    first = first_training_rows(store, part, store.chunk_tokens, least=2)
    if first is None:
        return {}
    start, stop, rows = first
    return {
        b: float(store.resid(b, start, stop)[rows].astype(np.float64).var(0).mean())
        for b in boundaries
    }
