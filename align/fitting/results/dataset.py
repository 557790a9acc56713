"""Per-pair scores from held-out sums; the alignment Dataset, the room it needs, its writing."""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
from dataclasses import dataclass

import numpy as np

from align import store as st
from align.errors import DiskSpaceError, NonFiniteError, OutputRefused
from align.fitting.measuring import measured
from align.fitting.planning.budget import RESULT_MARGIN, ResultBytes, ResultShape, result_bytes
from align.fitting.planning.split import Split
from align.fitting.results import uncertainty
from align.measures import MEASURES, variable
from align.messages import human_bytes
from align.ridge.closed_form import SolvedMap
from align.ridge.heldout import scores
from align.ridge.matrix import Summary
from align.ridge.matrix import summary as matrix_summary
from align.stats.bootstrap import Resampling
from align.version import __version__

SCORES = ("relative_error", "norm_error", "r2", "alpha", "alpha_rel")
ROUTES = ("store", "live")


@dataclass
class Side:
    """One model of a fit as its result records it.

    Parameters
    ----------
    provenance : dict
        A store's, or a model's for the live route.
    path : str or None
        The store, or the model's name or folder.
    n_layers : int
        Its number of blocks L (boundaries 0..L).
    d_model : int
        Its width.
    """

    provenance: dict
    path: str | None
    n_layers: int
    d_model: int

    @classmethod
    def of_store(cls, store) -> "Side":
        return cls(store.provenance, store.path, store.n_layers, store.d_model)

    @property
    def model(self):
        return self.provenance.get("model")


def import_dataset_modules() -> None:
    """Import xarray and what it imports at its first variable (dask.array, when installed)."""
    import xarray as xr

    xr.Variable(("x",), np.zeros(1))  # xarray imports dask.array here when dask is installed


def import_ahead() -> threading.Thread:
    """Import what the result's Dataset needs (xarray, and dask.array, which xarray imports
    at the first variable it makes when dask is installed: ~0.8 s together, a third of a
    4k-token fit) in a thread, while the sums are computed (their products release the GIL).
    The Dataset waits for it through the import lock; the thread is not a daemon, so the
    interpreter never exits half-way through an import."""
    t = threading.Thread(target=import_dataset_modules, name="align-import-ahead")
    t.start()
    return t


@dataclass
class PairResult:
    """One pair's numbers as the alignment result records them.

    The solve's choice of α (and its map when kept), the held-out scores, and what
    --convergence and the document bootstrap add (None without them).

    Parameters
    ----------
    fitted : SolvedMap
        α_rel, α, the validation curve; W and c when kept.
    relative_error, norm_error, r2 : float
        (1/N) Σ ‖e_n‖/max(‖y_n‖, ε) over the held-out tokens; Σ ‖e_n‖ / Σ ‖y_n‖;
        1 − Σ ‖e_n‖² / Σ ‖y_n − ȳ‖².
    by_fraction : dict, optional
        {fraction: (relative_error, α_rel)} of the fits of ¼ and ½ of the training documents.
    doc_pair, doc_target : array of shape (K, 3), optional
        Per held-out document Σ ratio, Σ ‖e‖, Σ ‖e‖²; and n, Σ ‖y‖, Σ ‖y − μ‖² of the target.
    doc_cc : array of shape (resamples,), optional
        ‖Σ_d w_bd c_d‖² of the target (`uncertainty.centred_square`).
    measures : dict, optional
        {streamed measure: (value, low, high)} (`measured.pair_measures`).
    measure_groups : int, optional
        Groups of held-out documents holding rows, which their jackknife interval left out
        in turn.
    sampled : dict, optional
        {measure: {field: value}} on the sampled rows (`sampled.attach`).
    """

    fitted: SolvedMap  # α_rel, α, the validation curve; W and c when kept
    relative_error: float  # (1/N) Σ ‖e_n‖/max(‖y_n‖, ε) over the held-out tokens
    norm_error: float  # Σ ‖e_n‖ / Σ ‖y_n‖
    r2: float  # 1 − Σ ‖e_n‖² / Σ ‖y_n − ȳ‖²
    by_fraction: dict | None = (
        None  # {fraction: (relative_error, α_rel)} of the fits of ¼ and ½ of the training documents
    )
    doc_pair: np.ndarray | None = None  # (K, 3): per held-out document Σ ratio, Σ ‖e‖, Σ ‖e‖²
    doc_target: np.ndarray | None = (
        None  # (K, 3): per held-out document n, Σ ‖y‖, Σ ‖y − μ‖² of the target
    )
    doc_cc: np.ndarray | None = (
        None  # (resamples,): ‖Σ_d w_bd c_d‖² of the target (`uncertainty.centred_square`)
    )
    measures: dict | None = (
        None  # {streamed measure: (value, low, high)} (`measured.pair_measures`)
    )
    measure_groups: int | None = None  # groups of held-out documents their jackknife left out
    sampled: dict | None = None  # {measure: {field: value}} on the sampled rows (`sampled.attach`)

    @property
    def alpha(self) -> float:
        return self.fitted.alpha

    @property
    def alpha_rel(self) -> float:
        return self.fitted.alpha_rel


def pair_results(
    fitted: dict,
    heldout: dict,
    split: Split | None = None,
    resampling: Resampling | None = None,
    fractions: dict | None = None,
) -> dict:
    """Each pair's `SolvedMap` with its held-out scores, as a `PairResult`.

    relative_error, norm_error and r2 come from the held-out sums (`ridge.heldout_sums`,
    reduced). With per-document sums in `heldout` (heldout_sums(...,
    docs=split.heldout_index[...])), a `split` and a `resampling`, each pair also keeps what
    the document bootstrap needs: doc_pair (K, 3), doc_target (K, 3) over the split's K
    held-out documents, and doc_cc (resamples,): ‖Σ_d w_bd c_d‖² of its target
    (`uncertainty.centred_square`), computed here, per block, so that no (K, d_T) array
    outlives its block.

    Parameters
    ----------
    fitted : dict of (int, int) to SolvedMap
        The block's maps.
    heldout : dict
        Its reduced held-out sums (`ridge.heldout_sums`).
    split : Split, optional
        The split, for the document bootstrap.
    resampling : Resampling, optional
        The bootstrap's resamples and seed.
    fractions : dict, optional
        With --convergence (`heldout["fractions"]`): {fraction: {(i, j): SolvedMap}}; each pair
        keeps by_fraction: {fraction: (relative_error, α_rel)} of the fits of ¼ and ½ of the
        training documents.

    Returns
    -------
    dict of (int, int) to PairResult
        {(i, j): PairResult}.
    """
    out = {
        (i, j): PairResult(
            f, *scores(heldout["pair"][(i, j)], heldout["target"][j], heldout["centred"][j])
        )
        for (i, j), f in fitted.items()
    }
    for frac, sums in (heldout.get("fractions") or {}).items():
        for (i, j), r in out.items():
            rel = scores(sums["pair"][(i, j)], sums["target"][j], sums["centred"][j]).relative_error
            m = (fractions or {}).get(frac, {}).get((i, j))
            r.by_fraction = {
                **(r.by_fraction or {}),
                frac: (rel, m.alpha_rel if m is not None else math.nan),
            }
    measures = measured.pair_measures(heldout, resampling if "doc" in heldout else None)
    for k, m in measures.items():
        out[k].measures = m
        if "doc" in heldout and resampling is not None:
            out[k].measure_groups = measured.groups_present(heldout)
    if split is None or resampling is None or "doc" not in heldout:
        return out
    K = len(split.test_docs)
    w = _weights(K, resampling)
    d = uncertainty.dense(heldout["doc"], K)
    cc = {j: uncertainty.centred_square(c, w) for j, c in d["centred"].items()}
    for (i, j), r in out.items():
        r.doc_pair, r.doc_target, r.doc_cc = d["pair"][(i, j)], d["target"][j], cc[j]
    return out


_WEIGHTS: dict = {}


def _weights(n_docs: int, resampling: Resampling) -> np.ndarray:
    """`uncertainty.weights`, drawn once per (documents, resampling) in a process."""
    key = (n_docs, resampling)
    if key not in _WEIGHTS:
        _WEIGHTS.clear()
        _WEIGHTS[key] = uncertainty.weights(n_docs, resampling)
    return _WEIGHTS[key]


def alignment_dataset(
    results: dict,
    boundaries: tuple,
    sides: tuple,
    split: Split,
    options: dict,
    route: str = "store",
    save_maps: bool = False,
    resampling: Resampling | None = None,
):
    """The alignment result (`schema: alignment`) as an xarray Dataset.

    The five scores over (source_boundary, target_boundary), `val_sse` over (source_boundary,
    target_boundary, alpha_grid: α_rel), `heldout_doc`, W and c with `save_maps`, and
    attributes summary, split, options, both sides' provenance and `route`. When the results
    hold per-document sums (`pair_results` with a split and `resampling`), also the document
    bootstrap (`_with_bootstrap`): per-document sums, `p_best`, 95% intervals of the scores and
    of the summary.

    Parameters
    ----------
    results : dict of (int, int) to PairResult
        Every pair's result.
    boundaries : tuple
        (source boundaries, target boundaries).
    sides : tuple
        (source Side, target Side).
    split : Split
        The split.
    options : dict
        The options the result records.
    route : str, optional
        "store" or "live".
    save_maps : bool, optional
        Keep W (n_source_boundaries, n_target_boundaries, d_source, d_target) and c.
    resampling : Resampling, optional
        The bootstrap's resamples and seed.

    Returns
    -------
    xarray.Dataset
        The alignment result.

    Raises
    ------
    NonFiniteError
        A non-finite score, before anything is summarised.
    """
    import xarray as xr

    (src_boundaries, tgt_boundaries), (source, target) = boundaries, sides
    if route not in ROUTES:
        raise ValueError(f"route {route!r} is not one of {ROUTES}")
    L_S, L_T = source.n_layers, target.n_layers
    shape = (len(src_boundaries), len(tgt_boundaries))
    arrays = {name: np.full(shape, np.nan) for name in SCORES}
    for a, i in enumerate(src_boundaries):
        for b, j in enumerate(tgt_boundaries):
            for name in arrays:
                arrays[name][a, b] = getattr(results[(i, j)], name)
    refuse_non_finite(arrays, src_boundaries, tgt_boundaries)
    dims = ("source_boundary", "target_boundary")
    data = {name: (dims, v) for name, v in arrays.items()}
    data["heldout_doc"] = (("heldout_doc",), np.asarray(split.test_docs, dtype=np.int64))
    grid, val_sse = _validation_curves(results, src_boundaries, tgt_boundaries)
    if grid is not None:
        data["val_sse"] = (dims + ("alpha_grid",), val_sse)
    first = results[(src_boundaries[0], tgt_boundaries[0])]
    if first.by_fraction is not None:
        fracs = sorted(first.by_fraction)
        by = np.array(
            [
                [
                    [
                        [results[(i, j)].by_fraction[f][k] for j in tgt_boundaries]
                        for i in src_boundaries
                    ]
                    for f in fracs
                ]
                for k in (0, 1)
            ]
        )  # (2: relative_error and α_rel, fractions, S, T)
        refuse_non_finite(
            {f"relative_error of the {f:g} fraction": by[0][k] for k, f in enumerate(fracs)},
            src_boundaries,
            tgt_boundaries,
        )
        data["relative_error_by_fraction"] = (
            ("fraction",) + dims,
            np.concatenate([by[0], arrays["relative_error"][None]]),
        )
        data["alpha_rel_by_fraction"] = (
            ("fraction",) + dims,
            np.concatenate([by[1], arrays["alpha_rel"][None]]),
        )
    if save_maps:
        data["W"] = (
            dims + ("d_source", "d_target"),
            np.stack(
                [
                    np.stack([results[(i, j)].fitted.W for j in tgt_boundaries])
                    for i in src_boundaries
                ]
            ),
        )
        data["c"] = (
            dims + ("d_target",),
            np.stack(
                [
                    np.stack([results[(i, j)].fitted.c for j in tgt_boundaries])
                    for i in src_boundaries
                ]
            ),
        )
    coords = {
        "source_boundary": ("source_boundary", np.asarray(src_boundaries, dtype=np.int64)),
        "target_boundary": ("target_boundary", np.asarray(tgt_boundaries, dtype=np.int64)),
        "source_depth": ("source_boundary", np.asarray(src_boundaries, dtype=np.float64) / L_S),
        "target_depth": ("target_boundary", np.asarray(tgt_boundaries, dtype=np.float64) / L_T),
    }
    if grid is not None:
        coords["alpha_grid"] = ("alpha_grid", grid)  # α_rel values of the validation curves
    if "relative_error_by_fraction" in data:
        coords["fraction"] = ("fraction", np.array(sorted(first.by_fraction) + [1.0]))
    point = matrix_summary(arrays["relative_error"], src_boundaries, tgt_boundaries, L_S, L_T)
    summary = point.to_attrs()
    if first.measures is not None or first.sampled is not None:
        summary["measures"] = _with_measures(data, results, src_boundaries, tgt_boundaries, options)
    _check_every_measure(data, options)
    summary.update(_grid_ends(arrays["alpha_rel"], grid))
    if resampling is not None and all(
        results[(i, j)].doc_pair is not None for i in src_boundaries for j in tgt_boundaries
    ):
        summary.update(
            _with_bootstrap(
                data, results, arrays, point, src_boundaries, tgt_boundaries, L_S, L_T, resampling
            )
        )
    if measured.has_intervals(first):  # the option as what was computed
        options = {**options, "measure_interval": measured.interval_option(options)}
    attrs = {
        "summary": summary,
        "route": route,
        "source": source.provenance,
        "target": target.provenance,
        "source_model": source.model,
        "target_model": target.model,
        "source_path": source.path,
        "target_path": target.path,
        "n_layers_source": L_S,
        "n_layers_target": L_T,
        "options": options,
        "split": split.record(),
        "align_version": __version__,
    }
    ds = xr.Dataset(data, coords=coords, attrs=jsonable(attrs))
    ds["relative_error"].attrs["description"] = (
        "mean over held-out tokens of ||x W + c - y|| / max(||y||, 1e-12)"
    )
    ds["norm_error"].attrs["description"] = (
        "sum of ||x W + c - y|| over sum of ||y|| (held-out tokens)"
    )
    ds["r2"].attrs["description"] = (
        "1 - sum ||e||^2 / sum ||y - mean(y)||^2 (held-out; variance-weighted)"
    )
    ds["alpha"].attrs["description"] = (
        "absolute ridge penalty of the final fit: alpha_rel * trace(XcT Xc) / d_source"
    )
    ds["alpha_rel"].attrs["description"] = (
        "ridge penalty in units of the mean eigenvalue, chosen on validation documents"
    )
    for name, text in DESCRIPTIONS.items():
        if name in ds:
            ds[name].attrs["description"] = text
    for name in summary.get("measures") or {}:
        if name in MEASURES:
            v = variable(name)
            ds[v].attrs["direction"] = MEASURES[name]
            ds[v].attrs["description"] = f"{name} of the held-out rows ({MEASURES[name]})"
            kind = measured.interval_kind(name, first)
            for end in ("_low", "_high"):
                ds[v + end].attrs["description"] = f"95% {kind} of {name}"
    return ds


DESCRIPTIONS = {
    "val_sse": "validation sum of squared errors of the map fitted on the fit part, for every alpha_rel of the grid "
    "(NaN: not evaluated for this pair)",
    "p_best": "fraction of document-bootstrap resamples in which this target boundary is the argmin of the row "
    "(target boundaries >= 1; rows sum to 1)",
    "relative_error_by_fraction": "relative_error of the maps fitted on 1/4, 1/2 and all of the training documents "
    "(`convergence`; each fraction chooses its alpha on its own validation documents)",
    "alpha_rel_by_fraction": "alpha_rel each fraction's fit chose",
    "doc_n_tokens": "held-out tokens scored per held-out document",
    "doc_ratio_sum": "per held-out document: sum over its tokens of ||e|| / max(||y||, 1e-12)",
    "doc_error_sum": "per held-out document: sum of ||e||",
    "doc_error_sq_sum": "per held-out document: sum of ||e||^2",
    "doc_norm_sum": "per held-out document: sum of ||y|| of the target",
    "doc_centred_sq_sum": "per held-out document: sum of ||y - mu||^2, mu the target's training mean",
}


def _with_measures(data: dict, results: dict, src_boundaries, tgt_boundaries, options) -> dict:
    """Adds the measures' arrays (`measured.measure_arrays`, `left_out_arrays`) to `data`;
    returns the summary's "measures" field (each one's direction, path and interval's scheme).
    options: the recorded options."""
    first = results[(src_boundaries[0], tgt_boundaries[0])]
    names, arrays = measured.measure_arrays(results, src_boundaries, tgt_boundaries)
    refuse_non_finite(
        {n: arrays[variable(n)] for n in names}, src_boundaries, tgt_boundaries, "measures"
    )
    dims = ("source_boundary", "target_boundary")
    data.update({name: (dims, v) for name, v in arrays.items()})
    data.update(measured.left_out_arrays(results, src_boundaries, tgt_boundaries))
    schemes = measured.row_interval_schemes(first, options)
    return measured.measures_summary(arrays, names, tgt_boundaries, first.measure_groups, schemes)


def _check_every_measure(data: dict, options: dict) -> None:
    """A RuntimeError (a fault of the code, not of the input) when an asked measure
    (`options["measures"]`) or its calibration (`options["calibrated"]`) has no array."""
    calibrated = options.get("calibrated", ())
    missing = [
        f"{n}{end}"
        for n in options.get("measures", ())
        if n in MEASURES and n != "ridge"
        for end in ("", "_p")
        if variable(n) + end not in data and (end == "" or n in calibrated)
    ]
    if missing:
        raise RuntimeError(f"the fit computed no {', '.join(missing)}, which it was asked for")


def _validation_curves(results: dict, src_boundaries, tgt_boundaries):
    """(α_rel grid (union over pairs, increasing), val_sse (S, T, n_alpha) with NaN where a
    pair's grid lacks an α), or (None, None) when the fit had a single α (nothing validated)."""
    grids = [
        np.asarray(results[(i, j)].fitted.val_alphas, dtype=np.float64)
        for i in src_boundaries
        for j in tgt_boundaries
    ]
    if not grids or any(len(g) < 2 for g in grids):
        return None, None
    grid = np.unique(np.concatenate(grids))
    out = np.full((len(src_boundaries), len(tgt_boundaries), len(grid)), np.nan)
    for a, i in enumerate(src_boundaries):
        for b, j in enumerate(tgt_boundaries):
            f = results[(i, j)].fitted
            out[a, b, np.searchsorted(grid, f.val_alphas)] = f.val_sse
    return grid, out


def _grid_ends(alpha_rel: np.ndarray, grid) -> dict:
    """How many pairs chose the smallest or the largest α_rel of their grid."""
    if grid is None:
        return {}
    return {
        "alpha_grid": [float(a) for a in grid],
        "pairs_at_smallest_alpha": int(np.sum(alpha_rel <= grid[0])),
        "pairs_at_largest_alpha": int(np.sum(alpha_rel >= grid[-1])),
    }


def _with_bootstrap(
    data: dict,
    results: dict,
    arrays: dict,
    point: Summary,
    src_boundaries,
    tgt_boundaries,
    L_S,
    L_T,
    resampling: Resampling,
) -> dict:
    """Adds to `data` the per-document sums, `p_best` and the scores' `<score>_low` /
    `<score>_high`; returns the summary's bootstrap fields (`uncertainty.summarise`)."""
    dims = ("source_boundary", "target_boundary")
    doc_pair = np.stack(
        [
            np.stack([results[(i, j)].doc_pair for j in tgt_boundaries], axis=1)
            for i in src_boundaries
        ],
        axis=1,
    )  # (K, S, T, 3)
    first = src_boundaries[0]
    doc_target = np.stack(
        [results[(first, j)].doc_target for j in tgt_boundaries], axis=1
    )  # (K, T, 3)
    cc = np.stack([results[(first, j)].doc_cc for j in tgt_boundaries], axis=1)  # (B, T)
    K = doc_pair.shape[0]
    w = _weights(K, resampling)
    boot = uncertainty.resampled_scores(doc_pair, doc_target, cc, w)
    for name, v in boot.items():
        lo, hi = uncertainty.interval(v)
        data[f"{name}_low"], data[f"{name}_high"] = (dims, lo), (dims, hi)
    p_best, fields = uncertainty.summarise(
        boot["relative_error"],
        point,
        src_boundaries,
        tgt_boundaries,
        L_S,
        L_T,
        resampling,
        arrays["relative_error"],
    )
    data["p_best"] = (dims, p_best)
    doc = ("heldout_doc",)
    data["doc_n_tokens"] = (doc, doc_target[:, 0, 0])
    for k, name in enumerate(("doc_ratio_sum", "doc_error_sum", "doc_error_sq_sum")):
        data[name] = (doc + dims, doc_pair[..., k])
    data["doc_norm_sum"] = (doc + ("target_boundary",), doc_target[..., 1])
    data["doc_centred_sq_sum"] = (doc + ("target_boundary",), doc_target[..., 2])
    return fields


def grid_note(ds, extended: bool) -> str | None:
    """One line for the log when some pair chose an end of its α grid (None when none did):
    how many, at which value, and what to do."""
    s = ds.attrs.get("summary") or {}
    low, high = s.get("pairs_at_smallest_alpha", 0), s.get("pairs_at_largest_alpha", 0)
    if not (low or high):
        return None
    grid = s.get("alpha_grid") or []
    ends = []
    if low:
        ends.append(f"{low} chose the smallest α_rel {grid[0]:g}")
    if high:
        ends.append(f"{high} the largest {grid[-1]:g}")
    n = ds.sizes["source_boundary"] * ds.sizes["target_boundary"]
    why = (
        "the grid reached its limit there (`alphas` auto stops at 1e-12 and 1e6)"
        if extended
        else "widen `alphas`, or use `alphas` auto"
    )
    return f"of {n} pairs, {' and '.join(ends)}: {why}; val_sse holds each pair's validation curve"


def refuse_non_finite(arrays: dict, src_boundaries, tgt_boundaries, what: str = "scores") -> None:
    """No result holds, and no summary is computed over, a non-finite score: raise
    NonFiniteError naming the pairs (source boundary, target boundary) and the scores.
    arrays: {score name: (len(src_boundaries), len(tgt_boundaries))}."""
    bad = {}
    for name, v in arrays.items():
        for a, b in zip(*np.nonzero(~np.isfinite(v))):
            bad.setdefault((src_boundaries[a], tgt_boundaries[b]), []).append(f"{name} {v[a, b]}")
    if bad:
        shown = "; ".join(
            f"source {i} -> target {j}: {', '.join(what)}" for (i, j), what in list(bad.items())[:4]
        )
        more = f" (and {len(bad) - 4} more pairs)" if len(bad) > 4 else ""
        targets = sorted({j for _, j in bad})
        raise NonFiniteError(
            f"{len(bad)} boundary pair(s) have non-finite held-out {what} ({shown}{more}): the held-out activations of "
            f"target boundary {', '.join(map(str, targets))} have no variance or overflow float64, so no map can be "
            "scored there; nothing was written (fit other `target_boundaries`, or re-extract the stores)"
        )


def jsonable(obj):
    """`obj` with numpy scalars as Python numbers, tuples as lists, keys as strings and
    non-finite floats as None: what a Zarr attribute holds."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def check_result_room(
    output: str,
    src_boundaries,
    tgt_boundaries,
    source: Side,
    target: Side,
    split: Split,
    save_maps: bool,
) -> None:
    """`check_room` for the alignment result these boundaries, sides and split make.

    Parameters
    ----------
    output : str
        Where the result goes.
    src_boundaries, tgt_boundaries : sequence of int
        The source and target boundaries.
    source, target : Side
        The two models.
    split : Split
        The split (its held-out documents).
    save_maps : bool
        Whether W and c are kept.

    Raises
    ------
    OutputRefused
        A local `output` that cannot be written.
    DiskSpaceError
        A file system with less free space than the result needs.
    """
    attrs = len(
        json.dumps(
            jsonable(
                {"source": source.provenance, "target": target.provenance, "split": split.record()}
            )
        )
    )
    shape = ResultShape(
        len(src_boundaries),
        len(tgt_boundaries),
        source.d_model,
        target.d_model,
        len(split.test_docs),
    )
    check_room(output, result_bytes(shape, save_maps, attrs))


def check_room(output: str, sizes: ResultBytes) -> None:
    """Refuse, before any computing, a local `output` that cannot be written (no folder to
    write in, no permission: a probe file is created and removed in the folder the result
    will go to, or its nearest existing ancestor) or whose file system has less free space
    than `sizes` (`result_bytes`) × RESULT_MARGIN. Object stores give no free-space figure;
    `check_output` has already reached them."""
    lp = st.local_path(output)
    if lp is None:
        return
    folder = os.path.dirname(os.path.abspath(os.path.expanduser(lp)))
    existing = folder
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise OutputRefused(
            f"`output` {output}: {existing} is a file, not a folder, so nothing can be written under it: "
            "choose another `output`"
        )
    try:
        fd, probe = tempfile.mkstemp(prefix=".align-write-probe-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputRefused(
            f"`output` {output}: cannot write in {existing} ({e.strerror or e}): "
            "choose a folder you can write to (nothing was computed)"
        ) from None
    need = sum(sizes)
    free = st.free_bytes(existing)
    if need * RESULT_MARGIN > free:
        maps = f", {human_bytes(sizes.maps)} of it the maps of `save_maps`" if sizes.maps else ""
        raise DiskSpaceError(
            f"`output` {output}: the alignment result needs up to {human_bytes(need * RESULT_MARGIN)}{maps}, but only {human_bytes(free)} "
            f"is free in {existing}: free some space or choose another `output`{' (or drop `save_maps`)' if maps else ''}; "
            "nothing was computed"
        )


def write_alignment(
    output: str, ds, inputs: dict, overwrite: bool = False, storage_options: dict | None = None
) -> None:
    """Write the alignment Dataset to `output` through the store's result writer.

    A hidden temporary renamed into place: a killed write never opens as complete.

    Parameters
    ----------
    output : str
        Where the result goes.
    ds : xarray.Dataset
        The alignment result (`alignment_dataset`).
    inputs : dict
        {role: path} that -o may never replace (the stores; for the live route, model
        folders).
    overwrite : bool, optional
        Replace an alignment result at `output`.
    storage_options : dict, optional
        fsspec options of a remote `output`.
    """
    st.write_result(
        output, ds, "alignment", overwrite=overwrite, storage_options=storage_options, inputs=inputs
    )
