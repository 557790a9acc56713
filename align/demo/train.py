"""Seeded training of small Qwen2-architecture causal LMs from scratch on the generated
arithmetic text, on CPU in float32, cached by the training configuration.

A trained model is a folder made by save_pretrained (safetensors weights, config, the demo's
tokenizer) plus `train.json` (the configuration, its hash, the loss curve, held-out losses
before and after, timings). A folder whose `train.json` carries the same configuration hash
is reused without training.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import time
from dataclasses import dataclass

from align import textfiles
from align.demo import data, tokenizer

TRAIN_FILE = "train.json"


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides the trained weights (the cache key)."""

    n_layers: int
    d_model: int
    n_heads: int = 4
    tokens: int = 250_000  # training tokens seen (batches × batch_size × seq_len, rounded up)
    seq_len: int = 64
    batch_size: int = 16
    lr: float = 3e-3
    warmup_steps: int = 20
    weight_decay: float = 0.01
    min_ops: int = 1
    max_ops: int = 4
    seed: int = 0
    bpe_merges: int = (
        0  # 0: the character tokenizer; else a BPE of this many merges learnt on the training text
    )

    @property
    def steps(self) -> int:
        return math.ceil(self.tokens / (self.batch_size * self.seq_len))

    def key(self) -> str:
        """sha256 of the configuration (and the alphabet), first 12 hex digits."""
        fields = dataclasses.asdict(self)
        if not self.bpe_merges:
            fields.pop("bpe_merges")  # the character models keep their keys
        blob = json.dumps({**fields, "alphabet": data.ALPHABET, "format": 1}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def qwen2_config(cfg: TrainConfig, vocab_size: int):
    """A Qwen2Config of cfg's depth and width: head_dim = d_model / n_heads, grouped-query
    attention with half as many KV heads, MLP width 4·d_model, tied embeddings."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=cfg.d_model,
        intermediate_size=4 * cfg.d_model,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=max(1, cfg.n_heads // 2),
        max_position_embeddings=max(512, cfg.seq_len),
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=0,
        pad_token_id=0,
    )


def _batches(text_ids, cfg: TrainConfig, rng):
    """Random windows of seq_len + 1 tokens from the id stream: (batch, seq_len+1) long."""
    import torch

    n = len(text_ids) - cfg.seq_len - 1
    starts = torch.randint(0, n, (cfg.batch_size,), generator=rng)
    return torch.stack([text_ids[s : s + cfg.seq_len + 1] for s in starts.tolist()])


def _heldout_loss(model, ids) -> float:
    """Mean next-token cross-entropy (nats) over fixed held-out windows `ids` (n, seq_len+1)."""
    import torch

    model.eval()
    with torch.no_grad():
        out = model(input_ids=ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(
            out.logits.reshape(-1, out.logits.shape[-1]), ids[:, 1:].reshape(-1)
        )
    model.train()
    return float(loss)


def trained(folder: str) -> dict | None:
    """The train.json of a finished model folder, or None."""
    p = os.path.join(folder, TRAIN_FILE)
    if not os.path.exists(p):
        return None
    return json.loads(textfiles.read(p, "demo model record"))


def train(cfg: TrainConfig, folder: str, log=print) -> dict:
    """Train a model of `cfg` into `folder` unless `folder` already holds one of the same key.

    AdamW (β = 0.9/0.95, weight decay on matrices only), linear warmup then cosine decay to
    10 % of the peak lr, next-token cross-entropy on random windows of the training stream.
    Seeded: the same cfg gives the same weights on the same torch build and machine, with one
    thread or two (another CPU's kernels change the last digits). Returns train.json.
    """
    import torch
    from transformers import Qwen2ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    done = trained(folder)
    if done is not None and done.get("key") == cfg.key():
        log(
            f"align demo: reusing trained model {folder} (key {cfg.key()}, {done['tokens_seen']:,} tokens)"
        )
        return done
    if os.path.exists(folder):
        shutil.rmtree(folder)
    tmp = folder.rstrip("/") + ".tmp"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    # The training stream: enough characters that windows rarely repeat.
    n_chars = max(4 * cfg.tokens, 20_000)
    text = data.training_text(n_chars, cfg.seed, cfg.min_ops, cfg.max_ops)
    tok = tokenizer.save(tmp, merges=cfg.bpe_merges, text=text[:200_000])
    torch.manual_seed(cfg.seed)
    model = Qwen2ForCausalLM(qwen2_config(cfg, len(tok)))
    model.train()
    ids = torch.tensor(tok(text)["input_ids"], dtype=torch.long)
    held = torch.tensor(
        tok("\n".join(data.heldout_documents(64, cfg.seed + 10_000, 8, cfg.min_ops, cfg.max_ops)))[
            "input_ids"
        ]
    )
    n_w = len(held) // (cfg.seq_len + 1)
    held = held[: n_w * (cfg.seq_len + 1)].view(n_w, cfg.seq_len + 1)[:64]

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )
    steps = cfg.steps

    def lr_at(step):
        if step < cfg.warmup_steps:
            return cfg.lr * (step + 1) / cfg.warmup_steps
        frac = (step - cfg.warmup_steps) / max(1, steps - cfg.warmup_steps)
        return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))

    loss0 = _heldout_loss(model, held)
    rng = torch.Generator().manual_seed(cfg.seed)
    curve, t0, last = [], time.time(), time.time()
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        batch = _batches(ids, cfg, rng)
        logits = model(input_ids=batch[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1)
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 25 == 0 or step == steps - 1:
            curve.append([step, float(loss.detach())])
        if time.time() - last >= 15 or step == steps - 1:
            last = time.time()
            rate = (step + 1) * cfg.batch_size * cfg.seq_len / (last - t0)
            log(
                f"align demo: training {cfg.n_layers}-layer d={cfg.d_model}{' (BPE)' if cfg.bpe_merges else ''}: step {step + 1}/{steps}, "
                f"loss {float(loss.detach()):.3f}, {rate:,.0f} tok/s, ETA {(steps - step - 1) * cfg.batch_size * cfg.seq_len / rate:,.0f} s"
            )
    seconds = time.time() - t0
    loss1 = _heldout_loss(model, held)
    model.eval()
    model.save_pretrained(tmp)
    info = {
        "key": cfg.key(),
        "config": dataclasses.asdict(cfg),
        "steps": steps,
        "tokens_seen": steps * cfg.batch_size * cfg.seq_len,
        "seconds": seconds,
        "tokens_per_second": steps * cfg.batch_size * cfg.seq_len / seconds,
        "heldout_loss_init": loss0,
        "heldout_loss_trained": loss1,
        "loss_curve": curve,
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    with open(os.path.join(tmp, TRAIN_FILE), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1)
    os.rename(tmp, folder)
    log(
        f"align demo: trained {folder}: held-out loss {loss0:.2f} -> {loss1:.2f} in {seconds:,.0f} s"
    )
    return info
