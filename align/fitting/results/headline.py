"""The one line an alignment result is read by: the pair, the argmin path, the slope of j*/L_T
on i/L_S with its interval (1: the diagonal, 0: flat), Spearman, and the control it is when it
is one (`align fit`'s last words, `align info`'s first)."""

from __future__ import annotations

import math

from align.names import pair_title

CONTROLS = {"shuffle": "control shuffle (each source token paired with other documents' tokens)"}


def _number(x) -> str:
    return "undefined" if x is None or not math.isfinite(float(x)) else f"{float(x):.2f}"


def _interval(summary: dict, key: str) -> str:
    """ " [low, high]" of a statistic's 95% interval, or "" without one."""
    lo, hi = summary.get(f"{key}_low"), summary.get(f"{key}_high")
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    return f" [{lo:.2f}, {hi:.2f}]"


def headline(attrs: dict) -> str:
    """ "shallow → deep: argmin path j*(i) [2, 4, 6] for i = [1, 2, 3]; slope 0.95 [0.80, 1.10]
    (1: the diagonal, 0: flat); Spearman 0.93 [0.50, 1.00]", the statistics from
    attrs["summary"] (docs/methods.md, The fit), "control shuffle (...): " before it for a
    control; a result whose summary was withheld (non-finite errors) says so."""
    s = attrs.get("summary") or {}
    control = (attrs.get("options") or {}).get("control")
    head = pair_title(attrs) + (
        f", {CONTROLS.get(control, 'control ' + str(control))}" if control else ""
    )
    if not s.get("argmin_path"):
        return f"{head}: no summary ({s.get('spearman_note') or 'no boundary >= 1 on one side'})"
    text = f"{head}: argmin path j*(i) {s['argmin_path']} for i = {s.get('source_boundaries')}"
    if s.get("slope") is not None:
        text += f"; slope {_number(s['slope'])}{_interval(s, 'slope')} (1: the diagonal, 0: flat)"
    rho = s.get("spearman")
    text += (
        f"; Spearman {_number(rho)}{_interval(s, 'spearman')}"
        if rho is not None
        else f"; Spearman {s.get('spearman_note', 'undefined')}"
    )
    return text


def pairing_text(pairing: dict | None) -> str:
    """How two models' tokens were paired (a result's attrs["pairing"]), for a caption or
    `align info`: "" for one token stream, else "pairing char-anchors: 1,234 anchored pairs;
    coverage source 41% of 3,000 tokens, target 100% of 1,234 tokens"."""
    p = pairing or {}
    if p.get("mode", "tokens") == "tokens":
        return ""
    cover = ", ".join(
        f"{side} {p[side]['coverage']:.0%} of {p[side]['tokens']:,} tokens"
        for side in ("source", "target")
        if isinstance(p.get(side), dict) and "coverage" in p[side]
    )
    pairs = p.get("pairs")
    return (
        f"pairing {p['mode']}"
        + (f": {pairs:,} anchored pairs" if pairs is not None else "")
        + (f"; coverage {cover}" if cover else "")
    )
