"""The options that fill no record field, each declared once (`align.declarations.Flag`): where
a command writes (-o, per command: what it writes), the route of `align fit` (--live), and the
values the live fit takes beside its records (--device-memory, --dry-run)."""

from __future__ import annotations

from align.declarations import flag

LIVE = flag(
    "--live",
    help="SOURCE and TARGET are models (folders or hub ids) run over CORPUS: the statistics "
    "accumulate as the activations appear and nothing but RESULT is written "
    "(docs/commands/fit.md, `--live`).",
    is_flag=True,
)
FIT_OUTPUT = flag(
    "-o",
    "--output",
    help="Alignment result to write (a folder, or an fsspec URL).",
    metavar="RESULT",
    required=True,
)
EXTRACT_OUTPUT = flag(
    "-o",
    "--output",
    help="Activation store to write (a folder, or an fsspec URL).",
    metavar="STORE",
    required=True,
)
DEVICE_MEMORY = flag(
    "--device-memory",
    help="--live on a GPU: the device's budget, e.g. 60GB [default: 90% of its free memory].",
    metavar="BYTES",
    parse="size",
)
LIVE_DRY_RUN = flag(
    "--dry-run",
    help="--live: print the plan (tokens, blocks, passes, memory) and a time estimate from one "
    "timed batch of each model; write nothing.",
    is_flag=True,
)
