"""The only place that knows model architectures (docs/methods.md, Notation).

For each family: where the decoder blocks, the embedding, the final norm and the unembedding
live, which submodule's output is "what the attention / MLP sublayer adds to the residual",
and what the model does between the last block and its logits (the lens head). The table is
declarative; what cannot be a table entry (a multiplier, a cap, a configuration under which
the sublayers do not add) is one named function per family, below the table.

    h_0      input of block 0 (the embedding output, scaled or with positions added as the
             model does: Gemma's √d, GPT-2's and OPT's learned positions)
    h_{l+1}  output of block l, before the final norm
    a_l, m_l what attention and the MLP add: h_{l+1} = h_l + a_l + m_l, for sequential and
             parallel blocks alike (both sublayers read h_l in GPT-NeoX, GPT-J, Phi, Falcon,
             Cohere), times the family's residual multiplier (Granite)
    lens     head(h) = finish(unembed(after_norm(final_norm(h)))): head(h_L) is the model's
             own logits

A model_type not in the table is discovered and proved by align.models.discovery.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from align.errors import InputError, ModelError


@dataclass(frozen=True)
class Family:
    """Where one architecture family keeps its parts (attribute paths from the CausalLM)."""

    name: str
    model_types: tuple[str, ...]
    blocks: str = "model.layers"
    embed: str = "model.embed_tokens"
    final_norm: str = "model.norm"
    unembed: str = "lm_head"
    # Submodule of a block whose OUTPUT is exactly what is added to the residual (None: the
    # block has no attention and MLP sublayers, e.g. a state-space mixer).
    attn_out: str | None = "self_attn"
    mlp_out: str | None = "mlp"
    # Modules applied after the final norm and before the unembedding (absent ones skipped).
    after_norm: tuple[str, ...] = ()
    # config -> the factor on a sublayer's output in the residual add (None: 1).
    residual_scale: Callable[[Any], float] | None = None
    # (config, logits) -> the model's own last step on its logits (None: none).
    finish: Callable[[Any, Any], Any] | None = None
    # config -> None, or why h_{l+1} = h_l + a_l + m_l does not hold for this configuration.
    not_additive: Callable[[Any], str | None] | None = None
    # The block changes a sublayer's returned tensor in place afterwards: capture a copy.
    copy_sublayers: bool = False
    # How the family was found: "table", "asserted" (--family) or "discovered".
    found: str = "table"
    notes: str = ""


# ----------------------------------------------------------------------------- per-family steps


def granite_residual_scale(config) -> float:
    """Granite adds `residual_multiplier` × each sublayer's output (its embedding_multiplier
    scales h_0 inside the model, before block 0, so h_0 needs nothing here)."""
    return float(config.residual_multiplier)


def granite_finish(config, logits):
    """Granite divides its logits by `logits_scaling`."""
    return logits / config.logits_scaling


def cohere_finish(config, logits):
    """Cohere multiplies its logits by `logit_scale`."""
    return logits * config.logit_scale


def gemma_softcap(config, logits):
    """Gemma 2/3 soft-cap the final logits: cap · tanh(logits / cap), cap = final_logit_softcapping."""
    cap = getattr(config, "final_logit_softcapping", None)
    if cap is None:
        return logits
    return (logits / cap).tanh() * cap


def opt_not_additive(config) -> str | None:
    """OPT with post-norm blocks (do_layer_norm_before=False, as in OPT-350m) normalises the
    sum after each add: the residual is not a sum of sublayer outputs."""
    if getattr(config, "do_layer_norm_before", True):
        return None
    return "its blocks normalise after the residual add (do_layer_norm_before=False)"


FAMILIES: tuple[Family, ...] = (
    Family("llama", ("llama",), notes="pre-norm; Llama 3's tokenizer prepends BOS"),
    Family("mistral", ("mistral", "ministral"), notes="pre-norm, sliding-window attention"),
    Family(
        "mixtral",
        ("mixtral",),
        notes="pre-norm; the MLP is a mixture of experts (m_l: the experts' weighted sum)",
    ),
    Family("qwen2", ("qwen2",), notes="pre-norm; Qwen's tokenizer adds no BOS"),
    Family(
        "qwen2_moe",
        ("qwen2_moe",),
        notes="pre-norm; m_l: routed experts plus the gated shared expert",
    ),
    Family("qwen3", ("qwen3",), notes="pre-norm with q/k norms"),
    Family("qwen3_moe", ("qwen3_moe",), notes="pre-norm; mixture-of-experts MLP"),
    Family(
        "gemma", ("gemma",), notes="pre-norm; h_0 is the embedding times √d_model; tied unembedding"
    ),
    Family(
        "gemma2",
        ("gemma2", "gemma3_text"),
        # Gemma 2/3 normalise each sublayer's output before the add: a_l is the output of
        # post_attention_layernorm(attn(·)), m_l of post_feedforward_layernorm(mlp(·)).
        attn_out="post_attention_layernorm",
        mlp_out="post_feedforward_layernorm",
        finish=gemma_softcap,
        notes="pre- and post-sublayer norms; h_0 scaled by √d_model; final logits soft-capped",
    ),
    Family(
        "gpt2",
        ("gpt2", "gpt_bigcode"),
        blocks="transformer.h",
        embed="transformer.wte",
        final_norm="transformer.ln_f",
        attn_out="attn",
        notes="learned position embeddings added before block 0; tied unembedding",
    ),
    Family(
        "gpt_neox",
        ("gpt_neox",),
        blocks="gpt_neox.layers",
        embed="gpt_neox.embed_in",
        final_norm="gpt_neox.final_layer_norm",
        attn_out="attention",
        notes="parallel residual when use_parallel_residual (Pythia): both sublayers read h_l",
    ),
    Family(
        "gptj",
        ("gptj",),
        blocks="transformer.h",
        embed="transformer.wte",
        final_norm="transformer.ln_f",
        attn_out="attn",
        notes="parallel block: one norm, both sublayers read it",
    ),
    Family(
        "phi",
        ("phi",),
        final_norm="model.final_layernorm",
        notes="parallel block: both sublayers read one norm of h_l",
    ),
    Family("phi3", ("phi3",), notes="pre-norm"),
    Family(
        "olmo2",
        ("olmo2", "olmo3", "exaone4"),
        # OLMo 2 normalises the sublayer outputs before the add: a_l is the output of
        # post_attention_layernorm(attn(h_l)), m_l of post_feedforward_layernorm(mlp(...)).
        attn_out="post_attention_layernorm",
        mlp_out="post_feedforward_layernorm",
        notes="normalises sublayer outputs before the residual add",
    ),
    Family("olmo", ("olmo",), notes="pre-norm; the norms have no weights"),
    Family("olmoe", ("olmoe",), notes="pre-norm; mixture-of-experts MLP"),
    Family("starcoder2", ("starcoder2",), notes="pre-norm with biases; tied unembedding"),
    Family("smollm3", ("smollm3",), notes="pre-norm; no rotary embedding in every fourth layer"),
    Family("helium", ("helium",), notes="pre-norm"),
    Family(
        "deepseek_v3",
        ("deepseek_v3",),
        notes="multi-head latent attention; mixture-of-experts MLP after the first dense blocks",
    ),
    Family(
        "gpt_oss",
        ("gpt_oss",),
        notes="alternating sliding and full attention with sinks; mixture-of-experts MLP",
    ),
    Family(
        "falcon",
        ("falcon",),
        blocks="transformer.h",
        embed="transformer.word_embeddings",
        final_norm="transformer.ln_f",
        attn_out="self_attention",
        copy_sublayers=True,
        notes="parallel attention (the block adds the attention output into the MLP's tensor in place)",
    ),
    Family(
        "stablelm", ("stablelm",), notes="pre-norm; parallel residual when use_parallel_residual"
    ),
    Family(
        "granite",
        ("granite",),
        residual_scale=granite_residual_scale,
        finish=granite_finish,
        notes="residual_multiplier on each add, embedding_multiplier on h_0, logits / logits_scaling",
    ),
    Family(
        "granitemoe",
        ("granitemoe",),
        mlp_out="block_sparse_moe",
        residual_scale=granite_residual_scale,
        finish=granite_finish,
        notes="Granite with a mixture-of-experts MLP",
    ),
    Family(
        "cohere",
        ("cohere", "cohere2"),
        finish=cohere_finish,
        notes="parallel block: one norm, both sublayers read it; logits × logit_scale; tied unembedding",
    ),
    Family(
        "opt",
        ("opt",),
        blocks="model.decoder.layers",
        embed="model.decoder.embed_tokens",
        final_norm="model.decoder.final_layer_norm",
        mlp_out="fc2",
        after_norm=("model.decoder.project_out",),
        not_additive=opt_not_additive,
        notes="learned positions added before block 0; m_l is fc2's output; project_out after the final norm",
    ),
)

BY_TYPE = {t: f for f in FAMILIES for t in f.model_types}
NAMES = tuple(f.name for f in FAMILIES)
SUPPORTED = ", ".join(BY_TYPE)


def get_path(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def by_name(name: str) -> Family:
    """The family called `name` (what `--family NAME` asserts), or an InputError naming them."""
    for fam in FAMILIES:
        if fam.name == name:
            return fam
    raise InputError(f"`family` {name!r} is not a family align knows: {', '.join(NAMES)}")


def for_config(config, asserted: str | None = None) -> Family | None:
    """The family a config is read with: the one asserted for it (`--family NAME`), else the
    table's for its model_type, else None (such a model is discovered from its modules)."""
    if asserted:
        return replace(by_name(asserted), found="asserted")
    return BY_TYPE.get(getattr(config, "model_type", None))


# The family each built model is read with, by id(model) (a weak reference checks the id still
# names that model): set by `assign` when a model is loaded with --family or discovered.
_BUILT: dict[int, tuple[Any, Family]] = {}


def check_parts(model, family: Family, name: str) -> None:
    """Refuse `family` for `model` (checkpoint `name`) unless every part it names is there:
    the blocks, embedding, final norm, unembedding, and the first block's sublayers."""
    paths = (family.blocks, family.embed, family.final_norm, family.unembed)
    missing = next((p for p in paths if not _has(model, p)), None)
    if missing is None:
        block = get_path(model, family.blocks)[0]
        subs = (p for p in (family.attn_out, family.mlp_out) if p and not _has(block, p))
        missing = next((f"{family.blocks}.0.{p}" for p in subs), None)
    if missing is not None:
        raise ModelError(
            f"{name!r} (model_type {getattr(model.config, 'model_type', '?')!r}) has no module "
            f"{missing!r}, where family {family.name} keeps a part: the `family` asserted is not "
            f"this model's; leave `family` out, or give the family of this architecture "
            f"({', '.join(NAMES)})"
        )


def _has(obj, path: str) -> bool:
    try:
        get_path(obj, path)
    except AttributeError:
        return False
    return True


def assign(model, family: Family) -> None:
    import weakref

    for k in [k for k, (ref, _) in _BUILT.items() if ref() is None]:
        del _BUILT[k]
    _BUILT[id(model)] = (weakref.ref(model), family)


def of(model) -> Family:
    """The family of a built CausalLM: the one assigned at load (asserted or discovered), else the table's."""
    held = _BUILT.get(id(model))
    if held is not None and held[0]() is model:
        return held[1]
    fam = for_config(model.config)
    if fam is None:
        raise ModelError(
            f"model_type {getattr(model.config, 'model_type', '?')!r} is not in align's family table and "
            "this model was not loaded by align.models.load_model, which discovers and proves its parts"
        )
    return fam


def blocks(model) -> list:
    """The decoder blocks of a CausalLM, in order (layer 0..L-1)."""
    return list(get_path(model, of(model).blocks))


def final_norm(model):
    return get_path(model, of(model).final_norm)


def unembed(model):
    return get_path(model, of(model).unembed)


def base_model(model):
    """The decoder without the LM head (what `extract` runs: no unembedding is computed)."""
    return get_path(model, of(model).blocks.rsplit(".", 1)[0])


def residual_scale(model) -> float:
    fam = of(model)
    return 1.0 if fam.residual_scale is None else fam.residual_scale(model.config)


def sublayers_refused(model) -> str | None:
    """None when h_{l+1} = h_l + a_l + m_l holds for this model, else why (one line)."""
    return refusal(of(model), model.config)


def refusal(fam: Family, config) -> str | None:
    """None when a model of `config` read as `fam` has sublayer outputs that add up to each
    block's change, else why (one line naming the family): known before the weights load."""
    if fam.attn_out is None or fam.mlp_out is None:
        return f"{fam.name} ({config.model_type}) blocks have no attention and MLP sublayers align can name"
    reason = fam.not_additive(config) if fam.not_additive else None
    return f"{fam.name} ({config.model_type}): {reason}" if reason else None


def sublayer_modules(model) -> tuple[list, list]:
    """Per block, the module whose output is a_l and the one whose output is m_l (times
    `residual_scale`); an InputError when the family has none or they do not add."""
    reason = sublayers_refused(model)
    if reason:
        raise InputError(f"sublayer outputs (attn, mlp) are not defined for this model: {reason}")
    fam = of(model)
    bl = blocks(model)
    return [get_path(b, fam.attn_out) for b in bl], [get_path(b, fam.mlp_out) for b in bl]


def checkpoint_keys(model_type: str, config=None) -> dict[str, str]:
    """Parameter-name prefixes inside a checkpoint's safetensors, for reading single tensors
    (final norm, modules after it, unembedding, embedding) without loading the blocks."""
    fam = (for_config(config) if config is not None else None) or BY_TYPE.get(model_type)
    if fam is None:
        raise ModelError(
            f"model_type {model_type!r} is not in align's family table: the lens from a store needs "
            f"the family's head ({SUPPORTED}); run `align lens MODEL CORPUS` on the model instead"
        )
    return {
        "final_norm": fam.final_norm,
        "unembed": fam.unembed,
        "embed": fam.embed,
        "after_norm": fam.after_norm,
    }


@dataclass
class Head:
    """h (..., d_model) -> the model's logits: final norm, the modules after it, unembedding,
    the family's last step (a cap or a scale). `head(h_L)` equals the model's own logits."""

    config: Any
    norm: Any
    unembed: Any
    after: tuple = ()
    finish: Callable | None = None
    modules: tuple = field(init=False)

    def __post_init__(self):
        self.modules = tuple(m for m in (self.norm, *self.after, self.unembed) if m is not None)

    def pre_unembed(self, h):
        """What the unembedding reads: the final norm and the modules after it applied to h."""
        for m in self.modules[:-1]:
            h = m(h)
        return h

    def __call__(self, h):
        logits = self.unembed(self.pre_unembed(h))
        return logits if self.finish is None else self.finish(self.config, logits)

    @property
    def parameter(self):
        """One parameter of the unembedding: its device and dtype are the head's."""
        return next(iter(self.unembed.parameters()))


def head(model) -> Head:
    fam = of(model)
    after = tuple(m for m in (_optional(model, p) for p in fam.after_norm) if m is not None)
    return Head(model.config, _optional(model, fam.final_norm), unembed(model), after, fam.finish)


def _optional(obj, path):
    """The module at `path`, or None where the model sets it to None (OPT without project_out)."""
    try:
        return get_path(obj, path)
    except AttributeError:
        return None


def record(fam: Family) -> dict:
    """What a store's or result's provenance records about the family a model is read with: its
    name, how it was found (table, asserted with --family, discovered), and the parts' paths."""
    return {
        "name": fam.name,
        "found": fam.found,
        "blocks": fam.blocks,
        "final_norm": fam.final_norm,
        "unembed": fam.unembed,
        "attn_out": fam.attn_out,
        "mlp_out": fam.mlp_out,
        "after_norm": list(fam.after_norm),
        "residual_scale": fam.residual_scale.__name__ if fam.residual_scale else None,
        "finish": fam.finish.__name__ if fam.finish else None,
    }
