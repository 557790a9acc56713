"""Each measure of an alignment result as the report shows it: ridge's relative error and every
measure of `align fit --measures` side by side on a pair's page (a row of panels, each on its
own colour scale, and one table of their paths, slopes, Spearman correlations, depth gaps,
values on the path and calibrated scores), and the index's grid of thumbnails per measure,
switched by tabs, on one colour scale per measure with its colour bar.

Ridge's statistics and their intervals are the result's summary; a measure's path is its
direction's pick per source row and its statistics are those of `compare.measures.path_summary`
(the formulas of ridge's summary, without intervals: the result keeps per-cell intervals of a
measure, not resamples of its path); its value on the path is the mean of the path's cells with
the interval `align compare --measure` gives it: the delete-a-group jackknife of that mean from
the cells' recomputations the fit kept (`<measure>_left_out`, `compare.measures.path_left_out`),
and "no interval" where the result keeps none (ridge, whose bootstrap keeps no resamples of a
cell; a measure fitted before results kept them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align.compare.measures import held_measures, path_left_out, path_summary, pick_of
from align.measures import DISTANCE, MEASURES, variable
from align.measures.registry import REGISTRY
from align.stats import jackknife
from align.study import figures
from align.study import html as h
from align.study.labels import shown
from align.study.schema import REPLICATE

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
        on = _on_path(ds, name, "relative_error", idx, cols)
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
        "on path": _on_path(ds, name, var, list(range(len(src))), ps["cols"]),
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


def _on_path(ds, name: str, var: str, idx: list, cols: list) -> tuple:
    """(mean θ̂ of `var` over the cells (idx[a], cols[a]), low, high): the interval is the
    delete-a-group jackknife one of that mean, θ̂ ± t · se of the path's recomputations θ_(g)
    (`path_left_out`, `jackknife.interval`, clipped to the measure's range), as `align compare
    --measure` gives it; (None, None) where the result keeps no recomputations of `var`."""
    m = ds[var].transpose("source_boundary", "target_boundary")
    value = float(np.asarray(m.values, np.float64)[idx, cols].mean()) if cols else np.nan
    if idx != list(range(len(cols))):
        ds = ds.isel(source_boundary=idx)
    left = path_left_out(ds, var, cols) if cols else None
    if left is None:
        return value, None, None
    measure = REGISTRY.get(name)
    low, high = jackknife.interval(value, left, measure.range if measure else None)
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
    ridge, from its summary), its mean on the path with its jackknife interval (`_on_path`;
    "no interval" where the result keeps no recomputations), its calibrated score on the path
    and the cells that beat the null, where the fit calibrated it."""
    calibrated = any(v.calibrated is not None for v in vs)
    head = ["measure", "direction", "path", "slope", "Spearman ρ", "mean depth gap", "on path"]
    head += ["calibrated on path", "beat the null"] if calibrated else []
    rows = []
    for v in vs:
        row = [v.name, f"{v.direction} ({pick_of(v.direction)})", " ".join(map(str, v.path))]
        row += [
            h.interval_cell(*v.stats[k], path=True) for k in ("slope", "spearman", "mean_depth_gap")
        ] + [_on_path_cell(*v.stats["on path"])]
        if calibrated:
            row += [h.number(v.calibrated), v.surviving or "—"]
        rows.append(row)
    return h.table(head, rows)


def _on_path_cell(value, low, high) -> tuple:
    """The mean on the path with its interval, or with "no interval" where it has none."""
    if low is None or high is None:
        return ("html", h.esc(h.number(value)) + '<span class="note">no interval</span>')
    return h.interval_cell(value, low, high)


def index_grids(trained: list, fits: dict, pair_href, note, named: dict | None = None) -> str:
    """The index's grid of thumbnails per measure (tabs where the results hold more than
    ridge): a row and a column per model, the replicates of a model (NAME@K, `schema`) in one
    (`grouped`); each measure's thumbnails on one colour scale, its colour bar above them; under
    each thumbnail the path's slope and `note(source, target)` (markup, or ""); `named`: what
    the study file named each replicate's checkpoint by (`labels.labels`), in the links' titles."""
    pairs = {
        (s, t): fits[(s, t, None)][1] for s in trained for t in trained if (s, t, None) in fits
    }
    names = [RIDGE] + [
        n for n in MEASURES if n != RIDGE and any(n in held_measures(ds) for ds in pairs.values())
    ]
    groups = grouped(trained)
    panes = [(n, _grid(n, groups, pairs, (pair_href, note, named or {}))) for n in names]
    return panes[0][1] if len(panes) == 1 else h.tabs("measure", panes)


def grouped(trained: list) -> dict:
    """{model: [its replicates' names]} in the study's order: a replicate NAME@K under NAME,
    a model of one checkpoint under its own name."""
    out = {}
    for m in trained:
        out.setdefault(m.split(REPLICATE)[0], []).append(m)
    return out


def _grid(name: str, groups: dict, pairs: dict, links: tuple) -> str:
    pair_href, note, named = links
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
    for a, sources in groups.items():
        cells = [("html", f'<a href="models/{h.esc(sources[0])}.html">{h.esc(a)}</a>')]
        for b, targets in groups.items():
            found = [(s, t) for s in sources for t in targets if (s, t) in held]
            if not found:
                fitted = any((s, t) in pairs for s in sources for t in targets)
                cells.append("—" if a != b and not fitted else "")
                continue
            thumb = _thumbnail(name, found[0], held[found[0]], pairs, (vmin, vmax), pair_href)
            more = _replicates(found, held, pair_href, named)
            cells.append(("html", thumb + note(*found[0]) + more))
        rows.append(cells)
    return bar + h.table(["source ↓ / target →"] + list(groups), rows, "grid")


def _thumbnail(name: str, pair: tuple, v: View, pairs: dict, scale: tuple, pair_href) -> str:
    """A pair's thumbnail linked to its page, its path's slope under it."""
    s, t = pair
    ds = pairs[pair]
    Ls, Lt = int(ds.attrs["n_layers_source"]), int(ds.attrs["n_layers_target"])
    fig = figures.thumbnail(v.matrix, MEASURES[name], scale, v.rows, v.path, Ls, Lt)
    slope = h.interval(*v.stats["slope"])
    return f'<a href="{pair_href(s, t)}">{h.svg(fig, f"{name} matrix of {s} → {t}")}</a>' + (
        f"slope {h.esc(slope)}"
    )


def _replicates(found: list, held: dict, pair_href, named: dict) -> str:
    """Under a cell of several replicate pairs (the thumbnail is the first's): their count,
    their slopes' range, and a link to each pair's page; "" for one pair."""
    if len(found) < 2:
        return ""
    slopes = [v for v in (held[p].stats["slope"][0] for p in found) if v is not None and v == v]
    spread = f", slope {h.number(min(slopes))} – {h.number(max(slopes))}" if slopes else ""
    links = " ".join(
        f'<a href="{pair_href(s, t)}" title="{h.esc(shown(s, named))} → '
        f'{h.esc(shown(t, named))}">{k + 1}</a>'
        for k, (s, t) in enumerate(found)
    )
    return f'<span class="reps">{len(found)} replicate pairs{spread}: {links}</span>'
