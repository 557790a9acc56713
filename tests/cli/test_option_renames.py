"""The old option names (--layers, --source-layers, --target-layers) are renamed only where
click would parse them as that option: never a value of another option, never after `--`;
errors name the option as typed; the old and the new name together are refused.

The expected argv of each case is written out by hand."""

from __future__ import annotations

import os

import pytest

from tests.helpers.assertions import one_line_error


def command(name):
    from align.cli.main import cli

    return cli.get_command(None, name)


@pytest.mark.parametrize(
    "name,argv,expected,typed",
    [
        # values of other options stay as typed, whatever they look like
        ("fit", ["A", "B", "-o", "--source-layers", "--overwrite"], None, {}),
        ("fit", ["A", "B", "--output", "--target-layers"], None, {}),
        ("extract", ["M", "C", "-o", "--layers"], None, {}),
        ("erase", ["M", "P", "--answer-marker", "--layers", "-o", "r"], None, {}),
        ("fit", ["A", "B", "--alphas", "--source-layers=1"], None, {}),
        # after `--` every token is an argument
        ("extract", ["M", "--", "--layers", "0"], None, {}),
        ("fit", ["A", "B", "--", "--source-layers", "1:"], None, {}),
        # in an option's place: renamed, also as --old=value
        (
            "fit",
            ["A", "B", "--source-layers", "1:", "--target-layers=0,2", "-o", "--layers"],
            ["A", "B", "--source-boundaries", "1:", "--target-boundaries=0,2", "-o", "--layers"],
            {"--source-boundaries": "--source-layers", "--target-boundaries": "--target-layers"},
        ),
        (
            "extract",
            ["M", "C", "--layers", "--layers", "-o", "out"],
            ["M", "C", "--boundaries", "--layers", "-o", "out"],
            {"--boundaries": "--layers"},
        ),
        # a short option whose value is glued on takes nothing more
        (
            "extract",
            ["M", "C", "-oout", "--layers", "0"],
            ["M", "C", "-oout", "--boundaries", "0"],
            {"--boundaries": "--layers"},
        ),
        # a command without the new option keeps the old name (click: no such option)
        ("plot", ["R", "--layers", "0"], None, {}),
    ],
)
def test_only_tokens_click_parses_as_the_option_are_renamed(name, argv, expected, typed):
    from align.cli.renames import renamed

    out, got = renamed(list(argv), command(name))
    assert out == (argv if expected is None else expected)
    assert got == typed


def test_a_value_that_looks_like_an_old_name_reaches_the_option(tmp_path, monkeypatch, cli):
    """`-o --source-layers --overwrite` writes to a folder of that name: the folder the old
    rename pointed at (./--source-boundaries) is left alone, and the error is the missing input."""
    monkeypatch.chdir(tmp_path)
    os.mkdir("--source-boundaries")
    (tmp_path / "--source-boundaries" / "notes.txt").write_text("mine")
    code, _, err = cli("fit", "nope-a.zarr", "nope-b.zarr", "-o", "--source-layers", "--overwrite")
    line = one_line_error(code, err, "nope-a.zarr")
    assert "deprecated" not in err and "boundaries" not in line
    assert sorted(os.listdir(tmp_path)) == ["--source-boundaries"]
    assert (tmp_path / "--source-boundaries" / "notes.txt").read_text() == "mine"


def test_errors_name_the_option_as_typed(tmp_path, cli):
    code, _, err = cli("fit", tmp_path / "a", tmp_path / "b", "--source-layers")
    one_line_error(
        code,
        err,
        "Option '--source-layers' requires an argument",
        progress=("align: warning: --source-layers is deprecated",),
    )
    assert "--source-boundaries' requires" not in err


@pytest.mark.parametrize(
    "argv,old,new",
    [
        (["extract", "M", "C", "--layers", "0", "--boundaries", "1"], "--layers", "--boundaries"),
        (["extract", "M", "C", "--boundaries=1", "--layers=0"], "--layers", "--boundaries"),
        (
            ["fit", "A", "B", "--source-boundaries", "1", "--source-layers", "0"],
            "--source-layers",
            "--source-boundaries",
        ),
    ],
)
def test_the_old_and_the_new_name_together_are_refused(cli, argv, old, new):
    code, _, err = cli(*argv)
    one_line_error(
        code, err, f"{old} and {new} are one option ({old} is its old name): give it once, as {new}"
    )
    assert code == 2
