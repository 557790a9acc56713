"""Which rows pair two models: one token stream token for token, or the tokens of two
tokenizations anchored on the text (`anchors`). Their tokenizers behave identically when they
share vocabulary, merges, added tokens, normalizer/pre-tokenizer and special-token wrapping
(compared by `corpus.tokenizer_hashes`; a store records them); `pairing` "auto" pairs tokens
then and anchors otherwise, "tokens" refuses tokenizers that differ, naming the parts, and
"char-anchors" anchors two tokenizations (of one tokenizer: token for token, every token
being its own anchor)."""

from __future__ import annotations

import numpy as np

from align.errors import StoreError
from align.fitting.pairing import anchors
from align.fitting.planning.split import shuffle_partners

TOKENIZER_PARTS = ("vocab", "merges", "added_tokens", "normalizer_pretokenizer", "special_wrapping")
TOKENIZER_NAMES = {
    "vocab": "vocabulary",
    "merges": "merges",
    "added_tokens": "added tokens",
    "normalizer_pretokenizer": "normalizer/pre-tokenizer",
    "special_wrapping": "special-token wrapping",
}


def differing_parts(source_hashes: dict, target_hashes: dict) -> list:
    """The names of the tokenizer parts whose hashes differ ([] when they behave identically)."""
    return [
        TOKENIZER_NAMES[k] for k in TOKENIZER_PARTS if source_hashes.get(k) != target_hashes.get(k)
    ]


def check_tokenizers(source_hashes: dict, target_hashes: dict, source: str, target: str) -> None:
    """Refuse two tokenizers that behave differently (`corpus.tokenizer_hashes` of each, or
    the hashes a store records) for a token-for-token pairing, naming the parts that differ;
    `source` and `target` say which inputs (a store's path and model, or a model's name)."""
    differ = differing_parts(source_hashes, target_hashes)
    if differ:
        raise StoreError(
            f"the tokenizers of source {source} and target {target} differ in {', '.join(differ)}: `pairing` tokens "
            "needs one token stream; pair their tokens on the text with `pairing` char-anchors (what auto does)"
        )


def resolve(pairing: str, source_hashes: dict, target_hashes: dict) -> tuple:
    """(mode, why): "tokens" or "char-anchors" for `pairing` (auto: tokens when the tokenizers
    behave identically), and the words the fit's log line gives for it."""
    differ = differing_parts(source_hashes, target_hashes)
    if pairing == "tokens" or (pairing == "auto" and not differ):
        return "tokens", "one tokenizer" if not differ else "asked for"
    if not differ:
        return "tokens", "char-anchors of one tokenizer: every token is its own anchor"
    return "char-anchors", f"the tokenizers differ in {', '.join(differ)}"


def check_same_text(S, T) -> None:
    """Two stores anchored on the text must hold the same text: the same corpus bytes and
    options (the corpus hash each records), and no packed windows."""
    cs, ct = S.provenance.get("corpus") or {}, T.provenance.get("corpus") or {}
    if cs.get("hash") != ct.get("hash"):
        differ = [
            f"{k} {cs.get(k)!r} in source, {ct.get(k)!r} in target"
            for k in sorted(set(cs) | set(ct))
            if k != "hash" and cs.get(k) != ct.get(k)
        ]
        raise StoreError(
            f"source {S.path} and target {T.path} were extracted from different corpora (corpus hash "
            f"{str(cs.get('hash'))[:12]} against {str(ct.get('hash'))[:12]}{'; ' + '; '.join(differ) if differ else ''}): "
            "anchors pair characters of one text; extract both from the same corpus with the same corpus options"
        )
    for role, s, c in (("source", S, cs), ("target", T, ct)):
        if c.get("pack") is not None:
            raise StoreError(
                f"{role} {s.path} packs documents into windows (extracted with `align extract --pack {c.get('pack')!r}`): a packed window's tokens read "
                "the end of the documents before them, cut at other characters by each tokenizer, so they cannot be "
                "anchored; extract both without `align extract --pack`"
            )


def anchored_partner(S, T, spec, log) -> tuple:
    """(Anchored, partner): the anchored pairs of two stores of one text (`anchors`), checked
    against `spec.min_coverage` and logged in one line, and each source token's target token
    (−1: none) under the first-token policy and `--control shuffle`."""
    names = (f"{S.path} ({S.provenance.get('model')})", f"{T.path} ({T.provenance.get('model')})")
    src, tgt = anchors.TokenPlaces.of_store(S), anchors.TokenPlaces.of_store(T)
    found = anchors.anchor_pairs(src, tgt, tuple(_max_length(x) for x in (S, T)))
    log(f"align fit: {anchors.coverage_line(found)}")
    left = anchors.windows_line(found)
    if left:
        log(f"align fit: {left}")
    anchors.check_coverage(found, spec.min_coverage, names)
    return found, partner_of(found, src, tgt, spec)


def partner_of(found, source, target, spec) -> np.ndarray:
    """(n_source_tokens,) each source token's target token through the anchored pairs `found`
    (−1: none), under the first-token policy and `--control shuffle`; `source`, `target`:
    the two token tables' anchors.TokenPlaces. Both routes pair through it."""
    rows = (
        anchors.shuffled(found, source, spec.seed, shuffle_partners)
        if spec.control == "shuffle"
        else found
    )
    return rows.partner(len(source), spec.include_first_token, source.pos, target.pos)


def _max_length(store):
    """The `max_length` a store's windows were cut at (its corpus record), or None."""
    value = (store.provenance.get("corpus") or {}).get("max_length")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def target_part(part: np.ndarray, partner: np.ndarray, n_target: int) -> np.ndarray:
    """(n_target,) int8: each target token's part through the pairing (−1: paired with none)."""
    out = np.full(n_target, -1, dtype=np.int8)
    ok = partner >= 0
    out[partner[ok]] = part[ok]
    return out
