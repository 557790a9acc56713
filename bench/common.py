"""What the bench scripts build alike: a byte-level BPE tokenizer trained on seeded random
words, and a random-weight model saved beside it (Qwen2 by default; any family of
`FAMILY_OPTIONS` from transformers' own config class at the same widths). Imported by
bench/extract.py, bench/padding.py, bench/live.py, bench/live_pairing.py and bench/gpu_check.py
(run as scripts, so this folder is on sys.path). Also the live benchmarks' floor: `widths`,
`matmul_rate` and `bare_forward`."""

from __future__ import annotations

import random
import time


def build_tokenizer(folder: str, vocab: int, seed: int = 0):
    """A byte-level BPE trained on seeded random words, saved into `folder`; returns (tokenizer, words)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(seed)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
        for _ in range(3000)
    ]
    text = [" ".join(rng.choice(words) for _ in range(200)) for _ in range(200)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(
        text,
        trainers.BpeTrainer(
            vocab_size=vocab,
            special_tokens=["<|endoftext|>"],
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    fast.save_pretrained(folder)
    return fast, words


# model_type -> what its config needs beyond vocab, hidden, heads, intermediate and layers (as
# transformers names them), given the widths: each family's own options at its defaults
# (Gemma 2's soft-capping, and so its eager attention; GPT-NeoX's parallel residual), the head
# width hidden / heads as Qwen2 has it; mixtures of experts with 8 experts, 2 per token.
_KV = lambda w: dict(num_key_value_heads=w["kv_heads"])  # noqa: E731
_HEAD = lambda w: dict(_KV(w), head_dim=w["hidden"] // w["heads"])  # noqa: E731
FAMILY_OPTIONS = {
    "qwen2": lambda w: dict(_KV(w), tie_word_embeddings=True),
    "qwen3": _HEAD,
    "llama": _KV,
    "mistral": _KV,
    "mixtral": lambda w: dict(_KV(w), num_local_experts=8, num_experts_per_tok=2),
    "gemma": _HEAD,
    "gemma2": lambda w: dict(_HEAD(w), query_pre_attn_scalar=w["hidden"] // w["heads"]),
    "gemma3_text": lambda w: dict(_HEAD(w), query_pre_attn_scalar=w["hidden"] // w["heads"]),
    "gpt_neox": lambda w: dict(
        use_parallel_residual=True, rotary_pct=0.25
    ),  # Pythia's; no grouped KV heads
    "gpt2": lambda w: dict(n_inner=w["intermediate"]),
    "phi3": _KV,
    "olmo2": _KV,
    "granite": _KV,
    "cohere": _KV,
    "starcoder2": _KV,
    "qwen3_moe": lambda w: dict(
        _HEAD(w),
        num_experts=8,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        moe_intermediate_size=w["intermediate"] // 4,
    ),
}


def family_config(
    family: str,
    vocab: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    intermediate: int,
    layers: int,
    max_positions: int = 4096,
    **extra,
):
    """transformers' config class of `family` (a FAMILY_OPTIONS key) at these widths; a
    default special-token id beyond the vocabulary is dropped (an embedding's padding row
    must lie inside it)."""
    from transformers import AutoConfig

    if family not in FAMILY_OPTIONS:
        raise ValueError(
            f"family {family!r} is not one the bench builds: {', '.join(FAMILY_OPTIONS)}"
        )
    widths = dict(
        vocab=vocab,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        intermediate=intermediate,
        layers=layers,
    )
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # StarCoder2's own defaults put its BOS beyond its vocabulary: not ours to print
    try:
        defaults = AutoConfig.for_model(family)
    finally:
        hf_logging.set_verbosity(verbosity)
    ids = {
        k: None
        for k in ("bos_token_id", "eos_token_id", "pad_token_id")
        if isinstance(getattr(defaults, k, None), int) and getattr(defaults, k) >= vocab
    }
    return AutoConfig.for_model(
        family,
        vocab_size=vocab,
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        max_position_embeddings=max_positions,
        **{**FAMILY_OPTIONS[family](widths), **ids, **extra},
    )


def build_model(
    folder: str,
    family: str,
    vocab: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    intermediate: int,
    layers: int,
):
    """A model of `family` at these widths with random weights (torch seed 0), saved into
    `folder` with the tokenizer of `build_tokenizer(folder, vocab)`; returns the tokenizer's
    training words."""
    import torch
    from transformers import AutoModelForCausalLM

    _, words = build_tokenizer(folder, vocab)
    config = family_config(family, vocab, hidden, heads, kv_heads, intermediate, layers)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    return words


def build_qwen2(
    folder: str, vocab: int, hidden: int, heads: int, kv_heads: int, intermediate: int, layers: int
):
    """`build_model` of a Qwen2 (tied embeddings)."""
    return build_model(folder, "qwen2", vocab, hidden, heads, kv_heads, intermediate, layers)


def widths(spec: str) -> tuple:
    """ "6x256" -> (6, 256): layers and d_model."""
    layers, d = (int(x) for x in spec.split("x"))
    return layers, d


def matmul_rate(n: int, p: int, q: int, seconds: float = 3.0) -> float:
    """float64 flop/s of torch's addmm on the statistics' own shape: (n, p)ᵀ (n, q)."""
    import torch

    X, Y = torch.randn(n, p, dtype=torch.float64), torch.randn(n, q, dtype=torch.float64)
    acc = torch.zeros(p, q, dtype=torch.float64)
    acc.addmm_(X.T, Y)
    k, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        acc.addmm_(X.T, Y)
        k += 1
    return 2.0 * n * p * q * k / (time.perf_counter() - t0)


def bare_forward(spec, batches, table) -> float:
    """Seconds of the bare decoder forward (`model.model`: no hooks, no unembedding) of the
    model of `spec` (align.models.ModelSpec) over `batches` of `table` (one warm-up batch first)."""
    import torch

    from align import models
    from align.extraction.batches import pad

    model, _ = models.load_model(spec)
    base = models.base_model(model)

    def run(b):
        ids, mask = pad([table.sequences[s] for s in b.members], "cpu")
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            base(input_ids=ids, attention_mask=mask, position_ids=position_ids, use_cache=False)

    run(batches[0])
    t = time.perf_counter()
    for b in batches:
        run(b)
    return time.perf_counter() - t
