"""The options of the analyses that need more than a model, a corpus and a batch size, as
records (ModelSpec and CorpusSpec group the model's and the corpus's), each field's option
declared on it (`align.declarations`): the CLI generates its options from them and builds the
records by declaration; `align.analyses.run` and `interventions_run` take them."""

from __future__ import annotations

from dataclasses import dataclass, field

from align.analyses.igrad_options import Variant
from align.analyses.skip import PARTS, SETTINGS, SPLITS
from align.declarations import not_an_option, option

LENS_KINDS = ("logit", "linear", "tuned")
PARTS_METAVAR = ",".join(PARTS)  # --parts: comma-separated, each checked by its command


@dataclass(frozen=True)
class SkipOptions:
    """`align skip`: the settings and parts run, the future setting's split points; each field's
    option is declared on it, its meaning under it."""

    settings: tuple = field(
        default=SETTINGS,
        metadata=option(
            "--settings",
            metavar=",".join(SETTINGS),
            default="current,future",
            shown_default="both",
        ),
    )
    """The settings to run, comma-separated: `current`, `future`."""
    parts: tuple = field(
        default=PARTS,
        metadata=option(
            "--parts", metavar=PARTS_METAVAR, default=PARTS_METAVAR, shown_default="all three"
        ),
    )
    """The parts to skip, comma-separated: `layer`, `attn`, `mlp`."""
    split: str = field(default="random", metadata=option("--split", metavar="|".join(SPLITS)))
    """The future setting's split points: `random` (up to 4 per prompt from 8, 16, ...; P1 on
    GSM8K), `answer-start` (one per prompt: its first answer token, read as `align erase` reads
    answers; P1 on MQuAKE), `answer-points` (the first answer token + 0, 4, 8, ... short of the
    answer's last 4 tokens, shuffled with `--split-seed` per prompt, up to 4; P1's rule on MATH)
    or `answer-points-stream` (the same points drawn from one Python random stream seeded
    `--split-seed`, prompt after prompt: P1's draws with `--split-seed 12345` and every level's
    prompts in one file, in P1's order)."""
    split_seed: int = field(default=0, metadata=option("--split-seed", metavar="N", type="seed"))
    """Seed of the random split points (and of the order of `answer-points`, or of
    `answer-points-stream`'s one stream)."""
    answer_field: str = field(default="answer", metadata=option("--answer-field", metavar="NAME"))
    """With an answer split: the `.jsonl` field holding the answer."""
    answer_marker: str | None = field(
        default=None, metadata=option("--answer-marker", metavar="TEXT")
    )
    """With an answer split: the answer is the text after the last TEXT (any corpus)."""
    split_stream_after: tuple = field(
        default=(),
        metadata=option(
            "--split-stream-after", metavar="FILE", multiple=True, shown_default="none"
        ),
    )
    """With `answer-points-stream`: files whose prompts draw from the stream first, in the order
    given (the earlier levels, as P1 runs them), read with this run's corpus options;
    repeatable."""


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
    kind: str = field(default="logit", metadata=option("--kind", choices=LENS_KINDS))
    """The lens: `logit` (the final norm and unembedding at every boundary), `linear` (a ridge
    map to boundary L fitted on the training documents, then the head) or `tuned` (an affine
    translator per boundary trained on KL(output ‖ lens)); linear and tuned score held-out
    documents."""
    through: str | None = field(default=None, metadata=option("--through", metavar="MODEL_B"))
    """With `--map`: read the source model's boundaries through the maps onto MODEL_B's last
    boundary and MODEL_B's head (final norm and unembedding), compared with MODEL_B's own
    output."""
    maps: str | None = field(default=None, metadata=option("--map", metavar="RESULT"))
    """An alignment result fitted with `--save-maps` (with `--through`; or a self-fit with
    `--kind linear`): its maps and its held-out documents are used, its stores read."""
    save_maps: str | None = field(
        default=None, metadata=option("--save-maps", metavar="RESULT", shown_default="not kept")
    )
    """`--kind linear`: keep the self-fit with its maps W and c as an alignment result here
    (`--map` reads it again); `--kind tuned`: keep the translators T_b(h) = h + h A_bᵀ + c_b as a
    translators result here."""
    steps: int = field(default=250, metadata=option("--steps", metavar="N", type="whole", least=1))
    """`--kind tuned`: optimiser steps per boundary (the paper's 250)."""
    train_tokens: int = field(
        default=4096, metadata=option("--train-tokens", metavar="N", type="whole", least=1)
    )
    """`--kind tuned`: training tokens drawn for each step (every one when fewer)."""
    lens_seed: int = field(default=0, metadata=option("--lens-seed", metavar="N", type="seed"))
    """`--kind tuned`: seed of the document split and of each step's draw (the linear lens uses
    the fit's seed)."""

    def recorded(self) -> dict:
        """What a linear or tuned result records of these options."""
        keep = ("kind", "through", "maps", "save_maps")
        if self.kind == "tuned":
            keep += ("steps", "train_tokens", "lens_seed")
        return {k: getattr(self, k) for k in keep}


@dataclass(frozen=True)
class EraseOptions:
    """`align erase`: the reference residual and how each prompt's answer is read."""

    reference: str = field(metadata=option("--reference", metavar="CORPUS", required=True))
    """The corpus whose mean residual replaces the erased cell (a `.txt`, `.jsonl` or folder;
    each document cut to `--max-length`)."""
    reference_docs: int = field(
        default=10, metadata=option("--reference-docs", metavar="N", type="whole", least=1)
    )
    """Documents of `--reference` to average over, its first; a corpus with fewer is refused."""
    answer_field: str = field(default="answer", metadata=option("--answer-field", metavar="NAME"))
    """In a `.jsonl` file, the field whose text is appended to `--text-field`'s text as the
    answer."""
    answer_marker: str | None = field(
        default=None,
        metadata=option(
            "--answer-marker", metavar="TEXT", shown_default="none (use `--answer-field`)"
        ),
    )
    """The answer is the text after the last occurrence of TEXT in each prompt (any corpus;
    `--format gsm8k`: `The final answer is`)."""


@dataclass(frozen=True)
class IgradOptions:
    """`align igrad`: the parts differentiated, the variant and how each prompt's answer is read."""

    parts: tuple = field(
        default=PARTS,
        metadata=option(
            "--parts", metavar=PARTS_METAVAR, default=PARTS_METAVAR, shown_default="all three"
        ),
    )
    """The parts to attribute, comma-separated: `layer`, `attn`, `mlp`."""
    variant: Variant | None = field(
        default=None,
        metadata=not_an_option("--protocol and its five options (igrad_options.variant)"),
    )
    """The variant (None: P1's, `PROTOCOLS["p1"]`)."""
    answer_field: str = field(default="answer", metadata=option("--answer-field", metavar="NAME"))
    """In a `.jsonl` file, the field whose text is appended to `--text-field`'s text as the
    answer."""
    answer_marker: str | None = field(
        default=None,
        metadata=option(
            "--answer-marker", metavar="TEXT", shown_default="none (use `--answer-field`)"
        ),
    )
    """The answer is the text after the last occurrence of TEXT in each prompt (any corpus;
    `--format gsm8k`: `The final answer is`)."""
