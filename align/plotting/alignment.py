"""The alignment result's figure: the error matrix with its argmin path, p_best, the line of
equal relative depth and the summary (from the result's attrs: nothing is recomputed)."""

from __future__ import annotations

import textwrap

import numpy as np

from align.errors import InputError
from align.fitting.results.headline import pairing_text
from align.measures import MEASURES, SIMILARITY
from align.names import model_name, pair_title
from align.plotting.common import DEFAULT_SIZE, check_schema, edges, figure, fmt, ticks

METRICS = ("relative_error", "r2")


def nonfinite_cells(ds, metric: str = "relative_error") -> tuple[int, int, tuple[int, int] | None]:
    """(count, total, first (source boundary, target boundary)) of the NaN/±inf cells of an
    alignment result's `metric` matrix; first is None when every cell is finite."""
    m = ds[metric].transpose("source_boundary", "target_boundary")
    bad = np.argwhere(~np.isfinite(m.values.astype(float)))
    if not len(bad):
        return 0, int(m.size), None
    i, j = bad[0]
    return (
        len(bad),
        int(m.size),
        (int(m["source_boundary"].values[i]), int(m["target_boundary"].values[j])),
    )


def summary_text(ds) -> str:
    """The §1 summary of an alignment result, as one or two lines of text (from attrs).

    A result whose relative_error holds NaN/±inf gets no summary: the argmin path, Spearman
    and depth gap in its attrs would have been computed around the missing cells, so the
    text names the cells instead (how many, the first) and says the summary is withheld."""
    n, total, first = nonfinite_cells(ds)
    if n:
        return (
            f"no summary: relative_error is NaN/inf at {n} of {total} cells (first: source boundary {first[0]}, "
            f"target boundary {first[1]});\nno statistic is computed over them: fit again from stores without NaN"
        )
    s = ds.attrs.get("summary") or {}
    rho = s.get("spearman")
    rho_txt = (
        (fmt(rho) + _ci(s, "spearman"))
        if rho is not None
        else f"undefined ({s.get('spearman_note', 'constant path')})"
    )
    path = s.get("argmin_path", [])
    prob = s.get("argmin_path_probability")
    path_txt = f"argmin path {path}" + (f" (p {fmt(prob)})" if prob is not None else "")
    slope = f"; slope {fmt(s['slope'])}{_ci(s, 'slope')}" if s.get("slope") is not None else ""
    return (
        f"{path_txt}; Spearman {rho_txt}{slope}\n"
        f"mean depth gap {fmt(s.get('mean_depth_gap'))}{_ci(s, 'mean_depth_gap')}; "
        f"soft-depth spread {fmt(s.get('soft_depth_spread'))}{_ci(s, 'soft_depth_spread')}"
    )


def _ci(summary: dict, key: str) -> str:
    """ " [low, high]" of a summary statistic's 95% interval, or "" when it has none."""
    lo, hi = summary.get(f"{key}_low"), summary.get(f"{key}_high")
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    return f" [{fmt(lo)}, {fmt(hi)}]"


def _model_label(ds, role: str) -> str:
    base = model_name(ds.attrs.get(f"{role}_model", role))
    prov = ds.attrs.get(role) if isinstance(ds.attrs.get(role), dict) else {}
    if prov.get("random_init"):
        base += f", random init (seed {prov.get('seed')})"
    n = ds.attrs.get(f"n_layers_{role}")
    return f"{base} ({n} layers)" if n is not None else base


def argmax_path(ds, metric: str = "r2") -> tuple[list, list]:
    """(rows i, j*(i) = argmax_j metric[i, j]) over the summary's boundaries ≥ 1 (first on
    exact ties): the best path of a similarity, as argmin_path is relative error's."""
    s = ds.attrs.get("summary") or {}
    m = ds[metric].transpose("source_boundary", "target_boundary")
    rows = s.get("source_boundaries") or [int(i) for i in m.source_boundary.values if i >= 1]
    cols = s.get("target_boundaries") or [int(j) for j in m.target_boundary.values if j >= 1]
    sub = m.sel(source_boundary=rows, target_boundary=cols).values.astype(float)
    return list(rows), [int(cols[int(np.argmax(r))]) for r in sub]


def _draw_alignment(ax, ds, metric, vmin, vmax, cmap, title=None):
    mat = ds[metric].transpose("source_boundary", "target_boundary").values.astype(float)
    src = ds["source_boundary"].values
    tgt = ds["target_boundary"].values
    mesh = ax.pcolormesh(
        edges(tgt), edges(src), mat, cmap=cmap, vmin=vmin, vmax=vmax, shading="flat"
    )
    s = ds.attrs.get("summary") or {}
    # No path through a matrix with NaN/inf cells (see summary_text).
    finite = not nonfinite_cells(ds)[0] and not nonfinite_cells(ds, metric)[0]
    if metric == "r2" and finite:
        rows, path = argmax_path(ds, metric)
        _draw_path(ax, path, rows, np.full(len(path), 25.0), "argmax r2 per row", "argmax_path")
    elif finite and s.get("argmin_path"):
        path = s["argmin_path"]
        rows = (s.get("source_boundaries") or [int(i) for i in src if i >= 1])[: len(path)]
        label = "argmin per row" + (" (area: p_best)" if "p_best" in ds else "")
        _draw_path(ax, path, rows, _path_marker_sizes(ds, path, rows), label, "argmin_path")
        if "p_best" in ds:  # every target a resample chose, as a dot of area p_best
            pb = ds["p_best"].transpose("source_boundary", "target_boundary")
            ii, jj = np.nonzero(np.nan_to_num(pb.values) > 0)
            ax.scatter(
                tgt[jj],
                src[ii],
                s=60 * pb.values[ii, jj],
                color="white",
                alpha=0.5,
                edgecolors="none",
                zorder=2,
                gid="p_best",
            )
    Ls = int(ds.attrs.get("n_layers_source", src.max()))
    Lt = int(ds.attrs.get("n_layers_target", tgt.max()))
    ax.plot(
        [0, Lt], [0, Ls], "--", color="red", lw=1.2, label="equal relative depth", gid="equal_depth"
    )
    ax.xaxis.set_major_locator(ticks(integer=True))
    ax.yaxis.set_major_locator(ticks(integer=True))
    ax.set_xlim(edges(tgt)[0], edges(tgt)[-1])
    ax.set_ylim(edges(src)[0], edges(src)[-1])
    # Labels, title and caption wrapped to the panel's width (a character of 10 pt is about
    # 5.5 pt wide, of 8 pt 4.4 pt), so a long line neither runs off a narrow figure nor
    # squeezes the panel.
    width = ax.figure.get_figwidth() * 72 * ax.get_position().width
    ax.set_xlabel(_wrap(f"target boundary: {_model_label(ds, 'target')}", width / 5.5))
    ax.set_ylabel(_wrap(f"source boundary: {_model_label(ds, 'source')}", width / 5.5))
    ax.set_title(_wrap(title or pair_title(ds.attrs), width / 6), fontsize=11)
    chars = max(30, int(width / 4.4))
    text = "\n".join(textwrap.fill(line, chars) for line in caption(ds, metric).split("\n"))
    ax.annotate(
        text,
        xy=(0.5, 0),
        xycoords=ax.xaxis.label,
        xytext=(0, -4),
        textcoords="offset points",
        ha="center",
        va="top",
        fontsize=8,
        gid="caption",
    )
    ax.legend(loc="lower right", fontsize=7, framealpha=0.8)
    return mesh


def _wrap(text: str, chars: float) -> str:
    """`text` in lines of at most `chars` characters (at least 24)."""
    return textwrap.fill(text, max(24, int(chars)))


def caption(ds, metric: str = "relative_error") -> str:
    """The caption under an alignment panel: the statistics of the summary (`summary_text`),
    for r2 the argmax path first (the statistics are those of relative error's argmin path),
    and the pairing of two tokenizers (`pairing_text`)."""
    text = summary_text(ds)
    if metric == "r2" and not nonfinite_cells(ds)[0] and not nonfinite_cells(ds, "r2")[0]:
        text = f"argmax r2 path {argmax_path(ds)[1]}; relative error's " + text
    pairing = pairing_text(ds.attrs.get("pairing"))
    return text + (f"\n{pairing}" if pairing else "")


def _draw_path(ax, path, rows, sizes, label, gid):
    ax.plot(path, rows, "-", color="white", lw=1.5, gid=gid)
    ax.scatter(
        path,
        rows,
        s=sizes,
        color="white",
        edgecolors="black",
        zorder=3,
        label=label,
        gid=gid.replace("path", "points"),
    )


def _path_marker_sizes(ds, path, rows) -> np.ndarray:
    """Marker areas of the argmin path: 60 · p_best of each chosen cell (a cell chosen in every
    resample is a full dot), or 25 without a bootstrap."""
    if "p_best" not in ds:
        return np.full(len(path), 25.0)
    pb = ds["p_best"]
    return np.array(
        [
            60.0 * max(float(pb.sel(source_boundary=i, target_boundary=j)), 0.05)
            for i, j in zip(rows, path)
        ]
    )


def plot_alignment(
    ds, metric: str = "relative_error", size=None, dpi: int = 100, title: str | None = None
):
    """Heatmap of an alignment result's error matrix, source boundaries i (rows, y) against
    target boundaries j (columns, x).

    metric: "relative_error" (docs/methods.md#held-out-scores, lower is better) or "r2" (higher is better).
    Drawn on top: the metric's own best path, for relative error the per-row argmin j*(i) for
    i >= 1 (from attrs["summary"]["argmin_path"]) with each point's area its p_best where the
    result holds the document bootstrap (and faint dots for the other targets the resamples
    chose), for r2 the per-row argmax (`argmax_path`); the line of equal relative depth
    j/L_T = i/L_S. The title names the pair (`pair_title`: model names without hashes); the
    caption under the panel holds the summary statistics with their 95% intervals and, for
    two tokenizers, the pairing and its coverage (`caption`). When relative_error holds
    NaN/inf, neither the path nor the summary is drawn: the caption names the non-finite
    cells instead (`summary_text`). The colour scale spans the i >= 1, j >= 1 block
    (boundary 0 maps almost perfectly and would flatten the rest); where a boundary-0 cell
    lies beyond it, the colour bar is extended (a triangle at that end) and its label says so.
    Returns a Figure of `size` = (width, height) pixels [default 900x750].
    """
    return plot_alignments(
        [ds], metric=metric, size=size, dpi=dpi, titles=[title] if title else None
    )


def plot_alignments(
    datasets, metric: str = "relative_error", size=None, dpi: int = 100, titles=None
):
    """Several alignment results side by side on one colour scale.

    E.g. a trained pair and its random-init control; each panel as in `plot_alignment`.

    Parameters
    ----------
    datasets : list of xarray.Dataset
        Alignment results.
    metric : str, optional
        "relative_error" or "r2".
    size : tuple of int, optional
        (width, height) in pixels [default: 900 px wide per panel, 750 high].
    dpi : int, optional
        Dots per inch.
    titles : list of str, optional
        One title a panel (default: the pair's names).

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        An unknown metric, or a Dataset that is not an alignment result.
    """
    if metric not in METRICS:
        raise InputError(f"`metric` {metric!r} is not one of {', '.join(METRICS)}")
    for ds in datasets:
        check_schema(ds, "alignment", "plot_alignment")
    n = len(datasets)
    size = size or (DEFAULT_SIZE["alignment"][0] * n, DEFAULT_SIZE["alignment"][1])
    fig, axes = figure(size, dpi, 1, n, layout="constrained")
    blocks = []
    for ds in datasets:
        m = ds[metric].transpose("source_boundary", "target_boundary")
        inner = m.sel(
            source_boundary=m.source_boundary >= 1, target_boundary=m.target_boundary >= 1
        ).values
        blocks.append(inner if inner.size else m.values)
    finite = np.concatenate([b[np.isfinite(b)].ravel() for b in blocks]) if blocks else np.array([])
    vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (None, None)
    cmap = "viridis" if metric == "relative_error" else "viridis_r"
    mesh = None
    for k, ds in enumerate(datasets):
        mesh = _draw_alignment(
            axes[0, k], ds, metric, vmin, vmax, cmap, titles[k] if titles else None
        )
    below, above = _clipped(datasets, metric, vmin, vmax)
    extend = {(False, False): "neither", (True, False): "min", (False, True): "max"}.get(
        (below, above), "both"
    )
    label = metric.replace("_", " ") + " (held-out)"
    if below or above:
        label += "\nscale of boundaries ≥ 1; boundary-0 cells beyond it clipped"
    # A narrow panel (a phone's figure) has its colour bar under it, where its label has room.
    flat = size[0] / n < 500
    if flat:
        label = "\n".join(_wrap(line, size[0] / n / 7) for line in label.split("\n"))
    fig.colorbar(
        mesh,
        ax=list(axes[0]),
        label=label,
        shrink=0.9,
        extend=extend,
        orientation="horizontal" if flat else "vertical",
    )
    return fig


def _clipped(datasets, metric, vmin, vmax) -> tuple[bool, bool]:
    """Whether any finite cell lies below vmin, above vmax (the boundary-0 cells the colour
    scale leaves out)."""
    if vmin is None:
        return False, False
    values = np.concatenate([ds[metric].values.astype(float).ravel() for ds in datasets])
    values = values[np.isfinite(values)]
    return bool((values < vmin).any()), bool((values > vmax).any())


def plot_measure(ds, name: str, size=None, dpi: int = 100):
    """Heatmap of one similarity measure of an alignment result (`align fit --measures`),
    source boundaries i (rows, y) against target boundaries j (columns, x), with the path its
    summary picked (attrs["summary"]["measures"][name]["path"]: each row's argmax for a
    similarity, argmin for a distance) and the line of equal relative depth; the colour
    scale's direction follows the measure's (darker is closer, as in the error matrix). Returns
    a Figure. `ridge` is the fit's own held-out relative error: `plot_alignment`'s figure of
    it (every alignment result holds it)."""
    check_schema(ds, "alignment", "plot_measure")
    if name == "ridge":
        return plot_alignment(ds, "relative_error", size=size, dpi=dpi)
    record = ((ds.attrs.get("summary") or {}).get("measures") or {}).get(name)
    if record is None or record.get("array") not in ds:
        held = [k for k in MEASURES if k in ((ds.attrs.get("summary") or {}).get("measures") or {})]
        raise InputError(
            f"`measure` {name}: not in this result (it holds {', '.join(held) or 'no measure'}); "
            "fit with `align fit --measures` to add it"
        )
    size = size or DEFAULT_SIZE["alignment"]
    fig, axes = figure(size, dpi, 1, 1, layout="constrained")
    ax = axes[0, 0]
    mat = ds[record["array"]].transpose("source_boundary", "target_boundary").values
    src, tgt = ds["source_boundary"].values, ds["target_boundary"].values
    cmap = "viridis_r" if record["direction"] == SIMILARITY else "viridis"
    mesh = ax.pcolormesh(edges(tgt), edges(src), mat, cmap=cmap, shading="flat")
    pick = "argmax" if record["direction"] == SIMILARITY else "argmin"
    ax.plot(
        record["path"],
        src,
        marker="o",
        color="white",
        mec="black",
        gid="measure_path",
        label=f"{pick} per row",
    )
    Ls = int(ds.attrs.get("n_layers_source", src.max()))
    Lt = int(ds.attrs.get("n_layers_target", tgt.max()))
    ax.plot([0, Lt], [0, Ls], "--", color="red", lw=1.2, label="equal relative depth")
    ax.xaxis.set_major_locator(ticks(integer=True))
    ax.yaxis.set_major_locator(ticks(integer=True))
    ax.set_xlabel(f"target boundary: {_model_label(ds, 'target')}")
    ax.set_ylabel(f"source boundary: {_model_label(ds, 'source')}")
    ax.set_title(f"{name} ({record['direction']}): {pick} path {record['path']}", fontsize=9)
    ax.legend(loc="lower right", fontsize=7, framealpha=0.8)
    fig.colorbar(mesh, ax=ax, label=f"{name} (held-out, {record['direction']})", shrink=0.9)
    return fig
