"""Advice is checked against the command it is given for: every option a message names is an
option of the command that prints it (`align demo` on a full disk named --boundaries and
--max-tokens, which demo does not have); a UTF-16 or UTF-32 file with its byte-order mark is
told its encoding, not latin1 (iconv -f latin1 would turn each character into two or four)."""

from __future__ import annotations

import re

import pytest

from tests.helpers.assertions import one_line_error

OPTION = re.compile(r"(?<![\w-])(--?[a-z][a-z0-9-]*)")


def options_of(name: str) -> set[str]:
    import click

    from align.cli.main import cli

    command = cli.get_command(None, name)
    return {
        o
        for p in command.params
        if isinstance(p, click.Option)
        for o in (*p.opts, *p.secondary_opts)
    } | {"--help", "-h"}


def named(line: str) -> set[str]:
    return set(OPTION.findall(line))


def commands() -> list[str]:
    from align.cli.main import COMMANDS

    return list(COMMANDS)


@pytest.mark.parametrize("name", commands())
def test_every_parameter_a_message_names_is_shown_as_an_option_of_the_command(name):
    """A message naming every parameter any command has, shown for `name`: each option it
    then holds is one of `name`'s own (a parameter it lacks is shown in words)."""
    from align import messages
    from align.cli import main

    every = sorted(main.option_names())
    main._command_name[:] = [name]
    try:
        shown = messages.shown(" ".join(f"`{p}`" for p in every), main.option_of)
    finally:
        main._command_name.clear()
    assert named(shown) <= options_of(name), named(shown) - options_of(name)
    assert "`" not in shown


@pytest.mark.parametrize("name", commands())
def test_out_of_memory_advice_names_options_of_its_command(name):
    from align.cli.main import LOWER_MEMORY

    if name in LOWER_MEMORY:
        assert named(LOWER_MEMORY[name]) <= options_of(name), LOWER_MEMORY[name]


def test_demo_on_a_full_disk_names_no_option_demo_lacks(cli, tmp_path, monkeypatch):
    """The store check's own refusal (align.extraction.plan.check_disk: 10⁹ bytes needed,
    1,000 free) raised where the demo extracts, shown by `align demo`."""
    from align.demo import pipeline
    from align.extraction import plan

    def full(*args, **kwargs):
        plan.check_disk(str(tmp_path / "stores" / "shallow.zarr"), 10**9, 1000)

    monkeypatch.setattr(pipeline, "run", full)
    code, _, err = cli("demo", "-o", tmp_path / "demo", "--size", "tiny")
    line = one_line_error(code, err, "needs 953.7 MiB on disk", "another disk")
    assert named(line) <= options_of("demo"), line
    assert "--boundaries" not in line and "--max-tokens" not in line


def test_extract_on_a_full_disk_still_names_its_options(
    cli, zoo, corpus_file, tmp_path, monkeypatch
):
    monkeypatch.setenv("ALIGN_FREE_DISK_BYTES", "1000")
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", tmp_path / "s.zarr")
    line = one_line_error(code, err, "choose fewer --boundaries or --max-tokens, or another disk")
    assert named(line) <= options_of("extract")


@pytest.mark.parametrize(
    "encoding,mark,name",
    [
        ("utf-16-le", b"\xff\xfe", "UTF-16LE"),
        ("utf-16-be", b"\xfe\xff", "UTF-16BE"),
        ("utf-32-le", b"\xff\xfe\x00\x00", "UTF-32LE"),
        ("utf-32-be", b"\x00\x00\xfe\xff", "UTF-32BE"),
    ],
)
def test_a_byte_order_mark_names_its_encoding(cli, zoo, tmp_path, encoding, mark, name):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(mark + "first document\n\nsecond one\n".encode(encoding))
    out = tmp_path / "s.zarr"
    code, _, err = cli("extract", zoo("qwen2"), corpus, "-o", out)
    one_line_error(
        code,
        err,
        f"corpus file {corpus} is {name} (its first bytes are {name}'s byte-order mark), not UTF-8",
        f"iconv -f {name} -t utf-8",
        absent=("latin1",),
    )
    assert not out.exists()


def test_a_file_without_a_mark_is_still_told_latin1(cli, zoo, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes("caf\xe9 au lait\n".encode("latin1"))
    code, _, err = cli("extract", zoo("qwen2"), corpus, "-o", tmp_path / "s.zarr")
    one_line_error(code, err, "is not UTF-8 (byte 0xe9 at offset 3, line 1)", "iconv -f latin1")
