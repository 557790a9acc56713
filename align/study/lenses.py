"""The report's lens sections: a model's lenses side by side on its page (the kinds of
`[analyses] lens`: KL to the final output and top-1 agreement against depth, with their
intervals, and a table of KL, top-1 agreement and cross-entropy to the next token per kind), and
on a pair's page the source read through the target's head (`[analyses] lens_through`), or
the one line that says why it was not. Nothing here is computed: the results hold every
number drawn."""

from __future__ import annotations

import os

from align.plotting.analyses import lens_label, plot_lenses
from align.store import open_result
from align.study import html as h
from align.study.state import DONE
from align.study.units import LENS_UNITS, THROUGH

METRICS = (("kl", "KL"), ("top1", "top-1"), ("ce", "CE"))  # (variable, column) of the tables
FIGURE = ((1000, 420), (h.NARROW, 560))  # wide, narrow (px)


def _entry(state: dict, name: str):
    entry = state.get("units", {}).get(name)
    return entry if entry and entry.get("state") == DONE else None


def model_lenses(root: str, state: dict, model: str) -> list:
    """The lens results of `model` that are done, in the order of LENS_UNITS."""
    out = []
    for kind in LENS_UNITS.values():
        entry = _entry(state, f"{kind} {model}")
        if entry is not None:
            out.append(open_result(os.path.join(root, entry["output"])))
    return out


def kinds_section(root: str, state: dict, model: str) -> str:
    """The lenses of `model` side by side, where the study ran more than the logit lens."""
    results = model_lenses(root, state, model)
    if not any(ds.attrs.get("kind", "logit") != "logit" for ds in results):
        return ""
    return (
        "<h2>Lenses side by side</h2><p>KL of each lens to the model's output and the share of "
        "tokens whose top-1 token is the output's, per boundary, token-weighted, with 95% "
        "bootstrap intervals (the logit lens over prompts and every token; the linear and "
        "tuned lenses over held-out documents and their tokens). The table adds the "
        "cross-entropy to the next token.</p>"
        + _figure(results, f"lenses of {model}: KL and top-1 agreement per boundary")
        + metrics_table(results)
    )


def through_section(root: str, state: dict, s: str, t: str) -> str:
    """`s` read through `t`'s head (the pair's lens-through unit), or why it could not be."""
    entry = _entry(state, f"{THROUGH} {s}->{t}")
    if entry is None:
        return ""
    folder = os.path.join(root, entry["output"])
    head = f"<h2>{h.esc(s)} read through {h.esc(t)}'s head</h2>"
    refused = os.path.join(folder, "refused.txt")
    if os.path.exists(refused):
        with open(refused, encoding="utf-8") as f:
            return head + h.sentence(f"Not drawn: {f.read().strip()}", None)
    ds = open_result(os.path.join(folder, "lens.zarr"))
    text = (
        f"<p>Each boundary b of {h.esc(s)} mapped by the ridge map of this pair's fit options "
        f"onto {h.esc(t)}'s last boundary, then through {h.esc(t)}'s final norm and "
        f"unembedding, compared token for token with {h.esc(t)}'s own output on the fit's "
        "held-out documents: KL, top-1 agreement and cross-entropy to the next token, "
        "token-weighted, with 95% document-bootstrap intervals.</p>"
    )
    alt = f"{s} read through {t}'s head: KL and top-1 agreement per boundary"
    label = f"{s} through {t}"
    return head + text + _figure([ds], alt, [label]) + metrics_table([ds], [label])


def _figure(results: list, alt: str, labels=None) -> str:
    def draw(size):
        return plot_lenses(results, size=size, right="top1", title=alt, labels=labels)

    return h.figure(draw, alt, *FIGURE)


def metrics_table(results: list, labels=None) -> str:
    """Per boundary (rows), each result's KL, top-1 agreement and cross-entropy to the next
    token, token-weighted, each with its 95% interval where the result holds it; `labels`
    name the results (default: their kinds)."""
    columns = []
    for k, ds in enumerate(results):
        label = labels[k] if labels is not None else lens_label(ds.attrs)
        for var, word in METRICS:
            if var in ds:
                columns.append((f"{label} {word} [95%]", ds, var))
    boundaries = sorted({int(b) for ds in results for b in ds["boundary"].values})
    rows = []
    for b in boundaries:
        row = [f"boundary {b}"]
        for _, ds, var in columns:
            if b not in ds["boundary"].values:
                row.append("")
                continue
            at = {"weighting": "token", "boundary": b}
            low, high = (
                float(ds[f"{var}_{e}"].sel(at)) if f"{var}_{e}" in ds else None
                for e in ("low", "high")
            )
            row.append(h.interval_cell(float(ds[var].sel(at)), low, high, 4))
        rows.append(row)
    return h.table(["boundary"] + [c[0] for c in columns], rows)
