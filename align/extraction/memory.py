"""A model already in memory (a transformers `PreTrainedModel` and its tokenizer, as
TransformerLens and nnsight users hold them) as `align.extract`'s `model`: the object itself, or
a ModelSpec whose `name` is the object (`ModelSpec(model, device="cuda", dtype="bfloat16")`)
where it runs otherwise than ModelSpec's defaults.

The model and the tokenizer are written with `save_pretrained` (safetensors) into a temporary
folder beside nothing of the user's, and the extraction reads that folder as it reads any model
folder: every check, the probe of the family and the forward are the same. The store records
the model as `in memory: NAME` and the weights by the sha256 of their safetensors files
(`weights` in the identity), so running again with the same weights resumes the store and other
weights are refused as another store. The folder is removed when the extraction ends.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from dataclasses import replace

from align.errors import InputError
from align.models import ModelSpec, saved_tokenizer_file, tokenizer_disagreement


def is_model_object(model) -> bool:
    """True for a model object in memory (anything with a config and `save_pretrained`), or a
    ModelSpec that holds one as its `name`; False for a path or a ModelSpec of one."""
    if isinstance(model, ModelSpec):
        model = model.name
    return not isinstance(model, (str, os.PathLike, ModelSpec)) and (
        hasattr(model, "save_pretrained") and hasattr(model, "config")
    )


def label(model) -> str:
    """How the store records a model object: `in memory: ` and the name it was loaded from
    (its config's `_name_or_path`), or its class when it has none."""
    name = getattr(model.config, "_name_or_path", "") or type(model).__name__
    return f"in memory: {name}"


@contextmanager
def saved_model(model, tokenizer):
    """Yield the ModelSpec of `model` and `tokenizer` written into a temporary folder (removed
    when the block ends). `model` is the object or a ModelSpec holding it as its `name`, whose
    other fields (dtype, device, family) the yielded spec keeps. A missing or unusable
    tokenizer and the options that name how a checkpoint is loaded (revision, random_init) are
    refused."""
    spec = model if isinstance(model, ModelSpec) else ModelSpec(model)
    model = spec.name
    if tokenizer is None:
        raise InputError(
            f"`model` is a model object ({type(model).__name__}): pass its `tokenizer` too "
            "(the tokenizer it was trained with)"
        )
    if not hasattr(tokenizer, "save_pretrained"):
        raise InputError(
            f"`tokenizer` is a {type(tokenizer).__name__}, not a transformers tokenizer: pass the "
            "model's tokenizer as loaded by AutoTokenizer"
        )
    for field in ("revision", "random_init", "seed", "allow_pickle_weights"):
        if getattr(spec, field):
            raise InputError(
                f"`{field}` names how a checkpoint is loaded; `model` is a model object already "
                "loaded: leave it out"
            )
    with tempfile.TemporaryDirectory(prefix="align-model-") as folder:
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        yield replace(spec, name=folder, label=label(model))


def tokenizer_warning(model, given) -> str | None:
    """The log line of a `given` tokenizer that tokenizes otherwise than the tokenizer.json of
    the folder it (or else `model`) was loaded from, or None. The store holds the given
    tokenizer's ids, as documented; the line says so, because AutoTokenizer replaces a saved
    normalizer or pre-tokenizer with its model class's own (a Qwen2 config gives any
    tokenizer.json Qwen2's), which `align extract` of the same folder does not."""
    if isinstance(model, ModelSpec):
        model = model.name
    names = (
        getattr(given, "name_or_path", None),
        getattr(getattr(model, "config", None), "_name_or_path", None),
    )
    found = next(((n, p) for n in names if n for p in [saved_tokenizer_file(n)] if p), None)
    why = tokenizer_disagreement(given, found[1]) if found else None
    if why is None:
        return None
    name, path = found
    return (
        f"align extract: warning: the `tokenizer` given tokenizes otherwise than {path} ({why}); "
        f"the store holds the given tokenizer's ids, not those `align extract {name}` gives; "
        f"for the file's own, pass align.models.load_tokenizer(ModelSpec({str(name)!r}))"
    )
