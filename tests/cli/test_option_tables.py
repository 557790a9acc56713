"""The option tables of docs/commands (every command's page) are what the options' declarations
generate (`python -m align.cli.option_tables` rewrites them), and every option of every command
has its row."""

import click
import pytest

from align.cli.option_tables import DOCS, TABLES, flags_of, main, rewritten

PAGES = sorted({spec.page for spec in TABLES.values()})


@pytest.mark.parametrize("page", PAGES)
def test_each_table_is_what_the_declarations_generate(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    assert rewritten(text, page) == text, "run: python -m align.cli.option_tables"


def test_a_row_edited_by_hand_is_found(capsys, tmp_path, monkeypatch):
    import align.cli.option_tables as tables

    text = (DOCS / "extract.md").read_text(encoding="utf-8")
    edited = text.replace("| `--sublayers` | off |", "| `--sublayers` | on |")
    assert edited != text
    for page in PAGES:
        (tmp_path / page).write_text((DOCS / page).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "extract.md").write_text(edited, encoding="utf-8")
    monkeypatch.setattr(tables, "DOCS", tmp_path)
    assert main(["--check"]) == 1
    assert "extract.md" in capsys.readouterr().err
    assert main([]) == 0
    assert (tmp_path / "extract.md").read_text(encoding="utf-8") == text


GENERATED = ("extract", "fit", "depth", "contrib", "skip", "lens", "erase", "igrad")
GENERATED += ("compare", "depthscore", "plot", "demo", "info", "study", "report")


@pytest.mark.parametrize("command_name", GENERATED)
def test_every_option_of_a_generated_page_has_a_row(command_name):
    from align.cli.main import cli

    command = cli.get_command(click.Context(cli), command_name)
    options = {p.opts[-1] for p in command.params if isinstance(p, click.Option)} - {"--help"}
    rows = set().union(
        *(flags_of(name) for name, spec in TABLES.items() if spec.page == f"{command_name}.md")
    )
    assert options == rows


def test_every_command_has_a_generated_page():
    from align.cli.main import COMMANDS

    assert sorted(COMMANDS) == sorted(GENERATED)


def test_a_shared_option_takes_each_command_s_words_in_its_help_and_its_table(cli):
    """One declaration (--overwrite, --dtype, --device) worded per command by its variants, the
    same words in the command's --help (without the Markdown) as in its page's table; a command
    that names no variant the flag has reads the flag's own text."""
    from align.cli.option_tables import table

    rows = {
        "contrib-run": "| `--overwrite` | off | replace an existing contributions result at `-o` |",
        "skip-run": "| `--overwrite` | off | replace an existing skipping result at `-o` |",
        "igrad-model": "| `--dtype` float32 \\| bfloat16 \\| float16 | float32, on a GPU too | "
        "Compute dtype: only this command needs gradients",
        "extract-model": "| `--device` cpu \\| cuda \\| auto | cpu | Where the model runs: `cpu`, "
        '`cuda`, or `auto`, accelerate\'s `device_map="auto"`: a model too large for one GPU '
        "spreads over the GPUs it needs. |",
        "skip-model": "| `--device` cpu \\| cuda \\| auto | cpu | `auto` is accelerate's "
        '`device_map="auto"`: a model too large for one GPU spreads over several (and the CPU). |',
    }
    for name, row in rows.items():
        assert row in table(name), name
    helps = {
        "contrib": "replace an existing contributions result at -o",
        "skip": "replace an existing skipping result at -o",
        "igrad": "Compute dtype: only this command needs gradients",
        "extract": "Where the model runs: cpu, cuda, or auto",
    }
    for command, words in helps.items():
        code, out, _ = cli(command, "--help")
        assert code == 0 and words in " ".join(out.split()), command
