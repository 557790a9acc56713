"""The only place that knows model architectures.

For each supported family it says where the decoder blocks, the embedding, the final norm
and the unembedding live, and which submodule's output is "what the attention / MLP sublayer
adds to the residual" (METHODS.md, Notation). Everything else in align asks this module.

Loading goes through `AutoModelForCausalLM.from_pretrained`, the same call for a small test
model saved with `save_pretrained` and for a real Qwen 2.5 checkpoint on a GPU.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

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
    # Submodule of a block whose OUTPUT is exactly what is added to the residual.
    attn_out: str = "self_attn"
    mlp_out: str = "mlp"
    notes: str = ""  # documentation only


FAMILIES: tuple[Family, ...] = (
    Family("qwen2", ("qwen2",), notes="pre-norm; Qwen's tokenizer adds no BOS"),
    Family("llama", ("llama",), notes="pre-norm; Llama's tokenizer prepends BOS"),
    Family("qwen3", ("qwen3",), notes="pre-norm with q/k norms"),
    Family(
        "olmo2",
        ("olmo2",),
        # OLMo2 normalises the sublayer outputs before the add: a_l is the output of
        # post_attention_layernorm(attn(h_l)), m_l of post_feedforward_layernorm(mlp(...)).
        attn_out="post_attention_layernorm",
        mlp_out="post_feedforward_layernorm",
        notes="normalises sublayer outputs before the residual add",
    ),
)

SUPPORTED = ", ".join(t for f in FAMILIES for t in f.model_types)
DTYPES = ("float32", "bfloat16", "float16")


def family_for(model_type: str) -> Family:
    """The family of a config's `model_type`, or a ModelError naming the supported ones."""
    for fam in FAMILIES:
        if model_type in fam.model_types:
            return fam
    raise ModelError(
        f"model_type {model_type!r} is not supported: align knows {SUPPORTED} "
        "(architectures are described in align/models.py)"
    )


def get_path(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def blocks(model) -> list:
    """The decoder blocks of a CausalLM, in order (layer 0..L-1)."""
    return list(get_path(model, family_for(model.config.model_type).blocks))


def final_norm(model):
    return get_path(model, family_for(model.config.model_type).final_norm)


def unembed(model):
    return get_path(model, family_for(model.config.model_type).unembed)


def base_model(model):
    """The decoder without the LM head (what `extract` runs: no unembedding is computed)."""
    return get_path(model, family_for(model.config.model_type).blocks.rsplit(".", 1)[0])


def sublayer_modules(model) -> tuple[list, list]:
    """Per block, the module whose output is a_l and the one whose output is m_l."""
    fam = family_for(model.config.model_type)
    bl = blocks(model)
    return [get_path(b, fam.attn_out) for b in bl], [get_path(b, fam.mlp_out) for b in bl]


def checkpoint_keys(model_type: str) -> dict[str, str]:
    """Parameter-name prefixes inside a checkpoint's safetensors, for reading single tensors
    (final norm, unembedding, embedding) without loading the blocks."""
    fam = family_for(model_type)
    return {"final_norm": fam.final_norm, "unembed": fam.unembed, "embed": fam.embed}


# ----------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class ModelSpec:
    """Everything that decides which weights run: part of a store's defining options."""

    name: str
    revision: str | None = None
    dtype: str | None = None  # None: bfloat16 where a GPU computes, float32 on CPU
    device: str = "cpu"  # cpu | cuda | auto
    trust_remote_code: bool = False
    allow_pickle_weights: bool = False
    random_init: bool = False
    seed: int = 0

    def resolved_dtype(self) -> str:
        if self.dtype is not None:
            if self.dtype not in DTYPES:
                raise InputError(f"--dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
            return self.dtype
        if self.device == "cuda":
            return "bfloat16"
        if self.device == "auto":
            import torch

            return "bfloat16" if torch.cuda.is_available() else "float32"
        return "float32"


def _looks_local(name: str) -> bool:
    """A path rather than a hub id ("org/name" has exactly one slash and no leading dot)."""
    return os.path.exists(name) or name.startswith((".", "/", "~")) or name.count("/") > 1


def load_config(spec: ModelSpec):
    """The model's config, checked against the supported families."""
    from transformers import AutoConfig

    name = os.path.expanduser(spec.name)
    if _looks_local(name) and not os.path.isdir(name):
        raise InputError(f"model folder {spec.name!r} does not exist: pass a folder made by save_pretrained or a hub id")
    if os.path.isdir(name) and not os.path.isfile(os.path.join(name, "config.json")):
        raise InputError(f"model folder {spec.name!r} has no config.json: pass a folder made by save_pretrained")
    try:
        config = AutoConfig.from_pretrained(name, revision=spec.revision, trust_remote_code=spec.trust_remote_code)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot load the config of {spec.name!r}: {first}") from None
    family_for(getattr(config, "model_type", "?"))
    return config


def config_hash(config) -> str:
    """sha256 of the config's full JSON, keys sorted (what decides the architecture)."""
    d = config.to_dict()
    for k in ("_name_or_path", "transformers_version", "_commit_hash", "dtype", "torch_dtype", "_attn_implementation_autoset"):
        d.pop(k, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()


def load_model(spec: ModelSpec):
    """(model, config) in eval mode, on the asked device and dtype.

    `spec.random_init` builds the same architecture from the config with weights drawn from
    the config's own initialiser under `torch.manual_seed(spec.seed)`: the untrained control.
    """
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    config = load_config(spec)
    dtype = getattr(torch, spec.resolved_dtype())
    if spec.device not in ("cpu", "cuda", "auto"):
        raise InputError(f"--device {spec.device!r} is not one of cpu, cuda, auto")
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda was asked for but torch sees no CUDA device: use --device cpu")
    name = os.path.expanduser(spec.name)
    attn = "sdpa"
    if spec.random_init:
        torch.manual_seed(spec.seed)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attn)
        if spec.device == "cuda":
            model = model.to("cuda")
        elif spec.device == "auto":
            from accelerate import dispatch_model, infer_auto_device_map

            model = dispatch_model(model, infer_auto_device_map(model, no_split_module_classes=model._no_split_modules))
    else:
        kwargs = dict(
            revision=spec.revision,
            dtype=dtype,
            trust_remote_code=spec.trust_remote_code,
            use_safetensors=None if spec.allow_pickle_weights else True,
            attn_implementation=attn,
        )
        if spec.device == "auto":
            kwargs["device_map"] = "auto"
        try:
            model = AutoModelForCausalLM.from_pretrained(name, config=config, **kwargs)
        except (OSError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            hint = "" if spec.allow_pickle_weights else " (align loads only safetensors weights unless --allow-pickle-weights)"
            raise ModelError(f"cannot load the weights of {spec.name!r}: {first}{hint}") from None
        if spec.device == "cuda":
            model = model.to("cuda")
    model.eval()
    model.requires_grad_(False)
    return model, config


def input_device(model):
    """Where token ids must go (the embedding's device, also under device_map)."""
    return model.get_input_embeddings().weight.device


def load_tokenizer(spec: ModelSpec):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(
            os.path.expanduser(spec.name), revision=spec.revision, trust_remote_code=spec.trust_remote_code
        )
    except (OSError, ValueError, KeyError, TypeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot load the tokenizer of {spec.name!r}: {first}") from None
    if not getattr(tok, "is_fast", False):
        raise ModelError(f"the tokenizer of {spec.name!r} is not a fast tokenizer: align needs character offsets")
    return tok
