"""From reduced statistics to maps, whatever produced the statistics: the check of the α grid
against the data's scale before any pass, and the solve of a block (α per pair, refit) on
the fit's device."""

from __future__ import annotations

import math
from typing import NamedTuple

from align.errors import InputError
from align.fitting.fit_options import backend
from align.fitting.planning.split import FRACTIONS, PART_GROUPS
from align.ridge.closed_form import DEFAULT_ALPHAS, solve_block
from align.ridge.statistics import N_PARTS, Statistics


def check_alphas(alphas, scale: dict, n_select: int, n_train: int) -> None:
    """Refuse, before the statistics pass, an α_rel whose absolute α is no usable float64.

    α = α_rel · trace(C)/d_source with C the centred scatter of the n training rows, and
    trace(C)/d_source ≈ n · `scale[b]`; α must be finite, positive and have a finite
    reciprocal (1/(λ+α) is taken), for n = n_select (the rows that choose α) and n_train (the
    final refit). The exact check runs again in the solve.

    Parameters
    ----------
    alphas : sequence of float
        The α_rel grid.
    scale : dict of int to float
        The mean variance per dimension of source boundary b in a first sample of training
        rows.
    n_select : int
        The rows that choose α.
    n_train : int
        The rows of the final refit.

    Raises
    ------
    InputError
        An α_rel whose absolute α is not usable for these data.
    """
    for b, v in scale.items():
        if not (v > 0 and math.isfinite(v)):
            continue  # a constant sample says nothing about the scale
        for a in alphas:
            for n in sorted({n_select, n_train}):
                x = a * n * v
                if not (math.isfinite(x) and x > 0 and math.isfinite(1.0 / x)):
                    how = "overflows" if not math.isfinite(x) or x > 1 else "underflows"
                    raise InputError(
                        f"`alphas` {a:g}: the absolute penalty α_rel · trace(XcᵀXc)/d_source ≈ {a:g} × {n * v:.3g} for "
                        f"source boundary {b} {how} float64: choose α_rel values nearer 1 (the default grid is "
                        f"{DEFAULT_ALPHAS[0]:g} to {DEFAULT_ALPHAS[-1]:g}); nothing was computed"
                    )


def solve(
    stats: Statistics,
    alphas,
    x_shift: dict,
    y_shift: dict,
    device: str = "cpu",
    factors: dict | None = None,
    extend: bool = False,
    threads: int = 1,
) -> dict:
    """Maps of every pair of a block from its reduced statistics (`ridge.Statistics`, numpy).

    α per pair is chosen on the validation part, W and c refitted on fit + validation
    (`ridge.solve_block`), with eigendecompositions and products on `device` (torch on a GPU).

    Parameters
    ----------
    stats : Statistics
        The block's reduced statistics.
    alphas : sequence of float
        The α_rel grid.
    x_shift : dict of int to array of shape (d_source,)
        The shifts the statistics were taken about, per source boundary.
    y_shift : dict of int to array of shape (d_target,)
        The same per target boundary.
    device : str, optional
        Where the solve runs ("cpu", or a torch device).
    factors : dict of int to Factor, optional
        {source boundary: ridge.Factor}, read and filled, so that blocks sharing source
        boundaries decompose each once.
    extend : bool, optional
        `--alphas auto`: a grid whose end is chosen gains decades there (`ridge.solve_block`).
    threads : int, optional
        Source boundaries solved side by side (`ridge.solve_block`).

    Returns
    -------
    dict of (int, int) to SolvedMap
        {(i, j): SolvedMap} (numpy).
    """
    return solve_block(stats, alphas, x_shift, y_shift, backend(device), factors, extend, threads)


class Solving(NamedTuple):
    """`solve`'s arguments beside the statistics, in its order: how a block's maps are solved.

    Attributes
    ----------
    alphas : sequence of float
        The α_rel grid.
    x_shift, y_shift : dict of int to array of shape (d_source,) or (d_target,)
        The shifts the statistics were taken about, per source and per target boundary.
    device : str
        Where the solve runs ("cpu", or a torch device).
    factors : dict of int to Factor or None
        {source boundary: ridge.Factor}, read and filled (the full fit's only).
    extend : bool
        `--alphas auto`: a grid whose end is chosen gains decades there.
    threads : int
        Source boundaries solved side by side.
    """

    alphas: tuple
    x_shift: dict
    y_shift: dict
    device: str = "cpu"
    factors: dict | None = None
    extend: bool = False
    threads: int = 1


def solve_all(stats: Statistics, solving: Solving) -> tuple[dict, dict]:
    """(maps of the full fit, {fraction: maps}) of a block. Two-part statistics give the full
    fit alone ({} for the fractions); the six parts of --convergence give it from their
    merged sums (`split.PART_GROUPS`) and the fits of ¼ and ½ of the training documents
    from theirs, each choosing its own α on its own validation documents. `solving.factors`
    serve the full fit only (a fraction's scatters are other matrices)."""
    if len(stats.n) == N_PARTS:
        return solve(stats, *solving), {}
    full = solve(stats.merged(*PART_GROUPS[1.0]), *solving)
    apart = solving._replace(factors=None)
    return full, {f: solve(stats.merged(*PART_GROUPS[f]), *apart) for f in FRACTIONS}
