"""How align names models to a person (figures, log lines, tables): a checkpoint folder by its
name without a trailing hash, a hub id as given, a randomly initialised model said to be one."""

from __future__ import annotations

import os
import re

HASH = re.compile(r"-[0-9a-f]{8,64}$")  # the demo's "deep-4f2a9c01b3de": a configuration hash


def model_name(name) -> str:
    """A model's short name: the folder's name without a trailing hash ("/x/deep-4f2a9c01b3de"
    is "deep"), or a hub id's last part ("Qwen/Qwen2.5-1.5B" is "Qwen2.5-1.5B")."""
    name = str(name)
    base = os.path.basename(name.rstrip("/\\")) or name
    return HASH.sub("", base) or base


def provenance_of(attrs: dict, role: str | None = None) -> dict:
    """The provenance record of a result's model: attrs[role] for an alignment's "source" or
    "target", the attrs themselves for an analysis of one model."""
    found = attrs.get(role) if role else attrs
    return found if isinstance(found, dict) else {}


def labelled(attrs: dict, role: str | None = None) -> str:
    """A result's model by its short name, "(random init)" added for a randomly initialised
    one (its weights are no checkpoint's: the folder only gave the shape)."""
    key = f"{role}_model" if role else "model"
    name = model_name(attrs.get(key) or role or "model")
    return name + (" (random init)" if provenance_of(attrs, role).get("random_init") else "")


def pair_title(attrs: dict) -> str:
    """The pair an alignment result maps, short: "shallow → deep (random init)"."""
    return f"{labelled(attrs, 'source')} → {labelled(attrs, 'target')}"
