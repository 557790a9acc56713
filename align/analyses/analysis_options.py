"""The options of the analyses that need more than a model, a corpus and a batch size, as
records (ModelSpec and CorpusSpec group the model's and the corpus's), each field's option
declared on it (`align.declarations`): the CLI generates its options from them and builds the
records by declaration; `align.analyses.run` and `interventions_run` take them."""

from __future__ import annotations

from dataclasses import dataclass, field

from align.analyses.igrad_options import Variant
from align.analyses.skip import PARTS, SETTINGS, SPLITS
from align.declarations import flag, not_an_option, option

# The answer options of `align erase` and `align igrad` (one declaration, two records).
ANSWER_FIELD = flag(
    "--answer-field",
    help="In a .jsonl file, the field whose text is appended to --text-field's text as the answer.",
    metavar="NAME",
    show_default=True,
)
ANSWER_MARKER = flag(
    "--answer-marker",
    help="The answer is the text after the last occurrence of TEXT in each prompt (any corpus; "
    "--format gsm8k: 'The final answer is') [default: use --answer-field].",
    metavar="TEXT",
)
PARTS_FLAG = flag("--parts", help="Comma-separated: layer, attn, mlp.", show_default=True)


def _parts(default: tuple) -> dict:
    """The metadata of a `parts` field: typed comma-separated (the command checks each)."""
    return option(
        *PARTS_FLAG.flags, help=PARTS_FLAG.help, default=",".join(default), show_default=True
    )


@dataclass(frozen=True)
class SkipOptions:
    """`align skip`: the settings and parts run, the future setting's split points.

    split: "random" (P1's seeded split points, seed `split_seed`), "answer-start",
    "answer-points" or "answer-points-stream" (from each prompt's answer, read with
    `answer_field` / `answer_marker` as `align erase` reads it); split_stream_after: with
    "answer-points-stream", the corpus files whose prompts draw from the stream first."""

    settings: tuple = field(
        default=SETTINGS,
        metadata=option(
            "--settings",
            help=f"Comma-separated: {', '.join(SETTINGS)}.",
            default="current,future",
            show_default=True,
        ),
    )
    parts: tuple = field(default=PARTS, metadata=_parts(PARTS))
    split: str = field(
        default="random",
        metadata=option(
            "--split",
            help="The future setting's split points: random (up to 4 per prompt from 8, 16, ...; "
            "P1 on GSM8K), answer-start (one per prompt: its first answer token, read as `align "
            "erase` reads answers; P1 on MQuAKE) or answer-points (the first answer token + 0, 4, "
            "8, ... short of the answer's last 4 tokens, shuffled with --split-seed per prompt, up "
            "to 4; P1's rule on MATH) or answer-points-stream (the same points drawn from one "
            "Python random stream seeded --split-seed, prompt after prompt: P1's draws with "
            "--split-seed 12345 and every level's prompts in one file, in P1's order).",
            metavar="|".join(SPLITS),
            show_default=True,
        ),
    )
    split_seed: int = field(
        default=0,
        metadata=option(
            "--split-seed",
            help="Seed of the future setting's split points.",
            type="seed",
            show_default=True,
        ),
    )
    answer_field: str = field(
        default="answer",
        metadata=option(
            "--answer-field",
            help="With --split answer-start or answer-points: the .jsonl field holding the answer.",
            show_default=True,
        ),
    )
    answer_marker: str | None = field(
        default=None,
        metadata=option(
            "--answer-marker",
            help="With --split answer-start or answer-points: the answer is the text after the "
            "last TEXT.",
            metavar="TEXT",
        ),
    )
    split_stream_after: tuple = field(
        default=(),
        metadata=option(
            "--split-stream-after",
            help="With --split answer-points-stream: files whose prompts draw from the stream "
            "first, in the order given (the earlier levels, as P1 runs them); read with this "
            "run's corpus options. Repeatable.",
            metavar="FILE",
            multiple=True,
        ),
    )


@dataclass(frozen=True)
class LensOptions:
    """`align lens`: batch_size, prompts per forward of a live model; from a store the head
    runs on `device` (cpu | cuda | auto) in `dtype` (None: the model's compute dtype there),
    `tokens_per_step` tokens per head application (None: lens.HEAD_TOKENS)."""

    batch_size: int = field(default=8, metadata=not_an_option("the command's --batch-size"))
    device: str = field(default="cpu", metadata=not_an_option("the model's --device (ModelSpec)"))
    dtype: str | None = field(
        default=None, metadata=not_an_option("the model's --dtype (ModelSpec)")
    )
    tokens_per_step: int | None = field(
        default=None, metadata=not_an_option("lens.HEAD_TOKENS; from the Python API")
    )


def _answer(of: object) -> dict:
    """The metadata of an answer field declared by the shared flag `of`."""
    how = {k: v for k, v in of.__dict__.items() if k not in ("flags", "help", "variants")}
    return option(*of.flags, help=of.help, **how)


@dataclass(frozen=True)
class EraseOptions:
    """`align erase`: the corpus `reference` whose first `reference_docs` documents' mean
    residual replaces an erased cell; each prompt's answer read with `answer_field` /
    `answer_marker`."""

    reference: str = field(
        metadata=option(
            "--reference",
            help="Corpus whose mean residual replaces the erased cell.",
            metavar="CORPUS",
            required=True,
        )
    )
    reference_docs: int = field(
        default=10,
        metadata=option(
            "--reference-docs",
            help="Documents of --reference to average over (fewer is an error).",
            type="whole",
            least=1,
            show_default=True,
        ),
    )
    answer_field: str = field(default="answer", metadata=_answer(ANSWER_FIELD))
    answer_marker: str | None = field(default=None, metadata=_answer(ANSWER_MARKER))


@dataclass(frozen=True)
class IgradOptions:
    """`align igrad`: the parts differentiated, the variant (None: P1's, `PROTOCOLS["p1"]`),
    each prompt's answer read with `answer_field` / `answer_marker`."""

    parts: tuple = field(default=PARTS, metadata=_parts(PARTS))
    variant: Variant | None = field(
        default=None,
        metadata=not_an_option("--protocol and its five options (igrad_options.variant)"),
    )
    answer_field: str = field(default="answer", metadata=_answer(ANSWER_FIELD))
    answer_marker: str | None = field(default=None, metadata=_answer(ANSWER_MARKER))
