"""The model zoo: small models built from a config with seeded random weights and a byte-level
BPE tokenizer trained on a few lines, saved with save_pretrained and read back through the same
code path as a real checkpoint; and the shared corpus. Nothing here imports align.

`make_model(family, path)`: the four main families (Qwen2, Llama, Qwen3, OLMo2; d_model 64,
2 layers, any config field overridable), what the `zoo` fixture serves.
`tiny(model_type, path, n_layers)`: every decoder family align reads, with each family's real
options switched on (`OPTIONS`; d_model 32), for the conformance suite."""

from __future__ import annotations

import math
import random

FAMILIES = ("qwen2", "llama", "qwen3", "olmo2")

_WORDS = (
    "the model reads every layer of the residual stream and a deeper network spreads "
    "the same computation over more layers while the shallow one finishes early in its "
    "depth so we fit linear maps from each layer to each layer and look at the errors"
).split()


def _corpus_text(seed: int = 0, n_docs: int = 12) -> str:
    rng = random.Random(seed)
    docs = []
    for i in range(n_docs):
        n = rng.choice([3, 8, 20, 45, 90, 140])
        lines, words = [], [rng.choice(_WORDS) for _ in range(n)]
        for k in range(0, n, 12):
            lines.append(" ".join(words[k : k + 12]) + rng.choice([".", ",", " 12 + 7 = 19.", "!"]))
        docs.append("\n".join(lines))
    return "\n\n".join(docs) + "\n"


CORPUS_TEXT = _corpus_text()


def make_tokenizer(path: str, bos: bool, vocab_size: int = 300):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([CORPUS_TEXT, _corpus_text(1)], trainer)
    if bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))]
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    fast.save_pretrained(path)
    return fast


def reference_tokenizer(path: str):
    """The tokenizer saved in `path`, read by transformers from its tokenizer.json alone.

    A reference for tests: AutoTokenizer is not one, since for a folder whose config.json says
    qwen2 it builds Qwen2's tokenizer class, which replaces the saved pre-tokenizer with its own
    (other ids for digits and newlines). tests/integration/test_tokenizer_loading.py checks this against the
    `tokenizers` library reading the same file."""
    import json
    import os

    from transformers import PreTrainedTokenizerFast

    with open(os.path.join(path, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    names = {
        k: config[k]
        for k in ("bos_token", "eos_token", "pad_token", "unk_token")
        if isinstance(config.get(k), str)
    }
    return PreTrainedTokenizerFast(tokenizer_file=os.path.join(path, "tokenizer.json"), **names)


def config_for(family: str, vocab_size: int, **overrides):
    """A small config of `family`; overrides set any field (hidden_size, layers, ...)."""
    import transformers as tf

    base = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        rms_norm_eps=1e-6,
        tie_word_embeddings=family in ("qwen2", "qwen3"),
    )
    cls = {
        "qwen2": tf.Qwen2Config,
        "llama": tf.LlamaConfig,
        "qwen3": tf.Qwen3Config,
        "olmo2": tf.Olmo2Config,
        "bert": tf.BertConfig,
    }[family]
    if family == "qwen3":
        base["head_dim"] = 16
    if family == "bert":
        base = dict(
            vocab_size=vocab_size,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
        )
    base.update(overrides)
    if "hidden_size" in overrides and family == "qwen3" and "head_dim" not in overrides:
        base["head_dim"] = base["hidden_size"] // base["num_attention_heads"]
    return cls(**base)


def make_model(
    family: str, path: str, seed: int = 0, vocab_size: int = 300, dtype=None, **overrides
) -> str:
    """Save a seeded random model of `family` and its tokenizer to `path`; returns `path`.

    Weights get std 0.2 instead of the usual 0.02 so that layers change the residual enough
    for the comparisons in the tests to mean something."""
    import torch
    import transformers as tf

    tf.utils.logging.disable_progress_bar()
    tok = make_tokenizer(path, bos=family in ("llama", "olmo2"), vocab_size=vocab_size)
    config = config_for(family, len(tok), **overrides)
    config.bos_token_id = tok.bos_token_id
    config.eos_token_id = tok.eos_token_id
    config.pad_token_id = tok.pad_token_id
    if family == "bert":
        tf.BertModel(config).save_pretrained(path)
        return path
    torch.manual_seed(seed)
    model = _built(tf, config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.2 if p.dim() > 1 and p.shape[-1] <= 256 else 0.05)
    if dtype is not None:
        model = model.to(dtype)
    model.save_pretrained(path)
    return path


# From this width on a model is of a real checkpoint's widths (hundreds of millions of weights).
REAL_WIDTH = 1024


def _built(tf, config):
    """The model of `config`, built. At a real checkpoint's widths transformers' own
    initialisation is skipped (the tied weights tied again after): every weight is drawn again
    by `make_model`, and that first draw took 4 of the 11 s a 14B-width layer took to make. A
    small model keeps it, so its weights stay the ones drawn after it, which the suite's
    numbers were made with."""
    if config.hidden_size < REAL_WIDTH:
        return tf.AutoModelForCausalLM.from_config(config)
    from transformers.initialization import no_init_weights

    with no_init_weights():
        model = tf.AutoModelForCausalLM.from_config(config)
    model.tie_weights()
    return model


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
    "gemma2": dict(
        final_logit_softcapping=3.0,
        attn_logit_softcapping=5.0,
        sliding_window=4,
        query_pre_attn_scalar=8,
    ),
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
    "falcon": dict(
        parallel_attn=True, new_decoder_architecture=False, multi_query=True, num_kv_heads=None
    ),
    "stablelm": dict(use_parallel_residual=True, partial_rotary_factor=0.5),
    "starcoder2": dict(tie_word_embeddings=True),
    "granite": dict(residual_multiplier=0.5, embedding_multiplier=3.0, logits_scaling=4.0),
    "granitemoe": dict(MOE, residual_multiplier=0.5, embedding_multiplier=3.0, logits_scaling=4.0),
    "cohere": dict(logit_scale=0.5),
    "cohere2": dict(logit_scale=0.5, sliding_window=4),
    "deepseek_v3": dict(
        MOE,
        n_routed_experts=4,
        n_shared_experts=1,
        first_k_dense_replace=1,
        kv_lora_rank=8,
        q_lora_rank=8,
        qk_rope_head_dim=4,
        qk_nope_head_dim=4,
        v_head_dim=8,
        n_group=1,
        topk_group=1,
        head_dim=4,
        num_key_value_heads=4,
    ),
    "gpt_oss": dict(MOE, sliding_window=4),
    "smollm3": dict(no_rope_layer_interval=2),
    "helium": {},
    "opt": dict(word_embed_proj_dim=16, ffn_dim=64, do_layer_norm_before=True, enable_bias=True),
}
FAMILY_TYPES = tuple(OPTIONS)


def config(model_type: str, vocab_size: int, n_layers: int = 3, **overrides):
    from transformers import AutoConfig

    want = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=n_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        head_dim=8,
    )
    want.update(OPTIONS.get(model_type, {}))  # a type outside the table: the caller's overrides
    if "n_embd" in want:  # GPT-2-style names
        want.update(n_layer=n_layers)
        for k in (
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "max_position_embeddings",
            "head_dim",
            "intermediate_size",
            "num_key_value_heads",
        ):
            want.pop(k)
    defaults = AutoConfig.for_model(model_type)
    keep = {
        k: v
        for k, v in want.items()
        if v is not None and (hasattr(defaults, k) or k in getattr(defaults, "attribute_map", {}))
    }
    keep.pop("head_dim", None) if model_type in (
        "falcon",
        "gpt_neox",
        "phi",
        "stablelm",
        "opt",
        "cohere",
    ) else None
    keep.update(overrides)
    cfg = AutoConfig.for_model(model_type, **keep)
    if getattr(cfg, "layer_types", None) is not None and len(cfg.layer_types) != n_layers:
        cfg.layer_types = [cfg.layer_types[i % len(cfg.layer_types)] for i in range(n_layers)]
    return cfg


def tiny(model_type: str, path: str, n_layers: int = 3, seed: int = 0, **overrides) -> str:
    """Save a seeded random tiny model of `model_type` and its tokenizer to `path`."""
    import torch
    import transformers as tf

    tf.utils.logging.set_verbosity_error()
    tok = make_tokenizer(
        path,
        bos=model_type in ("llama", "gemma", "gemma2", "gemma3_text", "olmo2", "opt"),
        vocab_size=200,
    )
    cfg = config(model_type, len(tok), n_layers, **overrides)
    cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id = (
        tok.bos_token_id,
        tok.eos_token_id,
        tok.pad_token_id,
    )
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
