"""The report's HTML pieces: a page, a table in its own scroll box, an inline SVG figure,
escaped text, an interval with the note a degenerate one needs, a collapsed block. Everything a
page needs is inside it (the style, every figure as inline SVG, the tabs in CSS): it opens
offline and makes no request to any network.

Pages read on any screen: a table scrolls inside its box with its first column fixed, the body
never scrolls sideways, and a figure is drawn at the pixel size it is shown at (never scaled
down, so its text keeps its drawn size, at least `MIN_FONT_PX`): wide figures come with a
narrow drawing for screens below `NARROW_BELOW` px, and a figure wider than its screen scrolls
in its own box."""

from __future__ import annotations

import hashlib
import html
import io
import math
import re

from align.plotting import write_figure

NARROW_BELOW = 1040  # px of the screen under which a figure's narrow drawing is shown
NARROW = 340  # px: the width of a narrow drawing (a 390 px phone's column holds it)
MIN_FONT_PX = 9.0  # the smallest text a figure draws, in CSS px at the size it is shown
MAX_TABS = 16  # the panes `tabs` can switch between (one CSS rule each)

STYLE = f"""
body{{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222;overflow-wrap:anywhere}}
.scroll{{overflow-x:auto;max-width:100%;margin:.6em 0}}
table{{border-collapse:separate;border-spacing:0}}td,th{{border:1px solid #ccc;border-width:0 1px 1px 0;padding:.2em .45em;text-align:right;overflow-wrap:normal}}
tr:first-child>*{{border-top-width:1px}}tr>:first-child{{border-left-width:1px;position:sticky;left:0;background:#fff;z-index:1}}
th,tr>th:first-child{{background:#f3f3f3}}td.l,th.l{{text-align:left}}nav a{{margin-right:1em}}
.grid td{{text-align:center;vertical-align:top}}.reps{{display:block;font-size:12px;white-space:normal;max-width:12em;margin:0 auto}}.reps a{{padding:0 .25em}}.grid th{{white-space:normal}}.m td{{font-size:12px}}.m small{{display:block;color:#555}}
td,th{{white-space:nowrap}}.note{{display:block;font-size:12px;color:#735;text-align:left;min-width:11em;max-width:15em;white-space:normal}}
.holds{{color:#075}}.not{{color:#a30}}pre{{background:#f6f6f6;padding:.6em;overflow:auto;font-size:12px}}
.fig{{overflow-x:auto;max-width:100%;margin:.6em 0}}.fig svg{{display:block;max-width:none;height:auto}}
.row{{display:flex;flex-wrap:wrap;gap:.8em;align-items:flex-start}}.row .fig{{flex:0 0 auto}}
.narrow{{display:none}}@media (max-width:{NARROW_BELOW}px){{.wide{{display:none}}.narrow{{display:block}}body{{padding:0 .6em;margin:1em auto}}}}
details{{margin:.6em 0}}summary{{cursor:pointer}}
.tabs>input{{position:absolute;opacity:0}}.tabs>label{{display:inline-block;padding:.2em .7em;border:1px solid #ccc;border-radius:.3em;margin:0 .3em .3em 0;cursor:pointer}}
.tabs>input:checked+label{{background:#222;color:#fff}}.tabs>input:focus-visible+label{{outline:2px solid #48f}}.tab{{display:none}}
{"".join(f".tabs>input:nth-of-type({k}):checked~.tab:nth-of-type({k}){{display:block}}" for k in range(1, MAX_TABS + 1))}
"""


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def number(x, digits: int = 3) -> str:
    """`x` with `digits` decimals; "—" for None or a non-finite value."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{float(x):.{digits}f}"


def interval(point, low, high, digits: int = 3) -> str:
    """ "0.812 [0.790, 0.835]", or the point alone where the interval is missing."""
    text = number(point, digits)
    if number(low) != "—" and number(high) != "—":
        text += f" [{number(low, digits)}, {number(high, digits)}]"
    return text


def degenerate(point, low, high, digits: int = 3, path: bool = False) -> str:
    """Why an interval looks odd at the digits shown, or "": a zero-width interval (the
    resamples agree; `path`: a statistic of the path, whose path does not move across them),
    or an estimate at one end of its interval (no resample lies beyond it: the statistic is
    at the most, or least, it reaches in the resamples, as a statistic of the path that only
    moves one way when documents are resampled)."""
    shown = [number(x, digits) for x in (point, low, high)]
    if "—" in shown:
        return ""
    p, lo, hi = shown
    if lo == hi:
        return "zero width: " + (
            "the path does not move across resamples" if path else "every resample gives it"
        )
    if p == hi:
        return "at its upper end: no resample is above it (the statistic is at its bound)"
    if p == lo:
        return "at its lower end: no resample is below it (the statistic is at its bound)"
    return ""


def interval_cell(point, low, high, digits: int = 3, path: bool = False) -> tuple:
    """A table cell of `interval`, with `degenerate`'s note beside it where it has one."""
    why = degenerate(point, low, high, digits, path)
    note = f'<span class="note">{esc(why)}</span>' if why else ""
    return ("html", esc(interval(point, low, high, digits)) + note)


def page(title: str, body: str, depth: int = 0) -> str:
    """A whole page: `body` under the title and the navigation (`depth`: folders below the
    report's root, for the relative links)."""
    up = "../" * depth
    nav = (
        f'<nav><a href="{up}index.html">Index</a><a href="{up}corpus.html">Corpus and options</a>'
        "</nav>"
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>"
        f"{nav}<h1>{esc(title)}</h1>{body}</body></html>\n"
    )


def table(header: list, rows: list, cls: str = "") -> str:
    """A table in its own scroll box (its first column stays in view); each cell is text
    (escaped) or a ("html", markup) pair kept as markup."""

    def cell(tag, c, k):
        markup = c[1] if isinstance(c, tuple) and c[0] == "html" else esc(c)
        return f"<{tag}{' class=l' if k == 0 else ''}>{markup}</{tag}>"

    head = "".join(cell("th", h, k) for k, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(cell("td", c, k) for k, c in enumerate(r)) + "</tr>" for r in rows
    )
    return f'<div class="scroll"><table class="{cls}"><tr>{head}</tr>{body}</table></div>'


def svg(fig, alt: str, cls: str = "") -> str:
    """`fig` as an inline SVG (the figure is closed): its text kept as text, its colour meshes
    as embedded pixels, shown at its pixel size (width × height at the figure's dpi) in a box
    of its own that scrolls when the screen is narrower; `alt` is its accessible name. Every id
    is prefixed with a hash of the drawing, so two figures on one page never share one."""
    import matplotlib
    from matplotlib.collections import QuadMesh

    for mesh in fig.findobj(QuadMesh):
        mesh.set_rasterized(True)
    width, height = (round(v * fig.dpi) for v in fig.get_size_inches())
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "align-report"}):
        write_figure(fig, buf, "svg")
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    prefix = "f" + hashlib.sha1(text.encode()).hexdigest()[:8] + "-"
    text = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}\1"', text)
    text = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}\1)", text)
    text = re.sub(r'href="#([^"]+)"', rf'href="#{prefix}\1"', text)
    text = re.sub(
        r'<svg\b[^>]*?\bwidth="[^"]*" height="[^"]*"',
        lambda m: m.group(0).split(' width="')[0] + f' width="{width}" height="{height}"',
        text,
        count=1,
    )
    text = text.replace("<svg ", f'<svg role="img" aria-label="{esc(alt)}" ', 1)
    return f'<div class="fig {cls}">{text}</div>'


def figure(draw, alt: str, wide: tuple, narrow: tuple | None = None) -> str:
    """A figure drawn twice, `draw(size)` at `wide` = (width, height) px for wide screens and
    at `narrow` for screens below NARROW_BELOW px (None: once, at `wide`, for every screen)."""
    if narrow is None:
        return svg(draw(wide), alt)
    return svg(draw(wide), alt, "wide") + svg(draw(narrow), alt, "narrow")


def image(uri: str, alt: str, width: int | None = None) -> str:
    w = f' width="{width}"' if width else ""
    return f'<img src="{uri}" alt="{esc(alt)}"{w}>'


def collapsed(summary: str, markup: str) -> str:
    """`markup` in a closed <details> under the one-line `summary`."""
    return f"<details><summary>{esc(summary)}</summary>{markup}</details>"


def tabs(name: str, panes: list) -> str:
    """CSS-only tabs (no script): `panes` [(label, markup)], at most MAX_TABS, the first
    shown; a radio button per pane, and STYLE's rule shows the pane of the checked one."""
    inputs = "".join(
        f'<input type="radio" name="{esc(name)}" id="{esc(name)}-{k}"{" checked" if k == 0 else ""}>'
        f'<label for="{esc(name)}-{k}">{esc(label)}</label>'
        for k, (label, _) in enumerate(panes[:MAX_TABS])
    )
    body = "".join(f'<div class="tab">{m}</div>' for _, m in panes[:MAX_TABS])
    return f'<div class="tabs">{inputs}{body}</div>'


def sentence(text: str, holds: bool | None) -> str:
    cls = {True: "holds", False: "not", None: ""}[holds]
    return f'<p class="{cls}">{esc(text)}</p>'
