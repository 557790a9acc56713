"""Records built by field name: one helper for every options dataclass, so that the flat
keywords of `align.extract` / `align.fit` and the CLI's parsed options reach the field they
name (a field inserted in a dataclass can never shift the values after it)."""

from __future__ import annotations

import dataclasses


def _fields(cls) -> tuple:
    """The field names of a dataclass or a NamedTuple."""
    if hasattr(cls, "_fields"):
        return cls._fields
    return tuple(f.name for f in dataclasses.fields(cls))


def take(cls, values: dict, renamed: dict | None = None, skip: tuple = ()) -> dict:
    """The entries of `values` that name fields of `cls` (a dataclass or NamedTuple), removed
    from `values` and keyed by field name. `renamed`: {keyword: field} where the two differ;
    `skip`: fields never taken from `values` (those the caller passes itself)."""
    renamed = renamed or {}
    names = set(_fields(cls)) - set(skip)
    out = {}
    for k in list(values):
        name = renamed.get(k, k)
        if name in names:
            out[name] = values.pop(k)
    return out


def build(cls, values: dict, renamed: dict | None = None, **given):
    """`cls(**given, **fields)`: the fields of `cls` that `values` names (`values` is left
    as it is; `renamed` as in `take`), beside those in `given`."""
    return cls(**given, **take(cls, dict(values), renamed, tuple(given)))
