"""Each measure of an alignment result as the report shows it: ridge's relative error and every
measure of `align fit --measures` side by side on a pair's page (a row of panels, each on its
own colour scale, and one table of their paths, slopes, Spearman correlations, depth gaps,
values on the path and calibrated scores), and the index's grid of thumbnails per measure,
switched by tabs, on one colour scale per measure with its colour bar.

Ridge's statistics and their intervals are the result's summary; a measure's path is its
direction's pick per source row and its statistics are those of `compare.measures.path_summary`
(the formulas of ridge's summary, without intervals: the result keeps per-cell intervals of a
measure, not resamples of its path); its value on the path is the mean of the path's cells with
[mean low, mean high] (`compare.measures.path_interval`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align.compare.measures import held_measures, path_interval, path_summary, pick_of
from align.measures import DISTANCE, MEASURES, variable
from align.study import figures
from align.study import html as h

RIDGE = "ridge"


@dataclass
class View:
    """One measure of one result: its matrix (source_boundary, target_boundary), direction,
    path (target per source row `rows`), and its statistics {key: (value, low, high)}."""

    name: str
    matrix: object
    direction: str
    rows: list
    path: list
    stats: dict
    calibrated: float | None = None
    surviving: str = ""


def _summary_stat(sm: dict, key: str) -> tuple:
    return tuple(sm.get(k) for k in (key, f"{key}_low", f"{key}_high"))


def view_of(ds, name: str) -> View:
    """The View of measure `name` (RIDGE: the held-out relative error and its summary)."""
    Ls, Lt = int(ds.attrs["n_layers_source"]), int(ds.attrs["n_layers_target"])
    if name == RIDGE:
        sm = ds.attrs.get("summary") or {}
        m = ds["relative_error"].transpose("source_boundary", "target_boundary")
        path = list(sm.get("argmin_path") or [])
        rows = list(sm.get("source_boundaries") or [])[: len(path)]
        tgt = list(m["target_boundary"].values)
        src = list(m["source_boundary"].values)
        cols = [tgt.index(j) for j in path]
        idx = [src.index(i) for i in rows]
        on = _on_path(ds, "relative_error", idx, cols)
        stats = {k: _summary_stat(sm, k) for k in ("slope", "spearman", "mean_depth_gap")}
        return View(name, m, DISTANCE, rows, path, stats | {"on path": on})
    var = variable(name)
    m = ds[var].transpose("source_boundary", "target_boundary")
    src, tgt = m["source_boundary"].values, m["target_boundary"].values
    ps = path_summary(m.values.astype(np.float64), MEASURES[name], src, tgt, Ls, Lt)
    stats = {
        "slope": (ps["slope"], None, None),
        "spearman": (ps["spearman"], None, None),
        "mean_depth_gap": (ps["gap"], None, None),
        "on path": _on_path(ds, var, list(range(len(src))), ps["cols"]),
    }
    calibrated = None
    if f"{var}_calibrated" in ds:
        c = ds[f"{var}_calibrated"].transpose("source_boundary", "target_boundary").values
        calibrated = float(np.asarray(c, np.float64)[np.arange(len(src)), ps["cols"]].mean())
    record = ((ds.attrs.get("summary") or {}).get("measures") or {}).get(name) or {}
    surviving = ""
    if "cells_surviving" in record:
        surviving = f"{record['cells_surviving']} of {m.size} cells, path " + (
            "yes" if record.get("path_surviving") else "no"
        )
    return View(
        name, m, MEASURES[name], [int(i) for i in src], ps["path"], stats, calibrated, surviving
    )


def _on_path(ds, var: str, idx: list, cols: list) -> tuple:
    """(mean of `var` over the cells (idx[a], cols[a]), and its [mean low, mean high])."""
    m = ds[var].transpose("source_boundary", "target_boundary")
    value = float(np.asarray(m.values, np.float64)[idx, cols].mean()) if cols else np.nan
    if idx != list(range(len(cols))):
        ds = ds.isel(source_boundary=idx)
    low, high = path_interval(ds, var, cols)
    return value, low, high


def views(ds) -> list:
    """Ridge's View and every measure's the result holds, in MEASURES order."""
    return [view_of(ds, RIDGE)] + [view_of(ds, n) for n in held_measures(ds)]


def _title(v: View) -> str:
    return f"{v.name} ({v.direction}): {pick_of(v.direction)} path {v.path}"


def measures_row(s: str, t: str, ds) -> str:
    """Every measure's matrix and path, one panel each, side by side (they wrap on a narrow
    screen), each on its own colour scale; and the table of their numbers."""
    Ls, Lt = int(ds.attrs["n_layers_source"]), int(ds.attrs["n_layers_target"])
    vs = views(ds)
    panels = "".join(
        h.svg(
            figures.panel(v.matrix, v.direction, _title(v), v.rows, v.path, Ls, Lt),
            f"{v.name} matrix of {s} → {t} with its {pick_of(v.direction)} path",
        )
        for v in vs
    )
    return f'<div class="row">{panels}</div>' + measures_table(vs)


def measures_table(vs: list) -> str:
    """Per measure: direction, path, slope, Spearman ρ, mean depth gap (with intervals for
    ridge, from its summary), its mean on the path [mean low, mean high], its calibrated score
    on the path and the cells that beat the null, where the fit calibrated it."""
    calibrated = any(v.calibrated is not None for v in vs)
    head = ["measure", "direction", "path", "slope", "Spearman ρ", "mean depth gap", "on path"]
    head += ["calibrated on path", "beat the null"] if calibrated else []
    rows = []
    for v in vs:
        row = [v.name, f"{v.direction} ({pick_of(v.direction)})", " ".join(map(str, v.path))]
        row += [
            h.interval_cell(*v.stats[k], path=True) for k in ("slope", "spearman", "mean_depth_gap")
        ] + [h.interval_cell(*v.stats["on path"])]
        if calibrated:
            row += [h.number(v.calibrated), v.surviving or "—"]
        rows.append(row)
    return h.table(head, rows)


def index_grids(trained: list, fits: dict, pair_href, note) -> str:
    """The index's grid of thumbnails per measure (tabs where the results hold more than
    ridge): each measure's thumbnails on one colour scale, its colour bar above them; under
    each thumbnail the path's slope and `note(source, target)` (markup, or "")."""
    pairs = {
        (s, t): fits[(s, t, None)][1] for s in trained for t in trained if (s, t, None) in fits
    }
    names = [RIDGE] + [
        n for n in MEASURES if n != RIDGE and any(n in held_measures(ds) for ds in pairs.values())
    ]
    panes = [(n, _grid(n, trained, pairs, pair_href, note)) for n in names]
    return panes[0][1] if len(panes) == 1 else h.tabs("measure", panes)


def _grid(name: str, trained: list, pairs: dict, pair_href, note) -> str:
    held = {
        k: view_of(ds, name)
        for k, ds in pairs.items()
        if name == RIDGE or name in held_measures(ds)
    }
    mats = [v.matrix for v in held.values()]
    vmin, vmax = figures.inner_range(mats)
    if vmin is None:
        return "<p>No finite cell to draw.</p>"
    direction = MEASURES[name]
    label = (
        "held-out relative error (smaller is closer)"
        if name == RIDGE
        else f"{name} ({direction}: "
        + ("larger" if direction != DISTANCE else "smaller")
        + " is closer)"
    )
    label += "; one scale for every pair, boundaries ≥ 1"
    extend = figures.extend_of(mats, vmin, vmax)
    bar = h.svg(figures.colour_bar(label, direction, vmin, vmax, extend), f"colour bar of {name}")
    rows = []
    for s in trained:
        cells = [("html", f'<a href="models/{h.esc(s)}.html">{h.esc(s)}</a>')]
        for t in trained:
            v = held.get((s, t))
            if v is None:
                cells.append("—" if s != t and (s, t) not in pairs else "")
                continue
            ds = pairs[(s, t)]
            Ls, Lt = int(ds.attrs["n_layers_source"]), int(ds.attrs["n_layers_target"])
            fig = figures.thumbnail(v.matrix, direction, (vmin, vmax), v.rows, v.path, Ls, Lt)
            alt = f"{name} matrix of {s} → {t}"
            slope = h.interval(*v.stats["slope"])
            cells.append(
                (
                    "html",
                    f'<a href="{pair_href(s, t)}">{h.svg(fig, alt)}</a>slope {h.esc(slope)}'
                    + note(s, t),
                )
            )
        rows.append(cells)
    return bar + h.table(["source ↓ / target →"] + trained, rows, "grid")
