"""`align demo`: the whole study, offline, on two small models trained here from scratch."""

from __future__ import annotations

import click

from align.cli.declared import Parsed, options_of
from align.declarations import flag
from align.demo import pipeline
from align.demo.pipeline import SIZES
from align.errors import InputError

MAX_SEEDS = 100  # training seeds one demo run may ask for

OUTPUT = flag(
    "-o",
    "--output",
    help="where models, stores, results and figures go: a folder the demo owns",
    metavar="FOLDER",
    shown_default="`demo-output`",
    default="demo-output",
)
SIZE = flag(
    "--size",
    help="full: 6 layers against 12 layers, both d_model 128; tiny: 2 layers d_model 32 against 4 "
    "layers d_model 48 (30 documents), a check that everything runs",
    choices=SIZES,
    default="full",
)
TOKENS = flag(
    "--tokens",
    help="training tokens per model, at least 1,000",
    metavar="N",
    shown_default="400,000 (full), 4,000 (tiny)",
    type="whole",
    least=1000,
)
SEED = flag(
    "--seed",
    help="the first seed of a count (it also seeds the held-out documents)",
    metavar="N",
    type="seed",
    default=0,
)
SEEDS = flag(
    "--seeds",
    help="training seeds: a count N (seeds `--seed` .. `--seed`+N−1) or a comma-separated list; "
    "the first is the one analysed and drawn",
    metavar="N|S1,S2,...",
    shown_default="3 (full), 2 (tiny)",
)


OPTIONS = (OUTPUT, SIZE, TOKENS, SEED, SEEDS)  # in the order of the help and of the page's table


@click.command("demo")
@options_of(*OPTIONS)
def demo_cmd(**values):
    """Train a 6-layer and a 12-layer model on generated arithmetic with each seed (cached),
    extract them and an untrained 12-layer control per seed, fit shallow -> deep and shallow ->
    control per seed, run contributions, logit lens, layer skipping and effective depth on the
    first seed, draw every figure, and print a summary with the spread across seeds.

    Nothing is downloaded. A second run reuses everything and only redraws the figures.
    """

    parsed = Parsed(values)
    output, size, tokens = parsed.take(OUTPUT), parsed.take(SIZE), parsed.take(TOKENS)
    seed, seeds = parsed.take(SEED), parsed.take(SEEDS)
    parsed.done()
    make = pipeline.default_config if size == "full" else pipeline.tiny_config
    kwargs = {} if tokens is None else {"tokens": tokens}
    report = pipeline.run(
        output, make(seeds=seed_list(seeds, seed, 3 if size == "full" else 2), **kwargs)
    )
    click.echo(report.summary)
    click.echo(
        f"  time     {report.timings['total']:,.0f} s this run "
        f"(steps: {', '.join(f'{k} {v:,.0f} s' for k, v in report.timings.items() if k != 'total' and v >= 1)})"
    )


def seed_list(text: str | None, first: int, default: int) -> tuple:
    """--seeds as a tuple: a count N gives first .. first+N-1, a list is taken as given."""

    text = str(default) if text is None else text.strip()
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        raise InputError(
            f"--seeds {text!r} must be a count or a comma-separated list of integers"
        ) from None
    if "," not in text:
        if not 1 <= values[0] <= MAX_SEEDS:
            raise InputError(
                f"--seeds {text} must be a count from 1 to {MAX_SEEDS} (each seed trains two models)"
            )
        return tuple(range(first, first + values[0]))
    if first != 0:
        raise InputError(
            "--seed gives the first seed of a count: with a list --seeds, put the first seed first"
        )
    if len(values) > MAX_SEEDS:
        raise InputError(f"--seeds lists {len(values)} seeds: at most {MAX_SEEDS}")
    if len(set(values)) != len(values) or min(values) < 0:
        raise InputError(f"--seeds {text} must list distinct non-negative integers")
    return tuple(values)


commands = [demo_cmd]
