"""The hook of layer skipping (`align.analyses.skip`): part "layer" sets h_{s+1} := h_s at the
intervened positions, part "attn" sets a_s := 0, part "mlp" sets m_s := 0."""

from __future__ import annotations

from align import models
from align.hooks.outputs import first, replace_first


def install_skip(model, part: str, layer: int, where):
    """Register the intervention hook of (part, layer) at positions `where` (B, T) bool;
    returns the handle. torch.where keeps dtype and values wherever `where` is False."""
    import torch  # imported on first use, as in every module of align: start-up stays light

    w = where[..., None]
    if part == "layer":

        def hook(module, args, kwargs, output):
            out = first(output)
            # The hook sees the block's input before a device_map hook moved it to the block's device.
            h_in = (args[0] if args else kwargs["hidden_states"]).to(out.device)
            return replace_first(output, torch.where(w.to(out.device), h_in, out))

        return models.blocks(model)[layer].register_forward_hook(
            hook, with_kwargs=True, prepend=True
        )
    attn_mods, mlp_mods = models.sublayer_modules(model)
    mod = {"attn": attn_mods, "mlp": mlp_mods}[part][layer]

    def zero(module, args, output):
        out = first(output)
        ww = w.reshape(-1, 1) if out.dim() == 2 else w  # a module on flattened tokens (OPT's fc2)
        return replace_first(output, torch.where(ww.to(out.device), torch.zeros_like(out), out))

    return mod.register_forward_hook(zero, prepend=True)
