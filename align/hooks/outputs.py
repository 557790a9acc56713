"""The tensor a hooked module returns: a block or sublayer returns a tensor, or a tuple or list
whose first item is the hidden states (the rest: attention weights, caches)."""

from __future__ import annotations


def first(output):
    """The hidden states of a module's `output`: the tensor itself, or its first item."""
    return output[0] if isinstance(output, (tuple, list)) else output


def replace_first(output, new):
    """`output` with its hidden states replaced by `new`, in the same container type."""
    if isinstance(output, tuple):
        return (new,) + tuple(output[1:])
    if isinstance(output, list):
        return [new] + list(output[1:])
    return new
