"""`align report DIR -o REPORT`: a study's results as a static site that opens offline.

Pages: index.html (the N × N grid of pairs, each cell the matrix's thumbnail, the slope and its
interval, the pairing's coverage where the tokenizers differ; the sentences that say what
holds), pairs/S--T.html (the matrix drawn by `align.plotting.plot_alignment` and as a table
whose cells carry the value and interval in their `title`, the argmin path, p_best along it,
the controls beside, the pairing, the provenance; then each measure beside ridge the fit
computed, its matrix, the path its direction picks with the calibration where the fit made
one, and its table of hover values), models/NAME.html (each analysis drawn by
`align.plotting.plot_result`, with its numbers in a table: the curves, and for layer skipping
the output effect O[s] per setting and part), corpus.html (the corpus, the options, the study
file). Every figure is an inline PNG with alt text; nothing is computed
here that the results do not hold, but the comparisons the sentences make.
"""

from __future__ import annotations

import json
import os

import numpy as np

from align import messages
from align.errors import InputError, StoreError
from align.faults import fault_point
from align.measures import SIMILARITY
from align.store import open_result
from align.store.temporaries import temporary, write_failed
from align.study import html as h
from align.study import replicates
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
    fits = {}
    for name, entry in _done(state, "fit"):
        d = entry["definition"]
        fits[(d["source"], d["target"], d.get("control"))] = (name, _open(root, entry))
    pages = {}
    for (s, t, control), (_, ds) in fits.items():
        if control is None:
            pages[f"pairs/{pair_file(s, t)}"] = pair_page(s, t, ds, _controls_of(fits, s, t))
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


def thumbnail(ds) -> str:
    """The relative_error matrix, small, without text (the pair's page has the full figure)."""
    import matplotlib.pyplot as plt

    m = ds["relative_error"].transpose("source_boundary", "target_boundary").values
    inner = m[1:, 1:] if min(m.shape) > 1 else m  # boundary 0 maps almost perfectly: as the figure
    fig, ax = plt.subplots(figsize=(1.8, 1.5), dpi=100)
    ax.imshow(m, origin="lower", aspect="auto", cmap="viridis", vmin=inner.min(), vmax=inner.max())
    ax.set_axis_off()
    fig.subplots_adjust(0, 0, 1, 1)
    return h.png(fig)


def index_page(state: dict, models: list, fits: dict) -> str:
    trained = [m for m in models if not any(k[1] == m and k[2] == "random_init" for k in fits)]
    rows, table_rows, said = [], [], []
    for s in trained:
        cells = [("html", f'<a href="models/{s}.html">{h.esc(s)}</a>')]
        for t in trained:
            found = fits.get((s, t, None))
            if found is None:
                cells.append("—" if s != t else "")
                continue
            ds = found[1]
            sm = _summary(ds)
            cov = _coverage(ds)
            alt = f"relative error matrix of {s} → {t}"
            cells.append(
                (
                    "html",
                    f'<a href="pairs/{pair_file(s, t)}">{h.image(thumbnail(ds), alt)}</a><br>'
                    f"slope {h.esc(_stat(sm, 'slope'))}" + (f"<br>{h.esc(cov)}" if cov else ""),
                )
            )
            table_rows.append(
                [("html", f'<a href="pairs/{pair_file(s, t)}">{h.esc(s)} → {h.esc(t)}</a>')]
                + [_stat(sm, key) for _, key in SUMMARY]
                + [str(sm.get("argmin_path")), cov or "same tokenizer"]
            )
            said += pair_sentences(s, t, ds, _controls_of(fits, s, t))
        rows.append(cells)
    grid = h.table(["source ↓ / target →"] + trained, rows, "grid")
    numbers = h.table(
        ["pair"] + [label for label, _ in SUMMARY] + ["argmin path", "pairing"], table_rows
    )
    body = (
        f"<p>{_count(len(trained), 'model')}, {_count(len(table_rows), 'pair')}. Each cell: the held-out relative "
        "error of the ridge map from every source boundary (rows, bottom to top) to every target "
        "boundary (columns), lower is better; the slope of the argmin path with its 95% interval.</p>"
        f"<h2>Grid</h2>{grid}<h2>What holds</h2>"
        + "".join(h.sentence(text, holds) for text, holds in said)
        + f"<h2>Numbers</h2>{numbers}<h2>Models</h2><ul>"
        + "".join(f'<li><a href="models/{m}.html">{h.esc(m)}</a></li>' for m in models)
        + "</ul>"
    )
    return h.page(f"Study {state.get('name', '')}", body)


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
    """The matrix as a table, rows the source boundaries (top: the last), each cell's value
    and 95% interval in its `title` (what a pointer over it shows) and `data-value`."""
    m = ds[variable].transpose("source_boundary", "target_boundary")
    lo = ds.get(f"{variable}_low")
    hi = ds.get(f"{variable}_high")
    src, tgt = m["source_boundary"].values, m["target_boundary"].values
    rows = []
    for i in reversed(range(len(src))):
        cells = [f"source {int(src[i])}"]
        for j in range(len(tgt)):
            v = float(m.values[i, j])
            ci = ""
            if lo is not None and hi is not None:
                a = float(lo.transpose("source_boundary", "target_boundary").values[i, j])
                b = float(hi.transpose("source_boundary", "target_boundary").values[i, j])
                ci = f" [{a:.6f}, {b:.6f}]"
            title = f"source boundary {int(src[i])}, target boundary {int(tgt[j])}: {variable} {v:.6f}{ci}"
            cells.append(
                ("html", f'<span title="{h.esc(title)}" data-value="{v!r}">{v:.3f}</span>')
            )
        rows.append(cells)
    return h.table(["boundary"] + [f"target {int(b)}" for b in tgt], rows, "m")


def pair_page(s: str, t: str, ds, controls: dict) -> str:
    from align.plotting import plot_alignment, plot_alignments

    sm = _summary(ds)
    fig = h.image(
        h.png(plot_alignment(ds)), f"relative error matrix of {s} → {t} with its argmin path"
    )
    stats = h.table(
        ["statistic", "value [95% interval]"],
        [[label, _stat(sm, key)] for label, key in SUMMARY]
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
    ctl = ""
    if controls:
        names = list(controls)
        both = plot_alignments([ds] + [controls[n] for n in names], titles=["trained"] + names)
        ctl = "<h2>Controls</h2>" + h.image(
            h.png(both), f"{s} → {t} beside its controls {', '.join(names)}"
        )
        ctl += h.table(
            ["", *[label for label, _ in SUMMARY]],
            [["trained"] + [_stat(sm, k) for _, k in SUMMARY]]
            + [[n] + [_stat(_summary(controls[n]), k) for _, k in SUMMARY] for n in names],
        )
    said = "".join(h.sentence(x, ok) for x, ok in pair_sentences(s, t, ds, controls))
    prov = {k: v for k, v in ds.attrs.items() if k not in ("summary",)}
    body = (
        f"{said}<h2>Matrix</h2>{fig}{stats}<h2>Values</h2><p>Point at a cell for its value and "
        f"interval.</p>{matrix_table(ds)}{pbest}{measure_sections(s, t, ds)}{ctl}<h2>Provenance</h2>"
        f"<pre>{h.esc(json.dumps(prov, indent=1, default=str)[:20000])}</pre>"
    )
    return h.page(f"{s} → {t}", body, depth=1)


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
    """A section per measure: its matrix drawn with the path its direction picks (each row's
    argmax for a similarity, argmin for a distance), the path with each cell's value, interval
    and calibration (null mean, calibrated score, p, p_family) where the result holds them,
    and the matrix as a table whose cells carry value and interval on hover."""
    from align.plotting import plot_measure

    out = []
    for name, var, direction in measures_of(ds):
        record = _summary(ds)["measures"][name]
        pick = "argmax" if direction == SIMILARITY else "argmin"
        fig = h.image(
            h.png(plot_measure(ds, name)), f"{name} matrix of {s} → {t} with its {pick} path"
        )
        calib = [(label, f"{var}_{k}") for label, k in CALIBRATION if f"{var}_{k}" in ds]
        rows = []
        for b, j in zip(ds["source_boundary"].values, record.get("path") or []):
            cell = {"source_boundary": int(b), "target_boundary": int(j)}
            value = [float(ds[var].sel(cell))] + [
                float(ds[f"{var}_{e}"].sel(cell)) if f"{var}_{e}" in ds else None
                for e in ("low", "high")
            ]
            rows.append(
                [f"source {int(b)}", f"target {int(j)}", h.interval(*value)]
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
            + f" is closer; the path is each source row's {pick}.</p>{fig}{surviving}"
            + h.table(
                ["source", pick, f"{name} [95% interval]"] + [label for label, _ in calib], rows
            )
            + matrix_table(ds, var)
        )
    return "".join(out)


def model_page(root: str, state: dict, model: str) -> str:
    from align.plotting import plot_result

    parts = []
    for kind in ("contrib", "lens", "skip", "depth"):
        entry = state.get("units", {}).get(f"{kind} {model}")
        if not entry or entry.get("state") != DONE:
            continue
        ds = _open(root, entry)
        parts.append(f"<h2>{h.esc(kind)}</h2>")
        if kind == "depth":
            parts += [h.sentence(text, None) for text in depth_sentences(model, ds)]
        parts.append(h.image(h.png(plot_result(ds)), f"{kind} of {model}"))
        parts.append(skipping_table(ds) if kind == "skip" else _curves_table(ds))
    body = "".join(parts) or "<p>No analysis of this model in the study.</p>"
    return h.page(f"Model {model}", body, depth=1)


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
            h.interval(*(cell(n, a, p, s) for n in ("O", "O_low", "O_high")), 4)
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
    """The result's curves (variables along one layer, boundary or rule dimension, or along
    one of them and a short one such as part) as a table per dimension: the numbers each
    figure draws."""
    columns = {}
    for name, v in ds.data_vars.items():
        if v.dtype.kind not in "fiu" or any(d in PER_ITEM for d in v.dims):
            continue
        if v.ndim == 1:
            columns.setdefault(v.dims[0], []).append((name, v.values))
        elif v.ndim == 2 and min(v.shape) <= 4 and set(v.dims) & set(AXES):
            axis = [d for d in v.dims if d in AXES]
            long = axis[0] if axis else v.dims[int(np.argmax(v.shape))]
            short = next(d for d in v.dims if d != long)
            v = v.transpose(short, long)
            labels = ds[short].values if short in ds.coords else range(v.shape[0])
            for k, label in enumerate(labels):
                columns.setdefault(long, []).append((f"{name} {label}", v.values[k]))
    out = []
    for dim, cols in columns.items():
        coord = ds[dim].values if dim in ds.coords else range(ds.sizes[dim])
        rows = [[str(c)] + [h.number(float(x[k]), 4) for _, x in cols] for k, c in enumerate(coord)]
        out.append(h.table([dim] + [n for n, _ in cols], rows))
    return "".join(out)


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


def _count(n: int, noun: str) -> str:
    """'1 pair', '3 pairs'."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
