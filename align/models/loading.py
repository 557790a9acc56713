"""Loading a model: its config (checked against the families), the weights or a random
initialisation, the attention implementation, and the token-id and device checks.

Loading goes through `AutoModelForCausalLM.from_pretrained`, the same call for a small test
model saved with `save_pretrained` and for a real Qwen 2.5 checkpoint on a GPU.
"""

from __future__ import annotations

import hashlib
import json
import os

from align import seeding, textfiles
from align.errors import InputError, ModelError
from align.models import discovery, families, weights
from align.models.hub import check_source, local_files_only
from align.models.spec import ModelSpec


def load_config(spec: ModelSpec):
    """The model's config, checked against the supported families."""
    from transformers import AutoConfig

    name = os.path.expanduser(spec.name)
    source = check_source(spec)
    path = os.path.join(name, "config.json")
    if source == "local" and not os.path.isfile(path):
        raise InputError(
            f"model folder {spec.name!r} has no config.json: pass a folder made by save_pretrained"
        )
    kwargs = {"local_files_only": True} if source == "hub" and local_files_only(spec) else {}
    if source == "local":  # its depth checked before transformers builds a list per block
        # (a config that is not UTF-8 is named as every text file is: align.textfiles)
        text = textfiles.read(path, "model config", ModelError)
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise ModelError(f"model config {path} is not JSON: {e}") from None
        weights.check_config(raw if isinstance(raw, dict) else {}, f"model {spec.name!r}")
    try:
        config = AutoConfig.from_pretrained(
            name, revision=spec.revision, trust_remote_code=spec.trust_remote_code, **kwargs
        )
    except Exception as e:  # OSError, ValueError, huggingface_hub's validation errors, ...
        # transformers' validators say what is wrong on the last line of a longer message
        said = " ".join(str(e).split()) or type(e).__name__
        raise ModelError(f"cannot load the config of {spec.name!r}: {said[:400]}") from None
    depth = {k: getattr(config, k, None) for k in ("num_hidden_layers", "layer_types")}
    weights.check_config(depth, f"model {spec.name!r}")
    discovery.of_config(
        config, spec.family, spec.trust_remote_code
    )  # a model align cannot read is refused here
    return config


def config_hash(config) -> str:
    """sha256 of the config's full JSON, keys sorted (what decides the architecture)."""
    d = config.to_dict()
    for k in (
        "_name_or_path",
        "transformers_version",
        "_commit_hash",
        "dtype",
        "torch_dtype",
        "_attn_implementation_autoset",
    ):
        d.pop(k, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()


def init_device(device: str) -> str:
    """Where `--random-init` draws its weights for `--device` cpu | cuda | auto: on the GPU for
    cuda (no minutes-long build on the CPU and copy), on the CPU otherwise (auto spreads a
    CPU-built model with accelerate). The device is part of the weights' identity: the same
    seed gives other numbers on another device's generator."""
    return "cuda" if device == "cuda" else "cpu"


def build_random(config, seed: int, dtype, device: str, attn: str = "sdpa"):
    """The architecture of `config` with weights from its own initialiser, drawn on `device`
    under `torch.manual_seed(seed)` (which seeds the CPU and every CUDA generator): the
    parameters are created and initialised there, never on the CPU first."""
    import torch
    from transformers import AutoModelForCausalLM

    seeding.check(seed, "seed")
    torch.manual_seed(seed)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attn)


def attention_implementation(config) -> str:
    """torch's scaled_dot_product_attention where the family supports it, else transformers'
    eager attention (Gemma 2 and gpt-oss: soft-capping and attention sinks are eager-only)."""
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        cls = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    except KeyError:
        return "sdpa"
    return "sdpa" if getattr(cls, "_supports_sdpa", True) else "eager"


def load_model(spec: ModelSpec):
    """(model, config) in eval mode, on the asked device and dtype.

    `spec.random_init` builds the same architecture from the config with weights drawn from
    the config's own initialiser under `torch.manual_seed(spec.seed)`, on the device
    `init_device` names: the untrained control. Checkpoints with `--device cuda` load straight
    to the GPU (device_map), never through host memory.
    """
    import torch
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    config = load_config(spec)
    dtype = getattr(torch, spec.resolved_dtype())
    if spec.device not in ("cpu", "cuda", "auto"):
        raise InputError(f"`device` {spec.device!r} is not one of cpu, cuda, auto")
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise InputError(
            "`device` cuda was asked for but torch sees no CUDA device: use `device` cpu"
        )
    name = os.path.expanduser(spec.name)
    attn = attention_implementation(config)
    if spec.random_init:
        model = build_random(config, spec.seed, dtype, init_device(spec.device), attn)
        if spec.device == "auto":
            from accelerate import dispatch_model, infer_auto_device_map

            model = dispatch_model(
                model, infer_auto_device_map(model, no_split_module_classes=model._no_split_modules)
            )
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
        elif spec.device == "cuda":
            # Straight to the GPU: no full copy of the weights in host memory first.
            kwargs["device_map"] = {"": "cuda"}
        if check_source(spec) == "hub" and local_files_only(spec):
            kwargs["local_files_only"] = True
        if os.path.isdir(name):
            weights.tensor_names(name)  # every weights file whole, before transformers reads it
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # its table of missing tensors: one line of ours instead
        try:
            # Tensors of another shape are reported in the loading information, not raised
            # after a 20-line table: the check below refuses them in one line.
            model, info = AutoModelForCausalLM.from_pretrained(
                name,
                config=config,
                output_loading_info=True,
                ignore_mismatched_sizes=True,
                **kwargs,
            )
        except (OSError, ValueError, RuntimeError, SafetensorError) as e:
            # (a damaged file of a hub cache: a local folder's files were checked above)
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            hint = (
                ""
                if spec.allow_pickle_weights
                else " (align loads only safetensors weights unless `allow_pickle_weights`)"
            )
            raise ModelError(f"cannot load the weights of {spec.name!r}: {first}{hint}") from None
        finally:
            hf_logging.set_verbosity(verbosity)
        where = f"model {spec.name!r}"
        weights.check_loaded(info, weights.tied(model), where, weights.untied(model))
    model.eval()
    model.requires_grad_(False)
    family = families.for_config(config, spec.family)
    if family is None or family.found != "table":
        # A discovered or asserted family is proved on this model before anything is written.
        if family is not None:
            families.check_parts(model, family, spec.name)
        families.assign(model, family or discovery.discover(model))
        discovery.verify(model)
    return model, config


def check_token_ids(spec: ModelSpec, config, max_id: int, where: str) -> None:
    """Refuse a token id the model has no embedding row for (ids 0..vocab_size-1): a tokenizer
    that does not belong to the weights, which would otherwise fail deep inside the forward.
    `where` says where the id first occurs (document and position)."""
    n = getattr(config, "vocab_size", None)
    if isinstance(n, int) and max_id >= n:
        raise InputError(
            f"the tokenizer of {spec.name!r} gives token id {max_id:,} ({where}), but the model has {n:,} token "
            "embeddings (config vocab_size): the tokenizer and the weights do not belong together; "
            "use the tokenizer saved with these weights"
        )


def input_device(model):
    """Where token ids must go (the embedding's device, also under device_map)."""
    return model.get_input_embeddings().weight.device
