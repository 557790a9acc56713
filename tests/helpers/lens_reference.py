"""References of the linear, tuned and cross-model lenses, written from their definitions
(docs/methods.md; Belrose et al. 2023 for the tuned lens) with numpy, scikit-learn and the
model's own transformers modules. Nothing here imports align."""

from __future__ import annotations

import numpy as np
import torch

from tests.helpers.references import head, sklearn_ridge


def scored_rows(doc, seq, pos, docs) -> np.ndarray:
    """Indices of the tokens of documents `docs` at a position above 0 whose next token of the
    same sequence is in the store."""
    doc, seq, pos = (np.asarray(a) for a in (doc, seq, pos))
    has_next = np.zeros(len(doc), bool)
    has_next[:-1] = (seq[1:] == seq[:-1]) & (pos[1:] == pos[:-1] + 1)
    return np.flatnonzero(np.isin(doc, docs) & (pos > 0) & has_next)


def training_rows(doc, pos, docs) -> np.ndarray:
    """Indices of the tokens of documents `docs` at a position above 0."""
    return np.flatnonzero(np.isin(np.asarray(doc), docs) & (np.asarray(pos) > 0))


@torch.no_grad()
def logits(model, h) -> np.ndarray:
    """The model's logits from residuals h (n, d_model) through its final norm and unembedding,
    in float64 (the model is copied to float64)."""
    m = model.double() if next(model.parameters()).dtype != torch.float64 else model
    return head(m, torch.as_tensor(np.asarray(h, np.float64))).numpy()


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def scores(lens_logits, final_logits, next_ids) -> dict:
    """Per token: KL(q ‖ p), top-1 agreement and cross-entropy of q to the next token."""
    lq, lp = log_softmax(lens_logits), log_softmax(final_logits)
    return {
        "kl": (np.exp(lq) * (lq - lp)).sum(-1),
        "top1": (lq.argmax(-1) == lp.argmax(-1)).astype(float),
        "ce": -lq[np.arange(len(lq)), next_ids],
    }


def ridge_lens(model, X_train, Y_train, alpha, X_test):
    """scikit-learn's Ridge at absolute penalty `alpha` from X to Y, applied to X_test, then
    the model's final norm and unembedding: (fitted Ridge, logits (n_test, vocab))."""
    r = sklearn_ridge(X_train, Y_train, alpha)
    return r, logits(model, r.predict(np.asarray(X_test, np.float64)))


def tuned_lens_logits(model, h, A, c):
    """The tuned lens of the paper, translator applied residually (the tuned-lens package's
    parametrisation): unembed(final_norm(h + A h + c)), float64."""
    h = np.asarray(h, np.float64)
    return logits(model, h + h @ np.asarray(A, np.float64).T + np.asarray(c, np.float64))
