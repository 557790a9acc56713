"""Independent references for the extraction tests. Nothing here imports align.

`residuals(model, ids)` runs one sequence through a transformers CausalLM by composing the
residual stream by hand from the model's own submodules (embedding, rotary embedding,
attention, MLP, norms), following each family's published block structure. It never uses
hooks nor `output_hidden_states`, so it checks what align's hooks capture.
"""

from __future__ import annotations

import numpy as np
import torch

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
            a = layer.post_attention_layernorm(layer.self_attn(hidden_states=h, attention_mask=mask,
                                                               position_embeddings=pe, position_ids=pos)[0])
            mid = h + a
            m = layer.post_feedforward_layernorm(layer.mlp(mid))
        else:
            a = layer.self_attn(hidden_states=layer.input_layernorm(h), attention_mask=mask,
                                position_embeddings=pe, position_ids=pos)[0]
            mid = h + a
            m = layer.mlp(layer.post_attention_layernorm(mid))
        h = mid + m
        resid.append(h)
        attn.append(a)
        mlp.append(m)
    f32 = lambda ts: torch.stack([t[0] for t in ts]).float().numpy()  # noqa: E731
    return {"resid": f32(resid), "attn": f32(attn), "mlp": f32(mlp), "final": inner.norm(h)[0].float().numpy(),
            "resid_bf16_bits": torch.stack([t[0] for t in resid]).view(torch.int16).numpy() if h.dtype == torch.bfloat16 else None}


def bf16_bits_to_float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint16).astype(np.uint32) << 16).view(np.float32)
