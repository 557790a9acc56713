"""The hook of integrated gradients (`align.analyses.igrad`): the object of a part at a layer
replaced by an interpolation between a baseline and itself, a leaf that requires grad."""

from __future__ import annotations

from align import models
from align.hooks.outputs import first, replace_first


def install_interpolation(
    model, part: str, layer: int, alpha, obj: str, baseline: str, store: dict
):
    """Forward hook replacing the object of `part` at `layer` (`align.analyses.igrad`) by
    y = b + r·(x − b), r = alpha (B,) per row, y a leaf that requires grad; x − b and y go
    to `store`. `obj` and `baseline` are an igrad variant's (`align.analyses.igrad_options`):
    for part "layer" the residual h_{l+1} ("residual") or what the block adds ("delta"), and
    the baseline b, "position-mean" (the mean over the prompt's positions) or zero."""
    import torch  # imported on first use, as in every module of align: start-up stays light

    def interpolated(x):
        x = x.detach()
        # Each row is the whole prompt (no padding): the mean over dim 1 is over its T positions.
        b = x.mean(1, keepdim=True) if baseline == "position-mean" else torch.zeros_like(x[:, :1])
        r = alpha.to(device=x.device, dtype=x.dtype)[:, None, None]
        y = (b + r * (x - b)).requires_grad_(True)
        store["dx"], store["y"] = x - b, y
        return y

    if part == "layer":

        def hook(module, args, kwargs, output):
            out = first(output)
            if obj == "residual":
                return replace_first(output, interpolated(out))
            # The hook sees the block's input before a device_map hook moved it to the block's device.
            h_in = (args[0] if args else kwargs["hidden_states"]).detach().to(out.device)
            return replace_first(output, h_in + interpolated(out - h_in))

        return models.blocks(model)[layer].register_forward_hook(
            hook, with_kwargs=True, prepend=True
        )
    attn_mods, mlp_mods = models.sublayer_modules(model)
    mod = {"attn": attn_mods, "mlp": mlp_mods}[part][layer]

    def sub(module, args, output):
        x = first(output)
        flat = (
            x.dim() == 2
        )  # a module on flattened tokens (OPT's fc2): interpolate per row as (B, T, d)
        y = interpolated(x.view(len(alpha), -1, x.shape[-1]) if flat else x)
        # A copy, so that a block adding into the returned tensor in place (Falcon) leaves the leaf alone.
        return replace_first(output, (y.view_as(x) if flat else y).clone())

    return mod.register_forward_hook(sub, prepend=True)
