"""What `align compare` shows, as records: one `Series` per result and per paired difference,
gathered in a `Comparison` (the table and the figure read these; nothing here computes)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Series:
    """The numbers of one result, or of one paired difference: per column, value, low and
    high arrays of one shape (scalars for depth and alignment, (boundaries,) for lens);
    `info`: the row's other columns."""

    label: str
    info: dict
    value: dict
    low: dict
    high: dict
    difference: bool = False
    boundary: np.ndarray | None = None
    relative: np.ndarray | None = None
    path: dict | None = None


@dataclass(frozen=True)
class View:
    """What `align compare` reads of each result.

    Parameters
    ----------
    weighting : str
        The lens average: "token" or "prompt".
    measure : str or None
        The alignment results' measure of `align fit --measures`; None or "ridge": the held-out
        error matrix and its summary.
    """

    weighting: str = "token"
    measure: str | None = None


@dataclass
class Comparison:
    """What `align compare` shows: the kind, the columns of numbers, one Series per result
    and per paired difference, and notes (what has no interval, and why)."""

    kind: str
    info_columns: list
    columns: list
    series: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    missing: str = "undefined"  # what a NaN number means in this kind of result
    measure: str | None = None  # alignment: the measure compared (None: ridge's error matrix)
