"""What the bench scripts build alike: a byte-level BPE tokenizer trained on seeded random
words, and a random-weight Qwen2 saved beside it. Imported by bench/extract.py,
bench/padding.py and bench/gpu_check.py (run as scripts, so this folder is on sys.path)."""

from __future__ import annotations

import random


def build_tokenizer(folder: str, vocab: int, seed: int = 0):
    """A byte-level BPE trained on seeded random words, saved into `folder`; returns (tokenizer, words)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    text = [" ".join(rng.choice(words) for _ in range(200)) for _ in range(200)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"], show_progress=False,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    fast.save_pretrained(folder)
    return fast, words


def build_qwen2(folder: str, vocab: int, hidden: int, heads: int, kv_heads: int, intermediate: int, layers: int):
    """A Qwen2 of these widths with random weights (torch seed 0), saved into `folder` with the
    tokenizer of `build_tokenizer(folder, vocab)`; returns the tokenizer's training words."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    _, words = build_tokenizer(folder, vocab)
    config = Qwen2Config(vocab_size=vocab, hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         intermediate_size=intermediate, num_hidden_layers=layers, max_position_embeddings=4096,
                         tie_word_embeddings=True)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    return words
