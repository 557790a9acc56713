"""Forward hooks that capture residuals and sublayer outputs (METHODS.md, Notation).

Our own hooks on the decoder blocks, never `output_hidden_states`: its last entry has the
final norm applied, and transformers' own hooks miss blocks swapped after the first forward.

    h_0      input of block 0            (forward pre-hook on block 0)
    h_{l+1}  output of block l           (forward hook on block l; tensor or tuple[0])
    a_l, m_l outputs of the modules `align.models` names as "what is added"
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from align import models


class _StopForward(Exception):
    """Raised by a hook once everything asked for is captured: later blocks need not run."""


def _first(x):
    return x[0] if isinstance(x, (tuple, list)) else x


@contextmanager
def capture(model, boundaries, layers=(), stop_early: bool = True):
    """Install hooks; yields a dict filled at each forward:

    out["resid"][b] = h_b (batch, seq, d_model) for b in `boundaries`,
    out["attn"][l], out["mlp"][l] = a_l, m_l for l in `layers`.

    With `stop_early`, the forward stops after the last block anything was asked of (use
    `run` below, which catches that)."""
    bl = models.blocks(model)
    L = len(bl)
    boundaries, layers = sorted(set(boundaries)), sorted(set(layers))
    out = {"resid": {}, "attn": {}, "mlp": {}}
    last_block = max([b - 1 for b in boundaries] + list(layers) + [-1])
    handles = []

    def pre0(module, args, kwargs):
        h = args[0] if args else kwargs["hidden_states"]
        out["resid"][0] = h
        if stop_early and last_block < 0:
            raise _StopForward

    def block_hook(l):
        def hook(module, args, output):
            if l + 1 in boundaries:
                out["resid"][l + 1] = _first(output)
            if stop_early and l == last_block and l < L - 1:
                raise _StopForward
        return hook

    def sub_hook(kind, l):
        def hook(module, args, output):
            out[kind][l] = _first(output)
        return hook

    try:
        if 0 in boundaries:
            handles.append(bl[0].register_forward_pre_hook(pre0, with_kwargs=True))
        for l, b in enumerate(bl):
            handles.append(b.register_forward_hook(block_hook(l)))
        if layers:
            attn_mods, mlp_mods = models.sublayer_modules(model)
            for l in layers:
                handles.append(attn_mods[l].register_forward_hook(sub_hook("attn", l)))
                handles.append(mlp_mods[l].register_forward_hook(sub_hook("mlp", l)))
        yield out
    finally:
        for h in handles:
            h.remove()


def run(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, boundaries, layers=()):
    """One forward of the decoder (no unembedding) with hooks; returns the captured dict.

    input_ids, attention_mask: (batch, seq), right-padded. Position ids are derived from the
    mask, so padding never shifts rotary positions."""
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    base = models.base_model(model)
    with capture(model, boundaries, layers) as out, torch.inference_mode():
        try:
            base(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False)
        except _StopForward:
            pass
    return out
