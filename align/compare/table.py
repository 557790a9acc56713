"""The table of `align compare` (a Comparison of `align.compare`) as text: aligned for the
terminal, Markdown, or CSV. Number columns read "value [low, high]" in text and Markdown, and
are three columns (X, X_low, X_high) at full precision in CSV."""

from __future__ import annotations

import csv
import io

import numpy as np

from align.compare.series import Comparison


def _num(x) -> str:
    x = float(x)
    if not np.isfinite(x):
        return "undefined"
    return f"{x:.4g}"


def _cell(v, lo, hi, missing: str = "undefined") -> str:
    if not np.isfinite(v):
        return missing
    return _num(v) + (f" [{_num(lo)}, {_num(hi)}]" if np.isfinite(lo) and np.isfinite(hi) else "")


def rows(cmp: Comparison) -> list[dict]:
    """The table's rows: {column: (value, low, high) for number columns, str/int for the
    others}; lens results give one row per boundary."""
    out = []
    for s in cmp.series:
        if s.boundary is None:
            out.append(
                {
                    **s.info,
                    **{
                        c: (float(s.value[c]), float(s.low[c]), float(s.high[c]))
                        for c in cmp.columns
                    },
                }
            )
            continue
        for k, b in enumerate(s.boundary):
            row = {**s.info, "boundary": int(b), "b/L": f"{s.relative[k]:.3f}"}
            row.update(
                {
                    c: (float(s.value[c][k]), float(s.low[c][k]), float(s.high[c][k]))
                    for c in cmp.columns
                }
            )
            out.append(row)
    return out


def text_table(cmp: Comparison, markdown: bool = False) -> str:
    """The table as aligned text (terminal) or a Markdown table: number columns read
    "value [low, high]"; notes follow."""
    header = cmp.info_columns + cmp.columns
    body = [
        [str(r[c]) if c in cmp.info_columns else _cell(*r[c], cmp.missing) for c in header]
        for r in rows(cmp)
    ]
    lines = []
    if markdown:
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" for _ in header) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in body]
        if cmp.notes:
            lines += [""] + [f"- {n}" for n in cmp.notes]
        return "\n".join(lines) + "\n"
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(header)]
    for row in [header] + body:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    lines += [f"note: {n}" for n in cmp.notes]
    return "\n".join(lines) + "\n"


def csv_table(cmp: Comparison) -> str:
    """The table as CSV: each number column as three columns (value, _low, _high), full
    precision, empty where undefined or without an interval."""
    header = list(cmp.info_columns)
    for c in cmp.columns:
        header += [c, f"{c}_low", f"{c}_high"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows(cmp):
        line = [r[c] for c in cmp.info_columns]
        for c in cmp.columns:
            line += ["" if not np.isfinite(x) else repr(x) for x in r[c]]
        w.writerow(line)
    return buf.getvalue()
