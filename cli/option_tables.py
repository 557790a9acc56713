"""The option tables of docs/commands, generated from the options' declarations.

    python -m align.cli.option_tables           # rewrite the tables between their markers
    python -m align.cli.option_tables --check   # exit 1 while a page differs (the suite runs it)

A table sits between `<!-- options: NAME -->` and `<!-- /options -->` in its page; `TABLES`
says which options it lists, in the order the command declares them. A row is the option's
flags with the value's name (`doc_metavar`, or its choices, or its metavar), its default
(`doc_default`, or the declared default: off for a flag, required, none) and its meaning
(`doc`, or the help). Options inside `worded(names, ...)` read those cells from the first of
their flag's `doc_variants` `names` it has: one declaration, worded per page.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
from dataclasses import dataclass, replace

from align.analyses.analysis_options import EraseOptions, IgradOptions, LensOptions, SkipOptions
from align.analyses.igrad_options import Variant
from align.cli import compare, demo, depthscore, plot, study
from align.cli.analyses import LENS_FIELDS
from align.cli.declared import Entry, entries, fields, sides
from align.cli.extract import CORPUS_FIELDS, INFO_JSON
from align.cli.shared_options import (
    ANALYSIS_DRY_RUN,
    ANALYSIS_OUTPUT,
    BOOTSTRAP,
    BOOTSTRAP_SEED,
    CONTRIB_STORE,
    DEPTH_CONTRIB,
    DEPTH_LENS,
    DEPTH_OUTPUT,
    DEVICE_MEMORY,
    EQUAL_N,
    ERASE_BATCH,
    EXTRACT_OUTPUT,
    FIT_OUTPUT,
    IGRAD_BATCH,
    IGRAD_PROTOCOL,
    LENS_STORE,
    LIVE,
    LIVE_DRY_RUN,
    OVERWRITE_RESULT,
    PROMPTS_BATCH,
    STORE_DRY_RUN,
)
from align.corpus import CorpusSpec
from align.extraction import ExtractOptions
from align.fitting.fit_options import Execution, FitSpec, LiveJob
from align.models import ModelSpec


@dataclass(frozen=True)
class Row:
    """One row for several options a page explains together (`parts`: which; their flags are
    checked against the command's, the row's cells are the page's)."""

    parts: tuple
    option: str
    default: str
    meaning: str


@dataclass(frozen=True)
class Worded:
    """Options whose rows on this page read their declarations' doc variants `names` (the first
    of them a flag has; none: its own doc, doc_default and doc_metavar)."""

    names: tuple
    parts: tuple


def worded(names, *parts) -> Worded:
    """`parts` (as `entries` takes them) worded by the doc variants `names` (one or a tuple)."""
    return Worded((names,) if isinstance(names, str) else tuple(names), parts)


def _in_words(entry: Entry, names: tuple) -> Entry:
    """`entry` with its flag's doc cells replaced by the first of the variants `names` it has."""
    variants = dict(entry.flag.doc_variants)
    for name in names:
        if name in variants:
            flag = replace(entry.flag, **dict(variants[name]))
            return replace(entry, flag=flag)
    return entry


DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "commands"
HEAD = "| option | default | meaning |\n|---|---|---|\n"

ANALYSIS_CORPUS = fields(CorpusSpec, *CORPUS_FIELDS)  # the analyses' corpus options

# NAME: (page, the options of the table in order)
TABLES = {
    "extract-model": ("extract.md", (EXTRACT_OUTPUT, fields(ModelSpec))),
    "extract-corpus": ("extract.md", (fields(CorpusSpec),)),
    "extract-run": ("extract.md", (fields(ExtractOptions),)),
    "fit-store": (
        "fit.md",
        (
            FIT_OUTPUT,
            fields(
                FitSpec,
                "test_fraction",
                "val_fraction",
                "seed",
                "alphas",
                "bootstrap",
                "bootstrap_seed",
                "convergence",
                "control",
                "measures",
                "sample_rows",
                "permutations",
                "neighbours",
                "pairing",
                "min_coverage",
                "include_first_token",
            ),
            Row(
                (fields(FitSpec, "source_boundaries", "target_boundaries"),),
                "`--source-boundaries SPEC`, `--target-boundaries SPEC`",
                "all stored (with `--live`: all 0..L)",
                "boundary subsets, e.g. `0,4,8`, `::2`, `1:` (the old names `--source-layers`, "
                "`--target-layers` still work in this release, with a warning)",
            ),
            fields(FitSpec, "save_maps"),
            fields(Execution, "overwrite"),
        ),
    ),
    "fit-execution": (
        "fit.md",
        (
            fields(Execution, "scheduler", "n_workers", "memory_limit", "device", "task_tokens"),
            LIVE_DRY_RUN,
        ),
    ),
    "fit-live": (
        "fit.md",
        (
            LIVE,
            fields(LiveJob, "batch_size"),
            Row(
                (sides(ModelSpec, "dtype"),),
                "`--dtype` float32 \\| bfloat16 \\| float16",
                "float32 on CPU, bfloat16 on CUDA",
                "compute dtype of both models; `--source-dtype`, `--target-dtype` set one",
            ),
            Row(
                (sides(ModelSpec, "revision"),),
                "`--source-revision`, `--target-revision`",
                "the hub's default",
                "hub revision of each model",
            ),
            Row(
                (sides(ModelSpec, "random_init"),),
                "`--random-init`",
                "off",
                "both models with seeded random weights (the untrained control); "
                "`--source-random-init`, `--target-random-init`: one of them",
            ),
            Row(
                (sides(ModelSpec, "seed"),),
                "`--source-init-seed N`, `--target-init-seed N`",
                "0",
                "seeds of the random weights (`align extract --seed`)",
            ),
            Row(
                (sides(ModelSpec, "family"),),
                "`--source-family NAME`, `--target-family NAME`",
                "the family table's, or discovered",
                "read that model as this family (`align extract --family`; "
                "[families](../families.md)), proved by a probe forward at load",
            ),
            Row(
                (
                    sides(ModelSpec, "trust_remote_code", "allow_pickle_weights"),
                    fields(LiveJob, "allow_long"),
                ),
                "`--trust-remote-code`, `--allow-pickle-weights`, `--allow-long`",
                "off",
                "as for `align extract`, for both models (a `--max-length` above either model's "
                "`max_position_embeddings` is capped at the fewer positions, with a log line, "
                "unless `--allow-long`)",
            ),
            DEVICE_MEMORY,
            Row(
                (fields(CorpusSpec, *CORPUS_FIELDS),),
                "`--dataset`, `--text-field`, `--format`, `--doc-split`, `--max-length` (512), "
                "`--overflow`, `--max-tokens`, `--max-docs`",
                "as `align extract`",
                "the corpus ([extract's corpus options](extract.md#options), [task "
                "formats](../formats.md#task-formats-format)); CORPUS may be left out with "
                "`--dataset` or a generated `--format`",
            ),
        ),
    ),
    "depth": (
        "depth.md",
        (
            DEPTH_CONTRIB,
            DEPTH_LENS,
            DEPTH_OUTPUT,
            worded("depth", OVERWRITE_RESULT),
            BOOTSTRAP,
            BOOTSTRAP_SEED,
        ),
    ),
    "compare": (
        "compare.md",
        (
            compare.OUTPUT,
            compare.FIGURE,
            compare.MEASURE,
            compare.WEIGHTING,
            compare.BOOTSTRAP,
            compare.SEED,
            compare.OVERWRITE,
        ),
    ),
    "depthscore": (
        "depthscore.md",
        (
            DEPTH_OUTPUT,
            depthscore.LEVELS,
            depthscore.BOOTSTRAP,
            depthscore.SEED,
            worded("depthscore", OVERWRITE_RESULT),
            depthscore.DRY_RUN,
        ),
    ),
    "demo": (
        "demo.md",
        (
            demo.OUTPUT,
            demo.SIZE,
            demo.TOKENS,
            Row(
                (demo.SEEDS,),
                "`--seeds N` or `--seeds S1,S2,...`",
                "3 (full), 2 (tiny)",
                "training seeds: a count (seeds `--seed` .. `--seed`+N−1) or a list; the first is "
                "the one analysed and drawn",
            ),
            demo.SEED,
        ),
    ),
    "info": ("info.md", (INFO_JSON,)),
    "study": (
        "study.md",
        (study.STUDY_OUTPUT, study.INIT, study.STUDY_DRY_RUN, study.KEEP_GOING, study.SCHEDULER),
    ),
    "report": ("report.md", (study.REPORT_OUTPUT,)),
    "contrib-run": (
        "contrib.md",
        (
            CONTRIB_STORE,
            worded("contrib", ANALYSIS_OUTPUT, PROMPTS_BATCH, OVERWRITE_RESULT, STORE_DRY_RUN),
            BOOTSTRAP,
            BOOTSTRAP_SEED,
        ),
    ),
    "contrib-model": ("contrib.md", (worded("analyses", fields(ModelSpec)),)),
    "contrib-corpus": ("contrib.md", (worded("analyses", ANALYSIS_CORPUS),)),
    "skip-run": (
        "skip.md",
        (
            worded("skip", ANALYSIS_OUTPUT, PROMPTS_BATCH, OVERWRITE_RESULT, ANALYSIS_DRY_RUN),
            fields(
                SkipOptions,
                "settings",
                "parts",
                "split",
                "split_seed",
                "split_stream_after",
                "answer_field",
                "answer_marker",
            ),
            BOOTSTRAP,
            BOOTSTRAP_SEED,
            EQUAL_N,
        ),
    ),
    "skip-model": ("skip.md", (worded("analyses", fields(ModelSpec)),)),
    "skip-corpus": ("skip.md", (worded("analyses", ANALYSIS_CORPUS),)),
    "lens-run": (
        "lens.md",
        (
            LENS_STORE,
            worded("lens", ANALYSIS_OUTPUT, PROMPTS_BATCH, OVERWRITE_RESULT, STORE_DRY_RUN),
            fields(LensOptions, *LENS_FIELDS),
            BOOTSTRAP,
            BOOTSTRAP_SEED,
        ),
    ),
    "lens-model": ("lens.md", (worded(("lens", "analyses"), fields(ModelSpec)),)),
    "lens-corpus": ("lens.md", (worded("analyses", ANALYSIS_CORPUS),)),
    "erase-run": (
        "erase.md",
        (
            ANALYSIS_OUTPUT,
            fields(EraseOptions, "reference", "reference_docs", "answer_field", "answer_marker"),
            ERASE_BATCH,
            worded("erase", OVERWRITE_RESULT, ANALYSIS_DRY_RUN),
        ),
    ),
    "erase-model": ("erase.md", (worded("analyses", fields(ModelSpec)),)),
    "erase-corpus": ("erase.md", (worded(("prompts", "analyses"), ANALYSIS_CORPUS),)),
    "igrad-run": (
        "igrad.md",
        (
            ANALYSIS_OUTPUT,
            fields(IgradOptions, "parts"),
            IGRAD_PROTOCOL,
            fields(Variant),
            fields(IgradOptions, "answer_field", "answer_marker"),
            IGRAD_BATCH,
            worded("igrad", OVERWRITE_RESULT, ANALYSIS_DRY_RUN),
        ),
    ),
    "igrad-model": (
        "igrad.md",
        (worded(("igrad", "analyses"), fields(ModelSpec, variant="gradients")),),
    ),
    "igrad-corpus": ("igrad.md", (worded(("prompts", "analyses"), ANALYSIS_CORPUS),)),
    "plot": (
        "plot.md",
        (
            plot.OUTPUT,
            plot.METRIC,
            plot.MEASURE,
            plot.AGG,
            plot.PART,
            plot.DEPTH,
            plot.SIZE,
            plot.DPI,
            plot.PROMPTS,
            plot.BESIDE,
        ),
    ),
}


def flags_of(name: str) -> set:
    """The long flags table `name` lists (its rows' and its grouped rows' options)."""
    parts = TABLES[name][1]
    listed = entries(*(p for p in parts if not isinstance(p, (Row, Worded))))
    grouped = entries(*(q for p in parts if isinstance(p, (Row, Worded)) for q in p.parts))
    return {e.flag.flags[-1] for e in [*listed, *grouped]}


def _cell_option(entry: Entry) -> str:
    flag = entry.flag
    *short, last = flag.flags
    value = flag.doc_metavar or flag.metavar
    if flag.doc_metavar is None and flag.choices is not None:
        value = " \\| ".join(flag.choices)
    if value and " \\| " in value:  # a list of values, after the flag
        return ", ".join(f"`{f}`" for f in flag.flags) + f" {value}"
    tail = f"`{last} {value}`" if value and not flag.is_flag else f"`{last}`"
    return ", ".join([*(f"`{f}`" for f in short), tail])


def _cell_default(entry: Entry) -> str:
    flag = entry.flag
    if flag.doc_default is not None:
        return flag.doc_default
    if flag.required:
        return "required"
    if flag.is_flag:
        return "off"
    return "none" if entry.default is None else str(entry.default)


def row(entry: Entry) -> str:
    """One option's row of its command's table."""
    meaning = entry.flag.doc or entry.flag.help
    return f"| {_cell_option(entry)} | {_cell_default(entry)} | {meaning} |\n"


def table(name: str) -> str:
    """The Markdown of table `name`, its head included."""
    rows = []
    for part in TABLES[name][1]:
        if isinstance(part, Row):
            rows.append(f"| {part.option} | {part.default} | {part.meaning} |\n")
        elif isinstance(part, Worded):
            rows.extend(row(_in_words(e, part.names)) for e in entries(*part.parts))
        else:
            rows.extend(row(e) for e in entries(part))
    return HEAD + "".join(rows)


def rewritten(text: str, page: str) -> str:
    """`text` (page `page`) with every table of `TABLES` on it generated anew."""
    for name, (where, _) in TABLES.items():
        if where != page:
            continue
        pattern = re.compile(
            rf"(<!-- options: {re.escape(name)} -->\n).*?(<!-- /options -->)", re.DOTALL
        )
        if not pattern.search(text):
            raise SystemExit(f"{page}: no <!-- options: {name} --> ... <!-- /options --> markers")
        text = pattern.sub(lambda m: m.group(1) + "\n" + table(name) + "\n" + m.group(2), text)
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail while a page differs")
    check = parser.parse_args(argv).check
    stale = []
    for page in sorted({page for page, _ in TABLES.values()}):
        path = DOCS / page
        text = path.read_text(encoding="utf-8")
        new = rewritten(text, page)
        if new != text:
            stale.append(page)
            if not check:
                path.write_text(new, encoding="utf-8")
    if check and stale:
        print(
            f"option tables out of date in {', '.join(stale)}: python -m align.cli.option_tables",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
