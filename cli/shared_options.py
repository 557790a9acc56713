"""The options that fill no record field, each declared once (`align.declarations.Flag`): where
a command writes (-o, per command: what it writes), the route of `align fit` (--live), the
values the live fit takes beside its records (--device-memory, --dry-run), and the analyses'
own (-o, --batch-size, --overwrite, --dry-run, the prompt bootstrap, --store, --protocol)."""

from __future__ import annotations

from align.analyses.igrad_options import PROTOCOLS
from align.declarations import flag
from align.stats.bootstrap import RESAMPLES

LIVE = flag(
    "--live",
    help="SOURCE and TARGET are models (folders or hub ids) run over CORPUS",
    is_flag=True,
)
FIT_OUTPUT = flag(
    "-o",
    "--output",
    help="the alignment result to write: a folder or an fsspec URL",
    metavar="RESULT",
    required=True,
)
EXTRACT_OUTPUT = flag(
    "-o",
    "--output",
    help="the activation store to write: a folder or an fsspec URL",
    metavar="STORE",
    required=True,
)
DEVICE_MEMORY = flag(
    "--device-memory",
    help="the device's budget when the models run on a GPU, e.g. `60GB`",
    metavar="BYTES",
    shown_default="90% of the GPU's free memory",
    parse="size",
)
LIVE_DRY_RUN = flag(
    "--dry-run",
    help="print the plan and a time estimate from a piece of the work timed here (with --live one batch of each model; on stores one statistics task and the measures of one pair); write nothing",
    is_flag=True,
)

# The analyses (contrib, skip, lens, depth, erase, igrad): where the result goes, how many rows
# a forward takes (per command: what a row is), the prompt bootstrap, a dry run.
ANALYSIS_OUTPUT = flag(
    "-o",
    "--output",
    help="the result to write",
    metavar="RESULT",
    required=True,
)
DEPTH_OUTPUT = flag(
    "-o",
    "--output",
    help="the result to write",
    metavar="RESULT",
    required=True,
)
OVERWRITE_RESULT = flag(
    "--overwrite",
    help="Replace an existing result at -o.",
    variants={
        page: {"help": f"replace an existing {result} result at `-o`"}
        for page, result in (
            ("contrib", "contributions"),
            ("skip", "skipping"),
            ("lens", "lens"),
            ("erase", "erasure"),
            ("igrad", "igrad"),
            ("depth", "depth"),
            ("depthscore", "depthscore"),
        )
    },
    is_flag=True,
)
PROMPTS_BATCH = flag(
    "--batch-size",
    help="Prompts (rows) per forward pass.",
    metavar="N",
    variants={
        "contrib": {
            "help": "prompts per forward pass (right-padded; padding is masked and never counted)"
        },
        "lens": {
            "help": "prompts per forward pass (right-padded; padding is masked and never scored)"
        },
        "skip": {"help": "rows (a prompt, or a prompt and one split point) per forward pass"},
    },
    type="whole",
    least=1,
    default=8,
)
ERASE_BATCH = flag(
    "--batch-size",
    help="rows (a prompt and one erased position) per forward pass",
    metavar="N",
    type="whole",
    least=1,
    default=8,
)
IGRAD_BATCH = flag(
    "--batch-size",
    help="interpolation points per forward and backward pass",
    metavar="N",
    type="whole",
    least=1,
    default=16,
)
# The dry run of contrib and lens from a model, as their pages say it; each adds its --store's.
STORE_DRY_RUN_DOC = (
    "print what the run will read (model, corpus, prompts, tokens), the forwards it will make "
    "(batches, padded positions), its memory (the weights and the activations of the largest "
    "batch; the measured peak on CUDA), what it will write, and its time from one timed batch "
    "scaled to every batch; write nothing. "
)
ANALYSIS_DRY_RUN = flag(
    "--dry-run",
    help="Print what the run will read, the forwards it will make, its memory, what it will "
    "write and its time from one timed batch; write nothing.",
    variants={
        "skip": {
            "help": "print what the run will read (model, corpus, prompts, tokens), the forwards it "
            "will make (batches, padded positions; per batch one clean forward and one per part "
            "and skipped layer), its memory (the weights and the activations of the largest "
            "batch; the measured peak on CUDA), what it will write, and its time from one timed "
            "batch scaled to every batch; write nothing"
        },
        "erase": {
            "help": "print what the run will read (model, prompts, their tokens, the reference "
            "corpus), the forwards it will make (rows, batches, 1 + L forwards a batch, the "
            "reference mean's forwards, padded positions), its memory (the weights and the "
            "activations of the largest batch; the measured peak on CUDA), what it will write, "
            "and its time from one timed batch scaled to every batch by padded positions; write "
            "nothing"
        },
        "igrad": {
            "help": "print what the run will read (model, prompts, their tokens), the forward and "
            "backward passes it will make (prompts × parts × layers × ⌈(N + 2)/batch⌉, padded "
            "positions), its memory (the weights and an estimate of what autograd keeps for the "
            "largest pass; the measured peak on CUDA), what it will write, and its time from one "
            "timed pass scaled by padded positions; write nothing. The pass timed is at layer 0, "
            "whose backward runs through every layer, so the time is an upper bound"
        },
    },
    is_flag=True,
)
STORE_DRY_RUN = flag(
    "--dry-run",
    help="Print what the run will read, the forwards it will make, its memory, what it will "
    "write and its time from one timed batch; write nothing. With --store: what the store holds "
    "and what the run will read.",
    variants={
        "contrib": {
            "help": STORE_DRY_RUN_DOC
            + "With `--store`, after the checks of a run: what the store holds (tokens, "
            "sequences, model, layers, d_model, dtype, boundaries, sublayers), what the run will "
            "read (chunks, bytes) and write; no time (the store route is not timed)"
        },
        "lens": {
            "help": STORE_DRY_RUN_DOC
            + "With `--store`, after the checks of a run (the checkpoint's config against the "
            "store's included): what the store holds (tokens, sequences, model, layers, d_model, "
            "dtype, boundaries), what the run will read (each boundary's residual, bytes; the "
            "checkpoint's head) and write; no time (the store route is not timed)"
        },
    },
    is_flag=True,
)
BOOTSTRAP = flag(
    "--bootstrap",
    help="resamples of prompts for the 95% intervals, 100 to 1,000,000",
    metavar="N",
    type="int",
    default=RESAMPLES,
    parse="resamples",
)
BOOTSTRAP_SEED = flag(
    "--bootstrap-seed",
    help="seed of the prompt bootstrap",
    metavar="N",
    type="seed",
    default=0,
)
EQUAL_N = flag(
    "--equal-n",
    help="also the aggregates over N prompts drawn per resample (`R_equal_n`, `O_equal_n`, below)",
    metavar="N",
    shown_default="off",
    type="whole",
    least=1,
)
CONTRIB_STORE = flag(
    "--store",
    help="read residuals and sublayer outputs from an activation store instead of running MODEL "
    "(then no MODEL or CORPUS)",
    metavar="STORE",
)
LENS_STORE = flag(
    "--store",
    help="read residuals from an activation store; only the final norm and unembedding of MODEL "
    "(default: the store's model) are read. No CORPUS with it",
    metavar="STORE",
)
DEPTH_CONTRIB = flag(
    "--contrib",
    help="a result of `align contrib`",
    metavar="RESULT",
    required=True,
    name="contrib_path",
)
DEPTH_LENS = flag(
    "--lens",
    help="a result of `align lens` on the same model",
    metavar="RESULT",
    required=True,
    name="lens_path",
)
IGRAD_PROTOCOL = flag(
    "--protocol",
    help="the preset of the five options below",
    choices=tuple(PROTOCOLS),
    default="p1",
)
