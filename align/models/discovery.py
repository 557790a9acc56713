"""Reading a model the family table does not list: discovery of its parts, and the probe forward
that proves them (or a table family asserted with --family) before anything is written.

`discover` finds, on a built model (or an empty meta-device build of its config), the one
ModuleList of `num_hidden_layers` blocks, the final norm beside it, the output embeddings and
the sublayer candidates by name; `verify` runs one short forward and checks captured h_b
against `output_hidden_states`, the head against the logits, causality, and which sublayer
candidates add up to each block's change (docs/families.md).
"""

from __future__ import annotations

from dataclasses import replace

from align.errors import ModelError
from align.models.families import (
    SUPPORTED,
    Family,
    assign,
    blocks,
    for_config,
    get_path,
    head,
    of,
    residual_scale,
)


def of_config(config, asserted: str | None = None, trust_remote_code: bool = False) -> Family:
    """The family a model of `config` will be read with, before its weights load: a table or
    asserted family, or the one `discover` finds on an empty (meta-device) build of it."""
    fam = for_config(config, asserted)
    if fam is not None:
        return fam
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # transformers' advice on building an encoder as a decoder is not ours to print
    try:
        with init_empty_weights(include_buffers=False):
            skeleton = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    except (ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(
            f"model_type {getattr(config, 'model_type', '?')!r} is not a causal language model "
            f"transformers can build: {first}"
        ) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    return discover(skeleton)


NORM_NAMES = ("norm", "final_norm", "ln_f", "final_layer_norm", "final_layernorm", "norm_f")
ATTN_NAMES = ("self_attn", "attention", "attn", "self_attention")
MLP_NAMES = ("mlp", "feed_forward", "ffn", "block_sparse_moe", "moe")
POST_NORMS = (("post_attention_layernorm", "post_feedforward_layernorm"),)


def _path_of(model, module) -> str | None:
    return next((n for n, m in model.named_modules() if m is module), None)


def discover(model) -> Family:
    """Find the parts of a CausalLM whose model_type the table lacks: the one ModuleList of
    `num_hidden_layers` blocks, the final norm beside it, the output embeddings; sublayer
    candidates by name (checked by `verify`). A ModelError names what could not be found."""
    import torch

    config = model.config
    mt = getattr(config, "model_type", "?")
    L = getattr(config, "num_hidden_layers", None)
    lists = [
        n
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.ModuleList) and len(m) == L and n
    ]
    if len(lists) != 1:
        raise ModelError(
            f"model_type {mt!r} is not in align's family table and its decoder blocks could not be found: "
            f"{len(lists)} ModuleLists of num_hidden_layers={L} modules ({', '.join(lists) or 'none'}); "
            f"align knows {SUPPORTED}, or assert one with `family` NAME"
        )
    blocks_path = lists[0]
    parent_path = blocks_path.rsplit(".", 1)[0] if "." in blocks_path else ""
    parent = get_path(model, parent_path) if parent_path else model
    norm = next(
        (
            f"{parent_path}.{n}".lstrip(".")
            for n in NORM_NAMES
            if isinstance(getattr(parent, n, None), torch.nn.Module)
        ),
        None,
    )
    out_emb, in_emb = model.get_output_embeddings(), model.get_input_embeddings()
    unembed_path = _path_of(model, out_emb) if out_emb is not None else None
    if norm is None or unembed_path is None:
        missing = " and ".join(
            w
            for w, p in (("the final norm", norm), ("the output embeddings", unembed_path))
            if p is None
        )
        raise ModelError(
            f"model_type {mt!r} is not in align's family table and {missing} could not be found "
            f"(looked beside {blocks_path} for {', '.join(NORM_NAMES)}); the family table knows {SUPPORTED}, "
            "or assert a family with `family` NAME"
        )
    block = get_path(model, blocks_path)[0]
    children = dict(block.named_children())
    attn = next((n for n in ATTN_NAMES if n in children), None)
    mlp = next((n for n in MLP_NAMES if n in children), None)
    return Family(
        f"discovered:{mt}",
        (mt,),
        blocks=blocks_path,
        embed=_path_of(model, in_emb) or "",
        final_norm=norm,
        unembed=unembed_path,
        attn_out=attn,
        mlp_out=mlp,
        found="discovered",
        notes="found by align.models.discovery.discover and checked by verify",
    )


# A float32 probe must agree to rounding; bf16/fp16 weights are probed in float32 arithmetic of
# their own dtype, so the bound scales with the dtype's epsilon.
PROBE_TOKENS = 8


def _tolerance(dtype) -> float:
    import torch

    return 1e-4 if dtype == torch.float32 else 50 * torch.finfo(dtype).eps


def verify(model, sublayers: bool = True) -> dict:
    """One short forward (PROBE_TOKENS tokens) that proves the family's parts on this model:
    captured h_b equal `output_hidden_states` for b < L; the head's input at h_L equals the last
    hidden state; head(h_L) equals the model's logits; the model is causal (a later token
    changes no earlier logit); and, where the family names sublayers,
    h_{l+1} = h_l + a_l + m_l. Returns {check: max abs difference relative to the values'
    scale}; a failed check is a ModelError naming it and by how much. Sublayer candidates of a
    discovered family that do not add are dropped (the family then has none), not failed."""
    import torch

    fam = of(model)
    bl = blocks(model)
    L = len(bl)
    dev = model.get_input_embeddings().weight.device
    vocab = model.get_input_embeddings().weight.shape[0]
    ids = (torch.arange(PROBE_TOKENS, device=dev) * 7919 + 3) % vocab
    ids = ids[None]
    resid, sub = {}, {}

    def keep(store, key):
        def hook(module, args, output):
            t = output[0] if isinstance(output, (tuple, list)) else output
            store[key] = t.detach().clone()

        return hook

    handles = [
        bl[0].register_forward_pre_hook(
            lambda m, a, k: resid.__setitem__(
                0, (a[0] if a else k["hidden_states"]).detach().clone()
            ),
            with_kwargs=True,
        )
    ]
    handles += [b.register_forward_hook(keep(resid, l + 1)) for l, b in enumerate(bl)]
    candidates = []
    if sublayers and fam.attn_out and fam.mlp_out:
        candidates.append((fam.attn_out, fam.mlp_out))
        if fam.found == "discovered":
            candidates += [p for p in POST_NORMS if all(hasattr(bl[0], n) for n in p)]
        for a, m in candidates:
            for l, b in enumerate(bl):
                for n in (a, m):
                    if hasattr(b, n) and (l, n) not in sub:
                        handles.append(get_path(b, n).register_forward_hook(keep(sub, (l, n))))
    try:
        with torch.no_grad():
            out = model(input_ids=ids, output_hidden_states=True, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    hs = out.hidden_states
    tol = _tolerance(resid[0].dtype)
    # Causal: a different last token changes nothing before it (a bidirectional encoder fails).
    other = ids.clone()
    other[0, -1] = (other[0, -1] + 1) % vocab
    with torch.no_grad():
        changed = model(input_ids=other, use_cache=False).logits

    def rel(a, b):
        a, b = a.float(), b.float().to(a.device)
        return float((a - b).abs().max() / b.abs().max().clamp(min=1e-30))

    hd = head(model)
    checks = {
        "h_b = output_hidden_states[b], b < L": lambda: _hidden_states_check(
            model, ids, resid, hs, L, rel
        ),
        "head input at h_L = last hidden state": lambda: (
            rel(hd.pre_unembed(resid[L]), hs[L]) if len(hs) > L else 0.0
        ),
        "head(h_L) = logits": lambda: rel(hd(resid[L]), out.logits),
        "causal: earlier logits do not see a later token": lambda: rel(
            changed[:, :-1], out.logits[:, :-1]
        ),
    }
    found = {}
    for check, measure in checks.items():
        try:
            diff, why = measure(), ""
        except (
            RuntimeError,
            ValueError,
            TypeError,
        ) as e:  # e.g. the parts found do not even fit together
            diff, why = (
                float("inf"),
                f" ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
            )
        if not diff <= tol:  # NaN fails too
            raise ModelError(
                f"{model.config.model_type} ({fam.name}, {fam.found}): the check {check!r} failed by "
                f"{diff:.2g}{why} (relative; at most {tol:.0e} passes): align cannot read this model's "
                "residual stream; assert the right family with `family` NAME, or use a supported model"
            )
        found[check] = diff
    scale = residual_scale(model)
    for a, m in candidates:
        if not all((l, a) in sub and (l, m) in sub for l in range(L)):
            continue
        err = max(
            rel(
                resid[l] + scale * (_as(sub[(l, a)], resid[l]) + _as(sub[(l, m)], resid[l])),
                resid[l + 1],
            )
            for l in range(L)
        )
        if err <= tol:
            found["h_{l+1} = h_l + a_l + m_l"] = err
            if (a, m) != (fam.attn_out, fam.mlp_out):
                assign(model, replace(fam, attn_out=a, mlp_out=m))
            break
    else:
        if (
            candidates
            and fam.found != "discovered"
            and (fam.not_additive is None or not fam.not_additive(model.config))
        ):
            raise ModelError(
                f"{model.config.model_type} ({fam.name}): the check 'h_(l+1) = h_l + a_l + m_l' failed: "
                "the family's sublayer modules do not add up to the residual for this configuration"
            )
        if fam.found == "discovered":
            assign(model, replace(fam, attn_out=None, mlp_out=None))
    return found


def _hidden_states_check(model, ids, resid, hs, L: int, rel) -> float:
    """How far the captured h_0..h_(L-1) are from the model's own `output_hidden_states`.
    Most models list the block inputs h_0..h_(L-1) there; some (Mamba) list the block outputs
    h_1..h_L, and then h_0 is checked against the input embeddings of the ids, which is what
    such a model feeds block 0. The smaller of the two readings is the model's convention."""
    import torch

    standard = max(rel(resid[b], hs[b]) for b in range(L))
    if standard == 0.0 or len(hs) != L + 1:
        return standard
    with torch.no_grad():
        h0 = rel(resid[0], model.get_input_embeddings()(ids))
    shifted = max([h0] + [rel(resid[b + 1], hs[b]) for b in range(L - 1)])
    return min(standard, shifted)


def _as(t, like):
    """A sublayer output in the residual's shape (OPT's fc2 works on flattened tokens)."""
    return t.reshape(like.shape) if t.shape != like.shape else t
