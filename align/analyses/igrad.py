"""Integrated gradients per layer and position ([P1] §3.3; P1's code: `lib/igrad.py`,
`get_igrads_multiple`).

For a prompt with answer-predicting positions A (`align.analyses.answers`), a part and a
layer l, let x (T, d_model) be the object interpolated at every position:

    part layer, object residual: h_{l+1}, the residual block l writes (P1: `layers[l].output[0]`)
    part layer, object delta:    C_l = h_{l+1} − h_l, what block l adds
    part attn, mlp:              a_l, m_l (either object; P1: `self_attn.output[0]`, `mlp.output`)

and b (1, d_model) the baseline, the same at every position: "position-mean", x's mean over
all T positions of the prompt (position 0 included, as P1); "zero", 0. f(r) is the target
when the object is replaced by y = b + r·(x − b) at every position (everything after it
recomputed, everything before it unchanged), under teacher forcing:

    prob:    f = Σ_{τ ∈ A} p(x_{τ+1} | x_{≤τ})        (P1)
    logprob: f = Σ_{τ ∈ A} log p(x_{τ+1} | x_{≤τ})

The attribution of position t, signed and summed over d_model (as P1: no norm, no abs):

    A[l, t] = Σ_d (x − b)_{t,d} · (1/N) Σ_{k=0}^{N−1} ∂f/∂y_{t,d} at y = b + r_k·(x − b)

with r_k = k/N ("left" rule, P1: r = 0 included, r = 1 not) or (k + ½)/N ("midpoint"),
N = steps. `PROTOCOLS["p1"]` (the default) is P1's code: residual, position-mean, prob,
left, N = 256; `PROTOCOLS["align"]` is delta, zero, logprob, midpoint, N = 64.

Completeness is the check, for every variant: for each prompt, part and layer,
Σ_t A[l, t] = f(1) − f(0) = f(x) − f(b) up to the rule's error, O(1/N) for the left rule and
O(1/N²) for the midpoint rule on a smooth f. The result stores f(x), f(b) per layer and the
gap Σ_t A[l, t] − (f(x) − f(b)). A[l, t] = 0 for t after the last answer-predicting position
(a causal model's f does not read them).

This is the only analysis that needs gradients: the model runs with autograd (default dtype
float32). Rows (interpolation points r of one prompt, part and layer, plus the end points 1
and 0 that give f(x) and f(b)) are batched `batch_size` per forward and backward pass; a plain
loop makes one pass per point.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from align import models
from align.analyses.erase import token_vars
from align.analyses.forward import check_batch, check_values
from align.analyses.igrad_options import (  # noqa: F401
    BASELINES,
    OBJECTS,
    PROTOCOLS,
    RULES,
    TARGETS,
    Variant,
    variant,  # re-exported: igrad.variant(name, **options)
)
from align.errors import InputError, NonFiniteError
from align.hooks import capture
from align.hooks.interpolate import install_interpolation

PARTS = ("layer", "attn", "mlp")


def alphas(steps: int, rule: str) -> np.ndarray:
    """The interpolation points r_k, k = 0..N−1: k/N ("left") or (k + ½)/N ("midpoint")."""
    if steps < 1:
        raise InputError(f"`steps` {steps} must be at least 1")
    if rule not in RULES:
        raise InputError(f"`rule` {rule!r} must be one of {', '.join(RULES)}")
    return (np.arange(steps) + (0.0 if rule == "left" else 0.5)) / steps


def _target(logits, target_ids, target: str):
    """f (B,): the answer tokens' summed probability ("prob") or log-probability ("logprob");
    logits (B, n_answer, V), target_ids (B, n_answer)."""
    import torch

    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    scores = torch.softmax(logits, -1) if target == "prob" else torch.log_softmax(logits, -1)
    return scores.gather(-1, target_ids[..., None])[..., 0].sum(-1)


def gradient_pass(model, ids, predicts, part, layer, alpha, prompt, v: Variant):
    """One forward and backward pass over rows of one prompt (ids (T,)) at points alpha (B,).

    Returns (f (B,), g·(x − b) summed over d_model (B, T)), float64 numpy."""
    import torch

    L = len(models.blocks(model))
    dev = models.input_device(model)
    B, T = len(alpha), len(ids)
    input_ids = torch.as_tensor(np.asarray(ids, np.int64), device=dev)[None].expand(B, T)
    mask = torch.ones((B, T), dtype=torch.long, device=dev)
    pos = torch.arange(T, device=dev)[None].expand(B, T)
    tau = torch.as_tensor(np.flatnonzero(predicts), device=dev)
    store = {}
    run = f"run scaling {'' if part == 'layer' else part + ' of '}layer {layer}"
    handle = install_interpolation(
        model, part, layer, torch.as_tensor(alpha), v.object, v.baseline, store
    )
    try:
        with torch.enable_grad(), capture.capture(model, [L], stop_early=False) as out:
            models.base_model(model)(
                input_ids=input_ids, attention_mask=mask, position_ids=pos, use_cache=False
            )
            hL = out["resid"][L]
            check_batch({"resid": {L: hL.detach()}, "logits": None}, mask, [prompt] * B, run)
            logits = models.head(model)(hL[:, tau.to(hL.device)])
            f = _target(logits, input_ids[:, tau + 1].to(logits.device), v.target)  # (B,)
            (g,) = torch.autograd.grad(f.sum(), store["y"])
    finally:
        handle.remove()
    gx = (g.double() * store["dx"].double()).sum(-1)
    return f.detach().double().cpu().numpy(), gx.cpu().numpy()


def check_parts(parts) -> None:
    """InputError unless `parts` is a non-empty selection of PARTS."""
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts:
        raise InputError(
            f"`parts` {','.join(parts)!r}: each item must be one of {', '.join(PARTS)}"
        )


def integrated_gradients(
    model,
    prompts,
    *,
    parts=PARTS,
    variant: Variant = PROTOCOLS["p1"],  # noqa: F811 (the parameter shadows igrad.variant)
    steps: int | None = None,
    batch_size: int = 16,
    progress=None,
) -> dict:
    """Integrated gradients of each prompt's answer target (module docstring) in `variant`.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model, in memory.
    prompts : list of AnswerPrompt
        The prompts with their answers.
    parts : tuple of str, optional
        "layer", "attn", "mlp".
    variant : Variant, optional
        Target, baseline and rule (default: P1's).
    steps : int, optional
        Replaces the variant's N when given.
    batch_size : int, optional
        Rows per pass.
    progress : align.fitting.live_route.progress.Progress, optional
        Counting passes; hears of each pass.

    Returns
    -------
    dict
        {"A": (n_prompts, n_parts, L, T_max) float64, NaN at positions ≥ a prompt's length;
        "f": (n_prompts,) f(x); "f_baseline": (n_prompts, n_parts, L) f(b); "gap": (n_prompts,
        n_parts, L) Σ_t A − (f − f_baseline); "variant"; "n_passes", "n_passes_one_at_a_time"}.

    Raises
    ------
    InputError
        No prompts, `batch_size` or `steps` below 1, an unknown part.
    NonFiniteError
        An answer probability that is not finite in the model's dtype.
    """
    if not prompts:
        raise InputError("no prompts to run: give at least one prompt with an answer")
    if batch_size < 1:
        raise InputError(f"`batch_size` {batch_size} must be at least 1")
    check_parts(parts)
    v = variant if steps is None else dataclasses.replace(variant, steps=steps)
    L = len(models.blocks(model))
    T_max = max(len(p) for p in prompts)
    points = np.concatenate([[1.0, 0.0], alphas(v.steps, v.rule)])
    A = np.full((len(prompts), len(parts), L, T_max), np.nan)
    f1 = np.zeros(len(prompts))
    f0 = np.zeros((len(prompts), len(parts), L))
    n_passes = 0
    for i, p in enumerate(prompts):
        for pi, part in enumerate(parts):
            for l in range(L):
                acc = np.zeros(len(p))
                for k in range(0, len(points), batch_size):
                    a = points[k : k + batch_size]
                    t = time.perf_counter()
                    f, gx = gradient_pass(model, p.token_id, p.predicts_answer, part, l, a, i, v)
                    n_passes += 1
                    if progress is not None:
                        progress.forward("model", len(a) * len(p), time.perf_counter() - t)
                        progress.step(f"prompt {i + 1:,} of {len(prompts):,}, {part} layer {l}")
                    mid = np.arange(k, k + len(a)) >= 2  # rows 0 and 1 are the end points
                    acc += gx[mid].sum(0) / v.steps
                    if k == 0:
                        f1[i], f0[i, pi, l] = f[0], f[1] if len(f) > 1 else np.nan
                    elif k == 1 and len(a):
                        f0[i, pi, l] = f[0]
                A[i, pi, l, : len(p)] = acc
                check_values(
                    "the attributions", acc[None], lambda t: (i, t), f" of {part} layer {l}"
                )
    _check_targets(f1, f0, parts, v)
    gap = np.nansum(A, -1) - (f1[:, None, None] - f0)
    return {
        "A": A,
        "f": f1,
        "f_baseline": f0,
        "gap": gap,
        "parts": tuple(parts),
        "steps": v.steps,
        "variant": v,
        "n_passes": n_passes,
        "n_passes_one_at_a_time": len(prompts) * (1 + len(parts) * L * (v.steps + 1)),
    }


def _check_targets(f1, f0, parts, v: Variant) -> None:
    """NonFiniteError when f(x) or f(b) is ±inf/NaN (log p of an answer token of probability 0
    in float32)."""
    bad = np.argwhere(~np.isfinite(f0 + f1[:, None, None]))
    if len(bad):
        i, pi, l = (int(x) for x in bad[0])
        what = "probability" if v.target == "prob" else "log-probability"
        raise NonFiniteError(
            f"the answer {what} is not finite for prompt {i} (f = {f1[i]}, with {parts[pi]} of layer {l} "
            f"at its baseline f = {f0[i, pi, l]}) at {len(bad):,} (prompt, part, layer) cells: an answer "
            "token has probability 0 in this dtype; run with `dtype` float32; nothing was written"
        )


def to_dataset(res: dict, prompts, attrs: dict):
    """The "igrad" result Dataset: `attribution` (prompt, part, layer, position), `f`
    (prompt,) f(x), `f_baseline` (f(b)) and `completeness_gap` (prompt, part, layer), the token
    variables of the erasure result, and attrs["variant"] (protocol, object, baseline, target,
    rule, steps)."""
    import xarray as xr

    n, _, L, T = res["A"].shape
    return xr.Dataset(
        token_vars(prompts, T)
        | {
            "attribution": (("prompt", "part", "layer", "position"), res["A"]),
            "f": (("prompt",), res["f"]),
            "f_baseline": (("prompt", "part", "layer"), res["f_baseline"]),
            "completeness_gap": (("prompt", "part", "layer"), res["gap"]),
        },
        coords={
            "prompt": np.arange(n),
            "part": list(res["parts"]),
            "layer": np.arange(L),
            "position": np.arange(T),
        },
        attrs={
            **attrs,
            "n_layers": L,
            "n_prompts": n,
            "steps": res["steps"],
            "rule": res["variant"].rule,
            "variant": res["variant"].to_attrs(),
        },
    )
