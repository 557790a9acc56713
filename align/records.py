"""Records from the flat keywords of the Python API (`align.extract`, `align.fit`): each keyword
reaches the field it names, so that a field inserted in a dataclass can never shift the values
after it; the caller refuses what no record took. The command line builds its records by each
option's declaration instead (`align.declarations`, `align.cli.declared`)."""

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
