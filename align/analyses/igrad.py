"""Integrated gradients per layer and position ([P1] §3.3).

For a prompt with answer-predicting positions A (`align.analyses.answers`), the target is the
log-probability of its answer tokens under teacher forcing,

    f = Σ_{τ ∈ A} log p(x_{τ+1} | x_{≤τ}).

For a part (layer: what block l adds, C_l = h_{l+1} − h_l; attn: a_l; mlp: m_l) and a layer
l, let x (T, d_model) be what the part adds at every position, and f(α) the target when the
part's output is replaced by α·x at every position (everything after it recomputed, everything
before it unchanged; α = 0 is the zero baseline). The attribution of position t is

    A[l, t] = Σ_d x_{t,d} · (1/N) Σ_{k=0}^{N−1} ∂f/∂y_{t,d} at y = α_k·x,   α_k = (k + ½)/N

(the midpoint Riemann rule over N = --steps points). Completeness is the check: for each
prompt, part and layer, Σ_t A[l, t] = f(1) − f(0) up to the rule's error, O(1/N²) for a smooth
f. The result stores f(1), f(0) per layer and the gap Σ_t A[l, t] − (f(1) − f(0)).
A[l, t] = 0 for t after the last answer-predicting position (a causal model's f does not read
them).

This is the only analysis that needs gradients: the model runs with autograd (default dtype
float32). Rows (interpolation points α of one prompt, part and layer, plus the end points 0
and 1 that give f(0) and f(1)) are batched `batch_size` per forward and backward pass; a plain
loop makes one pass per point.
"""

from __future__ import annotations

import numpy as np

from align import capture, models
from align.analyses.forward import check_batch, check_values
from align.analyses.skip import _first, _replace_first
from align.errors import InputError

PARTS = ("layer", "attn", "mlp")


def alphas(steps: int) -> np.ndarray:
    """The midpoint-rule interpolation points (k + ½)/N, k = 0..N−1."""
    if steps < 1:
        raise InputError(f"--steps {steps} must be at least 1")
    return (np.arange(steps) + 0.5) / steps


def _install(model, part: str, layer: int, alpha, store: dict):
    """Forward hook replacing the part's output at `layer` by α·x (α (B,) per row), with
    y = α·x a leaf that requires grad; x and y go to `store`."""
    def scaled(x):
        x = x.detach()
        y = (alpha.to(device=x.device, dtype=x.dtype)[:, None, None] * x).requires_grad_(True)
        store["x"], store["y"] = x, y
        return y

    if part == "layer":
        def hook(module, args, kwargs, output):
            out = _first(output)
            # The hook sees the block's input before a device_map hook moved it to the block's device.
            h_in = (args[0] if args else kwargs["hidden_states"]).detach().to(out.device)
            return _replace_first(output, h_in + scaled(out - h_in))

        return models.blocks(model)[layer].register_forward_hook(hook, with_kwargs=True, prepend=True)
    attn_mods, mlp_mods = models.sublayer_modules(model)
    mod = {"attn": attn_mods, "mlp": mlp_mods}[part][layer]
    return mod.register_forward_hook(lambda module, args, output: _replace_first(output, scaled(_first(output))), prepend=True)


def _pass(model, ids, predicts, part, layer, alpha, prompt):
    """One forward and backward pass over rows of one prompt (ids (T,)) at points alpha (B,).

    Returns (f (B,), g·x summed over d_model (B, T)), float64 numpy."""
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
    handle = _install(model, part, layer, torch.as_tensor(alpha), store)
    try:
        with torch.enable_grad(), capture.capture(model, [L], stop_early=False) as out:
            models.base_model(model)(input_ids=input_ids, attention_mask=mask, position_ids=pos, use_cache=False)
            hL = out["resid"][L]
            check_batch({"resid": {L: hL.detach()}, "logits": None}, mask, [prompt] * B, run)
            logits = models.unembed(model)(models.final_norm(model)(hL[:, tau.to(hL.device)]))
            logp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)
            target = input_ids[:, tau + 1].to(logp.device)
            f = logp.gather(-1, target[..., None])[..., 0].sum(-1)  # (B,)
            (g,) = torch.autograd.grad(f.sum(), store["y"])
    finally:
        handle.remove()
    gx = (g.double() * store["x"].double()).sum(-1)
    return f.detach().double().cpu().numpy(), gx.cpu().numpy()


def integrated_gradients(model, prompts, *, parts=PARTS, steps: int = 64, batch_size: int = 16, progress=None) -> dict:
    """Integrated gradients of each prompt's answer log-probability (module docstring).

    prompts: `AnswerPrompt`s. Returns {"A": (n_prompts, n_parts, L, T_max) float64, NaN at
    positions ≥ a prompt's length; "f": (n_prompts,) f(1); "f_baseline": (n_prompts,
    n_parts, L) f(0); "gap": (n_prompts, n_parts, L) Σ_t A − (f − f_baseline);
    "n_passes", "n_passes_one_at_a_time"}."""
    if not prompts:
        raise InputError("no prompts to run: give at least one prompt with an answer")
    if batch_size < 1:
        raise InputError(f"--batch-size {batch_size} must be at least 1")
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts:
        raise InputError(f"--parts {','.join(parts)!r}: each item must be one of {', '.join(PARTS)}")
    L = len(models.blocks(model))
    T_max = max(len(p) for p in prompts)
    points = np.concatenate([[1.0, 0.0], alphas(steps)])
    A = np.full((len(prompts), len(parts), L, T_max), np.nan)
    f1 = np.zeros(len(prompts))
    f0 = np.zeros((len(prompts), len(parts), L))
    n_passes = 0
    done, total = 0, len(prompts) * len(parts) * L
    for i, p in enumerate(prompts):
        for pi, part in enumerate(parts):
            for l in range(L):
                acc = np.zeros(len(p))
                for k in range(0, len(points), batch_size):
                    a = points[k:k + batch_size]
                    f, gx = _pass(model, p.token_id, p.predicts_answer, part, l, a, i)
                    n_passes += 1
                    mid = np.arange(k, k + len(a)) >= 2  # rows 0 and 1 are the end points
                    acc += gx[mid].sum(0) / steps
                    if k == 0:
                        f1[i], f0[i, pi, l] = f[0], f[1] if len(f) > 1 else np.nan
                    elif k == 1 and len(a):
                        f0[i, pi, l] = f[0]
                A[i, pi, l, : len(p)] = acc
                check_values("the attributions", acc[None], lambda t: (i, t), f" of {part} layer {l}")
                done += 1
                if progress is not None:
                    progress(done, total)
    _check_targets(f1, f0, parts)
    gap = np.nansum(A, -1) - (f1[:, None, None] - f0)
    return {"A": A, "f": f1, "f_baseline": f0, "gap": gap, "parts": tuple(parts), "steps": steps, "n_passes": n_passes,
            "n_passes_one_at_a_time": len(prompts) * (1 + len(parts) * L * (steps + 1))}


def _check_targets(f1, f0, parts) -> None:
    """NonFiniteError when f(1) or f(0) is ±inf/NaN (an answer token of probability 0 in float32)."""
    from align.errors import NonFiniteError

    bad = np.argwhere(~np.isfinite(f0 + f1[:, None, None]))
    if len(bad):
        i, pi, l = (int(x) for x in bad[0])
        raise NonFiniteError(f"the answer log-probability is not finite for prompt {i} (f = {f1[i]}, with {parts[pi]} of layer {l} "
                             f"zeroed f = {f0[i, pi, l]}) at {len(bad):,} (prompt, part, layer) cells: an answer token has "
                             "probability 0 in this dtype; run with --dtype float32; nothing was written")


def to_dataset(res: dict, prompts, attrs: dict):
    """The "igrad" result Dataset: `attribution` (prompt, part, layer, position), `f`
    (prompt,), `f_baseline` and `completeness_gap` (prompt, part, layer), and the token
    variables of the erasure result."""
    import xarray as xr

    from align.analyses.erase import _token_vars

    n, _, L, T = res["A"].shape
    return xr.Dataset(
        _token_vars(prompts, T) | {
            "attribution": (("prompt", "part", "layer", "position"), res["A"]),
            "f": (("prompt",), res["f"]),
            "f_baseline": (("prompt", "part", "layer"), res["f_baseline"]),
            "completeness_gap": (("prompt", "part", "layer"), res["gap"]),
        },
        coords={"prompt": np.arange(n), "part": list(res["parts"]), "layer": np.arange(L), "position": np.arange(T)},
        attrs={**attrs, "n_layers": L, "n_prompts": n, "steps": res["steps"], "rule": "midpoint"},
    )
