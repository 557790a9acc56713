"""`align plot`: any result store as a figure (PNG, PDF or SVG by -o's suffix), drawn by its
schema."""

from __future__ import annotations

import os

import click

from align import plotting
from align.cli.declared import Parsed, options_of
from align.declarations import flag
from align.errors import InputError
from align.names import pair_title
from align.plotting.common import FORMATS
from align.store import check_file_output, open_result

MAX_SIDE = 20_000
MAX_PIXELS = 100_000_000  # 400 MB of RGBA
MAX_DPI = 2400


def parse_size(value: str | None):
    """'WxH' -> (W, H) pixels, or None."""

    if value is None:
        return None
    try:
        w, h = (int(x) for x in value.lower().split("x"))
    except ValueError:
        raise InputError(
            f"--size {value!r} is not WIDTHxHEIGHT in pixels (e.g. 1200x800)"
        ) from None
    # The figure is drawn into an RGBA buffer of w*h*4 bytes (and a copy when the PNG is
    # encoded): bound it before matplotlib allocates, so a typo is one line, not a MemoryError.
    if w > MAX_SIDE or h > MAX_SIDE or w * h > MAX_PIXELS:
        raise InputError(
            f"--size {value!r} is too large: at most {MAX_SIDE:,} px a side and {MAX_PIXELS // 10**6} megapixels "
            f"in all (this one is {w * h / 1e6:,.0f} megapixels, {w * h * 4 / 2**30:,.1f} GiB to draw): give a smaller --size"
        )
    return w, h


def parse_prompts(value: str | None):
    """'0,3' -> [0, 3], or None."""

    if value is None:
        return None
    try:
        out = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or min(out) < 0:
        raise InputError(
            f"--prompts {value!r} is not a comma-separated list of prompt indices (e.g. 0,3)"
        )
    return out


def default_png(result: str) -> str:
    """RESULT.zarr -> RESULT.png beside it."""
    base = result.rstrip("/\\")
    root, ext = os.path.splitext(base)
    return (root if ext == ".zarr" else base) + ".png"


def _stem(path: str) -> str:
    """A result's name for a panel title: its folder's name without .zarr."""
    base = os.path.basename(path.rstrip("/\\"))
    return base[: -len(".zarr")] if base.endswith(".zarr") else base


OUTPUT = flag(
    "-o",
    "--output",
    help="the figure to write, by its suffix: `.png` (exactly `--size` pixels), `.pdf` or `.svg` "
    "(`--size` / `--dpi` inches); written beside and renamed into place, whole or not at all",
    metavar="FILE",
    shown_default="RESULT with `.png` (`x.zarr` → `x.png` beside it)",
)
METRIC = flag(
    "--metric",
    help="alignment: the matrix to draw",
    shown_default="relative_error",
    choices=("relative_error", "r2"),
)
MEASURE = flag(
    "--measure",
    help="alignment: draw a similarity measure of `align fit --measures` (`cka`, `procrustes`, "
    "...) instead, with the path its summary picked (a similarity's row argmax, a distance's "
    "argmin); a measure the result does not hold is refused, naming those it holds; `ridge` is "
    "the error matrix, the figure drawn without `--measure`",
    metavar="NAME",
)
AGG = flag(
    "--agg",
    help="contributions: `mean` or `max`; skipping and depthscore: `max` or `mean_over_prompts`",
    metavar="TEXT",
    shown_default="mean (contributions), max (skipping, depthscore)",
)
PART = flag(
    "--part",
    help="skipping: the R heatmap's part; depthscore: the part drawn (`layer`, `attn`, `mlp`)",
    metavar="TEXT",
    shown_default="layer",
)
DEPTH = flag(
    "--depth",
    help="lens, contributions: a depth result whose effective depths to mark",
    metavar="DEPTH",
    name="depth_path",
)
SIZE = flag(
    "--size",
    help=f"the figure's size in pixels, exactly (at most {MAX_SIDE:,} a side and "
    f"{MAX_PIXELS // 10**6} megapixels)",
    metavar="WxH",
    shown_default="by schema, e.g. 900x750 for an alignment",
)
DPI = flag(
    "--dpi",
    help=f"dots per inch, 20 to {MAX_DPI} (the fonts scale with it)",
    metavar="N",
    type="whole",
    least=20,
    most=MAX_DPI,
    default=100,
)
PROMPTS = flag(
    "--prompts",
    help="erasure, igrad: the prompt indices to draw",
    metavar="I,J,...",
    shown_default="the first 4",
)
BESIDE = flag(
    "--beside",
    help="alignment: another alignment result (e.g. a control) drawn beside RESULT on one colour "
    "scale; lens: another lens result (another kind) drawn with RESULT on the same axes; "
    "repeatable",
    metavar="RESULT",
    multiple=True,
)


OPTIONS = (
    OUTPUT,
    METRIC,
    MEASURE,
    AGG,
    PART,
    DEPTH,
    SIZE,
    DPI,
    PROMPTS,
    BESIDE,
)  # in the order of the help and of the page's table


@click.command("plot")
@click.argument("result")
@options_of(*OPTIONS)
def plot_cmd(result, **values):
    """Draw RESULT (an alignment, contributions, skipping, lens, depth, erasure or igrad store) as
    a PNG, PDF or SVG."""
    parsed = Parsed(values)
    output, metric, measure = parsed.take(OUTPUT), parsed.take(METRIC), parsed.take(MEASURE)
    agg, part, depth_path = parsed.take(AGG), parsed.take(PART), parsed.take(DEPTH)
    size, dpi, prompts = parsed.take(SIZE), parsed.take(DPI), parsed.take(PROMPTS)
    beside = parsed.take(BESIDE)
    parsed.done()

    pixels = parse_size(size)
    out = output or default_png(result)
    # A figure file that is absent or a regular file is replaced; a folder, another kind of
    # file or an input of the plot never is.
    check_file_output(
        out,
        tuple(FORMATS),
        inputs={
            f"RESULT {result}": result,
            f"--depth {depth_path}": depth_path,
            **{f"--beside {b}": b for b in beside},
        },
    )
    ds = open_result(result)
    depth = open_result(depth_path, "depth") if depth_path else None
    if measure == "ridge" and plotting.schema_of(ds) == "alignment":
        # ridge's matrix is the fit's own held-out relative error: the figure drawn without
        # --measure (with --beside too), not a measure the result would have to hold
        if metric == "r2":
            raise InputError(
                "--measure ridge draws the held-out relative error; r2 is drawn with --metric r2 "
                "alone: give one of them"
            )
        measure = None
    if measure is not None:
        fig = plotting.plot_measure(ds, measure, size=pixels, dpi=dpi)
    elif beside and plotting.schema_of(ds) == "lens":
        # the lens kinds drawn together
        fig = plotting.plot_lenses(
            [ds, *(open_result(b, "lens") for b in beside)], size=pixels, dpi=dpi
        )
    elif beside:
        if plotting.schema_of(ds) != "alignment":
            raise InputError(
                f"--beside draws alignment results side by side; {result} is a {plotting.schema_of(ds)} result"
            )
        others = [open_result(b, "alignment") for b in beside]
        fig = plotting.plot_alignments(
            [ds, *others],
            metric=metric or "relative_error",
            size=pixels,
            dpi=dpi,
            titles=[
                f"{_stem(p)}: {pair_title(d.attrs)}"
                for p, d in zip((result, *beside), (ds, *others))
            ],
        )
    else:
        fig = plotting.plot_result(
            ds,
            metric=metric,
            agg=agg,
            part=part,
            depth=depth,
            size=pixels,
            dpi=dpi,
            prompts=parse_prompts(prompts),
        )
    # Drawn beside the target and renamed over it: a failed write leaves the old PNG intact.
    plotting.save(fig, out)
    w, h = fig.get_size_inches() * fig.dpi
    click.echo(
        f"align plot: wrote {out} ({int(round(w))}x{int(round(h))} px at {dpi} dpi, "
        f"{plotting.schema_of(ds)})"
    )


commands = [plot_cmd]
