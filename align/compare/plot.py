"""The figure of `align compare`: each result's numbers with their intervals, and the paired
differences. Like `align.plotting`, it draws what the Comparison already holds and computes
nothing new; figures are of exactly `size` pixels at `dpi`.

- depth: (ED + 1) / L per rule, one marker per result with its interval (left); the paired
  differences in layers, with a zero line (right, when there are any).
- lens: KL and top-5 overlap against relative depth b/L, one line per result with its
  interval shaded (top); the paired differences (bottom, when there are any).
- alignment: each result's argmin path j*/L_T and soft depth against i/L_S, beside the
  relative-depth diagonal; on a measure (`Comparison.measure`), each result's path on it (a
  similarity's argmax, a distance's argmin).
"""

from __future__ import annotations

import numpy as np

from align.analyses.depth import RULES
from align.plotting.common import figure

DEFAULT_SIZE = {"depth": (1100, 450), "lens": (1200, 800), "alignment": (900, 600)}


def _legend(ax, outside: bool = False):
    """The axes' legend; `outside`: to the right of the axes, where no path runs under it
    (the constrained layout makes room)."""
    if not ax.get_legend_handles_labels()[0]:
        return
    if outside:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    else:
        ax.legend(fontsize=8)


def _errorbar(ax, x, s, col, **kw):
    v, lo, hi = float(s.value[col]), float(s.low[col]), float(s.high[col])
    if not np.isfinite(v):
        return
    err = None
    if np.isfinite(lo) and np.isfinite(hi):
        err = [[max(v - lo, 0.0)], [max(hi - v, 0.0)]]
    ax.errorbar([x], [v], yerr=err, fmt="o", capsize=3, **kw)


def _depth(cmp, size, dpi):
    diffs = [s for s in cmp.series if s.difference]
    models = [s for s in cmp.series if not s.difference]
    fig, axes = figure(size, dpi, 1, 2 if diffs else 1, layout="constrained")
    ax = axes[0, 0]
    width = 0.6 / max(len(models), 1)
    for k, s in enumerate(models):
        for r, rule in enumerate(RULES):
            _errorbar(
                ax,
                r - 0.3 + width * (k + 0.5),
                s,
                f"{rule} ratio",
                color=f"C{k}",
                label=s.label if r == 0 else None,
                gid=f"ratio/{s.label}/{rule}",
            )
    ax.set_xticks(range(len(RULES)), RULES)
    ax.set_xlim(-0.5, len(RULES) - 0.5)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("(ED + 1) / L")
    ax.set_title("effective depth, 95% prompt-bootstrap intervals", fontsize=10)
    _legend(ax)
    if diffs:
        ax = axes[0, 1]
        width = 0.6 / len(diffs)
        for k, s in enumerate(diffs):
            for r, rule in enumerate(RULES):
                _errorbar(
                    ax,
                    r - 0.3 + width * (k + 0.5),
                    s,
                    rule,
                    color=f"C{len(models) + k}",
                    label=s.label if r == 0 else None,
                    gid=f"difference/{s.label}/{rule}",
                )
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_xticks(range(len(RULES)), RULES)
        ax.set_xlim(-0.5, len(RULES) - 0.5)
        ax.set_ylabel("difference in ED (layers)")
        ax.set_title("paired differences (same prompts)", fontsize=10)
        _legend(ax)
    return fig


def _lens(cmp, size, dpi):
    diffs = [s for s in cmp.series if s.difference]
    models = [s for s in cmp.series if not s.difference]
    fig, axes = figure(size, dpi, 2 if diffs else 1, 2, layout="constrained")
    for q, col in enumerate(cmp.columns):
        for row, group, offset in ((0, models, 0), (1, diffs, len(models))):
            if row == 1 and not diffs:
                continue
            ax = axes[row, q]
            for k, s in enumerate(group):
                x, v, lo, hi = s.relative, s.value[col], s.low[col], s.high[col]
                ax.plot(
                    x, v, "o-", ms=3, color=f"C{offset + k}", label=s.label, gid=f"{col}/{s.label}"
                )
                ok = np.isfinite(lo) & np.isfinite(hi)
                if ok.any():
                    ax.fill_between(x[ok], lo[ok], hi[ok], color=f"C{offset + k}", alpha=0.2, lw=0)
            if row == 1:
                ax.axhline(0, color="0.5", lw=0.8)
            ax.set_xlabel("relative depth b / L")
            ax.set_ylabel(
                ("difference in " if row else "")
                + ("KL(lens ‖ output), nats" if col == "KL" else "top-5 overlap")
            )
            _legend(ax)
    axes[0, 0].set_title("logit lens, 95% prompt-bootstrap intervals shaded", fontsize=10)
    return fig


def _alignment(cmp, size, dpi):
    fig, axes = figure(size, dpi, layout="constrained")
    ax = axes[0, 0]
    ax.plot([0, 1], [0, 1], color="0.6", lw=0.8, ls=":", label="relative-depth diagonal")
    pick = "argmin"
    for k, s in enumerate(cmp.series):
        p = s.path or {}
        if not p.get("argmin_path") or not p.get("n_source") or not p.get("n_target"):
            continue
        pick = p.get("pick", "argmin")
        i = np.asarray(p["source_boundaries"], float) / p["n_source"]
        ax.plot(
            i,
            np.asarray(p["argmin_path"], float) / p["n_target"],
            "o-",
            ms=3,
            color=f"C{k}",
            label=f"{s.label}: {pick}",
            gid=f"path/{s.label}",
        )
        if p.get("soft_depth"):
            ax.plot(i, p["soft_depth"], "--", color=f"C{k}", lw=1, label=f"{s.label}: soft depth")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("source boundary i / L_S")
    ax.set_ylabel("best target boundary j* / L_T")
    ax.set_title(f"{cmp.measure or 'alignment'}: {pick} paths", fontsize=10)
    _legend(ax, outside=True)
    return fig


def plot_comparison(cmp, size=None, dpi: int = 100):
    """The figure of a Comparison (`align.compare.build`), by its kind."""
    draw = {"depth": _depth, "lens": _lens, "alignment": _alignment}[cmp.kind]
    return draw(cmp, size or DEFAULT_SIZE[cmp.kind], dpi)
