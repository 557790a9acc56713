"""Tiny models of every decoder family align reads, with each family's real options switched on,
and where each keeps its parts, written out from transformers' model code independently of
align/models/families.py. Nothing here imports align.

`tiny(model_type, path, n_layers)` saves a seeded random model (weights std 0.2, so that blocks
change the residual enough to matter) and a byte-level BPE tokenizer with save_pretrained.
`ARCH[model_type]` says, for the references in the tests: the blocks, the final norm and the
modules after it, the unembedding, which block children add to the residual, the multiplier on
what they add, and the model's own last step on its logits."""

from __future__ import annotations

import math

# model_type -> config options beyond the common small widths: each family's distinctive
# options on (parallel residuals, soft-capping, multipliers, mixtures of experts, GQA,
# sliding windows, partial rotary, projections around the blocks).
MOE = dict(num_experts=4, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=16)
OPTIONS = {
    "llama": {},
    "mistral": dict(sliding_window=4),
    "ministral": dict(sliding_window=4),
    "mixtral": dict(MOE, sliding_window=None),
    "qwen2": dict(tie_word_embeddings=True),
    "qwen2_moe": dict(MOE, shared_expert_intermediate_size=16, decoder_sparse_step=1),
    "qwen3": dict(tie_word_embeddings=True),
    "qwen3_moe": dict(MOE, decoder_sparse_step=1),
    "gemma": {},
    "gemma2": dict(final_logit_softcapping=3.0, attn_logit_softcapping=5.0, sliding_window=4, query_pre_attn_scalar=8),
    "gemma3_text": dict(final_logit_softcapping=3.0, sliding_window=4, query_pre_attn_scalar=8),
    "gpt2": dict(n_embd=32, n_layer=None, n_head=4, n_positions=128),
    "gpt_bigcode": dict(n_embd=32, n_layer=None, n_head=4, n_positions=128, multi_query=True),
    "gpt_neox": dict(use_parallel_residual=True, rotary_pct=0.5),
    "gptj": dict(n_embd=32, n_layer=None, n_head=4, n_positions=128, rotary_dim=4),
    "phi": dict(partial_rotary_factor=0.5),
    "phi3": {},
    "olmo": {},
    "olmo2": {},
    "olmo3": {},
    "exaone4": {},
    "olmoe": dict(MOE),
    "falcon": dict(parallel_attn=True, new_decoder_architecture=False, multi_query=True, num_kv_heads=None),
    "stablelm": dict(use_parallel_residual=True, partial_rotary_factor=0.5),
    "starcoder2": dict(tie_word_embeddings=True),
    "granite": dict(residual_multiplier=0.5, embedding_multiplier=3.0, logits_scaling=4.0),
    "granitemoe": dict(MOE, residual_multiplier=0.5, embedding_multiplier=3.0, logits_scaling=4.0),
    "cohere": dict(logit_scale=0.5),
    "cohere2": dict(logit_scale=0.5, sliding_window=4),
    "deepseek_v3": dict(MOE, n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=8,
                        q_lora_rank=8, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8, n_group=1, topk_group=1,
                        head_dim=4, num_key_value_heads=4),
    "gpt_oss": dict(MOE, sliding_window=4),
    "smollm3": dict(no_rope_layer_interval=2),
    "helium": {},
    "opt": dict(word_embed_proj_dim=16, ffn_dim=64, do_layer_norm_before=True, enable_bias=True),
}
FAMILY_TYPES = tuple(OPTIONS)


def _gemma_cap(config, logits):
    cap = config.final_logit_softcapping
    return logits if cap is None else (logits / cap).tanh() * cap


def _llama_like(**kw):
    return dict(dict(blocks="model.layers", norm="model.norm", after=(), unembed="lm_head", attn="self_attn", mlp="mlp",
                     scale=None, finish=None), **kw)


# Where each family keeps its parts (read from transformers' modeling_*.py of each family).
ARCH = {t: _llama_like() for t in FAMILY_TYPES}
ARCH.update({
    "gemma2": _llama_like(attn="post_attention_layernorm", mlp="post_feedforward_layernorm", finish=_gemma_cap),
    "gemma3_text": _llama_like(attn="post_attention_layernorm", mlp="post_feedforward_layernorm", finish=_gemma_cap),
    "olmo2": _llama_like(attn="post_attention_layernorm", mlp="post_feedforward_layernorm"),
    "olmo3": _llama_like(attn="post_attention_layernorm", mlp="post_feedforward_layernorm"),
    "exaone4": _llama_like(attn="post_attention_layernorm", mlp="post_feedforward_layernorm"),
    "gpt2": _llama_like(blocks="transformer.h", norm="transformer.ln_f", attn="attn"),
    "gpt_bigcode": _llama_like(blocks="transformer.h", norm="transformer.ln_f", attn="attn"),
    "gptj": _llama_like(blocks="transformer.h", norm="transformer.ln_f", attn="attn"),
    "gpt_neox": _llama_like(blocks="gpt_neox.layers", norm="gpt_neox.final_layer_norm", attn="attention"),
    "phi": _llama_like(norm="model.final_layernorm"),
    "falcon": _llama_like(blocks="transformer.h", norm="transformer.ln_f", attn="self_attention"),
    "granite": _llama_like(scale=lambda c: c.residual_multiplier, finish=lambda c, x: x / c.logits_scaling),
    "granitemoe": _llama_like(mlp="block_sparse_moe", scale=lambda c: c.residual_multiplier,
                              finish=lambda c, x: x / c.logits_scaling),
    "cohere": _llama_like(finish=lambda c, x: x * c.logit_scale),
    "cohere2": _llama_like(finish=lambda c, x: x * c.logit_scale),
    "opt": _llama_like(blocks="model.decoder.layers", norm="model.decoder.final_layer_norm",
                       after=("model.decoder.project_out",), mlp="fc2"),
})


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


def config(model_type: str, vocab_size: int, n_layers: int = 3, **overrides):
    from transformers import AutoConfig

    want = dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=n_layers,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, head_dim=8)
    want.update(OPTIONS.get(model_type, {}))  # a type outside the table: the caller's overrides
    if "n_embd" in want:  # GPT-2-style names
        want.update(n_layer=n_layers)
        for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings", "head_dim",
                  "intermediate_size", "num_key_value_heads"):
            want.pop(k)
    defaults = AutoConfig.for_model(model_type)
    keep = {k: v for k, v in want.items()
            if v is not None and (hasattr(defaults, k) or k in getattr(defaults, "attribute_map", {}))}
    keep.pop("head_dim", None) if model_type in ("falcon", "gpt_neox", "phi", "stablelm", "opt", "cohere") else None
    keep.update(overrides)
    cfg = AutoConfig.for_model(model_type, **keep)
    if getattr(cfg, "layer_types", None) is not None and len(cfg.layer_types) != n_layers:
        cfg.layer_types = [cfg.layer_types[i % len(cfg.layer_types)] for i in range(n_layers)]
    return cfg


def tiny(model_type: str, path: str, n_layers: int = 3, seed: int = 0, **overrides) -> str:
    """Save a seeded random tiny model of `model_type` and its tokenizer to `path`."""
    import torch
    import transformers as tf

    from modelzoo import make_tokenizer

    tf.utils.logging.set_verbosity_error()
    tok = make_tokenizer(path, bos=model_type in ("llama", "gemma", "gemma2", "gemma3_text", "olmo2", "opt"),
                         vocab_size=200)
    cfg = config(model_type, len(tok), n_layers, **overrides)
    cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
    torch.manual_seed(seed)
    model = tf.AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif p.dim() > 1:
                p.normal_(0.0, 0.2 / math.sqrt(max(1.0, p.shape[-1] / 32)))
            else:
                p.normal_(0.0, 0.05)
    model.save_pretrained(path)
    return path
