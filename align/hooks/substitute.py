"""The hook of residual erasure (`align.analyses.erase`): h_b := a value at chosen positions,
on the input of block b."""

from __future__ import annotations

from align import models


def replaced(h, where, value):
    """h (B, T, d_model) with h := value at positions `where` (B, T) bool; value: a (d_model,)
    tensor, or None for the residual itself (the exact-zero check)."""
    import torch  # imported on first use, as in every module of align: start-up stays light

    repl = h if value is None else value.to(device=h.device, dtype=h.dtype).expand_as(h)
    return torch.where(where[..., None].to(h.device), repl, h)


def install_erase(model, boundary: int, where, value):
    """Pre-hook on block `boundary` < L: h_b := value at positions `where` (`replaced`)."""

    def pre(module, args, kwargs):
        h = args[0] if args else kwargs["hidden_states"]
        new = replaced(h, where, value)
        if args:
            return (new,) + tuple(args[1:]), kwargs
        return args, {**kwargs, "hidden_states": new}

    return models.blocks(model)[boundary].register_forward_pre_hook(
        pre, with_kwargs=True, prepend=True
    )
