"""Ridge maps between residual streams from sufficient statistics (docs/methods.md, The fit).

Pure math on arrays: no file, no model, no Dask. Tokens are rows: X (n_tokens, d_source),
Y (n_tokens, d_target); a map predicts y = x W + c with W (d_source, d_target).

The flow, all in float64, one module a step:

1. `statistics`: `chunk_statistics` turns one chunk of tokens into per-part sums (n, Σx,
   XᵀX, Σy, Σ‖y‖², XᵀY) of SHIFTED rows (x − s_x, y − s_y, with s a first-chunk mean:
   centring later then cancels far less); `add_statistics` adds two of them (any order of
   chunks gives the same sums up to rounding; a fixed reduction tree gives the same bits).
2. `closed_form`: `solve_block` does one eigendecomposition of the centred XᵀX per source boundary
   and part, scores every α of the grid on the validation part from statistics alone, picks
   α per pair (ties to the larger), and refits on all training tokens: a `SolvedMap` per pair.
3. `heldout`: `heldout_sums` accumulates the held-out error sums of one chunk once W is known;
   `scores` turns them into relative_error, norm_error and r2 (`Scores`).
4. `matrix`: `summary` reads the error matrix (`Summary`).

A `backend.Backend` does the chunk products on numpy (CPU) or torch (e.g. CUDA) with one code
path. The names below are those callers use as `ridge.X`.
"""

from align.ridge.backend import CPU, Backend
from align.ridge.closed_form import (
    AUTO_FLOOR,
    AUTO_LIMITS,
    DEFAULT_ALPHAS,
    TIE_RTOL,
    Factor,
    SolvedMap,
    about,
    absolute_alpha,
    choose_alpha,
    eigen,
    moments,
    ridge_map,
    solve_block,
    source_factor,
    validation_sse,
)
from align.ridge.heldout import EPS, Scores, add_heldout, heldout_sums, scores
from align.ridge.matrix import Summary, spearman, summary
from align.ridge.statistics import (
    FIT,
    N_PARTS,
    VAL,
    Statistics,
    add_statistics,
    chunk_statistics,
    tree_sum,
)

__all__ = [
    "AUTO_FLOOR",
    "AUTO_LIMITS",
    "CPU",
    "DEFAULT_ALPHAS",
    "EPS",
    "FIT",
    "N_PARTS",
    "TIE_RTOL",
    "VAL",
    "Backend",
    "Factor",
    "Scores",
    "SolvedMap",
    "Statistics",
    "Summary",
    "about",
    "absolute_alpha",
    "add_heldout",
    "add_statistics",
    "choose_alpha",
    "chunk_statistics",
    "eigen",
    "heldout_sums",
    "moments",
    "ridge_map",
    "scores",
    "solve_block",
    "source_factor",
    "spearman",
    "summary",
    "tree_sum",
    "validation_sse",
]
