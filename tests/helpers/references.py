"""Independent references: plain numpy, scikit-learn and transformers code. Nothing here imports
align.

`residuals(model, ids)` runs one sequence through a transformers CausalLM by composing the
residual stream by hand from the model's own submodules (embedding, rotary embedding,
attention, MLP, norms), following each family's published block structure. It never uses
hooks nor `output_hidden_states`, so it checks what align's hooks capture.

`sklearn_ridge`, `ridge_val_sse`, `chosen_alpha` and `heldout_scores` are the fit's reference:
scikit-learn's `Ridge` (with intercept, float64) on raw rows, α relative to the mean eigenvalue of
the centred Gram matrix, and the held-out scores written out with numpy and `r2_score`.

`ARCH[model_type]` says where each decoder family keeps its parts, written out from
transformers' model code independently of align/models/families.py: the blocks, the final norm and the
modules after it, the unembedding, which block children add to the residual, the multiplier on
what they add, and the model's own last step on its logits (`blocks`, `head`, `scale`).
"""

from __future__ import annotations

import numpy as np
import torch

from tests.helpers.zoo import FAMILY_TYPES

POST_NORM_FAMILIES = ("olmo2",)  # normalise sublayer outputs before the residual add


def causal_mask(T: int, dtype) -> torch.Tensor:
    m = torch.full((T, T), torch.finfo(dtype).min, dtype=dtype).triu(1)
    return m[None, None]


@torch.inference_mode()
def residuals(model, ids) -> dict[str, np.ndarray]:
    """{"resid": (L+1, T, d), "attn": (L, T, d), "mlp": (L, T, d)} as float32 numpy, and
    "final": final_norm(h_L) (T, d), for one sequence of token ids."""
    inner = model.model
    x = torch.as_tensor(np.asarray(ids), dtype=torch.long)[None]
    T = x.shape[1]
    h = inner.embed_tokens(x)
    pos = torch.arange(T)[None]
    pe = inner.rotary_emb(h, pos)
    mask = causal_mask(T, h.dtype)
    post = model.config.model_type in POST_NORM_FAMILIES
    resid, attn, mlp = [h], [], []
    for layer in inner.layers:
        if post:
            a = layer.post_attention_layernorm(
                layer.self_attn(
                    hidden_states=h, attention_mask=mask, position_embeddings=pe, position_ids=pos
                )[0]
            )
            mid = h + a
            m = layer.post_feedforward_layernorm(layer.mlp(mid))
        else:
            a = layer.self_attn(
                hidden_states=layer.input_layernorm(h),
                attention_mask=mask,
                position_embeddings=pe,
                position_ids=pos,
            )[0]
            mid = h + a
            m = layer.mlp(layer.post_attention_layernorm(mid))
        h = mid + m
        resid.append(h)
        attn.append(a)
        mlp.append(m)
    f32 = lambda ts: torch.stack([t[0] for t in ts]).float().numpy()  # noqa: E731
    return {
        "resid": f32(resid),
        "attn": f32(attn),
        "mlp": f32(mlp),
        "final": inner.norm(h)[0].float().numpy(),
        "resid_bf16_bits": torch.stack([t[0] for t in resid]).view(torch.int16).numpy()
        if h.dtype == torch.bfloat16
        else None,
    }


def bf16_bits_to_float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint16).astype(np.uint32) << 16).view(np.float32)


def _gemma_cap(config, logits):
    cap = config.final_logit_softcapping
    return logits if cap is None else (logits / cap).tanh() * cap


def _llama_like(**kw):
    return dict(
        dict(
            blocks="model.layers",
            norm="model.norm",
            after=(),
            unembed="lm_head",
            attn="self_attn",
            mlp="mlp",
            scale=None,
            finish=None,
        ),
        **kw,
    )


# Where each family keeps its parts (read from transformers' modeling_*.py of each family).
ARCH = {t: _llama_like() for t in FAMILY_TYPES}
ARCH.update(
    {
        "gemma2": _llama_like(
            attn="post_attention_layernorm", mlp="post_feedforward_layernorm", finish=_gemma_cap
        ),
        "gemma3_text": _llama_like(
            attn="post_attention_layernorm", mlp="post_feedforward_layernorm", finish=_gemma_cap
        ),
        "olmo2": _llama_like(attn="post_attention_layernorm", mlp="post_feedforward_layernorm"),
        "olmo3": _llama_like(attn="post_attention_layernorm", mlp="post_feedforward_layernorm"),
        "exaone4": _llama_like(attn="post_attention_layernorm", mlp="post_feedforward_layernorm"),
        "gpt2": _llama_like(blocks="transformer.h", norm="transformer.ln_f", attn="attn"),
        "gpt_bigcode": _llama_like(blocks="transformer.h", norm="transformer.ln_f", attn="attn"),
        "gptj": _llama_like(blocks="transformer.h", norm="transformer.ln_f", attn="attn"),
        "gpt_neox": _llama_like(
            blocks="gpt_neox.layers", norm="gpt_neox.final_layer_norm", attn="attention"
        ),
        "phi": _llama_like(norm="model.final_layernorm"),
        "falcon": _llama_like(
            blocks="transformer.h", norm="transformer.ln_f", attn="self_attention"
        ),
        "granite": _llama_like(
            scale=lambda c: c.residual_multiplier, finish=lambda c, x: x / c.logits_scaling
        ),
        "granitemoe": _llama_like(
            mlp="block_sparse_moe",
            scale=lambda c: c.residual_multiplier,
            finish=lambda c, x: x / c.logits_scaling,
        ),
        "cohere": _llama_like(finish=lambda c, x: x * c.logit_scale),
        "cohere2": _llama_like(finish=lambda c, x: x * c.logit_scale),
        "opt": _llama_like(
            blocks="model.decoder.layers",
            norm="model.decoder.final_layer_norm",
            after=("model.decoder.project_out",),
            mlp="fc2",
        ),
    }
)


def get(obj, path):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def blocks(model):
    return list(get(model, ARCH[model.config.model_type]["blocks"]))


def head(model, h):
    """The model's logits from a raw last residual h, through its own modules."""
    a = ARCH[model.config.model_type]
    for path in (a["norm"], *a["after"]):
        m = get(model, path)
        if m is not None:
            h = m(h)
    logits = get(model, a["unembed"])(h)
    return logits if a["finish"] is None else a["finish"](model.config, logits)


def scale(model) -> float:
    f = ARCH[model.config.model_type]["scale"]
    return 1.0 if f is None else float(f(model.config))


def alpha_scale(X) -> float:
    """trace(Xcᵀ Xc) / d for X: (n_tokens, d), Xc = X − mean(X): the factor that turns a relative
    α into the absolute α a ridge on X uses."""
    Xc = np.asarray(X, np.float64) - np.asarray(X, np.float64).mean(0)
    return float(np.trace(Xc.T @ Xc) / Xc.shape[1])


def sklearn_ridge(X, Y, alpha: float):
    """scikit-learn's Ridge with intercept and absolute penalty `alpha`, fitted in float64 on
    X: (n_tokens, d_source), Y: (n_tokens, d_target)."""
    from sklearn.linear_model import Ridge

    return Ridge(alpha=alpha, fit_intercept=True).fit(
        np.asarray(X, np.float64), np.asarray(Y, np.float64)
    )


def ridge_val_sse(X_fit, Y_fit, X_val, Y_val, alphas_rel) -> np.ndarray:
    """Σ ‖sklearn_ridge(X_fit, Y_fit, α·alpha_scale(X_fit)).predict(X_val) − Y_val‖² for each relative α:
    (len(alphas_rel),)."""
    scale = alpha_scale(X_fit)
    return np.array(
        [
            ((sklearn_ridge(X_fit, Y_fit, a * scale).predict(X_val) - Y_val) ** 2).sum()
            for a in alphas_rel
        ]
    )


def chosen_alpha(sse, Y_fit, Y_val) -> int:
    """Index of the α a fit chooses from its validation curve `sse`: the largest whose error is
    within 1e-12 of the minimum, relative to max(min sse, Σ‖Y_val − mean(Y_fit)‖²) (below that the
    closed form's differences are rounding)."""
    sse = np.asarray(sse)
    vyy = ((np.asarray(Y_val) - np.asarray(Y_fit).mean(0)) ** 2).sum()
    return int(np.flatnonzero(sse <= sse.min() + 1e-12 * max(sse.min(), vyy))[-1])


def heldout_scores(pred, Y) -> dict[str, float]:
    """The held-out scores of predictions pred for Y, both (n_tokens, d_target): relative_error =
    mean ‖pred − y‖ / max(‖y‖, 1e-12), norm_error = Σ‖pred − y‖ / Σ‖y‖, r2 = scikit-learn's
    variance-weighted R²."""
    from sklearn.metrics import r2_score

    e = np.linalg.norm(pred - Y, axis=1)
    y = np.linalg.norm(Y, axis=1)
    return {
        "relative_error": float(np.mean(e / np.maximum(y, 1e-12))),
        "norm_error": float(e.sum() / y.sum()),
        "r2": float(r2_score(Y, pred, multioutput="variance_weighted")),
    }
