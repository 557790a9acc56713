"""Every command's `--help` as the `align` console script prints it at a fixed width, and the
golden copies kept under tests/cli/data/help/ (`python -m tests.helpers.help_pages` rewrites
them; `tests/cli/test_help_pages.py` fails while one differs).

A page is rendered in this process with click's CliRunner at 100 columns (the group's
`max_content_width`), whatever the terminal: the copies are the same on every machine."""

from __future__ import annotations

import pathlib
import sys

import click
from click.testing import CliRunner

GOLDEN = pathlib.Path(__file__).resolve().parent.parent / "cli" / "data" / "help"
WIDTH = 100


def _paths(group: click.Group, ctx: click.Context, prefix: tuple = ()) -> list[tuple]:
    """The command paths under `group` (its subgroups' commands too), in its listed order."""
    out = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        out.append((*prefix, name))
        if isinstance(command, click.Group):
            out.extend(_paths(command, click.Context(command, info_name=name), (*prefix, name)))
    return out


def pages() -> dict[str, str]:
    """{file name: help text}: `align.txt` for the group, `<command>[-<sub>].txt` for each command."""
    from align.cli.main import cli

    runner = CliRunner()
    out = {}
    for path in [(), *_paths(cli, click.Context(cli, info_name="align"))]:
        result = runner.invoke(
            cli, [*path, "--help"], prog_name="align", terminal_width=WIDTH, env={"COLUMNS": "100"}
        )
        if result.exit_code != 0:
            raise RuntimeError(
                f"align {' '.join(path)} --help exited {result.exit_code}: {result.output}"
            )
        out["-".join(("align",) + path) + ".txt"] = result.output
    return out


def write(folder: pathlib.Path = GOLDEN) -> list[str]:
    """Write every page into `folder` (stale pages removed); the names written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = pages()
    for stale in set(p.name for p in folder.glob("*.txt")) - set(written):
        (folder / stale).unlink()
    for name, text in written.items():
        (folder / name).write_text(text, encoding="utf-8")
    return sorted(written)


if __name__ == "__main__":
    for name in write():
        print(GOLDEN / name, file=sys.stderr)
