"""What a checkpoint's weight files hold, checked before and after they load.

Before: the config does not contradict itself (a depth of 1 .. MAX_BLOCKS blocks, one layer
type per block), and every safetensors file of a local checkpoint is whole (its header says
where each tensor's bytes lie; the file must reach the last of them). After: `from_pretrained`'s loading
information proves that every parameter and buffer the architecture expects came from the
files and that no tensor in them went unused; transformers itself excepts tied weights (filled
from the tensor they are tied to) and non-persistent buffers (computed, never saved). A
checkpoint that fails is one line naming the file or the first tensor, and nothing is written.
"""

from __future__ import annotations

import json
import os
import struct

from align.errors import ModelError

# The most blocks a config may say a model has: beyond any model align reads, and small
# enough that building it is not the first thing to fail (a config of 10⁹ blocks).
MAX_BLOCKS = 10_000


def header(path: str) -> dict:
    """The JSON header of the safetensors file `path` ({tensor: {dtype, shape, data_offsets}}),
    after checking the file is whole: a ModelError names an empty, unreadable or truncated
    file (the bytes its header describes and the bytes it holds)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            n = struct.unpack("<Q", head)[0] if len(head) == 8 else None
            text = f.read(n) if n is not None and n <= size - 8 else None
    except OSError as e:
        raise ModelError(f"cannot read weights file {path}: {e.strerror or e}") from None
    if size == 0:
        raise ModelError(f"weights file {path} is empty (0 bytes): copy the checkpoint again")
    if text is None:
        raise ModelError(
            f"weights file {path} is truncated or not safetensors: its {size:,} bytes do not "
            "hold the header it starts with; copy the checkpoint again"
        )
    try:
        table = json.loads(text)
        end = max(
            (int(v["data_offsets"][1]) for k, v in table.items() if k != "__metadata__"),
            default=0,
        )
    except (ValueError, KeyError, TypeError, IndexError):
        raise ModelError(
            f"weights file {path} has a damaged safetensors header: copy the checkpoint again"
        ) from None
    if 8 + n + end > size:
        raise ModelError(
            f"weights file {path} is truncated: its header places tensors up to byte "
            f"{8 + n + end:,}, but the file holds {size:,} bytes; copy the checkpoint again"
        )
    return {k: v for k, v in table.items() if k != "__metadata__"}


def tensor_names(folder: str) -> list[str]:
    """The tensors the safetensors weights of the local checkpoint `folder` hold (its
    model.safetensors, or every shard its model.safetensors.index.json names; each file
    checked by `header`); [] when it has neither (pickle weights are not read here)."""
    files = ["model.safetensors"]
    index = os.path.join(folder, "model.safetensors.index.json")
    if not os.path.isfile(os.path.join(folder, files[0])) and os.path.isfile(index):
        try:
            with open(index, "rb") as f:
                files = sorted(set(json.loads(f.read())["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return []  # named where the weights are fingerprinted (align.provenance)
    names: list[str] = []
    for name in files:
        if os.path.isfile(os.path.join(folder, name)):
            names += header(os.path.join(folder, name))
    return names


def check_config(values: dict, where: str) -> None:
    """Refuse a config (its values: config.json as read, or a config's attributes) that
    contradicts itself: num_hidden_layers not a whole number 1 .. MAX_BLOCKS, or a layer_types
    list of another length."""
    n = values.get("num_hidden_layers")
    if n is None:
        return
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_BLOCKS:
        raise ModelError(
            f"{where}: config.json says num_hidden_layers {n!r}; a model has 1 to "
            f"{MAX_BLOCKS:,} blocks: fix the config (the weights number their blocks)"
        )
    kinds = values.get("layer_types")
    if isinstance(kinds, (list, tuple)) and len(kinds) != n:
        raise ModelError(
            f"{where}: config.json says num_hidden_layers {n} but lists {len(kinds)} layer_types: "
            "the config contradicts itself; fix it (one layer type per block)"
        )


def loaded_names(model, keys) -> dict[str, str]:
    """{the parameter name `model` loads it as: the checkpoint's tensor name} for the tensor
    names `keys` of a checkpoint, renamed as `from_pretrained` renames them for this
    architecture (transformers' WeightRenaming rules: GPT-NeoX's saved `embed_out` is its
    `lm_head`); a name no rule touches is itself, and every name is itself where this
    transformers has no such rules. Reading single tensors (the lens head over a store) must
    ask for them by these names, or it would take an absent unembedding for a tied one."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightRenaming, rename_source_key

        rules = [t for t in get_model_conversion_mapping(model) if isinstance(t, WeightRenaming)]
    except (ImportError, AttributeError, TypeError):
        return {k: k for k in keys}
    return {rename_source_key(k, rules, [])[0]: k for k in keys}


def tied(model) -> set[str]:
    """The parameters `model` fills from another tensor it is tied to (no tensor of their own
    in the weights: the unembedding tied to the embedding). transformers ties them only where
    the config says so (`tie_word_embeddings`): its per-model `all_tied_weights_keys` follows
    the config; the class's `_tied_weights_keys` (the ties the architecture can make) stands in
    only where that is absent, under the same config rule."""
    keys = getattr(model, "all_tied_weights_keys", None)
    if keys is None:
        config = getattr(model, "config", None)
        ties = bool(getattr(config, "tie_word_embeddings", False))
        keys = getattr(model, "_tied_weights_keys", None) if ties else None
    return set(keys or ())


def untied(model) -> set[str]:
    """The parameters the architecture can tie to another tensor but this model's config
    unties (`tie_word_embeddings: false`): each needs a tensor of its own in the weights."""
    return set(getattr(model, "_tied_weights_keys", None) or ()) - tied(model)


def untied_head(where: str, key: str) -> ModelError:
    """The one line for an unembedding the config unties and the weights lack (transformers
    would fill it at random: every logit computed through it would be noise)."""
    return ModelError(
        f"{where}: its config unties the unembedding (tie_word_embeddings false) but the "
        f"weights hold no {key}: it would be drawn at random; set tie_word_embeddings true if "
        "this checkpoint's unembedding is its embedding, or use the weights saved with this "
        "config (nothing was written)"
    )


def head_tied(model, key: str, held, where: str) -> bool:
    """Whether the unembedding `key` (its parameter's name) of `model` is tied to the
    embedding, as transformers ties it (`tied`); where it is not and the checkpoint's tensor
    names `held` lack it, the one line of `untied_head` (the lens over a store reads the head
    alone, with no loading information to check)."""
    if key in tied(model):
        return True
    if key not in held:
        raise untied_head(where, key)
    return False


def check_loaded(info: dict, tied: set[str], where: str, untied: set[str] = frozenset()) -> None:
    """Refuse a model whose loading information (`from_pretrained(...,
    output_loading_info=True)`) shows a tensor the architecture expects that the weights
    lacked (it would be initialised at random; a `tied` one excepted), one the weights held
    that the architecture did not use, or one of another shape (the weights' and the
    config's): one line naming the first of each and the counts. A lacking tensor of `untied`
    (one the config unties: the unembedding) has its own line (`untied_head`)."""
    missing = sorted(set(info.get("missing_keys") or ()) - tied)
    head = [k for k in missing if k in untied]
    if head:
        raise untied_head(where, head[0])
    unused = sorted(info.get("unexpected_keys") or ())
    shaped = sorted(info.get("mismatched_keys") or (), key=str)
    if not (missing or unused or shaped):
        return
    parts = []
    if missing:
        parts.append(f"{len(missing)} expected tensor(s) not in the weights (first {missing[0]})")
    if unused:
        parts.append(f"{len(unused)} tensor(s) of the weights unused (first {unused[0]})")
    if shaped:
        first = shaped[0]
        if isinstance(first, (tuple, list)) and len(first) == 3:
            name, held, built = first
            first = f"{name}: {tuple(held)} in the weights, {tuple(built)} by the config"
        parts.append(f"{len(shaped)} tensor(s) of another shape than the config's (first {first})")
    raise ModelError(
        f"{where}: the weights do not fit the architecture its config describes: "
        f"{'; '.join(parts)}; use the config saved with these weights (nothing was written)"
    )
