"""The exception types users see.

Every error a user can cause is an `AlignError`: the CLI prints its message as one line on
stderr and exits non-zero, with no traceback. Messages say what failed, what was expected,
what was found, and what to do.
"""


class AlignError(Exception):
    """Base of every error a user can cause; its message is one line."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class InputError(AlignError):
    """Bad user input: a path, an option value, a corpus."""


class ModelError(AlignError):
    """A model that cannot be loaded or that align does not know."""


class StoreError(AlignError):
    """A store that is missing, of the wrong schema, incomplete, or made from something else."""


class StoreMismatch(StoreError):
    """An existing store was made with options that differ from the ones asked for now."""


class StoreLocked(StoreError):
    """Another process holds the store's write lock."""


class DiskSpaceError(AlignError):
    """Not enough free disk for the store a run would write."""


class OverflowError16(AlignError):
    """A value does not fit the float16 storage dtype."""


class NonFiniteError(AlignError):
    """NaN or ±inf where a number is needed (activations, statistics, a result): refused and
    named (array, boundary, chunk, token), never summarised over."""


class OutputRefused(AlignError):
    """`-o` names something a command must not replace: a path that is not a result of the
    command's own kind, one of the command's inputs, or a folder holding anything else."""
