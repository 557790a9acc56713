"""`align plot`: any result store as a PNG figure, drawn by its schema."""

from __future__ import annotations

import os

import click


def parse_size(value: str | None):
    """'WxH' -> (W, H) pixels, or None."""
    from align.errors import InputError

    if value is None:
        return None
    try:
        w, h = (int(x) for x in value.lower().split("x"))
    except ValueError:
        raise InputError(f"--size {value!r} is not WIDTHxHEIGHT in pixels (e.g. 1200x800)") from None
    return w, h


def default_png(result: str) -> str:
    """RESULT.zarr -> RESULT.png beside it."""
    base = result.rstrip("/\\")
    root, ext = os.path.splitext(base)
    return (root if ext == ".zarr" else base) + ".png"


@click.command("plot")
@click.argument("result")
@click.option("-o", "--output", metavar="FILE.png", default=None, help="PNG to write [default: RESULT with .png].")
@click.option("--metric", type=click.Choice(["relative_error", "r2"]), default=None,
              help="alignment: the matrix to draw [default: relative_error].")
@click.option("--agg", default=None, help="contributions: mean | max [mean]; skipping: max | mean_over_prompts [max].")
@click.option("--part", default=None, help="skipping: the R heatmap's part, layer | attn | mlp [layer].")
@click.option("--depth", "depth_path", metavar="DEPTH", default=None,
              help="lens, contributions: a depth result whose effective depths to mark.")
@click.option("--size", default=None, metavar="WxH", help="Figure size in pixels [default: by schema, e.g. 900x750].")
@click.option("--dpi", type=click.IntRange(min=20), default=100, show_default=True, help="Dots per inch (fonts scale with it).")
def plot_cmd(result, output, metric, agg, part, depth_path, size, dpi):
    """Draw RESULT (an alignment, contributions, skipping, lens or depth store) as a PNG."""
    from align import plotting
    from align.store import open_result

    ds = open_result(result)
    depth = open_result(depth_path, "depth") if depth_path else None
    fig = plotting.plot_result(ds, metric=metric, agg=agg, part=part, depth=depth, size=parse_size(size), dpi=dpi)
    out = output or default_png(result)
    plotting.save(fig, out)
    w, h = fig.get_size_inches() * fig.dpi
    click.echo(f"align plot: wrote {out} ({int(round(w))}x{int(round(h))} px, {plotting.schema_of(ds)})")


commands = [plot_cmd]
