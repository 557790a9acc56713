"""One full forward of a CausalLM with align's hooks: residuals, sublayer outputs, logits."""

from __future__ import annotations

from align import capture, models


def forward(model, input_ids, attention_mask, position_ids, boundaries=(), layers=(), logits: bool = True) -> dict:
    """Run `model` on a right-padded batch (all tensors (B, T)).

    Returns {"resid": {b: h_b}, "attn": {l: a_l}, "mlp": {l: m_l}, "logits": (B, T, V) or
    None}, tensors (B, T, d_model) in the model's dtype on its device. Hooks installed before
    this call (an intervention) run first and are seen by the capture."""
    import torch

    with capture.capture(model, boundaries, layers, stop_early=False) as out, torch.inference_mode():
        kw = dict(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False)
        if logits:
            out["logits"] = model(**kw).logits
        else:
            models.base_model(model)(**kw)
            out["logits"] = None
    return out
