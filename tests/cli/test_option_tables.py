"""The option tables of docs/commands (extract, fit, depth, compare, depthscore, demo, info,
plot) are what the options' declarations generate (`python -m align.cli.option_tables` rewrites
them), and every option of a command whose page is generated has its row."""

import click
import pytest

from align.cli.option_tables import DOCS, TABLES, flags_of, main, rewritten

PAGES = sorted({page for page, _ in TABLES.values()})


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


GENERATED = ("extract", "fit", "depth", "compare", "depthscore", "demo", "info", "plot")


@pytest.mark.parametrize("command_name", GENERATED)
def test_every_option_of_a_generated_page_has_a_row(command_name):
    from align.cli.main import cli

    command = cli.get_command(click.Context(cli), command_name)
    options = {p.opts[-1] for p in command.params if isinstance(p, click.Option)} - {"--help"}
    rows = set().union(
        *(flags_of(name) for name, (page, _) in TABLES.items() if page == f"{command_name}.md")
    )
    assert options == rows


# Pages whose tables are still written by hand: each option of the command has a row there.
# (study and report describe their few options in prose.)
HAND_WRITTEN = ("contrib", "skip", "lens", "erase", "igrad")


@pytest.mark.parametrize("command_name", HAND_WRITTEN)
def test_every_option_has_a_row_on_a_hand_written_page(command_name):
    import re

    from align.cli.main import cli

    command = cli.get_command(click.Context(cli), command_name)
    text = (DOCS / f"{command_name}.md").read_text(encoding="utf-8")
    cells = " ".join(line.split("|")[1] for line in text.splitlines() if line.startswith("| `"))
    flags = {
        o
        for p in command.params
        if isinstance(p, click.Option)
        for o in p.opts
        if o.startswith("--") and o != "--help"
    }
    missing = sorted(f for f in flags if not re.search(re.escape(f) + r"(?![\w-])", cells))
    assert missing == [], f"docs/commands/{command_name}.md has no row for {missing}"
