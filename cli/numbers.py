"""The command line's number types, each declared once: a whole number (at most 2⁶³ − 1: no
count, size or seed beyond a 64-bit integer reaches numpy or torch), a seed (0 .. 2⁶³ − 1, the
range `align.seeding` gives every seed), and a finite decimal (1e400 is float infinity)."""

from __future__ import annotations

import math

import click

from align.seeding import MAX_SEED

MAX_INT = 2**63 - 1


def whole(least: int | None = None, most: int = MAX_INT) -> click.IntRange:
    """A whole number from `least` (None: any) to `most`, refused in one line outside."""
    return click.IntRange(least, most)


class Finite(click.ParamType):
    """A decimal number that is finite: inf and nan (1e400 reads as inf) are refused."""

    name = "float"

    def convert(self, value, param, ctx):
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


SEED = click.IntRange(0, MAX_SEED)
FINITE = Finite()
