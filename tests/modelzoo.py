"""Small models of each supported family, built from a config with seeded random weights,
with a byte-level BPE tokenizer trained on a few lines, saved with save_pretrained."""

from __future__ import annotations

import random

FAMILIES = ("qwen2", "llama", "qwen3", "olmo2")

_WORDS = ("the model reads every layer of the residual stream and a deeper network spreads "
          "the same computation over more layers while the shallow one finishes early in its "
          "depth so we fit linear maps from each layer to each layer and look at the errors").split()


def _corpus_text(seed: int = 0, n_docs: int = 12) -> str:
    rng = random.Random(seed)
    docs = []
    for i in range(n_docs):
        n = rng.choice([3, 8, 20, 45, 90, 140])
        lines, words = [], [rng.choice(_WORDS) for _ in range(n)]
        for k in range(0, n, 12):
            lines.append(" ".join(words[k:k + 12]) + rng.choice([".", ",", " 12 + 7 = 19.", "!"]))
        docs.append("\n".join(lines))
    return "\n\n".join(docs) + "\n"


CORPUS_TEXT = _corpus_text()


def make_tokenizer(path: str, bos: bool, vocab_size: int = 300):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([CORPUS_TEXT, _corpus_text(1)], trainer)
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", tok.token_to_id("<s>"))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>")
    fast.save_pretrained(path)
    return fast


def reference_tokenizer(path: str):
    """The tokenizer saved in `path`, read by transformers from its tokenizer.json alone.

    A reference for tests: AutoTokenizer is not one, since for a folder whose config.json says
    qwen2 it builds Qwen2's tokenizer class, which replaces the saved pre-tokenizer with its own
    (other ids for digits and newlines). tests/test_tokenizer_loading.py checks this against the
    `tokenizers` library reading the same file."""
    import json
    import os

    from transformers import PreTrainedTokenizerFast

    with open(os.path.join(path, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    names = {k: config[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token") if isinstance(config.get(k), str)}
    return PreTrainedTokenizerFast(tokenizer_file=os.path.join(path, "tokenizer.json"), **names)


def config_for(family: str, vocab_size: int, **overrides):
    """A small config of `family`; overrides set any field (hidden_size, layers, ...)."""
    import transformers as tf

    base = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                rms_norm_eps=1e-6, tie_word_embeddings=family in ("qwen2", "qwen3"))
    cls = {"qwen2": tf.Qwen2Config, "llama": tf.LlamaConfig, "qwen3": tf.Qwen3Config, "olmo2": tf.Olmo2Config,
           "bert": tf.BertConfig}[family]
    if family == "qwen3":
        base["head_dim"] = 16
    if family == "bert":
        base = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
    base.update(overrides)
    if "hidden_size" in overrides and family == "qwen3" and "head_dim" not in overrides:
        base["head_dim"] = base["hidden_size"] // base["num_attention_heads"]
    return cls(**base)


def make_model(family: str, path: str, seed: int = 0, vocab_size: int = 300, dtype=None, **overrides) -> str:
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
    model = tf.AutoModelForCausalLM.from_config(config)
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
