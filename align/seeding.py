"""The range every seed align takes lies in: 0 .. 2⁶³ − 1.

A seed reaches torch's `manual_seed` (random initialisations), numpy's `default_rng` (splits,
shuffles, the bootstrap) and Python's int arithmetic of derived seeds; 2⁶³ − 1 is the largest
that every one of them takes (torch refuses past 2⁶⁴ − 1, and a derived seed adds to it), so a
seed beyond it is refused in one line, never passed on to fail inside one of them.
"""

from __future__ import annotations

from align.errors import InputError

MAX_SEED = 2**63 - 1


def check(seed, name: str) -> None:
    """Refuse `seed` (the parameter `name`) unless it is a whole number 0 .. MAX_SEED."""
    whole = not isinstance(seed, bool) and hasattr(seed, "__index__")
    if not whole or not 0 <= int(seed) <= MAX_SEED:
        raise InputError(
            f"`{name}` {seed}: a seed must be a whole number from 0 to 2**63 - 1 "
            f"({MAX_SEED:,}), e.g. `{name}` 0"
        )
