"""Figures from result Datasets (the xarray Datasets that `align.store.open_result` returns).

Every function here draws what a result already holds and computes no new statistic: the
argmin path and the summary numbers of an alignment come from its `summary` attribute (written
by `align fit`, METHODS.md §1), effective depths from a "depth" result (§5). Each function
returns a matplotlib Figure of exactly `size` pixels (width, height) at `dpi`; `save(fig, path)`
writes it as a PNG of that size. Matplotlib runs headless (the Agg backend) unless the caller
chose another backend before importing this module.

A Dataset of another schema is refused with a one-line AlignError naming both schemas.
"""

from __future__ import annotations

import math
import os
import sys

import matplotlib

# Headless by default; a notebook (MPLBACKEND set by the kernel) or a caller that already
# imported pyplot keeps its own backend.
if "MPLBACKEND" not in os.environ and "matplotlib.pyplot" not in sys.modules:
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from align.errors import InputError  # noqa: E402
from align.faults import fault_point  # noqa: E402
from align.store.temporaries import staged  # noqa: E402

DEFAULT_SIZE = {"alignment": (900, 750), "contributions": (1200, 500), "skipping": (1200, 900),
                "lens": (1200, 500), "depth": (700, 450), "erasure": (1200, 420), "igrad": (1200, 420), "depthscore": (1000, 420)}
METRICS = ("relative_error", "r2")
_REQUIRED = {
    "alignment": ("relative_error", "r2"),
    "contributions": ("rel_norm", "cos", "resid_cos"),
    "skipping": ("R", "O"),
    "lens": ("kl", "overlap"),
    "depth": ("effective_depth", "ratio"),
    "erasure": ("effect", "token", "predicts_answer", "n_tokens"),
    "igrad": ("attribution", "token", "predicts_answer", "n_tokens"),
    "depthscore": ("DS", "n_prompts"),
}
MAX_PANELS = 4  # prompts drawn by default, one row of panels each


def schema_of(ds) -> str | None:
    """The schema a result Dataset declares in attrs["align"], or None when it declares none."""
    marker = ds.attrs.get("align")
    return marker.get("schema") if isinstance(marker, dict) else None


def check_schema(ds, schema: str, what: str = "this plot") -> None:
    """Raise InputError (one line) unless `ds` is a result of `schema` holding its variables."""
    found = schema_of(ds)
    if found is not None and found != schema:
        raise InputError(f"{what} needs a result of schema {schema!r}, got one of schema {found!r}: "
                         f"use the plot function for {found!r} (or `align plot`, which picks it)")
    missing = [v for v in _REQUIRED[schema] if v not in ds.variables]
    if missing:
        raise InputError(f"{what} needs a result of schema {schema!r}; this Dataset lacks {', '.join(missing)}")


def _figure(size, dpi, nrows=1, ncols=1, **kw):
    w, h = size
    if w < 50 or h < 50:
        raise InputError(f"figure size {w}x{h} px is too small: give at least 50x50")
    fig, axes = plt.subplots(nrows, ncols, figsize=(w / dpi, h / dpi), dpi=dpi, squeeze=False, **kw)
    return fig, axes


def save(fig, path: str) -> str:
    """Write `fig` as a PNG of exactly its pixel size (no tight bounding box) at `path`, whole
    or not at all, and close it: drawn inside a marked temporary folder beside `path` and
    renamed over it (align.store.temporaries: a killed run's folder is cleaned by the next
    write of `path`; a full disk is one StoreError naming `path`, which is left as it was)."""
    with staged(path) as tmp:
        write_png(fig, tmp)
        fault_point("figure_before_rename")
    return path


def write_png(fig, path: str) -> None:
    """Draw `fig` into the file `path` as a PNG of exactly its pixel size, and close it."""
    try:
        fig.savefig(path, dpi=fig.dpi, format="png")
    finally:
        plt.close(fig)


def _edges(values) -> np.ndarray:
    """Cell edges around sorted coordinate values (midpoints; the outer cells as wide as
    their neighbour), so non-contiguous boundaries (e.g. 0, 4, 8) draw as cells."""
    v = np.asarray(values, dtype=float)
    if len(v) == 1:
        return np.array([v[0] - 0.5, v[0] + 0.5])
    mid = (v[1:] + v[:-1]) / 2
    return np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])


def _fmt(x, digits=2) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "undefined"
    return f"{x:.{digits}f}"


def nonfinite_cells(ds, metric: str = "relative_error") -> tuple[int, int, tuple[int, int] | None]:
    """(count, total, first (source boundary, target boundary)) of the NaN/±inf cells of an
    alignment result's `metric` matrix; first is None when every cell is finite."""
    m = ds[metric].transpose("source_boundary", "target_boundary")
    bad = np.argwhere(~np.isfinite(m.values.astype(float)))
    if not len(bad):
        return 0, int(m.size), None
    i, j = bad[0]
    return len(bad), int(m.size), (int(m["source_boundary"].values[i]), int(m["target_boundary"].values[j]))


def summary_text(ds) -> str:
    """The §1 summary of an alignment result, as one or two lines of text (from attrs).

    A result whose relative_error holds NaN/±inf gets no summary: the argmin path, Spearman
    and depth gap in its attrs would have been computed around the missing cells, so the
    text names the cells instead (how many, the first) and says the summary is withheld."""
    n, total, first = nonfinite_cells(ds)
    if n:
        return (f"no summary: relative_error is NaN/inf at {n} of {total} cells (first: source boundary {first[0]}, "
                f"target boundary {first[1]});\nno statistic is computed over them: fit again from stores without NaN")
    s = ds.attrs.get("summary") or {}
    rho = s.get("spearman")
    rho_txt = (_fmt(rho) + _ci(s, "spearman")) if rho is not None else f"undefined ({s.get('spearman_note', 'constant path')})"
    path = s.get("argmin_path", [])
    prob = s.get("argmin_path_probability")
    path_txt = f"argmin path {path}" + (f" (p {_fmt(prob)})" if prob is not None else "")
    slope = f"; slope {_fmt(s['slope'])}{_ci(s, 'slope')}" if s.get("slope") is not None else ""
    return (f"{path_txt}; Spearman {rho_txt}{slope}\n"
            f"mean depth gap {_fmt(s.get('mean_depth_gap'))}{_ci(s, 'mean_depth_gap')}; "
            f"soft-depth spread {_fmt(s.get('soft_depth_spread'))}{_ci(s, 'soft_depth_spread')}")


def _ci(summary: dict, key: str) -> str:
    """" [low, high]" of a summary statistic's 95% interval, or "" when it has none."""
    lo, hi = summary.get(f"{key}_low"), summary.get(f"{key}_high")
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    return f" [{_fmt(lo)}, {_fmt(hi)}]"


def _model_label(ds, role: str) -> str:
    name = str(ds.attrs.get(f"{role}_model", role))
    base = os.path.basename(name.rstrip("/")) or name
    prov = ds.attrs.get(role) if isinstance(ds.attrs.get(role), dict) else {}
    if prov.get("random_init"):
        base += f", random init (seed {prov.get('seed')})"
    n = ds.attrs.get(f"n_layers_{role}")
    return f"{base} ({n} layers)" if n is not None else base


def _draw_alignment(ax, ds, metric, vmin, vmax, cmap, title=None):
    mat = ds[metric].transpose("source_boundary", "target_boundary").values.astype(float)
    src = ds["source_boundary"].values
    tgt = ds["target_boundary"].values
    mesh = ax.pcolormesh(_edges(tgt), _edges(src), mat, cmap=cmap, vmin=vmin, vmax=vmax, shading="flat")
    s = ds.attrs.get("summary") or {}
    # No argmin path through a matrix with NaN/inf cells (see summary_text).
    path = (s.get("argmin_path") or []) if not nonfinite_cells(ds)[0] else []
    rows = s.get("source_boundaries") or [int(i) for i in src if i >= 1]
    if path:
        ax.plot(path, rows[: len(path)], "-", color="white", lw=1.5, gid="argmin_path")
        sizes = _path_marker_sizes(ds, path, rows)
        ax.scatter(path, rows[: len(path)], s=sizes, color="white", edgecolors="black", zorder=3,
                   label="argmin per row" + (" (area: p_best)" if "p_best" in ds else ""), gid="argmin_points")
        if "p_best" in ds:  # every target a resample chose, as a dot of area p_best
            pb = ds["p_best"].transpose("source_boundary", "target_boundary")
            ii, jj = np.nonzero(np.nan_to_num(pb.values) > 0)
            ax.scatter(tgt[jj], src[ii], s=60 * pb.values[ii, jj], color="white", alpha=0.5, edgecolors="none",
                       zorder=2, gid="p_best")
    Ls = int(ds.attrs.get("n_layers_source", src.max()))
    Lt = int(ds.attrs.get("n_layers_target", tgt.max()))
    ax.plot([0, Lt], [0, Ls], "--", color="red", lw=1.2, label="equal relative depth", gid="equal_depth")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(_edges(tgt)[0], _edges(tgt)[-1])
    ax.set_ylim(_edges(src)[0], _edges(src)[-1])
    ax.set_xlabel(f"target boundary: {_model_label(ds, 'target')}")
    ax.set_ylabel(f"source boundary: {_model_label(ds, 'source')}")
    ax.set_title(((title + "\n") if title else "") + summary_text(ds), fontsize=9)
    ax.legend(loc="lower right", fontsize=7, framealpha=0.8)
    return mesh


def _path_marker_sizes(ds, path, rows) -> np.ndarray:
    """Marker areas of the argmin path: 60 · p_best of each chosen cell (a cell chosen in every
    resample is a full dot), or 25 without a bootstrap."""
    if "p_best" not in ds:
        return np.full(len(path), 25.0)
    pb = ds["p_best"]
    return np.array([60.0 * max(float(pb.sel(source_boundary=i, target_boundary=j)), 0.05) for i, j in zip(rows, path)])


def plot_alignment(ds, metric: str = "relative_error", size=None, dpi: int = 100, title: str | None = None):
    """Heatmap of an alignment result's error matrix, source boundaries i (rows, y) against
    target boundaries j (columns, x).

    metric: "relative_error" (METHODS.md §1, lower is better) or "r2" (higher is better).
    Drawn on top: the per-row argmin path j*(i) of relative error for i >= 1 (from
    attrs["summary"]["argmin_path"]) with each point's area its p_best where the result holds
    the document bootstrap (and faint dots for the other targets the resamples chose), the
    line of equal relative depth j/L_T = i/L_S, and the summary statistics in the title with
    their 95% intervals. When relative_error holds NaN/inf, neither the path nor
    the summary is drawn: the title names the non-finite cells instead (`summary_text`). The
    colour scale spans the i >= 1, j >= 1 block (boundary 0 maps almost perfectly and would
    flatten the rest); cells outside it are clipped.
    Returns a Figure of `size` = (width, height) pixels [default 900x750].
    """
    return plot_alignments([ds], metric=metric, size=size, dpi=dpi, titles=[title] if title else None)


def plot_alignments(datasets, metric: str = "relative_error", size=None, dpi: int = 100, titles=None):
    """Several alignment results side by side on one colour scale (e.g. a trained pair and its
    random-init control); each panel as in `plot_alignment`. [default size: 900 px wide per
    panel, 750 high]"""
    if metric not in METRICS:
        raise InputError(f"--metric {metric!r} is not one of {', '.join(METRICS)}")
    for ds in datasets:
        check_schema(ds, "alignment", "plot_alignment")
    n = len(datasets)
    size = size or (DEFAULT_SIZE["alignment"][0] * n, DEFAULT_SIZE["alignment"][1])
    fig, axes = _figure(size, dpi, 1, n, layout="constrained")
    blocks = []
    for ds in datasets:
        m = ds[metric].transpose("source_boundary", "target_boundary")
        inner = m.sel(source_boundary=m.source_boundary >= 1, target_boundary=m.target_boundary >= 1).values
        blocks.append(inner if inner.size else m.values)
    finite = np.concatenate([b[np.isfinite(b)].ravel() for b in blocks]) if blocks else np.array([])
    vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (None, None)
    cmap = "viridis" if metric == "relative_error" else "viridis_r"
    mesh = None
    for k, ds in enumerate(datasets):
        mesh = _draw_alignment(axes[0, k], ds, metric, vmin, vmax, cmap, titles[k] if titles else None)
    fig.colorbar(mesh, ax=list(axes[0]), label=metric.replace("_", " ") + " (held-out)", shrink=0.9)
    return fig


def plot_contributions(ds, agg: str = "mean", depth=None, size=None, dpi: int = 100):
    """Per layer l: relative norm (left) and cosine (right) of what attention, the MLP and the
    whole layer add to the residual (METHODS.md §2), aggregated by `agg` ("mean" or "max"),
    plus cos(h_{l+1}, h_l) on the right. With a "depth" result, the cosine effective depth is
    marked. Returns a Figure of `size` pixels [default 1200x500]."""
    check_schema(ds, "contributions", "plot_contributions")
    aggs = [str(a) for a in ds["agg"].values]
    if agg not in aggs:
        raise InputError(f"--agg {agg!r} is not one of {', '.join(aggs)}")
    fig, axes = _figure(size or DEFAULT_SIZE["contributions"], dpi, 1, 2, layout="constrained")
    layers = ds["layer"].values
    for part in [str(p) for p in ds["part"].values]:
        axes[0, 0].plot(layers, ds["rel_norm"].sel(part=part, agg=agg).values, "o-", ms=3, label=part, gid=f"rel_norm/{part}")
        axes[0, 1].plot(layers, ds["cos"].sel(part=part, agg=agg).values, "o-", ms=3, label=part, gid=f"cos/{part}")
    axes[0, 1].plot(layers, ds["resid_cos"].sel(agg=agg).values, "k--", lw=1, label="cos(h_l+1, h_l)", gid="resid_cos")
    axes[0, 1].axhline(0, color="grey", lw=0.5)
    axes[0, 0].set_ylabel(f"‖contribution‖ / ‖residual‖ ({agg} over tokens)")
    axes[0, 1].set_ylabel(f"cosine with the residual ({agg} over tokens)")
    _mark_depth(axes[0, 1], depth, "cosine")
    _label_curves(axes[0], "layer")
    fig.suptitle(f"contributions: {_short(ds.attrs.get('model', ''))}", fontsize=10)
    return fig


def _label_curves(axes, xlabel: str) -> None:
    """Integer ticks, the x label and a legend on each axes of a row of per-layer curves."""
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(xlabel)
        ax.legend(fontsize=8)


def plot_skipping(ds, part: str = "layer", agg: str = "max", size=None, dpi: int = 100):
    """Layer skipping (METHODS.md §3): top, the R[s, l] heatmaps (skipped layer s, rows; later
    layer l, columns) of the "current" and "future" settings for `part`; bottom, O[s] bars for
    the three parts, per setting. `agg`: "max" or "mean_over_prompts". Returns a Figure of
    `size` pixels [default 1200x900]."""
    check_schema(ds, "skipping", "plot_skipping")
    parts = [str(p) for p in ds["part"].values]
    aggs = [str(a) for a in ds["agg"].values]
    if part not in parts:
        raise InputError(f"--part {part!r} is not one of {', '.join(parts)}")
    if agg not in aggs:
        raise InputError(f"--agg {agg!r} is not one of {', '.join(aggs)}")
    settings = [str(s) for s in ds["setting"].values]
    fig, axes = _figure(size or DEFAULT_SIZE["skipping"], dpi, 2, len(settings), layout="constrained")
    skipped, later = ds["skipped"].values, ds["later"].values
    vmax = float(np.nanmax(ds["R"].sel(part=part, agg=agg).values)) if ds["R"].size else 1.0
    mesh = None
    for k, setting in enumerate(settings):
        ax = axes[0, k]
        r = ds["R"].sel(setting=setting, part=part, agg=agg).transpose("skipped", "later").values
        mesh = ax.pcolormesh(_edges(later), _edges(skipped), r, cmap="magma", vmin=0, vmax=vmax or 1.0, shading="flat")
        ax.invert_yaxis()
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("later layer l")
        ax.set_ylabel(f"skipped layer s ({part})")
        ax.set_title(f"R[s, l], {setting} ({agg})", fontsize=10)
        ax = axes[1, k]
        width = 0.8 / len(parts)
        for q, p in enumerate(parts):
            ax.bar(skipped + (q - (len(parts) - 1) / 2) * width, ds["O"].sel(setting=setting, part=p, agg=agg).values,
                   width=width, label=p, gid=f"O/{setting}/{p}")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("skipped layer s")
        ax.set_ylabel("O[s]: ‖p' − p‖₂")
        ax.set_title(f"effect on the output, {setting} ({agg})", fontsize=10)
        ax.legend(fontsize=8)
    fig.colorbar(mesh, ax=list(axes[0]), label="relative change of later contributions")
    fig.suptitle(f"layer skipping: {_short(ds.attrs.get('model', ''))}", fontsize=10)
    return fig


def plot_lens(ds, depth=None, size=None, dpi: int = 100):
    """Logit lens (METHODS.md §4): KL(lens ‖ output) (left) and top-5 overlap (right) per
    boundary, token-weighted (solid) and prompt-weighted (dashed). With a "depth" result, the
    KL and overlap effective depths (§5) are marked as vertical lines where defined, and named
    as undefined where not. Returns a Figure of `size` pixels [default 1200x500]."""
    check_schema(ds, "lens", "plot_lens")
    fig, axes = _figure(size or DEFAULT_SIZE["lens"], dpi, 1, 2, layout="constrained")
    b = ds["boundary"].values
    for w in [str(x) for x in ds["weighting"].values]:
        style = "o-" if w == "token" else "s--"
        axes[0, 0].plot(b, ds["kl"].sel(weighting=w).values, style, ms=3, label=f"{w}-weighted", gid=f"kl/{w}")
        axes[0, 1].plot(b, ds["overlap"].sel(weighting=w).values, style, ms=3, label=f"{w}-weighted", gid=f"overlap/{w}")
    axes[0, 0].set_ylabel("KL(lens ‖ model output), nats")
    axes[0, 1].set_ylabel("top-5 overlap with the output")
    axes[0, 1].set_ylim(-0.02, 1.02)
    _mark_depth(axes[0, 0], depth, "kl")
    _mark_depth(axes[0, 1], depth, "overlap")
    _label_curves(axes[0], "residual boundary b")
    fig.suptitle(f"logit lens: {_short(ds.attrs.get('model', ''))}", fontsize=10)
    return fig


def plot_depth(ds, size=None, dpi: int = 100):
    """Effective-depth ratios (ED + 1) / L per rule (METHODS.md §5) as bars; an undefined
    rule has no bar and says why. Returns a Figure of `size` pixels [default 700x450]."""
    check_schema(ds, "depth", "plot_depth")
    fig, axes = _figure(size or DEFAULT_SIZE["depth"], dpi, layout="constrained")
    ax = axes[0, 0]
    rules = [str(r) for r in ds["rule"].values]
    ratio = ds["ratio"].values.astype(float)
    ax.bar(range(len(rules)), np.where(np.isfinite(ratio), ratio, 0.0), color="tab:blue", gid="ratio")
    reasons = ds.attrs.get("reasons") or {}
    for k, (r, v) in enumerate(zip(rules, ratio)):
        ed = float(ds["effective_depth"].sel(rule=r))
        ax.text(k, (v if np.isfinite(v) else 0) + 0.02, f"ED {ed:g}" if np.isfinite(ed) else "undefined",
                ha="center", fontsize=8)
        if not np.isfinite(v) and reasons.get(r):
            ax.text(k, 0.5, str(reasons[r])[:60], ha="center", rotation=90, fontsize=6, va="center")
    ax.set_xticks(range(len(rules)), rules)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("(ED + 1) / L")
    ax.set_title(f"effective depth: {_short(ds.attrs.get('model', ''))}", fontsize=10)
    return fig


def plot_depthscore(ds, part: str = "layer", agg: str = "max", size=None, dpi: int = 100):
    """Depth score against level (METHODS.md §6): one panel per effect (layer, output), one
    line per setting (the future one, P1's, first), for `part` and `agg`; the right axis reads
    DS / L. A flat line: the model uses no more depth for harder items. Undefined points are
    gaps; the prompt-bootstrap 95% intervals (ds_low, ds_high), where the result has them, are
    error bars. Returns a Figure of `size` pixels [default 1000x420]."""
    check_schema(ds, "depthscore", "plot_depthscore")
    parts, aggs = [str(p) for p in ds["part"].values], [str(a) for a in ds["agg"].values]
    if part not in parts:
        raise InputError(f"--part {part!r} is not one of {', '.join(parts)}")
    if agg not in aggs:
        raise InputError(f"--agg {agg!r} is not one of {', '.join(aggs)}")
    effects = [str(e) for e in ds["effect"].values]
    fig, axes = _figure(size or DEFAULT_SIZE["depthscore"], dpi, 1, len(effects), layout="constrained")
    levels = ds["level"].values
    L = ds.attrs.get("n_layers")
    for k, effect in enumerate(effects):
        ax = axes[0, k]
        settings = sorted((str(s) for s in ds["setting"].values), key=lambda s: s != "future")  # P1's first
        for setting in settings:
            y = ds["DS"].sel(setting=setting, part=part, agg=agg, effect=effect).values.astype(float)
            label = {"future": "future (P1)", "current": "current (align's extension)"}.get(setting, setting)
            line, = ax.plot(levels, y, marker="o", label=label, gid=f"DS/{effect}/{setting}")
            if "ds_low" in ds and "ds_high" in ds:
                lo = ds["ds_low"].sel(setting=setting, part=part, agg=agg, effect=effect).values.astype(float)
                hi = ds["ds_high"].sel(setting=setting, part=part, agg=agg, effect=effect).values.astype(float)
                ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(y)
                if ok.any():
                    # Asymmetric bars from the percentiles; clipped at 0 against rounding.
                    err = np.vstack([np.maximum(y[ok] - lo[ok], 0), np.maximum(hi[ok] - y[ok], 0)])
                    bars = ax.errorbar(levels[ok], y[ok], yerr=err, fmt="none", ecolor=line.get_color(), capsize=3)
                    bars.lines[2][0].set_gid(f"DS-interval/{effect}/{setting}")  # the vertical bars
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("level")
        ax.set_ylabel("depth score DS (layers)")
        if L:
            ax.set_ylim(0, L - 1)
            ax.secondary_yaxis("right", functions=(lambda d, L=L: d / L, lambda r, L=L: r * L)).set_ylabel("DS / L")
        ax.set_title(f"{effect} effect ({part}, {agg})", fontsize=10)
        ax.legend(fontsize=8)
    name = "P1's depth score (future setting)" if "future" in ds["setting"].values else "depth score (current setting)"
    fig.suptitle(f"{name} by level: {_short(ds.attrs.get('model', ''))}", fontsize=10)
    return fig


def _depth_value(depth, rule):
    if depth is None:
        return None
    check_schema(depth, "depth", "the depth marker")
    v = float(depth["effective_depth"].sel(rule=rule))
    return v if np.isfinite(v) else None


def _mark_depth(ax, depth, rule):
    if depth is None:
        return
    v = _depth_value(depth, rule)
    if v is None:
        ax.plot([], [], " ", label=f"{rule} effective depth: undefined")
    else:
        ax.axvline(v, color="tab:red", lw=1, ls=":", label=f"{rule} effective depth {v:g}", gid=f"depth/{rule}")


def _short(name) -> str:
    name = str(name)
    return os.path.basename(name.rstrip("/")) or name


def _prompts_to_draw(ds, prompts):
    n = int(ds.sizes["prompt"])
    chosen = list(range(min(n, MAX_PANELS))) if prompts is None else [int(p) for p in prompts]
    bad = [p for p in chosen if not 0 <= p < n]
    if bad or not chosen:
        raise InputError(f"prompt {bad[0] if bad else '(none)'} is not in this result: it holds prompts 0..{n - 1}")
    return chosen


def _token_axis(ax, ds, i):
    """x ticks labelled with prompt i's tokens (answer-predicting positions in red); returns T."""
    T = int(ds["n_tokens"].values[i])
    labels = [str(t).replace("\n", "\\n") for t in ds["token"].values[i, :T]]
    pred = ds["predicts_answer"].values[i, :T]
    ax.set_xticks(range(T), labels, rotation=90, fontsize=6 if T > 40 else 8)
    for tick, p in zip(ax.get_xticklabels(), pred):
        if p:
            tick.set_color("tab:red")
    return T


def plot_erasure(ds, prompts=None, size=None, dpi: int = 100):
    """Residual erasure (METHODS.md §6, [P1] Fig. 6b): per prompt, the map of E[b, t] = max over
    answer-predicting positions of ‖p′ − p‖₂ when the residual at boundary b (rows, y: b = 0..L,
    h_L the last block's output) at position t (columns, x, labelled with the tokens;
    answer-predicting ones in red) is replaced by the reference mean. A result written before
    boundary L was erased has rows 0..L−1 and says so in its titles. One panel per prompt in
    `prompts` [default: the first 4], on one colour scale. Returns a Figure of `size` pixels
    [default 1200 wide, 420 high per prompt]."""
    check_schema(ds, "erasure", "plot_erasure")
    chosen = _prompts_to_draw(ds, prompts)
    w, h = DEFAULT_SIZE["erasure"]
    fig, axes = _figure(size or (w, h * len(chosen)), dpi, len(chosen), 1, layout="constrained")
    E = ds["effect"].values
    vmax = float(np.nanmax(E[chosen])) if np.isfinite(E[chosen]).any() else 1.0
    no_last = ds.sizes["boundary"] == ds.attrs.get("n_layers")  # an older result: boundaries 0..L−1
    rows = f"b = 0..{int(ds['boundary'].values[-1])}" + (", no boundary L (an older result)" if no_last else "")
    mesh = None
    for k, i in enumerate(chosen):
        ax = axes[k, 0]
        T = _token_axis(ax, ds, i)
        b = ds["boundary"].values
        mesh = ax.pcolormesh(np.arange(T + 1) - 0.5, _edges(b), E[i, :, :T], cmap="viridis", vmin=0, vmax=vmax or 1.0,
                             shading="flat", gid=f"effect/{i}")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("boundary b")
        answer = str(ds["answer"].values[i]) if "answer" in ds else ""
        ax.set_title(f"prompt {i}: erasing h_b(t), {rows}; answer {answer[:40]!r}", fontsize=9)
    fig.colorbar(mesh, ax=[axes[k, 0] for k in range(len(chosen))], label="max over answer positions of ‖p′ − p‖₂")
    fig.suptitle(f"residual erasure: {_short(ds.attrs.get('model', ''))}", fontsize=10)
    return fig


def plot_igrad(ds, prompts=None, size=None, dpi: int = 100):
    """Integrated gradients ([P1] §3.3): per prompt (rows of panels) and part (columns), the
    attribution A[l, t] of the answer's target (attrs["variant"]: P1's summed probability, or
    the log-probability) to the part's object at layer l (y) and position t (x, tokens;
    answer-predicting ones in red), on a symmetric diverging scale per prompt. Each panel's
    title gives the largest completeness gap of its layers. Returns a Figure of `size` pixels [default 1200 wide, 420 high per prompt]."""
    check_schema(ds, "igrad", "plot_igrad")
    chosen = _prompts_to_draw(ds, prompts)
    parts = [str(p) for p in ds["part"].values]
    w, h = DEFAULT_SIZE["igrad"]
    fig, axes = _figure(size or (w, h * len(chosen)), dpi, len(chosen), len(parts), layout="constrained")
    A = ds["attribution"].transpose("prompt", "part", "layer", "position").values
    layers = ds["layer"].values
    # A result written before the variant was recorded is the align variant (log p, midpoint).
    v = ds.attrs.get("variant") or {"protocol": "align", "target": "logprob", "rule": "midpoint",
                                    "steps": ds.attrs.get("steps", "?")}
    target = "Σ p(answer)" if v["target"] == "prob" else "log p(answer)"
    how = f"{v['protocol']}, {v['rule']} rule, {v['steps']} steps"
    for k, i in enumerate(chosen):
        T = int(ds["n_tokens"].values[i])
        r = float(np.nanmax(np.abs(A[i, :, :, :T]))) or 1.0
        mesh = None
        for q, part in enumerate(parts):
            ax = axes[k, q]
            _token_axis(ax, ds, i)
            mesh = ax.pcolormesh(np.arange(T + 1) - 0.5, _edges(layers), A[i, q, :, :T], cmap="RdBu_r", vmin=-r, vmax=r,
                                 shading="flat", gid=f"attribution/{i}/{part}")
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylabel("layer l")
            gap = float(np.nanmax(np.abs(ds["completeness_gap"].sel(part=part).values[i]))) if "completeness_gap" in ds else float("nan")
            ax.set_title(f"prompt {i}, {part}: completeness gap ≤ {gap:.2g}", fontsize=9)
        fig.colorbar(mesh, ax=[axes[k, q] for q in range(len(parts))], label=f"attribution to {target}")
    fig.suptitle(f"integrated gradients ({how}): {_short(ds.attrs.get('model', ''))}", fontsize=10)
    return fig


PLOTTERS = {"alignment": plot_alignment, "contributions": plot_contributions, "skipping": plot_skipping,
            "lens": plot_lens, "depth": plot_depth, "erasure": plot_erasure, "igrad": plot_igrad,
            "depthscore": plot_depthscore}


def plot_result(ds, **options):
    """Draw any result Dataset with the function of its schema; options go to that function
    (unknown ones for that schema are refused)."""
    schema = schema_of(ds)
    if schema not in PLOTTERS:
        raise InputError(f"cannot plot a Dataset of schema {schema!r}: align plots {', '.join(PLOTTERS)}")
    fn = PLOTTERS[schema]
    import inspect

    allowed = set(inspect.signature(fn).parameters) - {"ds"}
    bad = [k for k, v in options.items() if v is not None and k not in allowed]
    if bad:
        raise InputError(f"option {bad[0].replace('_', '-')!r} does not apply to a {schema} result")
    return fn(ds, **{k: v for k, v in options.items() if v is not None})
