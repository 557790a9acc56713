"""The final norm and the unembedding of a checkpoint, read from its safetensors alone.

The logit lens over an activation store needs only these two modules. They are built on the
meta device from the config (so no block is ever allocated), located with `align.models`,
and filled with the few tensors they own, read one by one with `safetensors.safe_open`.
With tied embeddings (the config's `tie_word_embeddings`) the checkpoint has no unembedding
tensor: the embedding matrix is read instead; an untied unembedding the checkpoint lacks is
refused.
"""

from __future__ import annotations

import json
import os

from align import models, textfiles
from align.errors import InputError, ModelError, NonFiniteError
from align.models import families

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"


def _resolve(name: str, revision: str | None, filename: str) -> str | None:
    """Local path of one file of a checkpoint folder or (cached) hub repository, or None."""
    local = os.path.expanduser(name)
    if os.path.isdir(local):
        p = os.path.join(local, filename)
        return p if os.path.isfile(p) else None
    try:
        from huggingface_hub import hf_hub_download

        return hf_hub_download(name, filename, revision=revision)
    except Exception:  # absent file, unreachable hub: the caller says what is missing
        return None


def weight_map(name: str, revision: str | None = None) -> dict[str, str]:
    """{tensor name: local safetensors file} of a checkpoint (sharded or not)."""
    index = _resolve(name, revision, INDEX)
    if index is not None:
        try:
            wm = json.loads(textfiles.read(index, "weight index", ModelError))["weight_map"]
        except (ValueError, KeyError, TypeError) as e:
            raise ModelError(
                f"the weight index {index} cannot be read ({type(e).__name__}: {e}): the checkpoint is "
                "damaged"
            ) from None
        files = {fn: _resolve(name, revision, fn) for fn in set(wm.values())}
        missing = [fn for fn, p in files.items() if p is None]
        if missing:
            raise ModelError(
                f"checkpoint {name!r} lists shard {missing[0]} in {INDEX} but it is missing"
            )
        return {k: files[fn] for k, fn in wm.items()}
    single = _resolve(name, revision, SINGLE)
    if single is None:
        raise ModelError(
            f"checkpoint {name!r} has no {SINGLE} or {INDEX}: the lens over a store reads safetensors weights only"
        )
    from safetensors import safe_open

    with safe_open(single, framework="pt") as f:
        return {k: single for k in f.keys()}


def _read(wm: dict[str, tuple], key: str):
    """The tensor the model loads as `key`, from {name: (file, the checkpoint's name)}."""
    from safetensors import safe_open

    path, saved = wm[key]
    with safe_open(path, framework="pt") as f:
        return f.get_tensor(saved)


def _check_finite(name: str, key: str, t) -> None:
    """A NaN/inf weight of the head would make every lens value NaN: refuse it, named."""
    import torch

    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        n = int((~torch.isfinite(t)).sum())
        raise NonFiniteError(
            f"checkpoint {name!r} has {n:,} NaN/inf values in tensor {key!r} of shape {tuple(t.shape)}: "
            "the logit lens cannot read through it; fix the checkpoint"
        )


def head_device(device: str) -> str:
    """The device `--device` cpu | cuda | auto names for the lens head: auto is the GPU when
    torch sees one, else the CPU; cuda without a GPU is refused in one line."""
    import torch

    if device not in ("cpu", "cuda", "auto"):
        raise InputError(f"`device` {device!r} is not one of cpu, cuda, auto")
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError(
            "`device` cuda was asked for but torch sees no CUDA device: use `device` cpu"
        )
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def head_source(name: str, revision: str | None, config, trust_remote_code: bool = False):
    """(skeleton, weight map, tied) of checkpoint `name`: its architecture built on the meta
    device from `config` (no memory), {parameter name: (file, the checkpoint's tensor name)}
    of its safetensors (`models.loaded_names`), and whether its unembedding is its embedding. The config decides the tie, as it does for transformers
    (`tie_word_embeddings`): an untied unembedding the checkpoint lacks is refused in one line,
    never read from the embedding."""
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM

    with init_empty_weights(include_buffers=False):
        skeleton = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    files = weight_map(name, revision)
    # by the names the model loads them as (a checkpoint may save its head under another)
    wm = {
        mine: (files[saved], saved) for mine, saved in models.loaded_names(skeleton, files).items()
    }
    unembed = models.checkpoint_keys(config.model_type, config)["unembed"]
    tied = models.head_tied(skeleton, f"{unembed}.weight", wm, f"checkpoint {name!r}")
    return skeleton, wm, tied


def read_head(
    name: str,
    revision: str | None = None,
    dtype: str = "float32",
    trust_remote_code: bool = False,
    device: str = "cpu",
):
    """Read the head of a checkpoint: its final norm, the modules after it and its unembedding.

    Only the head's tensors are read (the embedding's when the unembedding is tied to it), one
    at a time on the host, and copied into modules allocated on the device in `dtype` (no
    float32 copy of the head on the device).

    Parameters
    ----------
    name : str
        A model folder or hub id.
    revision : str, optional
        The hub revision.
    dtype : str, optional
        The head's dtype on the device.
    trust_remote_code : bool, optional
        Passed to transformers when the config is read and the head's modules are built.
    device : str, optional
        cpu | cuda | auto (`head_device`).

    Returns
    -------
    config : transformers.PretrainedConfig
        The checkpoint's config.
    head : align.models.families.Head
        Final norm, the modules the family applies after it, unembedding, its cap or scale.
    """
    import torch

    if dtype not in models.DTYPES:
        raise InputError(f"dtype {dtype!r} is not one of {', '.join(models.DTYPES)}")
    device = head_device(device)
    config = models.load_config(
        models.ModelSpec(name, revision, trust_remote_code=trust_remote_code)
    )
    keys = models.checkpoint_keys(config.model_type, config)
    skeleton, wm, tied = head_source(name, revision, config, trust_remote_code)
    head = models.head(skeleton)
    torch_dtype = getattr(torch, dtype)

    def fill(module, prefix, fallback=None):
        module.to_empty(device=device).to(torch_dtype)
        state = {}
        for pname in module.state_dict():
            key = f"{prefix}.{pname}"
            if key not in wm and fallback is not None and f"{fallback}.{pname}" in wm:
                key = f"{fallback}.{pname}"  # tied embeddings: the unembedding is the embedding
            if key not in wm:
                raise ModelError(
                    f"checkpoint {name!r} has no tensor {key!r}: cannot build the lens head"
                )
            state[pname] = _read(wm, key)
            _check_finite(name, key, state[pname])
        module.load_state_dict(state)  # copies each tensor to the module's device and dtype
        return module.eval().requires_grad_(False)

    norm = fill(head.norm, keys["final_norm"])
    after = tuple(fill(m, path) for m, path in zip(head.after, keys["after_norm"]))
    unembed = fill(head.unembed, keys["unembed"], fallback=keys["embed"] if tied else None)
    return config, families.Head(config, norm, unembed, after, head.finish)
