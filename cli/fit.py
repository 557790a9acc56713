"""`align fit`."""

from __future__ import annotations

import click


def _alphas(ctx, param, value):
    if value is None:
        return None
    try:
        out = [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of numbers (e.g. 1e-6,1e-3,1)") from None
    if not out:
        raise click.BadParameter(f"{value!r} lists no α")
    return out


@click.command("fit")
@click.argument("source")
@click.argument("target")
@click.option("-o", "--output", required=True, metavar="RESULT", help="Alignment result to write (a folder, or an fsspec URL).")
@click.option("--test-fraction", type=float, default=0.2, show_default=True, help="Fraction of documents held out for scoring.")
@click.option("--val-fraction", type=float, default=0.2, show_default=True,
              help="Fraction of the remaining documents that chooses α.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the document split.")
@click.option("--alphas", callback=_alphas, default=None, metavar="A,B,...",
              help="Relative ridge penalties (units of the mean eigenvalue of XcᵀXc) [default: 1e-6..1e1 by decades].")
@click.option("--include-first-token", is_flag=True, help="Also fit and score position 0 of each sequence.")
@click.option("--source-layers", default=None, metavar="SPEC", help="Source boundaries to map from, e.g. 0,4,8 or ::2 [default: all stored].")
@click.option("--target-layers", default=None, metavar="SPEC", help="Target boundaries to map to [default: all stored].")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Dask scheduler address (tcp://host:8786), or `synchronous` to run in this process "
                   "[default: a small fit in threads of this process, a larger one on a local cluster, one worker "
                   "process per CPU].")
@click.option("--workers", "n_workers", type=click.IntRange(min=1), default=None,
              help="Worker processes of the local cluster: at most one per CPU core (more are capped, with a log line); "
                   "fewer when --memory-limit cannot hold them [default: one per core].")
@click.option("--memory-limit", default=None, metavar="BYTES",
              help="Memory budget, e.g. 8GB: of the whole fit (this process and the workers it starts, their idle "
                   "footprint included), or per worker with --scheduler [default: 60% of the available memory].")
@click.option("--device", default="cpu", show_default=True, metavar="DEVICE",
              help="Where products and solves (eigendecompositions included) run: cpu, or a CUDA device "
                   "(cuda, cuda:N) through torch, in float64.")
@click.option("--save-maps", is_flag=True, help="Also store every map's W and c (float64; the size is printed first).")
@click.option("--task-tokens", type=click.IntRange(min=1), default=None,
              help="Tokens each task reads [default: the store's chunk; 65,536 or more on a GPU].")
@click.option("--overwrite", is_flag=True,
              help="Replace RESULT if it is an alignment result (never a store, an input or a folder holding other files).")
def fit_cmd(source, target, output, test_fraction, val_fraction, seed, alphas, include_first_token, source_layers,
            target_layers, scheduler, n_workers, memory_limit, device, save_maps, task_tokens, overwrite):
    """Fit ridge maps from every boundary of SOURCE to every boundary of TARGET and score them.

    SOURCE and TARGET are activation stores made by `align extract` from the same corpus with
    one tokenizer. The result holds relative_error, norm_error, r2 and α per pair on held-out
    documents; open it with xarray.open_zarr(RESULT) or align.open_alignment(RESULT).
    """
    from align.fitting import FitOptions, fit

    fit(source, target, output, FitOptions(
        test_fraction=test_fraction, val_fraction=val_fraction, seed=seed, alphas=alphas,
        include_first_token=include_first_token, source_layers=source_layers, target_layers=target_layers,
        scheduler=scheduler, n_workers=n_workers, memory_limit=memory_limit, device=device, save_maps=save_maps,
        task_tokens=task_tokens, overwrite=overwrite))


commands = [fit_cmd]
