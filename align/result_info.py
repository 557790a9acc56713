"""`align info RESULT`: a result store in a few readable lines (what it is, its models and
corpus, its headline numbers, the similarity measures it holds with their paths and
calibration, how its intervals were drawn, its options and variables), from the result
itself (the command adds how to print every attribute)."""

from __future__ import annotations

import json
import math
import textwrap

from align.fitting.measuring.measured import FAMILY_LEVEL
from align.fitting.results.headline import headline, pairing_text
from align.measures import MEASURES, SIMILARITY
from align.names import model_name, provenance_of

WIDTH = 100  # a line's width before it wraps, under its label


def _field(label: str, text: str) -> str:
    return textwrap.fill(text, WIDTH, initial_indent=f"  {label:<11} ", subsequent_indent=" " * 14)


def _model(attrs: dict, role: str | None = None) -> str:
    """ "shallow (/abs/shallow-4f2a..., 6 layers, random init seed 3)"."""
    key = f"{role}_model" if role else "model"
    name = str(attrs.get(key) or provenance_of(attrs, role).get("model") or "?")
    prov = provenance_of(attrs, role)
    layers = attrs.get(f"n_layers_{role}") if role else attrs.get("n_layers")
    notes = [name] if model_name(name) != name else []
    if layers is not None:
        notes.append(f"{layers} layers")
    if prov.get("random_init"):
        notes.append(f"random init, seed {prov.get('seed')}")
    return model_name(name) + (f" ({', '.join(notes)})" if notes else "")


def _corpus(record) -> str | None:
    if not isinstance(record, dict) or not record.get("source"):
        return None
    digest = str(record.get("hash") or "")
    return f"{record['source']}" + (f" (sha256 {digest[:12]})" if digest else "")


def _intervals(attrs: dict) -> str:
    b = attrs.get("bootstrap") or (attrs.get("summary") or {}).get("bootstrap")
    if isinstance(b, dict) and b.get("resamples"):
        by_document = str(b.get("method", "")).startswith("document")  # the lens's other kinds
        alignment = attrs.get("align", {}).get("schema") == "alignment"
        what = "document" if alignment or by_document else "prompt"
        return (
            f"{b.get('level', 0.95):.0%} intervals over {b['resamples']:,} {what} resamples "
            f"(seed {b.get('seed')})"
        )
    return str(attrs.get("intervals") or "none")


def _options(options) -> str:
    if not isinstance(options, dict) or not options:
        return "none recorded"
    parts = []
    for k, v in options.items():
        if isinstance(v, (list, tuple)) and len(v) > 8:
            v = f"[{v[0]}, {v[1]}, ..., {v[-1]}] ({len(v)})"
        elif isinstance(v, dict):
            v = json.dumps(v, sort_keys=True)
        parts.append(f"{k} {v}")
    return ", ".join(parts)


def _calibrated(options: dict) -> tuple:
    """(the measures calibrated, the measures asked but not), from the options the fit
    recorded (`calibrated`; a result without it calibrated every measure it computed)."""
    asked = [m for m in options.get("measures", ()) if m != "ridge"]
    calibrated = options.get("calibrated")
    if not isinstance(calibrated, list):
        return asked, []
    return calibrated, [m for m in asked if m not in calibrated]


def _row_interval(sample: dict) -> str:
    """The row measures' interval as the sample's record has it (attrs["options"]
    ["sampled_rows"]): the jackknife, the bootstrap's resamples (a result written before the
    record named its scheme: the bootstrap), or none."""
    scheme = sample.get("interval", "bootstrap" if "bootstrap_resamples" in sample else None)
    if scheme == "jackknife":
        return "the row measures' intervals a delete-a-group jackknife over groups of documents"
    if scheme == "bootstrap":
        resamples = sample.get("bootstrap_resamples", 0)
        return f"the row measures' intervals over {resamples:,} document resamples"
    return "no interval of the row measures"


def _measures(ds) -> list:
    """(label, text) lines of the measures of `align fit --measures` an alignment result
    holds (attrs["summary"]["measures"]): each with its direction and path (a similarity's
    row argmax, a distance's argmin) and, where the fit calibrated it, the cells and the path
    that beat the grid's null; then the rows they were computed on, and the calibration's
    draw (attrs["options"]["sampled_rows"]). [] without measures."""
    records = (ds.attrs.get("summary") or {}).get("measures") or {}
    names = [n for n in MEASURES if isinstance(records.get(n), dict)]
    if not names:
        return []
    src = [int(i) for i in ds["source_boundary"].values]
    cells = int(ds.sizes["source_boundary"] * ds.sizes["target_boundary"])
    out = []
    for n in names:
        r = records[n]
        direction = r.get("direction", MEASURES[n])
        pick = "argmax" if direction == SIMILARITY else "argmin"
        text = f"{n} ({direction}): {pick} path {r.get('path')} for i = {src}"
        if "cells_surviving" in r:
            text += (
                f"; {r['cells_surviving']} of {cells} cells beat the grid's null (p_family < "
                f"{FAMILY_LEVEL}), the path {'does' if r.get('path_surviving') else 'does not'}"
            )
        out.append(("measures" if not out else "", text))
    where = [str(records[k]) for k in ("rows", "interval") if isinstance(records.get(k), str)]
    if where:
        out.append(("", "computed on " + "; intervals: ".join(where)))
    own = {}  # the row measures' interval, where it is not the streamed measures'
    for n in names:
        text = records[n].get("interval")
        if isinstance(text, str) and text != records.get("interval"):
            own.setdefault(text, []).append(n)
    for text, which in own.items():
        out.append(("", f"{', '.join(which)} on the sampled rows; intervals: {text}"))
    options = ds.attrs.get("options") or {}
    sample = options.get("sampled_rows")
    if isinstance(sample, dict) and sample.get("permutations"):
        calibrated, left = _calibrated(options)
        out.append(
            (
                "calibration",
                (f"{', '.join(calibrated)} against " if left else "")
                + f"{sample['permutations']:,} permutations of {sample.get('rows', 0):,} sampled "
                f"held-out rows, re-paired by {sample.get('null_scheme', '?')} (seed "
                f"{sample.get('seed')}); {_row_interval(sample)}, k = "
                f"{sample.get('neighbours')} neighbours"
                + (f"; not calibrated: {', '.join(left)}" if left else ""),
            )
        )
    else:
        out.append(("calibration", "none (the fit drew no permutation null)"))
    copies = sample.get("duplicated_rows") if isinstance(sample, dict) else None
    if isinstance(copies, dict) and copies.get("fraction"):
        out.append(("ties", _copies_line(copies, ds)))
    return out


def _copies_line(copies: dict, ds) -> str:
    """The cells whose sampled rows are mostly exact copies (a repeated token's embedding at
    boundary 0): ties decide mknn, cknna and rsa there."""
    frac = copies["fraction"]
    src, tgt = ds["source_boundary"].values, ds["target_boundary"].values
    a, b = max(
        ((a, b) for a in range(len(frac)) for b in range(len(frac[a]))),
        key=lambda c: frac[c[0]][c[1]],
    )
    cells = sum(len(r) for r in frac)
    text = (
        f"{copies.get('mostly_copies', 0)} of {cells} cells have sampled rows mostly exact "
        f"copies (ties decide mknn, cknna, rsa there); the most at source boundary "
        f"{src[a]} x target boundary {tgt[b]}: {frac[a][b]:.0%} of rows copied"
    )
    return text


def _depths(ds) -> str:
    reasons = ds.attrs.get("reasons") or {}
    out = []
    for rule in [str(r) for r in ds["rule"].values]:
        v = float(ds["effective_depth"].sel(rule=rule))
        if not math.isfinite(v):
            out.append(f"{rule} undefined ({reasons.get(rule, 'no reason recorded')})")
            continue
        text = f"{rule} {v:g}"
        if "effective_depth_low" in ds:
            lo = float(ds["effective_depth_low"].sel(rule=rule))
            hi = float(ds["effective_depth_high"].sel(rule=rule))
            if math.isfinite(lo) and math.isfinite(hi):
                text += f" [{lo:g}, {hi:g}]"
        out.append(text)
    return "; ".join(out)


def describe(path: str, ds) -> str:
    """The summary `align info` prints of the result Dataset `ds` read from `path`."""
    attrs = ds.attrs
    marker = attrs.get("align") or {}
    schema = marker.get("schema", "?")
    lines = [
        f"{path}: align result, schema {schema} (version {marker.get('version', '?')}, "
        f"written by align {marker.get('align_version') or attrs.get('align_version', '?')})"
    ]
    if schema == "alignment":
        lines.append(_field("headline", headline(attrs)))
        lines.append(_field("source", _model(attrs, "source")))
        lines.append(_field("target", _model(attrs, "target")))
        pairing = pairing_text(attrs.get("pairing")).removeprefix("pairing ")
        lines.append(_field("pairing", pairing or "one token stream (both read the same tokens)"))
        lines.append(_field("route", str(attrs.get("route", "?"))))
        lines += [_field(label, text) for label, text in _measures(ds)]
        corpus = _corpus(provenance_of(attrs, "source").get("corpus"))
    else:
        lines.append(_field("model", _model(attrs)))
        if attrs.get("n_prompts") is not None:
            lines.append(_field("prompts", f"{attrs['n_prompts']:,}"))
        corpus = _corpus(attrs.get("corpus"))
        if schema == "depth":
            lines.append(_field("depths", _depths(ds)))
    if corpus:
        lines.append(_field("corpus", corpus))
    lines.append(_field("intervals", _intervals(attrs)))
    lines.append(_field("options", _options(attrs.get("options"))))
    groups: dict = {}
    for name in ds.data_vars:
        dims = " × ".join(f"{d} {n}" for d, n in ds[name].sizes.items()) or "scalar"
        groups.setdefault(dims, []).append(str(name))
    for k, (dims, names) in enumerate(groups.items()):
        lines.append(_field("variables" if k == 0 else "", f"{dims}: {', '.join(names)}"))
    return "\n".join(lines)
