"""The option tables of docs/commands, generated from the options' declarations.

    python -m align.cli.option_tables           # rewrite the tables between their markers
    python -m align.cli.option_tables --check   # exit 1 while a page differs (the suite runs it)

A table sits between `<!-- options: NAME -->` and `<!-- /options -->` in its page; `TABLES`
names, for each, a group of its command's options (declared once, in the command's module, in
the order and the words of its help) and the rows its page words itself. A row is the option's
flags with the value's name (its metavar, or its choices), its default (`shown_default`, or the
declared default: off for a flag, required, none) and its meaning: the option's one text (a
record field's docstring, or a command's variant of it).
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
from dataclasses import dataclass

from align.cli import analyses, compare, demo, depthscore, extract, fit, interventions, plot, study
from align.cli.declared import Entry, entries, fields, sides
from align.cli.extract import CORPUS_FIELDS
from align.corpus import CorpusSpec
from align.fitting.fit_options import FitSpec, LiveJob
from align.models import ModelSpec


@dataclass(frozen=True)
class Row:
    """One row for several options a page explains together (`parts`: which, as `entries`
    takes them; the row stands where the first of them stands in the command's order, its
    cells are the page's)."""

    parts: tuple
    option: str
    default: str
    meaning: str


@dataclass(frozen=True)
class Table:
    """A table of `page`: the options of `parts`, a group of its command's options in the
    command's order and words (declared once, in the command's module); `rows`: options the
    page explains together in one row."""

    page: str
    parts: tuple
    rows: tuple = ()


DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "commands"
HEAD = "| option | default | meaning |\n|---|---|---|\n"

BOUNDARIES = Row(
    (fields(FitSpec, "source_boundaries", "target_boundaries"),),
    "`--source-boundaries SPEC`, `--target-boundaries SPEC`",
    "all stored (with `--live`: all 0..L)",
    "boundary subsets, e.g. `0,4,8`, `::2`, `1:` (the old names `--source-layers`, "
    "`--target-layers` still work in this release, with a warning)",
)
LIVE_ROWS = (
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
    Row(
        (fields(CorpusSpec, *CORPUS_FIELDS),),
        "`--dataset`, `--text-field`, `--format`, `--doc-split`, `--max-length` (512), "
        "`--overflow`, `--max-tokens`, `--max-docs`",
        "as `align extract`",
        "the corpus ([extract's corpus options](extract.md#options), [task "
        "formats](../formats.md#task-formats-format)); CORPUS may be left out with "
        "`--dataset` or a generated `--format`",
    ),
)
SEEDS = Row(
    (demo.SEEDS,),
    "`--seeds N` or `--seeds S1,S2,...`",
    "3 (full), 2 (tiny)",
    "training seeds: a count (seeds `--seed` .. `--seed`+N−1) or a list; the first is "
    "the one analysed and drawn",
)

# NAME: the table between its page's markers
TABLES = {
    "extract-model": Table("extract.md", extract.EXTRACT_MODEL),
    "extract-corpus": Table("extract.md", extract.EXTRACT_CORPUS),
    "extract-run": Table("extract.md", extract.EXTRACT_RUN),
    "fit-store": Table("fit.md", fit.FIT_SPEC, rows=(BOUNDARIES,)),
    "fit-execution": Table("fit.md", fit.FIT_EXECUTION),
    "fit-live": Table("fit.md", (fit.LIVE, *fit.LIVE_FORM), rows=LIVE_ROWS),
    "depth": Table("depth.md", (analyses.DEPTH_OPTIONS,)),
    "compare": Table("compare.md", compare.OPTIONS),
    "depthscore": Table("depthscore.md", (depthscore.OPTIONS,)),
    "demo": Table("demo.md", demo.OPTIONS, rows=(SEEDS,)),
    "info": Table("info.md", (extract.INFO_JSON,)),
    "study": Table("study.md", study.STUDY_OPTIONS),
    "report": Table("report.md", (study.REPORT_OUTPUT,)),
    "contrib-run": Table("contrib.md", analyses.CONTRIB_RUN),
    "contrib-model": Table("contrib.md", analyses.MODEL),
    "contrib-corpus": Table("contrib.md", analyses.CORPUS),
    "skip-run": Table("skip.md", analyses.SKIP_RUN),
    "skip-model": Table("skip.md", analyses.MODEL),
    "skip-corpus": Table("skip.md", analyses.CORPUS),
    "lens-run": Table("lens.md", analyses.LENS_RUN),
    "lens-model": Table("lens.md", analyses.LENS_MODEL),
    "lens-corpus": Table("lens.md", analyses.CORPUS),
    "erase-run": Table("erase.md", interventions.ERASE_RUN),
    "erase-model": Table("erase.md", analyses.MODEL),
    "erase-corpus": Table("erase.md", analyses.PROMPTS_CORPUS),
    "igrad-run": Table("igrad.md", interventions.IGRAD_RUN),
    "igrad-model": Table("igrad.md", interventions.IGRAD_MODEL),
    "igrad-corpus": Table("igrad.md", analyses.PROMPTS_CORPUS),
    "plot": Table("plot.md", plot.OPTIONS),
}


def flags_of(name: str) -> set:
    """The long flags table `name` lists (its rows' and its grouped rows' options)."""
    return {e.flag.flags[-1] for e in entries(*TABLES[name].parts)}


def _cell_option(entry: Entry) -> str:
    flag = entry.flag
    *short, last = flag.flags
    value = flag.metavar
    if value is not None and "\\|" not in value:  # a metavar's alternatives, escaped
        value = value.replace("|", " \\| ")
    if value is None and flag.choices is not None:
        value = " \\| ".join(flag.choices)
    if value and " \\| " in value:  # a list of values, after the flag
        return ", ".join(f"`{f}`" for f in flag.flags) + f" {value}"
    tail = f"`{last} {value}`" if value and not flag.is_flag else f"`{last}`"
    return ", ".join([*(f"`{f}`" for f in short), tail])


def _cell_default(entry: Entry) -> str:
    flag = entry.flag
    if flag.shown_default is not None:
        return flag.shown_default
    if flag.required:
        return "required"
    if flag.is_flag:
        return "off"
    return "none" if entry.default is None else str(entry.default)


def row(entry: Entry) -> str:
    """One option's row of its command's table."""
    meaning = re.sub(r"(?<!\\)\|", r"\\|", entry.flag.help)  # a bare | would end the cell
    return f"| {_cell_option(entry)} | {_cell_default(entry)} | {meaning} |\n"


def table(name: str) -> str:
    """The Markdown of table `name`, its head included: a row per option in the command's
    order, the page's own row where the first of the options it groups stands."""
    spec = TABLES[name]
    listed = entries(*spec.parts)
    grouped = {e.flag.flags: r for r in spec.rows for e in entries(*r.parts)}
    missing = set(grouped) - {e.flag.flags for e in listed}
    if missing:
        raise TypeError(f"table {name}: rows for options its command group lacks: {missing}")
    rows, done = [], set()
    for entry in listed:
        own = grouped.get(entry.flag.flags)
        if own is None:
            rows.append(row(entry))
        elif id(own) not in done:
            done.add(id(own))
            rows.append(f"| {own.option} | {own.default} | {own.meaning} |\n")
    return HEAD + "".join(rows)


def rewritten(text: str, page: str) -> str:
    """`text` (page `page`) with every table of `TABLES` on it generated anew."""
    for name, spec in TABLES.items():
        if spec.page != page:
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
    for page in sorted({spec.page for spec in TABLES.values()}):
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
