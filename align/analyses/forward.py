"""One full forward of a CausalLM with align's hooks: residuals, sublayer outputs, logits;
and the finiteness check every analysis runs on what it reads or computes.

A checkpoint with a NaN weight, or a float16 run that overflows, gives NaN/inf residuals; an
analysis that aggregates them writes NaN-filled results with exit 0. So every forward checks
what it captured, once per batch: one min/max reduction per array (no copy of the array, exact
for every float dtype) and one host synchronisation for all of them. Only when that finds
something are the details computed (which array, which prompt and position, how many values),
restricted to real tokens: padding slots are never measured, so NaN there is not an error.
"""

from __future__ import annotations

import numpy as np

from align import models
from align.errors import NonFiniteError
from align.hooks import capture

_ADVICE = (
    "a weight of the checkpoint is NaN/inf, or its dtype overflows: check the checkpoint's weights, "
    "or run with `dtype` float32; nothing was written"
)


def forward(
    model, batch: tuple, boundaries=(), layers=(), logits: bool = True, prompts=None, run: str = ""
) -> dict:
    """Run `model` on a right-padded batch = (input_ids, attention_mask, position_ids), all
    tensors (B, T).

    Returns {"resid": {b: h_b}, "attn": {l: a_l}, "mlp": {l: m_l}, "logits": (B, T, V) or
    None}, tensors (B, T, d_model) in the model's dtype on its device. Hooks installed before
    this call (an intervention) run first and are seen by the capture.

    Every returned array is checked for NaN/±inf at real tokens (`check_batch`); `prompts`
    (B,) are the rows' prompt indices and `run` names the run ("clean run", "run skipping
    ..."), both only for the message of the NonFiniteError raised."""
    import torch

    input_ids, attention_mask, position_ids = batch
    with (
        capture.capture(model, boundaries, layers, stop_early=False) as out,
        torch.inference_mode(),
    ):
        kw = dict(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=False,
        )
        if logits:
            out["logits"] = model(**kw).logits
        else:
            models.base_model(model)(**kw)
            out["logits"] = None
    check_batch(out, attention_mask, prompts, run)
    return out


def _ordered(out) -> list[tuple[str, object]]:
    """(label, tensor) of a forward's arrays in the order the model computes them, so the first
    one reported is where the non-finite values appeared (later arrays inherit them)."""
    items = []
    for b, t in out.get("resid", {}).items():
        items.append(((b, 0), f"the residual at boundary {b}", t))
    for kind, rank, name in (("attn", 1, "attention output"), ("mlp", 2, "MLP output")):
        for l, t in out.get(kind, {}).items():
            items.append(((l, rank), f"the {name} of layer {l}", t))
    if out.get("logits") is not None:
        items.append(((float("inf"), 0), "the output logits", out["logits"]))
    return [(label, t) for _, label, t in sorted(items, key=lambda x: x[0])]


def finite_flags(tensors) -> list[bool]:
    """True per tensor when it holds no NaN/±inf: one aminmax reduction each (min and max
    propagate NaN and show ±inf; no temporary of the tensor's size), one host sync in all."""
    import torch

    tensors = list(tensors)
    if not tensors:
        return []
    dev = tensors[0].device
    flags = [
        torch.isfinite(torch.stack(torch.aminmax(t))).all().to(dev)
        if t.numel()
        else torch.ones((), dtype=torch.bool, device=dev)
        for t in tensors
    ]
    return torch.stack(flags).tolist()


def _counts(t, mask):
    """Per-token (nan, inf) counts of t (..., d) at the positions `mask` (...) allows."""
    import torch

    nan = torch.isnan(t).sum(-1)
    inf = torch.isinf(t).sum(-1)
    if mask is not None:
        m = mask.to(nan.device).bool()
        nan, inf = nan * m, inf * m
    return nan.cpu().numpy(), inf.cpu().numpy()


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _how_many(nan: int, inf: int) -> str:
    return " and ".join(
        p for p in (f"{nan:,} NaN" if nan else "", f"{inf:,} ±inf" if inf else "") if p
    ) + (" value" if nan + inf == 1 else " values")


def describe(label: str, nan, inf, where, scope: str) -> str:
    """One-line account of the non-finite values of one array: nan, inf are per-token counts
    (n_tokens,) (numpy), where(k) -> (prompt, position) of token k ((None, k) when tokens
    belong to no prompt)."""
    bad = np.flatnonzero((nan + inf) > 0)
    first = min(where(int(k)) for k in bad)
    at = f"token {first[1]}" if first[0] is None else f"prompt {first[0]}, position {first[1]}"
    return f"{label} holds {_how_many(int(nan.sum()), int(inf.sum()))} at {_plural(len(bad), 'token')}{scope} (first: {at})"


def check_batch(out, attention_mask, prompts=None, run: str = "") -> None:
    """Raise NonFiniteError when any array of a forward (`forward`'s dict) holds NaN/±inf at a
    real token (attention_mask (B, T) == 1), naming the first such array in compute order,
    the prompt and position of its first bad token, and the counts; later arrays that hold
    them too are counted."""
    items = _ordered(out)
    flags = finite_flags(t for _, t in items)
    if all(flags):
        return
    B, T = attention_mask.shape
    prompts = list(range(B)) if prompts is None else [int(p) for p in prompts]
    bad = []
    for (label, t), ok in zip(items, flags):
        if ok:
            continue
        nan, inf = _counts(t, attention_mask)  # (B, T): padding zeroed
        if (nan + inf).sum():
            bad.append((label, nan.ravel(), inf.ravel()))
    if not bad:
        return  # NaN only in padding slots, which no analysis reads
    label, nan, inf = bad[0]
    scope = f" of a batch of {_plural(len(set(prompts)), 'prompt')}" + (
        f" in the {run}" if run else ""
    )
    msg = describe(label, nan, inf, lambda k: (prompts[k // T], k % T), scope)
    if len(bad) > 1:
        msg += f", and {_plural(len(bad) - 1, 'later array')} too (up to {bad[-1][0]})"
    raise NonFiniteError(f"the model computed non-finite values: {msg}: {_ADVICE}")


def check_tokens(label: str, t, where, scope: str = "", advice: str = _ADVICE) -> None:
    """NonFiniteError when t (n_tokens, d) (a tensor or array) holds NaN/±inf; where(k) ->
    (prompt, position) of token k. One reduction and one host sync when all is finite."""
    import torch

    t = torch.as_tensor(t)
    if finite_flags([t])[0]:
        return
    nan, inf = _counts(t.reshape(t.shape[0], -1), None)
    raise NonFiniteError(f"non-finite values: {describe(label, nan, inf, where, scope)}: {advice}")


def check_values(label: str, values, where, scope: str = "", advice: str = _ADVICE) -> None:
    """NonFiniteError when per-token host values (n_tokens,) or (k, n_tokens) hold NaN/±inf
    (a metric computed from the arrays); where(k) -> (prompt, position) of token k."""
    v = np.asarray(values, np.float64)
    if np.isfinite(v).all():
        return
    v = v.reshape(-1, v.shape[-1])
    nan, inf = np.isnan(v).sum(0), np.isinf(v).sum(0)
    raise NonFiniteError(
        f"non-finite values computed: {describe(label, nan, inf, where, scope)}: {advice}"
    )
