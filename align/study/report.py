"""`align report DIR -o REPORT`: a study's results as a static site that opens offline.

Pages: index.html (the models × models grid of pairs, a model's replicates in one row and
column (`views.grouped`), each cell the matrix's thumbnail with axes on the
grid's one colour scale, the slope and its interval, the pairing's coverage where the
tokenizers differ, tabs that switch the grid between the measures the fits hold: `views`; the
sentences that say what holds), pairs/S--T.html (the matrix drawn by
`align.plotting.plot_alignment` and as a table of each cell's value and interval, the argmin
path, p_best along it, every measure side by side with its path, slope and calibrated score
(`views`), each measure's path with the calibration where the fit made one, the controls
beside, each on its own scale, the pairing, the provenance collapsed), models/NAME.html (each
analysis drawn by `align.plotting.plot_result`, with its numbers and their intervals in a
table: the curves, and for layer skipping the output effect O[s] per setting and part),
corpus.html (the corpus, the options, the study file). Every figure is an inline SVG with a
name (`html.svg`); nothing is computed here that the results do not hold, but the comparisons
the sentences make and the statistics of a measure's path (`compare.measures.path_summary`).
"""

from __future__ import annotations

import itertools
import json
import os

import numpy as np

from align import messages
from align.errors import InputError, StoreError
from align.faults import fault_point
from align.measures import SIMILARITY
from align.names import labelled
from align.plotting import DEFAULT_SIZE, plot_alignment, plot_result, schema_of
from align.store import open_result
from align.store.temporaries import temporary, write_failed
from align.study import figures, labels, lenses, replicates, views
from align.study import html as h
from align.study.schema import twin_name
from align.study.state import DONE, is_study, read_state
from align.study.units import pair_stem

MARKER = ".align-report"  # the file that marks a folder as a report `write_report` may replace
SUMMARY = (  # (label, key in the summary) of the pair table
    ("Spearman ρ", "spearman"),
    ("slope", "slope"),
    ("mean depth gap", "mean_depth_gap"),
    ("soft-depth spread", "soft_depth_spread"),
)


def write_report(root: str, output: str, log=None) -> str:
    """Write the report of the study in `root` to the folder `output`, whole.

    Built in a marked temporary folder beside it (`align.store.temporaries`, the result
    writer's: a later write removes it only when its marker proves it align's and its writer
    gone), then renamed into place. `output` is replaced only when it is empty or a report
    (its `.align-report` marker, written first), checked again just before; nothing else
    beside it is touched.

    Parameters
    ----------
    root : str
        The study's folder.
    output : str
        The report's folder (new, or a report).
    log : callable, optional
        Receives each message (default: stderr).

    Returns
    -------
    str
        `output`.

    Raises
    ------
    InputError
        `root` that is not a study folder, or `output` that exists and is not a report.
    """
    log = log or messages.say
    if not is_study(root):
        raise InputError(f"{root} is not a study folder (no study.json): run `align study` first")
    state = read_state(root)
    check_report_output(output)
    pages = {MARKER: "an align study report: `align report` replaces this folder\n"}
    with messages.heartbeat(log, "align report: drawing the pages"):
        pages.update(build_pages(root, state))
    path = os.path.abspath(os.path.expanduser(output))
    with temporary(path, output) as t:
        try:
            for rel, text in pages.items():  # the marker first
                os.makedirs(os.path.dirname(os.path.join(t.new, rel)) or t.new, exist_ok=True)
                with open(os.path.join(t.new, rel), "w", encoding="utf-8") as f:
                    f.write(text)
        except OSError as e:
            raise StoreError(write_failed(output, e)) from None
        fault_point("report_before_rename")
        check_report_output(output)  # what is there now: a report, an empty folder or nothing
        if os.path.isdir(path) and os.listdir(path):
            os.rename(path, t.old)
        elif os.path.isdir(path):
            os.rmdir(path)
        os.rename(t.new, path)
    log(f"align report: wrote {output} ({len(pages) - 1} pages): open {output}/index.html")
    return output


def check_report_output(output: str) -> None:
    """Refuse, in one line, an `output` the report may not replace: a link, a file, or a
    folder that is neither empty nor a report (no marker)."""
    path = os.path.expanduser(output)
    if os.path.islink(path):
        raise InputError(
            f"`output` {output} is a symbolic link: give the report's folder itself (a new or "
            "empty folder, or a report)"
        )
    if os.path.exists(path) and not _replaceable(path):
        raise InputError(
            f"`output` {output} exists and is not a report (no {MARKER}): give a new or empty folder"
        )


def _replaceable(path: str) -> bool:
    """An empty folder, or a report written before (it holds the marker)."""
    return os.path.isdir(path) and (
        not os.listdir(path) or os.path.isfile(os.path.join(path, MARKER))
    )


def _done(state: dict, kind: str) -> list:
    """(name, entry) of the units of `kind` that are done, in the study's order."""
    units = state.get("units", {})
    return [
        (n, units[n])
        for n in state.get("order", [])
        if units.get(n, {}).get("kind") == kind and units[n].get("state") == DONE
    ]


def _open(root: str, entry: dict):
    return open_result(os.path.join(root, entry["output"]))


def build_pages(root: str, state: dict) -> dict:
    """{relative path: HTML} of every page."""
    fits, named = {}, labels.labels(state)
    for name, entry in _done(state, "fit"):
        d = entry["definition"]
        fits[(d["source"], d["target"], d.get("control"))] = (name, _open(root, entry))
    pages = {}
    for (s, t, control), (_, ds) in fits.items():
        if control is None:
            through = lenses.through_section(root, state, s, t)
            pages[f"pairs/{pair_file(s, t)}"] = pair_page(
                s, t, ds, _controls_of(fits, s, t), through, named
            )
    models = state.get("models") or sorted({k[0] for k in fits} | {k[1] for k in fits})
    for m in models:
        pages[f"models/{m}.html"] = model_page(root, state, m)
    pages["corpus.html"] = corpus_page(state)
    pages["index.html"] = index_page(state, models, fits)
    pages.update(replicates.pages(root, state, pages))  # the spread across replicates, where any
    return pages


def pair_file(source: str, target: str) -> str:
    """The page of the pair source -> target, named as its fit (`units.pair_stem`)."""
    return f"{pair_stem(source, target)}.html"


def _summary(ds) -> dict:
    return ds.attrs.get("summary") or {}


def _coverage(ds) -> str | None:
    p = ds.attrs.get("pairing") or {}
    if p.get("mode") != "char-anchors":
        return None
    return "coverage " + ", ".join(
        f"{side} {100 * p[side]['coverage']:.1f}%" for side in ("source", "target") if side in p
    )


def _stat(s: dict, key: str) -> str:
    return h.interval(s.get(key), s.get(f"{key}_low"), s.get(f"{key}_high"))


def index_page(state: dict, models: list, fits: dict) -> str:
    trained = [m for m in models if not any(k[1] == m and k[2] == "random_init" for k in fits)]
    named = labels.labels(state)
    table_rows, said = [], []
    for s in trained:
        for t in trained:
            found = fits.get((s, t, None))
            if found is None:
                continue
            ds = found[1]
            sm = _summary(ds)
            cov = _coverage(ds)
            table_rows.append(
                [
                    (
                        "html",
                        f'<a href="pairs/{pair_file(s, t)}">{h.esc(labels.shown(s, named))} → '
                        f"{h.esc(labels.shown(t, named))}</a>",
                    )
                ]
                + [h.interval_cell(*_triple(sm, key), path=True) for _, key in SUMMARY]
                + [str(sm.get("argmin_path")), cov or "same tokenizer"]
            )
            said += pair_sentences(s, t, ds, _controls_of(fits, s, t))

    def note(s, t):
        cov = _coverage(fits[(s, t, None)][1])
        return f"<br>{h.esc(cov)}" if cov else ""

    grid = views.index_grids(trained, fits, lambda s, t: f"pairs/{pair_file(s, t)}", note, named)
    numbers = h.table(
        ["pair"] + [label for label, _ in SUMMARY] + ["argmin path", "pairing"], table_rows
    )
    body = (
        f"<p>{_models_count(trained)}, {_count(len(table_rows), 'pair')}. Each cell: the "
        "matrix of a measure between every source boundary (rows, bottom to top) and every "
        "target boundary (columns) of the pair, darker is closer (for ridge the held-out "
        "relative error, lower is better), with the path each source row picks in white and "
        "the line of equal relative depth dashed red; under it the path's slope, for ridge with "
        "its 95% interval. A model of several checkpoints (replicates) has one row and one "
        "column: its cell shows the first replicate pair's matrix, how many replicate pairs "
        "it holds, their slopes' range and a link to each pair's page. The tabs switch the "
        "grid between the measures the pairs hold.</p>"
        f"<h2>Grid</h2>{grid}<h2>What holds</h2>"
        + "".join(h.sentence(text, holds) for text, holds in said)
        + f"<h2>Numbers</h2>{numbers}<h2>Models</h2><ul>"
        + "".join(
            f'<li><a href="models/{m}.html">{h.esc(labels.shown(m, named))}</a></li>'
            for m in models
        )
        + "</ul>"
    )
    return h.page(f"Study {state.get('name', '')}", body)


def _triple(s: dict, key: str) -> tuple:
    """(value, low, high) of summary statistic `key`."""
    return s.get(key), s.get(f"{key}_low"), s.get(f"{key}_high")


def _controls_of(fits: dict, s: str, t: str) -> dict:
    """{control: result} of the pair s -> t: its shuffle control, and the fit s -> t's own
    random-init twin (by its exact name: never another model's twin)."""
    out = {k[2]: v[1] for k, v in fits.items() if k[:2] == (s, t) and k[2]}
    twin = fits.get((s, twin_name(t), "random_init"))
    if twin is not None:
        out["random_init"] = twin[1]
    return out


def pair_sentences(s: str, t: str, ds, controls: dict) -> list:
    """(sentence, holds) pairs computed from the numbers: whether the path's Spearman ρ is
    positive with its interval above 0, and whether each control's slope interval lies apart
    from the trained pair's."""
    sm = _summary(ds)
    out = []
    rho, lo = sm.get("spearman"), sm.get("spearman_low")
    if rho is None:
        out.append((f"{s} → {t}: the argmin path's Spearman ρ is undefined.", None))
    elif lo is not None and lo == lo:
        holds = lo > 0
        out.append(
            (
                f"{s} → {t}: "
                + (
                    "the argmin path rises with depth"
                    if holds
                    else "a rising argmin path is not established"
                )
                + f" (Spearman ρ {_stat(sm, 'spearman')}: the interval "
                + ("lies above 0)." if holds else "reaches 0 or below)."),
                holds,
            )
        )
    else:
        out.append((f"{s} → {t}: Spearman ρ {h.number(rho)} (no interval: no bootstrap).", None))
    for name, c in controls.items():
        cs = _summary(c)
        a = (sm.get("slope_low"), sm.get("slope_high"))
        b = (cs.get("slope_low"), cs.get("slope_high"))
        if None in a + b or any(x != x for x in a + b):
            out.append(
                (f"{s} → {t} against its {name} control: no slope intervals to compare.", None)
            )
            continue
        apart = a[0] > b[1] or b[0] > a[1]
        out.append(
            (
                f"{s} → {t}: the slope {_stat(sm, 'slope')} "
                + ("is separated from" if apart else "is not separated from")
                + f" the {name} control's {_stat(cs, 'slope')}"
                + (" (the intervals do not overlap)." if apart else " (the intervals overlap)."),
                apart,
            )
        )
    return out


def matrix_table(ds, variable: str = "relative_error") -> str:
    """The matrix as a table, rows the source boundaries (top: the last), each cell its value
    and under it its 95% interval, both also in its `title` (what a pointer over it shows,
    with 6 decimals) and the value in `data-value`."""
    m = ds[variable].transpose("source_boundary", "target_boundary")
    lo = ds.get(f"{variable}_low")
    hi = ds.get(f"{variable}_high")
    if lo is not None and hi is not None:
        lo = lo.transpose("source_boundary", "target_boundary").values
        hi = hi.transpose("source_boundary", "target_boundary").values
    src, tgt = m["source_boundary"].values, m["target_boundary"].values
    rows = []
    for i in reversed(range(len(src))):
        cells = [f"source {int(src[i])}"]
        for j in range(len(tgt)):
            v = float(m.values[i, j])
            ci = shown = ""
            if lo is not None and hi is not None:
                a, b = float(lo[i, j]), float(hi[i, j])
                ci = f" [{a:.6f}, {b:.6f}]"
                if np.isfinite(a) and np.isfinite(b):
                    shown = f"<small>[{a:.3f}, {b:.3f}]</small>"
            title = f"source boundary {int(src[i])}, target boundary {int(tgt[j])}: {variable} {v:.6f}{ci}"
            cells.append(
                (
                    "html",
                    f'<span title="{h.esc(title)}" data-value="{v!r}">{v:.3f}</span>{shown}',
                )
            )
        rows.append(cells)
    return h.table(["boundary"] + [f"target {int(b)}" for b in tgt], rows, "m")


def pair_page(
    s: str, t: str, ds, controls: dict, through: str = "", named: dict | None = None
) -> str:
    """The page of pair s -> t; `through` the section of s read through t's head, or "";
    `named` what the study file named each replicate's checkpoint by (`labels.labels`)."""
    sm = _summary(ds)
    fig = h.figure(
        lambda size: plot_alignment(ds, size=size),
        f"relative error matrix of {s} → {t} with its argmin path",
        (760, 640),
        (h.NARROW, 480),
    )
    stats = h.table(
        ["statistic", "value [95% interval]"],
        [[label, h.interval_cell(*_triple(sm, key), path=True)] for label, key in SUMMARY]
        + [
            ["argmin path", str(sm.get("argmin_path"))],
            ["path probability", h.number(sm.get("argmin_path_probability"))],
            ["pairing", _coverage(ds) or (ds.attrs.get("pairing") or {}).get("mode", "tokens")],
        ],
    )
    pbest = ""
    if "p_best" in ds:
        pb = ds["p_best"].transpose("source_boundary", "target_boundary")
        path = sm.get("argmin_path") or []
        rows = [
            [
                f"source {b}",
                f"target {j}",
                h.number(float(pb.sel(source_boundary=b, target_boundary=j))),
            ]
            for b, j in zip(sm.get("source_boundaries", []), path)
        ]
        pbest = "<h2>p_best along the path</h2>" + h.table(["source", "argmin", "p_best"], rows)
    side = ""
    if measures_of(ds):
        side = (
            "<h2>Measures side by side</h2><p>Each measure's matrix on its own colour scale "
            "(darker is closer) with the path its direction picks per source row; the table "
            "gives each path's slope, Spearman ρ and mean depth gap over the source boundaries "
            "≥ 1 (with intervals for ridge, from its bootstrap), the measure's mean on the path "
            "with the 95% delete-a-group jackknife interval of that mean (as align compare "
            "--measure gives it) where the result keeps the cells' recomputations, and where "
            "the fit calibrated it the calibrated score on the path and the cells that beat "
            "the null.</p>" + views.measures_row(s, t, ds)
        )
    said = "".join(h.sentence(x, ok) for x, ok in pair_sentences(s, t, ds, controls))
    body = (
        f"{said}<h2>Matrix</h2>{fig}{stats}{side}<h2>Values</h2><p>Each cell: the value and "
        f"its 95% interval (point at it for 6 decimals).</p>{matrix_table(ds)}{pbest}"
        f"{measure_sections(s, t, ds)}{controls_section(s, t, ds, controls)}{through}"
        f"<h2>Provenance</h2>{provenance(ds)}"
    )
    named = named or {}
    title = f"{labels.shown(s, named)} → {labels.shown(t, named)}"
    return h.page(title, body, depth=1)


def controls_section(s: str, t: str, ds, controls: dict) -> str:
    """The trained pair beside each control, each matrix on its own colour scale (on one
    scale a control's larger errors wash the trained matrix out), and their summaries."""
    if not controls:
        return ""
    sm = _summary(ds)
    Ls, Lt = int(ds.attrs["n_layers_source"]), int(ds.attrs["n_layers_target"])
    panels = []
    for label, c in [("trained", ds)] + list(controls.items()):
        v = views.view_of(c, views.RIDGE)
        title = f"{label}: relative error, argmin path {v.path}"
        fig = figures.panel(v.matrix, v.direction, title, v.rows, v.path, Ls, Lt)
        panels.append(h.svg(fig, f"{s} → {t}, {label}: relative error with its argmin path"))
    return (
        "<h2>Controls</h2><p>The trained pair and each control, each on its own colour scale "
        "(the bars under them differ).</p>"
        f'<div class="row">{"".join(panels)}</div>'
        + h.table(
            ["", *[label for label, _ in SUMMARY]],
            [["trained"] + [h.interval_cell(*_triple(sm, k), path=True) for _, k in SUMMARY]]
            + [
                [n] + [h.interval_cell(*_triple(_summary(c), k), path=True) for _, k in SUMMARY]
                for n, c in controls.items()
            ],
        )
    )


def provenance(ds) -> str:
    """The result's attributes (but its summary) as JSON, collapsed under a one-line summary:
    the models, the held-out documents, align's version."""
    prov = {k: v for k, v in ds.attrs.items() if k not in ("summary",)}
    text = json.dumps(prov, indent=1, default=str)
    docs = ds.sizes.get("heldout_doc")
    parts = [
        f"{labelled(ds.attrs, 'source')} → {labelled(ds.attrs, 'target')}",
        f"{docs:,} held-out documents" if docs else "",
        f"align {ds.attrs['align_version']}" if ds.attrs.get("align_version") else "",
        f"{text.count(chr(10)) + 1:,} lines of JSON",
    ]
    summary = "Provenance: " + "; ".join(p for p in parts if p)
    return h.collapsed(summary, f"<pre>{h.esc(text)}</pre>")


CALIBRATION = (  # (label, suffix) of a measure's calibration arrays, where the fit made them
    ("null mean", "null_mean"),
    ("calibrated", "calibrated"),
    ("p", "p"),
    ("p_family", "p_family"),
)


def measures_of(ds) -> list:
    """(name, array, direction) of every measure beside ridge the result holds, in the
    order of its summary (`align fit --measures`)."""
    held = _summary(ds).get("measures") or {}
    return [
        (name, m["array"], m["direction"])
        for name, m in held.items()
        if isinstance(m, dict) and m.get("array") in ds
    ]


def measure_sections(s: str, t: str, ds) -> str:
    """A section per measure (its matrix is drawn in the row of measures side by side): the
    path its direction picks (each row's argmax for a similarity, argmin for a distance) with
    each cell's value, interval and calibration (null mean, calibrated score, p, p_family)
    where the result holds them, and the matrix as a table of values and intervals."""
    out = []
    for name, var, direction in measures_of(ds):
        record = _summary(ds)["measures"][name]
        pick = "argmax" if direction == SIMILARITY else "argmin"
        calib = [(label, f"{var}_{k}") for label, k in CALIBRATION if f"{var}_{k}" in ds]
        rows = []
        for b, j in zip(ds["source_boundary"].values, record.get("path") or []):
            cell = {"source_boundary": int(b), "target_boundary": int(j)}
            value = [float(ds[var].sel(cell))] + [
                float(ds[f"{var}_{e}"].sel(cell)) if f"{var}_{e}" in ds else None
                for e in ("low", "high")
            ]
            rows.append(
                [f"source {int(b)}", f"target {int(j)}", h.interval_cell(*value)]
                + [h.number(float(ds[a].sel(cell))) for _, a in calib]
            )
        surviving = ""
        if "cells_surviving" in record:
            surviving = h.sentence(
                f"{name}: {record['cells_surviving']} of {ds[var].size} cells beat the null "
                "(p_family < 0.05); the path "
                + ("does, every cell of it." if record.get("path_surviving") else "does not."),
                bool(record.get("path_surviving")),
            )
        out.append(
            f"<h2>{h.esc(name)}</h2><p>A {h.esc(direction)}: "
            + ("larger" if direction == SIMILARITY else "smaller")
            + f" is closer; the path is each source row's {pick}.</p>{surviving}"
            + h.table(
                ["source", pick, f"{name} [95% interval]"] + [label for label, _ in calib], rows
            )
            + matrix_table(ds, var)
        )
    return "".join(out)


def model_page(root: str, state: dict, model: str) -> str:

    parts = []
    for kind in ("contrib", "lens", "skip", "depth"):
        entry = state.get("units", {}).get(f"{kind} {model}")
        if not entry or entry.get("state") != DONE:
            continue
        ds = _open(root, entry)
        parts.append(f"<h2>{h.esc(kind)}</h2>")
        if kind == "depth":
            parts += [h.sentence(text, None) for text in depth_sentences(model, ds)]
        parts.append(analysis_figure(ds, f"{kind} of {model}"))
        parts.append(skipping_table(ds) if kind == "skip" else _curves_table(ds))
    parts.append(lenses.kinds_section(root, state, model))
    body = "".join(parts) or "<p>No analysis of this model in the study.</p>"
    return h.page(f"Model {labels.shown(model, labels.labels(state))}", body, depth=1)


NARROW_HEIGHT = {"contributions": 720}  # px: its two panels stacked (`plot_contributions`)


def analysis_figure(ds, alt: str) -> str:
    """An analysis's figure (`plot_result`) at most 1000 px wide on a wide screen, and drawn
    again, taller, for a narrow one (the contributions' two panels one above the other)."""
    schema = schema_of(ds)
    w, ht = DEFAULT_SIZE[schema]
    wide = (min(w, 1000), round(ht * min(w, 1000) / w))
    narrow = (h.NARROW, NARROW_HEIGHT.get(schema, 560 if w > 800 else 360))
    return h.figure(lambda size: plot_result(ds, size=size), alt, wide, narrow)


def skipping_table(ds, agg: str = "max") -> str:
    """The output effect O[s] of skipping each layer s (rows), per setting and part
    (columns), with its 95% interval where the result has one: the bars of the skipping
    figure, at its aggregation `agg` over prompts."""
    settings, parts = [str(x) for x in ds["setting"].values], [str(x) for x in ds["part"].values]

    def cell(name, setting, part, s):
        if name not in ds:
            return None
        return float(ds[name].sel(setting=setting, part=part, agg=agg, skipped=s))

    rows = [
        [f"layer {int(s)}"]
        + [
            h.interval_cell(*(cell(n, a, p, s) for n in ("O", "O_low", "O_high")), 4)
            for a in settings
            for p in parts
        ]
        for s in ds["skipped"].values
    ]
    head = ["skipped"] + [f"O {a} {p} ({agg})" for a in settings for p in parts]
    return h.table(head, rows)


def depth_sentences(model: str, ds) -> list:
    """Each rule's effective depth in words, with its interval where the result has one."""
    out = []
    for k, rule in enumerate(ds["rule"].values):
        ed = float(ds["effective_depth"].values[k])
        if ed != ed:
            out.append(f"{model}: the effective depth by the {rule} rule is undefined.")
            continue
        low = float(ds["effective_depth_low"].values[k]) if "effective_depth_low" in ds else None
        high = float(ds["effective_depth_high"].values[k]) if "effective_depth_high" in ds else None
        out.append(
            f"{model}: effective depth by the {rule} rule {h.interval(ed, low, high, 1)} "
            f"(ratio to the model's depth {h.number(float(ds['ratio'].values[k]), 2)})."
        )
    return out


PER_ITEM = ("prompt", "lens_prompt", "heldout_doc")  # dimensions too long for a page's table
AXES = ("layer", "boundary", "rule")  # what a curve runs along


def _curves_table(ds) -> str:
    """The result's curves (variables along one layer, boundary or rule dimension, and short
    ones such as part and agg) as a table per dimension: the numbers each figure draws, each
    with its 95% interval (`<name>_low`, `<name>_high`) in the same cell where the result holds
    one (`_bound`)."""
    columns = {}
    for name, v in ds.data_vars.items():
        if name.endswith(("_low", "_high")) or v.dtype.kind not in "fiu" or v.ndim == 0:
            continue
        if any(d in PER_ITEM for d in v.dims):
            continue
        axis = [d for d in v.dims if d in AXES]
        long = axis[0] if axis else v.dims[int(np.argmax(v.shape))]
        short = [d for d in v.dims if d != long]
        if any(ds.sizes[d] > 4 for d in short):
            continue
        labels = [ds[d].values if d in ds.coords else range(ds.sizes[d]) for d in short]
        for combo in itertools.product(*[list(enumerate(x)) for x in labels]):
            at = {d: k for d, (k, _) in zip(short, combo)}
            named = {d: str(label) for d, (_, label) in zip(short, combo)}
            values = v.isel(at).transpose(long).values
            low, high = (_bound(ds.get(f"{name}_{e}"), at, named, long) for e in ("low", "high"))
            label = " ".join([name] + list(named.values()))
            columns.setdefault(long, []).append((label, values, low, high))
    out = []
    for dim, cols in columns.items():
        coord = ds[dim].values if dim in ds.coords else range(ds.sizes[dim])
        rows = [
            [str(c)]
            + [
                h.interval_cell(
                    float(x[k]),
                    None if lo is None else float(lo[k]),
                    None if hi is None else float(hi[k]),
                    4,
                )
                for _, x, lo, hi in cols
            ]
            for k, c in enumerate(coord)
        ]
        head = [dim] + [n + (" [95%]" if lo is not None else "") for n, _, lo, _ in cols]
        out.append(h.table(head, rows))
    return "".join(out)


def _bound(b, at: dict, named: dict, long: str):
    """The bound `b` (an interval's `_low` or `_high`) of the column at positions `at`, along
    `long`, or None: where `b` lacks the agg dimension it is the interval of the mean (the
    analyses bootstrap their means), so it belongs to agg "mean" alone."""
    if b is None:
        return None
    for d in at:
        if d not in b.dims and not (d == "agg" and named[d] == "mean"):
            return None
    return b.isel({d: k for d, k in at.items() if d in b.dims}).transpose(long).values


def corpus_page(state: dict) -> str:
    text = state.get("study_text", "")
    units = state.get("units", {})
    rows = [
        [n, units.get(n, {}).get("state", "pending"), h.number(units.get(n, {}).get("seconds"), 1)]
        for n in state.get("order", [])
    ]
    corpus = state.get("corpus") or {}
    body = (
        "<h2>Corpus</h2>"
        + h.table(["option", "value"], [[k, json.dumps(v)] for k, v in corpus.items()])
        + f"<h2>Study file</h2><p>{h.esc(state.get('study', ''))}</p><pre>{h.esc(text)}</pre>"
        f"<h2>Units</h2>{h.table(['unit', 'state', 'seconds'], rows)}"
    )
    return h.page("Corpus and options", body)


def _models_count(trained: list) -> str:
    """'3 models', or '3 models (7 checkpoints)' where some are replicates."""
    groups = views.grouped(trained)
    if len(groups) == len(trained):
        return _count(len(trained), "model")
    return f"{_count(len(groups), 'model')} ({len(trained)} checkpoints)"


def _count(n: int, noun: str) -> str:
    """'1 pair', '3 pairs'."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
