"""The options of the analyses that need more than a model, a corpus and a batch size, as
records (ModelSpec and CorpusSpec group the model's and the corpus's): the CLI builds them by
field name (`align.records.build`), `align.analyses.run` and `interventions_run` take them."""

from __future__ import annotations

from dataclasses import dataclass

from align.analyses.igrad_options import Variant
from align.analyses.skip import PARTS, SETTINGS


@dataclass(frozen=True)
class SkipOptions:
    """`align skip`: the settings and parts run, the future setting's split points.

    split: "random" (P1's seeded split points, seed `split_seed`), "answer-start",
    "answer-points" or "answer-points-stream" (from each prompt's answer, read with
    `answer_field` / `answer_marker` as `align erase` reads it); split_stream_after: with
    "answer-points-stream", the corpus files whose prompts draw from the stream first."""

    settings: tuple = SETTINGS
    parts: tuple = PARTS
    split: str = "random"
    split_seed: int = 0
    answer_field: str = "answer"
    answer_marker: str | None = None
    split_stream_after: tuple = ()


@dataclass(frozen=True)
class LensOptions:
    """`align lens`: batch_size, prompts per forward of a live model; from a store the head
    runs on `device` (cpu | cuda | auto) in `dtype` (None: the model's compute dtype there),
    `tokens_per_step` tokens per head application (None: lens.HEAD_TOKENS)."""

    batch_size: int = 8
    device: str = "cpu"
    dtype: str | None = None
    tokens_per_step: int | None = None


@dataclass(frozen=True)
class EraseOptions:
    """`align erase`: the corpus `reference` whose first `reference_docs` documents' mean
    residual replaces an erased cell; each prompt's answer read with `answer_field` /
    `answer_marker`."""

    reference: str
    reference_docs: int = 10
    answer_field: str = "answer"
    answer_marker: str | None = None


@dataclass(frozen=True)
class IgradOptions:
    """`align igrad`: the parts differentiated, the variant (None: P1's, `PROTOCOLS["p1"]`),
    each prompt's answer read with `answer_field` / `answer_marker`."""

    parts: tuple = PARTS
    variant: Variant | None = None
    answer_field: str = "answer"
    answer_marker: str | None = None
