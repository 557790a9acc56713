"""Each option declared once: every option of `align extract`, `align fit` and the analyses is
generated from a declaration and sets a record field (or is a standalone value the command
takes), every field of their options records is declared as an option or says why not, and the records the commands
build hold what was typed, field by field (the values compared with a record built by hand)."""

import dataclasses

import click
import pytest

from align.analyses.analysis_options import EraseOptions, IgradOptions, LensOptions, SkipOptions
from align.analyses.igrad_options import Variant
from align.cli.declared import Declared, Parsed
from align.cli.shared_options import EXTRACT_OUTPUT
from align.corpus import CorpusSpec
from align.declarations import declarations, undeclared
from align.extraction import ExtractOptions
from align.fitting.fit_options import Execution, FitSpec, LiveJob
from align.models import ModelSpec

RECORDS = (
    FitSpec,
    Execution,
    LiveJob,
    ExtractOptions,
    ModelSpec,
    CorpusSpec,
    SkipOptions,
    LensOptions,
    EraseOptions,
    IgradOptions,
    Variant,
)
DECLARED_COMMANDS = ("extract", "fit", "contrib", "skip", "lens", "depth", "erase", "igrad")
DECLARED_COMMANDS += ("plot", "info", "report", "compare", "depthscore", "demo", "study")


def test_every_command_is_declared():
    from align.cli.main import COMMANDS

    assert sorted(COMMANDS) == sorted(DECLARED_COMMANDS)


def _command(name):
    from align.cli.main import cli

    return cli.get_command(click.Context(cli), name)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_every_field_is_an_option_or_says_why_not(record):
    assert undeclared(record) == [], f"{record.__name__}: fields with no declaration"


@pytest.mark.parametrize("name", DECLARED_COMMANDS)
def test_every_option_is_generated_from_a_declaration(name):
    options = [p for p in _command(name).params if isinstance(p, click.Option)]
    hand_made = [p.opts[0] for p in options if not isinstance(p, Declared) and p.name != "help"]
    assert hand_made == []
    for p in options:
        if isinstance(p, Declared) and p.fills.record is not None:
            assert p.fills.name in {f.name for f in dataclasses.fields(p.fills.record)}


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_every_declared_field_reaches_a_command(record):
    """A field declared as an option is an option of a command."""
    reached = {
        (p.fills.record, p.fills.name)
        for name in DECLARED_COMMANDS
        for p in _command(name).params
        if isinstance(p, Declared)
    }
    missing = [n for n in declarations(record) if (record, n) not in reached]
    assert missing == []


def _parse(name, args):
    """click's parsed values of `align NAME ARGS` and the command, without running it."""
    from align.cli.main import cli

    command = _command(name)
    parent = click.Context(cli, info_name="align", **cli.context_settings)  # -h as in a run
    ctx = command.make_context(name, list(args), parent=parent)
    return ctx, command


def test_extract_builds_its_records_field_by_field(tmp_path):
    from align.cli.extract import corpus_spec, model_spec

    ctx, command = _parse(
        "extract",
        [
            "m",
            "c.txt",
            "-o",
            "s",
            "--seed",
            "7",
            "--dtype",
            "float16",
            "--random-init",
            "--max-length",
            "64",
            "--pack",
            "\\n\\n",
            "--batch-size",
            "3",
            "--sublayers",
            "--codec",
            "none",
            "--chunk-tokens",
            "128",
            "--overwrite",
        ],
    )
    with ctx:
        parsed = Parsed(ctx.params, command)
        got = (model_spec("m", parsed), corpus_spec("c.txt", parsed), parsed.record(ExtractOptions))
        output = parsed.take(EXTRACT_OUTPUT)
        parsed.done()
    assert output == "s"
    assert got == (
        ModelSpec("m", dtype="float16", random_init=True, seed=7),
        CorpusSpec("c.txt", max_length=64, pack="\n\n"),
        ExtractOptions(
            batch_size=3, sublayers=True, codec="none", chunk_tokens=128, overwrite=True
        ),
    )


def test_fit_live_sides_take_their_own_value_or_the_shared_one():
    ctx, command = _parse(
        "fit",
        [
            "--live",
            "a",
            "b",
            "c.txt",
            "-o",
            "r",
            "--dtype",
            "bfloat16",
            "--target-dtype",
            "float16",
            "--source-random-init",
            "--source-init-seed",
            "4",
            "--target-revision",
            "v2",
            "--trust-remote-code",
            "--seed",
            "9",
        ],
    )
    with ctx:
        parsed = Parsed(ctx.params, command)
        source, target = (parsed.side(ModelSpec, s) for s in ("source", "target"))
        spec = parsed.record(FitSpec)
    assert source == dict(
        revision=None,
        dtype="bfloat16",
        trust_remote_code=True,
        allow_pickle_weights=False,
        random_init=True,
        seed=4,
        family=None,
    )
    assert target == dict(
        revision="v2",
        dtype="float16",
        trust_remote_code=True,
        allow_pickle_weights=False,
        random_init=False,
        seed=0,
        family=None,
    )
    assert spec.seed == 9  # the split's seed, not a model's


def test_a_value_nothing_takes_is_refused():
    ctx, command = _parse("extract", ["m", "-o", "s"])
    with ctx:
        parsed = Parsed(ctx.params, command)
        parsed.record(ExtractOptions)
        with pytest.raises(TypeError, match="no record or value took: .*'dataset'"):
            parsed.done()


def test_one_option_declared_twice_in_a_command_is_refused():
    from align.cli.declared import fields, options_of

    with pytest.raises(TypeError, match=r"declared twice in one command: \['seed'\]"):
        options_of(fields(FitSpec, "seed"), fields(ModelSpec, "seed"))


def test_messages_name_a_field_by_its_declared_flag():
    from align.cli.main import option_names

    names = option_names("fit")
    assert names["n_workers"] == "--workers"
    assert names["memory_limit"] == "--memory-limit"
    assert names["output"] == "-o"
    assert option_names("extract")["fmt"] == "--format"


def test_igrad_builds_its_variant_and_options_by_declaration():
    from align.analyses.igrad_options import PROTOCOLS, variant

    ctx, command = _parse(
        "igrad",
        ["m", "p.jsonl", "-o", "r", "--protocol", "align", "--steps", "8", "--parts", "mlp"],
    )
    with ctx:
        parsed = Parsed(ctx.params, command)
        typed = parsed.fields(Variant)
        options = parsed.fields(IgradOptions)
    assert typed == dict(object=None, baseline=None, target=None, rule=None, steps=8)
    assert variant("align", **typed) == dataclasses.replace(PROTOCOLS["align"], steps=8)
    assert options == dict(parts="mlp", answer_field="answer", answer_marker=None)


def test_skip_and_erase_records_hold_what_was_typed():
    ctx, command = _parse(
        "skip",
        [
            "m",
            "c.txt",
            "-o",
            "r",
            "--split",
            "answer-start",
            "--split-seed",
            "3",
            "--answer-marker",
            "A:",
            "--split-stream-after",
            "x.txt",
            "--split-stream-after",
            "y.txt",
        ],
    )
    with ctx:
        typed = Parsed(ctx.params, command).fields(SkipOptions)
    assert typed == dict(
        settings="current,future",
        parts="layer,attn,mlp",
        split="answer-start",
        split_seed=3,
        answer_field="answer",
        answer_marker="A:",
        split_stream_after=("x.txt", "y.txt"),
    )
    ctx, command = _parse(
        "erase", ["m", "p.jsonl", "-o", "r", "--reference", "ref.txt", "--answer-field", "gold"]
    )
    with ctx:
        record = Parsed(ctx.params, command).record(EraseOptions)
    assert record == EraseOptions("ref.txt", 10, "gold", None)


def test_a_field_s_docstring_is_its_help_its_row_and_its_api_text():
    """One text: the docstring under `FitSpec.bootstrap` (read here with ast, as griffe reads it
    for the API page) is its table row's meaning and, without its Markdown, its --help."""
    import ast
    import inspect

    from align.cli.option_tables import table
    from align.fitting import fit_options

    tree = ast.parse(inspect.getsource(fit_options))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "FitSpec").body
    at = next(
        k for k, n in enumerate(body) if getattr(n, "target", None) and n.target.id == "bootstrap"
    )
    text = " ".join(body[at + 1].value.value.split())
    assert text.startswith("Resamples of the held-out documents for `p_best`")
    assert f"| `--bootstrap N` | 1000 | {text} |" in table("fit-store")
    option = next(p for p in _command("fit").params if p.name == "bootstrap")
    assert option.help == text.replace("`", "")


def test_an_option_without_a_text_is_refused():
    from align.declarations import declarations, option

    @dataclasses.dataclass(frozen=True)
    class Bare:
        n: int = dataclasses.field(default=1, metadata=option("--n"))

    with pytest.raises(TypeError, match="Bare.n is an option with no text: write its docstring"):
        declarations(Bare)


def test_plain_drops_the_markdown_only():
    from align.declarations import plain

    assert plain("see [the α grid](#the-grid) and `--seed`; `a` \\| b") == (
        "see the α grid and --seed; a | b"
    )


def test_the_numbers_an_option_s_text_states_are_the_library_s():
    from align.cli import compare, depthscore
    from align.cli.shared_options import BOOTSTRAP
    from align.measures import PERMUTATIONS, SAMPLE_ROWS
    from align.stats.bootstrap import MAX_RESAMPLES, MIN_RESAMPLES

    bounds = f"{MIN_RESAMPLES:,} to {MAX_RESAMPLES:,}"
    fit = declarations(FitSpec)
    assert bounds in fit["bootstrap"].flag.help
    for flag in (BOOTSTRAP, compare.BOOTSTRAP, depthscore.BOOTSTRAP):
        assert bounds in flag.help, flag.flags
    assert fit["sample_rows"].flag.shown_default.startswith(f"{SAMPLE_ROWS:,},")
    assert fit["permutations"].flag.shown_default.startswith(
        f"{PERMUTATIONS} for mknn, cknna and rsa alone"
    )
    assert f"{PERMUTATIONS} gives p-values down to 0.01" in fit["permutations"].flag.help
