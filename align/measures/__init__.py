"""Similarity measures between the layers of two models beside ridge's held-out error
(docs/methods.md, Similarity measures), one record each (`registry.Measure`: name,
direction, ideal, range, its sums form, its rows form, its peer): `streamed` computes them
from sums over rows accumulated in the fit's held-out pass (`cka`, `cka-debiased`,
`procrustes`, `procrustes-heldout`, `cca`, `svcca`), every pair at once in `pairs`;
`rows` (mutual neighbours, CKNNA, RSA, and every measure's calibration) from rows sampled
from the held-out documents, each boundary's rows prepared once (`prepared`) and every cell
read from the prepared records (`cells`): on the sample, a null draw's permutation, a
bootstrap resample's multiplicities. The spectral measures' formulas, shared by the two
forms, are `formulas`'.

`MEASURES` names every measure `align fit --measures` accepts and its direction: for a
"similarity" larger is closer (a row's path is its argmax), for a "distance" smaller is
closer (its argmin). `ridge` is the fit's held-out relative error, always computed.
`MEASURES`, `STREAMED` and `ROW_ONLY` are views of `registry.REGISTRY`."""

from __future__ import annotations

from align.errors import InputError
from align.measures.registry import DISTANCE as DISTANCE
from align.measures.registry import REGISTRY
from align.measures.registry import SIMILARITY as SIMILARITY

MODULES = (
    "registry",
    "formulas",
    "streamed",
    "pairs",
    "rows",
    "prepared",
    "cells",
    "calibration",
)

MEASURES = {m.name: m.direction for m in REGISTRY.values()}
STREAMED = tuple(m.name for m in REGISTRY.values() if m.sums)  # from the held-out sums
# only on the sampled rows (with the calibration)
ROW_ONLY = tuple(m.name for m in REGISTRY.values() if m.rows and not m.sums)
SAMPLE_ROWS = 1024  # rows drawn from the held-out documents for the row measures (at most)
PERMUTATIONS = 99  # the null draws suggested for the calibration (p-values down to 0.01)


def variable(name: str) -> str:
    """The result's array of measure `name` ("cka-debiased" -> "cka_debiased").

    Parameters
    ----------
    name : str
        A measure.

    Returns
    -------
    str
        The array's name.
    """
    return name.replace("-", "_")


def parse_measures(text) -> tuple:
    """`--measures` as a tuple of valid names in MEASURES order, "ridge" always first.

    Parameters
    ----------
    text : str, list, tuple or None
        "cka,procrustes", "all", or a list/tuple of names (None: ridge alone).

    Returns
    -------
    tuple of str
        The names.

    Raises
    ------
    InputError
        An unknown name, in one line listing the valid ones, or no name at all.
    """
    if text is None:
        return ("ridge",)
    items = text.split(",") if isinstance(text, str) else list(text)
    names = [str(s).strip() for s in items if str(s).strip()]
    if not names:
        raise InputError(f"`measures` {text!r}: give one or more of {', '.join(MEASURES)}, or all")
    if "all" in names:
        return tuple(MEASURES)
    bad = [n for n in names if n not in MEASURES]
    if bad:
        raise InputError(
            f"`measures` {', '.join(bad)}: not a measure; the measures are "
            f"{', '.join(MEASURES)} (or all)"
        )
    return tuple(n for n in MEASURES if n == "ridge" or n in names)
