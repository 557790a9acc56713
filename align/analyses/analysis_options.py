"""The options of the analyses that need more than a model, a corpus and a batch size, as
records (ModelSpec and CorpusSpec group the model's and the corpus's), each field's option
declared on it (`align.declarations`): the CLI generates its options from them and builds the
records by declaration; `align.analyses.run` and `interventions_run` take them."""

from __future__ import annotations

from dataclasses import dataclass, field

from align.analyses.igrad_options import Variant
from align.analyses.skip import PARTS, SETTINGS, SPLITS
from align.declarations import flag, not_an_option, option

LENS_KINDS = ("logit", "linear", "tuned")

# The answer options of `align erase` and `align igrad` (one declaration, two records).
ANSWER_FIELD = flag(
    "--answer-field",
    help="In a .jsonl file, the field whose text is appended to --text-field's text as the answer.",
    metavar="NAME",
    doc="in a `.jsonl` file, the field whose text is appended to `--text-field`'s text as the "
    "answer",
    doc_default="`answer`",
)
ANSWER_MARKER = flag(
    "--answer-marker",
    help="The answer is the text after the last occurrence of TEXT in each prompt (any corpus; "
    "--format gsm8k: 'The final answer is') [default: use --answer-field].",
    metavar="TEXT",
    doc="the answer is the text after the last occurrence of TEXT in each prompt",
    doc_default="none (use `--answer-field`)",
)
PARTS_FLAG = flag("--parts", help="Comma-separated: layer, attn, mlp.")


def _parts(default: tuple, doc: str) -> dict:
    """The metadata of a `parts` field: typed comma-separated (the command checks each); `doc`
    its row's meaning."""
    return option(
        *PARTS_FLAG.flags,
        help=PARTS_FLAG.help,
        default=",".join(default),
        doc=doc,
        doc_default="all three",
        doc_metavar=",".join(default),
    )


@dataclass(frozen=True)
class SkipOptions:
    """`align skip`: the settings and parts run, the future setting's split points; each field's
    option is declared on it, its meaning under it."""

    settings: tuple = field(
        default=SETTINGS,
        metadata=option(
            "--settings",
            help=f"Comma-separated: {', '.join(SETTINGS)}.",
            default="current,future",
            doc="the settings to run",
            doc_default="both",
            doc_metavar=",".join(SETTINGS),
        ),
    )
    """The settings run ("current", "future")."""
    parts: tuple = field(default=PARTS, metadata=_parts(PARTS, "the parts to skip"))
    """The parts skipped ("layer", "attn", "mlp")."""
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
            doc="the future setting's split points (below)",
            doc_metavar=" \\| ".join(SPLITS),
        ),
    )
    """The future setting's split points: "random" (P1's seeded split points, seed
    `split_seed`), "answer-start", "answer-points" or "answer-points-stream" (from each prompt's
    answer)."""
    split_seed: int = field(
        default=0,
        metadata=option(
            "--split-seed",
            help="Seed of the future setting's split points.",
            type="seed",
            doc="seed of the random split points (and of the order of `answer-points`, or of "
            "`answer-points-stream`'s one stream)",
            doc_metavar="N",
        ),
    )
    """The seed of the random split points."""
    answer_field: str = field(
        default="answer",
        metadata=option(
            "--answer-field",
            help="With --split answer-start or answer-points: the .jsonl field holding the answer.",
            doc="with an answer split: the `.jsonl` field holding the answer",
            doc_default="`answer`",
            doc_metavar="NAME",
        ),
    )
    """The .jsonl field holding each prompt's answer (answer splits)."""
    answer_marker: str | None = field(
        default=None,
        metadata=option(
            "--answer-marker",
            help="With --split answer-start or answer-points: the answer is the text after the "
            "last TEXT.",
            metavar="TEXT",
            doc="with an answer split: the answer is the text after the last TEXT (any corpus)",
        ),
    )
    """The answer is the text after the last occurrence of this marker (answer splits)."""
    split_stream_after: tuple = field(
        default=(),
        metadata=option(
            "--split-stream-after",
            help="With --split answer-points-stream: files whose prompts draw from the stream "
            "first, in the order given (the earlier levels, as P1 runs them); read with this "
            "run's corpus options. Repeatable.",
            metavar="FILE",
            multiple=True,
            doc="with `answer-points-stream`: files whose prompts draw from the stream first, in "
            "the order given (the earlier levels); repeatable",
            doc_default="none",
        ),
    )
    """With "answer-points-stream": the corpus files whose prompts draw from the stream first."""


@dataclass(frozen=True)
class LensOptions:
    """`align lens`: how the head runs."""

    batch_size: int = field(default=8, metadata=not_an_option("the command's --batch-size"))
    """Prompts per forward of a live model."""
    device: str = field(default="cpu", metadata=not_an_option("the model's --device (ModelSpec)"))
    """Where the head runs from a store (cpu | cuda | auto)."""
    dtype: str | None = field(
        default=None, metadata=not_an_option("the model's --dtype (ModelSpec)")
    )
    """The head's dtype from a store (None: the model's compute dtype there)."""
    tokens_per_step: int | None = field(
        default=None, metadata=not_an_option("lens.HEAD_TOKENS; from the Python API")
    )
    """Tokens per head application (None: lens.HEAD_TOKENS)."""
    kind: str = field(
        default="logit",
        metadata=option(
            "--kind",
            help="logit (the final norm and unembedding at every boundary), linear (a ridge map "
            "to the last boundary first, fitted on the training documents) or tuned (an affine "
            "translator trained on the KL to the output); linear and tuned are scored on held-"
            "out documents.",
            choices=LENS_KINDS,
            doc="the lens ([methods](../methods.md#logit-lens)): `logit`, `linear` (a ridge map "
            "to boundary L fitted on the training documents, then the head) or `tuned` (an affine "
            "translator per boundary trained on KL(output ‖ lens)); linear and tuned score held-"
            "out documents",
            doc_metavar=" \\| ".join(LENS_KINDS),
        ),
    )
    """The lens: "logit", "linear" or "tuned"."""
    through: str | None = field(
        default=None,
        metadata=option(
            "--through",
            help="Read MODEL's boundaries through the maps of --map onto MODEL_B's last "
            "boundary and MODEL_B's final norm and unembedding.",
            metavar="MODEL_B",
            doc="with `--map`: read the source model's boundaries through the maps onto MODEL_B's "
            "last boundary and MODEL_B's head, compared with MODEL_B's own output",
        ),
    )
    """The model whose head reads the mapped boundaries (with `maps`)."""
    maps: str | None = field(
        default=None,
        metadata=option(
            "--map",
            help="An alignment result fitted with --save-maps whose maps the lens reads (with "
            "--through, or a self-fit with --kind linear); its stores give the tokens.",
            metavar="RESULT",
            doc="an alignment result fitted with `--save-maps` (with `--through`; or a self-fit "
            "with `--kind linear`): its maps and its held-out documents are used, its stores read",
        ),
    )
    """An alignment result with maps (W, c) the lens reads."""
    save_maps: str | None = field(
        default=None,
        metadata=option(
            "--save-maps",
            help="--kind linear: also write the self-fit (its maps W and c) to this alignment "
            "result.",
            metavar="RESULT",
            doc="`--kind linear`: keep the self-fit with its maps as an alignment result here "
            "(`--map` reads it again)",
            doc_default="not kept",
        ),
    )
    """Where the linear lens's self-fit is written (None: not kept)."""
    steps: int = field(
        default=250,
        metadata=option(
            "--steps",
            help="--kind tuned: optimiser steps per boundary.",
            type="whole",
            least=1,
            doc="`--kind tuned`: optimiser steps per boundary (the paper's 250)",
            doc_metavar="N",
        ),
    )
    """Optimiser steps of each tuned-lens translator."""
    train_tokens: int = field(
        default=4096,
        metadata=option(
            "--train-tokens",
            help="--kind tuned: training tokens drawn for each step.",
            type="whole",
            least=1,
            doc="`--kind tuned`: training tokens drawn for each step (every one when fewer)",
            doc_metavar="N",
        ),
    )
    """Training tokens drawn for each optimiser step."""
    lens_seed: int = field(
        default=0,
        metadata=option(
            "--lens-seed",
            help="Seed of the split into training and held-out documents (tuned) and of the "
            "tuned lens's draws.",
            type="seed",
            doc="`--kind tuned`: seed of the document split and of each step's draw",
            doc_metavar="N",
        ),
    )
    """The tuned lens's split and draw seed (the linear lens uses the fit's seed)."""

    def recorded(self) -> dict:
        """What a linear or tuned result records of these options."""
        keep = ("kind", "through", "maps", "save_maps")
        if self.kind == "tuned":
            keep += ("steps", "train_tokens", "lens_seed")
        return {k: getattr(self, k) for k in keep}


def _answer(of: object) -> dict:
    """The metadata of an answer field declared by the shared flag `of`."""
    how = {k: v for k, v in of.__dict__.items() if k not in ("flags", "help", "variants")}
    return option(*of.flags, help=of.help, **how)


@dataclass(frozen=True)
class EraseOptions:
    """`align erase`: the reference residual and how each prompt's answer is read."""

    reference: str = field(
        metadata=option(
            "--reference",
            help="Corpus whose mean residual replaces the erased cell.",
            metavar="CORPUS",
            doc="the corpus whose mean residual replaces the erased cell (a `.txt`, `.jsonl` or "
            "folder; each document cut to `--max-length`)",
            required=True,
        )
    )
    """The corpus whose mean residual replaces an erased cell."""
    reference_docs: int = field(
        default=10,
        metadata=option(
            "--reference-docs",
            help="Documents of --reference to average over (fewer is an error).",
            type="whole",
            least=1,
            doc="documents of `--reference` to average over; a corpus with fewer is refused",
            doc_metavar="N",
        ),
    )
    """How many of its first documents are averaged."""
    answer_field: str = field(default="answer", metadata=_answer(ANSWER_FIELD))
    """The .jsonl field appended to each prompt as its answer."""
    answer_marker: str | None = field(default=None, metadata=_answer(ANSWER_MARKER))
    """The answer is the text after the last occurrence of this marker."""


@dataclass(frozen=True)
class IgradOptions:
    """`align igrad`: the parts differentiated, the variant and how each prompt's answer is read."""

    parts: tuple = field(default=PARTS, metadata=_parts(PARTS, "the parts to attribute"))
    """The parts differentiated ("layer", "attn", "mlp")."""
    variant: Variant | None = field(
        default=None,
        metadata=not_an_option("--protocol and its five options (igrad_options.variant)"),
    )
    """The variant (None: P1's, `PROTOCOLS["p1"]`)."""
    answer_field: str = field(default="answer", metadata=_answer(ANSWER_FIELD))
    """The .jsonl field appended to each prompt as its answer."""
    answer_marker: str | None = field(default=None, metadata=_answer(ANSWER_MARKER))
    """The answer is the text after the last occurrence of this marker."""
