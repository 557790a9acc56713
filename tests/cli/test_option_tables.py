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
    from align.cli.main import COMMAND_MODULES

    assert sorted(COMMAND_MODULES) == sorted(GENERATED)


def test_a_shared_option_takes_each_page_s_words():
    """One declaration (--overwrite, the analyses' --dry-run) worded per page by its variants;
    a page that names no variant the flag has reads the flag's own doc."""
    from align.cli.option_tables import table

    assert "| `--overwrite` | off | replace an existing contributions result at `-o` |" in table(
        "contrib-run"
    )
    assert "| `--overwrite` | off | replace an existing skipping result at `-o` |" in table(
        "skip-run"
    )
    assert "| `--dtype` float32 \\| bfloat16 \\| float16 | float32, on a GPU too |" in table(
        "igrad-model"
    )
    assert "| `--device` cpu \\| cuda \\| auto | cpu | `auto` is accelerate's" in table(
        "extract-model"
    )
    assert "over the GPUs it needs |" in table("extract-model")
    assert "over several (and the CPU) |" in table("skip-model")
