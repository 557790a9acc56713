"""The tuned lens (docs/methods.md, Tuned lens; Belrose et al. 2023, arXiv 2303.08112).

Boundary b < L gets an affine translator applied residually,

    T_b(h) = h + h A_bᵀ + c_b,      A_b = 0, c_b = 0 at the start (the logit lens),

trained alone (each translator's loss depends on it only) to minimise the mean over training
tokens of KL(p ‖ q_b) = Σ_v p(v) (log p(v) − log q_b(v)), p = softmax(head(h_L)) the model's own
output and q_b = softmax(head(T_b(h_b))). Boundary L needs none (T_L = identity). The optimiser
is tuned-lens's default: SGD with Nesterov momentum β = 0.9, learning rate 1.0 · (1 − β),
weight decay 1e-3, decayed linearly to 0 over the steps; each step draws its tokens from the
training tokens with a seeded generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align.errors import InputError

MOMENTUM = 0.9
LEARNING_RATE = 1.0  # tuned-lens's SGD default, scaled by (1 − β) as it does
WEIGHT_DECAY = 1e-3
TARGET_BYTES = 1 << 30  # the training targets log p are computed once when they fit in this


@dataclass
class Translator:
    """T(h) = h + h Aᵀ + c: A (d_model, d_model) and c (d_model,) float32 tensors."""

    A: object
    c: object

    def __call__(self, h):
        """T(h) for h (..., d_model), in h's dtype."""
        A, c = (t.to(h.device, h.dtype) for t in (self.A, self.c))
        return h + h @ A.T + c


def identity(d_model: int) -> Translator:
    """The translator of the logit lens: A = 0, c = 0 (the tuned lens's initialisation)."""
    import torch

    return Translator(torch.zeros(d_model, d_model), torch.zeros(d_model))


def kl_to_output(lens_logits, final_logp):
    """Mean over tokens of KL(p ‖ q) = Σ_v p (log p − log q): `final_logp` log p (n, vocab),
    `lens_logits` q's logits (n, vocab); the tuned lens's loss."""
    import torch

    lq = torch.log_softmax(lens_logits.float(), -1)
    return (final_logp.exp() * (final_logp - lq)).sum(-1).mean()


def output_logp(head, h_final, step: int = 1024):
    """log p = log_softmax(head(h_L)) (n_tokens, vocab), float32, `step` tokens at a time: the
    training targets computed once (`train`'s `final_logp`)."""
    import torch

    with torch.no_grad():
        return torch.cat(
            [
                torch.log_softmax(head(h_final[k : k + step]).float(), -1)
                for k in range(0, h_final.shape[0], step)
            ]
        )


def train(
    x, h_final, head, steps: int = 250, tokens_per_step: int = 4096, seed: int = 0, final_logp=None
):
    """Train one boundary's translator (module docstring) on its training tokens.

    Parameters
    ----------
    x : tensor of shape (n_tokens, d_model)
        The boundary's residuals on the training tokens.
    h_final : tensor of shape (n_tokens, d_model)
        Boundary L's residuals on the same tokens (the output p = softmax(head(h_L))).
    head : align.models.families.Head
        The model's final norm and unembedding (float32; not trained); the training runs on
        its device.
    steps : int, optional
        Optimiser steps (the paper's 250).
    tokens_per_step : int, optional
        Tokens drawn for each step (every training token when fewer).
    seed : int, optional
        The draws' seed.
    final_logp : tensor of shape (n_tokens, vocab), optional
        `output_logp(head, h_final)`, when it fits in memory: not recomputed at every step.

    Returns
    -------
    Translator
        The trained translator, and its loss per step as `losses` (steps,).
    """
    import torch

    if steps < 1 or tokens_per_step < 1:
        raise InputError(
            f"steps {steps} and tokens_per_step {tokens_per_step} must both be at least 1"
        )
    d, device = x.shape[1], head.parameter.device
    A = torch.zeros(d, d, device=device, requires_grad=True)
    c = torch.zeros(d, device=device, requires_grad=True)
    opt = torch.optim.SGD(
        [A, c],
        lr=LEARNING_RATE * (1 - MOMENTUM),
        momentum=MOMENTUM,
        nesterov=True,
        weight_decay=WEIGHT_DECAY,
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: max(0.0, (steps - k) / steps))
    rng = np.random.default_rng(seed)
    n = x.shape[0]
    losses = np.zeros(steps)
    x, h_final = x.to(device).float(), h_final.to(device).float()
    for k in range(steps):
        pick = (
            slice(None)
            if tokens_per_step >= n
            else torch.from_numpy(rng.choice(n, tokens_per_step, replace=False))
        )
        if final_logp is None:
            target = output_logp(head, h_final[pick], max(n, 1))
        else:
            target = final_logp[pick]
        h = x[pick]
        loss = kl_to_output(head(h + h @ A.T + c), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses[k] = float(loss.detach())
    out = Translator(A.detach().clone(), c.detach().clone())
    out.losses = losses
    return out
