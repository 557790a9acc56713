"""The linear, tuned and cross-model lenses scored on held-out tokens (docs/methods.md, Linear
lens, Tuned lens, One model read through another).

A lens of kind k reads boundary b's residual h_b through a translation T_b into the residual
space of a model's final boundary, then through that model's head:
q_b = softmax(head(T_b(h_b))). The reference is that model's own output p = softmax(head(h_L)).
Per held-out token with a next token y in the store:

    KL_b      = Σ_v q_b(v) (log q_b(v) − log p(v))     (nats; as the logit lens, align.analyses.lens)
    overlap_b = |top5(q_b) ∩ top5(p)| / 5
    top1_b    = [argmax q_b = argmax p]
    ce_b      = −log q_b(y)                             (nats)

Two averages, as the logit lens's: "token" (every scored token) and "document" (the mean over a
document's tokens, then over documents); each with a document-bootstrap 95% interval from the
per-document sums (`align.stats.bootstrap`, the documents the unit resampled).
"""

from __future__ import annotations

import time

import numpy as np

from align.analyses.lens import TOP_K, lens_logits, log_probs, metrics_of, next_tokens, output_of
from align.errors import InputError
from align.stats import bootstrap

METRICS = ("kl", "overlap", "top1", "ce")
WEIGHTINGS = ("token", "document")
SPAN = 16  # a batch's rows lie within SPAN batches' worth of tokens: what a read may hold
DESCRIPTIONS = {
    "kl": "KL(lens || model output) in nats",
    "overlap": f"top-{TOP_K} overlap of the lens with the model output",
    "top1": "share of tokens whose lens top-1 token is the model output's",
    "ce": "cross-entropy of the lens to the next token, in nats",
}


def scored_tokens(doc, pos, nxt, heldout_docs, include_first_token: bool) -> np.ndarray:
    """Sorted indices of the tokens a lens is scored on: a held-out document's, with a next
    token, position 0 only when `include_first_token` (the fit's rule for its held-out part)."""
    keep = np.isin(np.asarray(doc), np.asarray(heldout_docs)) & (np.asarray(nxt) >= 0)
    if not include_first_token:
        keep &= np.asarray(pos) != 0
    return np.flatnonzero(keep)


def batches(rows: np.ndarray, step: int, span: int):
    """Sorted `rows` cut into batches of at most `step` rows lying within `span` tokens of the
    batch's first: (start, stop, rows) with every row in [start, stop), stop − start ≤ span.
    A batch of rows of several documents is one head application; the span bounds what is
    read around them."""
    rows = np.asarray(rows, np.int64)
    k = 0
    while k < len(rows):
        end = min(k + step, int(np.searchsorted(rows, rows[k] + span)))
        yield int(rows[k]), int(rows[end - 1]) + 1, rows[k:end]
        k = end


class DocumentSums:
    """Per-document sums of the metrics at boundaries 0..L and token counts."""

    def __init__(self, n_boundaries: int, docs: np.ndarray):
        self.docs = np.asarray(docs, np.int64)
        self.sums = {m: np.zeros((len(docs), n_boundaries)) for m in METRICS}
        self.count = np.zeros(len(docs), np.int64)
        self.seen = np.zeros(n_boundaries, bool)

    def unit(self, doc) -> np.ndarray:
        """Each token's document index into `docs`."""
        return np.searchsorted(self.docs, np.asarray(doc, np.int64))

    def add(self, b: int, values: dict, unit) -> None:
        """Add tokens at boundary b: `values` {metric: (n,)}, `unit` their documents' indices."""
        for m in METRICS:
            np.add.at(self.sums[m][:, b], unit, values[m])
        self.seen[b] = True

    def result(self) -> dict:
        """{metric: (2, L+1) token- and document-weighted means, NaN where not measured},
        "per_document" {metric_sum: (D, L+1), "token_count": (D,)}, "documents", "n_tokens",
        "measured"."""
        used = self.count > 0
        if not used.any():
            raise InputError(
                "no held-out token with a next token to score the lens on: give more documents"
            )
        out, per = {}, {}
        for m in METRICS:
            s = self.sums[m][used]
            s[:, ~self.seen] = np.nan
            out[m] = np.stack(
                [s.sum(0) / self.count[used].sum(), (s / self.count[used, None]).mean(0)]
            )
            per[f"{m}_sum"] = s
        per["token_count"] = self.count[used]
        return {
            **out,
            "per_document": per,
            "documents": self.docs[used],
            "n_tokens": int(self.count.sum()),
            "measured": [int(b) for b in np.flatnonzero(self.seen)],
        }


def evaluate(
    source, target, rows, translate, head, heldout_docs, step: int = 1024, progress=None
) -> dict:
    """Every boundary of store `source` read through `translate` and `head`, scored on `rows`.

    Parameters
    ----------
    source : ActivationStore
        The store whose boundaries are read (model A).
    target : ActivationStore
        The store of the model whose head reads them (model B; `source` itself for one model):
        its boundary L_B gives the reference p = softmax(head(h_L)). Token for token the same
        stream as `source`.
    rows : array of int
        The scored tokens (`scored_tokens`), sorted.
    translate : callable
        (b, x) -> h: x (n_tokens, d_source) float tensor of boundary b into (n_tokens, d_model
        of B) in the head's dtype and device; None for a boundary not read.
    head : align.models.families.Head
        Model B's final norm and unembedding.
    heldout_docs : array of int
        The held-out documents (the bootstrap's units), sorted.
    step : int, optional
        Tokens per application of the head.
    progress : align.fitting.live_route.progress.Progress, optional
        Hears of each step.

    Returns
    -------
    dict
        `DocumentSums.result()`.
    """
    import torch

    L_B = target.n_layers
    param = head.parameter
    acc = DocumentSums(source.n_layers + 1, heldout_docs)
    doc, nxt = (
        source.tokens("doc"),
        next_tokens(*(source.tokens(k) for k in ("token_id", "seq", "pos"))),
    )
    for start, stop, batch in batches(rows, step, SPAN * step):
        t = time.perf_counter()
        unit, at = acc.unit(doc[batch]), batch - start
        final = lens_logits(
            head, torch.from_numpy(target.resid(L_B, start, stop)[at]).to(param.device, param.dtype)
        )
        acc.count += np.bincount(unit, minlength=len(acc.docs))
        p = output_of(final)
        for b in source.boundaries:
            h = translate(b, torch.from_numpy(source.resid(b, start, stop)[at]))
            if h is None:
                continue
            values = metrics_of(
                log_probs(lens_logits(head, h.to(param.device, param.dtype))), p, nxt[batch]
            )
            acc.add(b, values, unit)
        if progress is not None:
            progress.forward("model", len(batch), time.perf_counter() - t)
            progress.step(f"{stop:,} tokens")
    return acc.result()


def curve_replicates(per: dict, idx: np.ndarray) -> dict:
    """{metric: (resamples, 2 weightings, boundaries)} from per-document sums and counts,
    resample indices idx (resamples, size) into the documents."""
    counts = np.asarray(per["token_count"], np.float64)
    out = {}
    for m in METRICS:
        sums = np.asarray(per[f"{m}_sum"], np.float64)
        token = bootstrap.resampled_token_means(sums, counts, idx)
        document = bootstrap.resampled_means(sums / counts[:, None], idx)
        out[m] = np.stack([token, document], 1)
    return out


def to_dataset(res: dict, attrs: dict, n_layers: int, resampling=bootstrap.DEFAULT):
    """The "lens" result of a linear, tuned or cross-model lens: `kl`, `overlap`, `top1`, `ce`
    (weighting, boundary) with their document-bootstrap `_low`/`_high`, the per-document sums
    `<metric>_sum` (document, boundary) and `token_count` (document); attrs as given plus the
    counts, the boundaries measured and the bootstrap's record."""
    import xarray as xr

    per = res["per_document"]
    n = len(per["token_count"])
    reps = curve_replicates(per, bootstrap.indices(n, resampling))
    dims = ("weighting", "boundary")
    data = {}
    for m in METRICS:
        data[m] = (dims, res[m], {"description": DESCRIPTIONS[m]})
        low, high = bootstrap.percentile_interval(reps[m])
        data[f"{m}_low"], data[f"{m}_high"] = (dims, low), (dims, high)
        data[f"{m}_sum"] = (("document", "boundary"), per[f"{m}_sum"])
    data["token_count"] = (("document",), np.asarray(per["token_count"], np.int64))
    coords = {
        "weighting": list(WEIGHTINGS),
        "boundary": np.arange(n_layers + 1),
        "document": np.asarray(res["documents"], np.int64),
    }
    ds = xr.Dataset(data, coords=coords)
    ds.attrs = {
        **attrs,
        "n_layers": n_layers,
        "n_tokens": res["n_tokens"],
        "n_documents": n,
        "boundaries_measured": list(res["measured"]),
        "intervals": f"document bootstrap of both weightings over {n} held-out documents",
        "bootstrap": bootstrap.record(
            n, resampling, method="document bootstrap (held-out documents), percentile intervals"
        ),
    }
    return ds
