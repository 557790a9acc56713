"""The report's HTML pieces: a page, a table, an inline PNG figure, escaped text. Everything a
page needs is inside it (the style, every image as a data: URI): it opens offline and makes
no request to any network."""

from __future__ import annotations

import base64
import html
import io
import math

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.6em 0;display:block;overflow-x:auto;max-width:100%}td,th{border:1px solid #ccc;padding:.2em .45em;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}nav a{margin-right:1em}img{max-width:100%}
.grid td{text-align:center;vertical-align:top}.grid img{width:180px}.m td{font-size:12px}
.holds{color:#075}.not{color:#a30}pre{background:#f6f6f6;padding:.6em;overflow:auto;font-size:12px}
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
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>"
        f"{nav}<h1>{esc(title)}</h1>{body}</body></html>\n"
    )


def table(header: list, rows: list, cls: str = "") -> str:
    """A table; each cell is text (escaped) or a ("html", markup) pair kept as markup."""

    def cell(tag, c, k):
        markup = c[1] if isinstance(c, tuple) and c[0] == "html" else esc(c)
        return f"<{tag}{' class=l' if k == 0 else ''}>{markup}</{tag}>"

    head = "".join(cell("th", h, k) for k, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(cell("td", c, k) for k, c in enumerate(r)) + "</tr>" for r in rows
    )
    return f'<table class="{cls}"><tr>{head}</tr>{body}</table>'


def png(fig) -> str:
    """`fig` as a data: URI of its PNG (the figure is closed)."""
    from align.plotting import write_png

    buf = io.BytesIO()
    write_png(fig, buf)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def image(uri: str, alt: str, width: int | None = None) -> str:
    w = f' width="{width}"' if width else ""
    return f'<img src="{uri}" alt="{esc(alt)}"{w}>'


def sentence(text: str, holds: bool | None) -> str:
    cls = {True: "holds", False: "not", None: ""}[holds]
    return f'<p class="{cls}">{esc(text)}</p>'
