"""The library speaks in its own terms: its messages name the Python API's parameters
(`batch_size`, `output`), never the command line's options (--batch-size, -o), except inside a
quoted command line (`align fit --live`); the CLI shows those names as its options."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from align.fitting import Execution

ROOT = Path(__file__).resolve().parents[2]
FLAG = re.compile(r"(?<![\w`-])(--[a-z][a-z0-9-]*|-o)(?![\w-])")
COMMAND_LINE = re.compile(r"align [a-z]+(?: [A-Z_.]+)*(?: --?[a-z][\w-]*(?:[ =][^\s`'\"]+)?)*")


# The calls that declare a record field's command-line option (align.declarations): their
# strings are the command line's own terms, not the library's messages.
DECLARING = {"option", "flag", "not_an_option"}


def strings(path: Path):
    """(line, text) of every string literal of a module that is not a docstring, an attribute
    docstring (a string under a field) or part of an option's declaration."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    docs |= {
        id(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
    }
    declaring = {
        id(c)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) in DECLARING
        for c in ast.walk(n)
    }
    for n in ast.walk(tree):
        if (
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and id(n) not in docs | declaring
        ):
            yield n.lineno, n.value


def test_library_messages_name_parameters_not_options():
    bad = []
    for folder in ("align", "store"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, text in strings(path):
                text = COMMAND_LINE.sub("", text)
                if FLAG.search(text):
                    bad.append(f"{path.relative_to(ROOT)}:{line}: {text.strip()[:80]!r}")
    assert not bad, "library strings that name command-line options:\n" + "\n".join(bad)


def test_shown_translates_only_known_names():
    from align import messages

    terms = {"batch_size": "--batch-size", "output": "-o"}.get
    text = "`batch_size` 0 must be at least 1; choose another `output`, not `path`"
    assert (
        messages.shown(text, terms)
        == "--batch-size 0 must be at least 1; choose another -o, not `path`"
    )
    assert messages.shown(text) == text  # nothing installed: as written
    with messages.speaking(terms):
        assert (
            messages.shown(text)
            == "--batch-size 0 must be at least 1; choose another -o, not `path`"
        )
    assert messages.shown(text) == text


def test_the_library_error_names_the_python_parameter_and_the_cli_the_option(tmp_path, capsys):
    import align
    from align.cli.main import main
    from align.errors import InputError

    with pytest.raises(InputError) as e:
        align.fit(
            str(tmp_path / "a"),
            str(tmp_path / "b"),
            str(tmp_path / "r"),
            None,
            Execution(memory_limit="-5GB"),
        )
    assert str(e.value).startswith("`memory_limit` -5GB: a budget must be more than 0 bytes"), str(
        e.value
    )
    with pytest.raises(SystemExit):
        main(
            [
                "fit",
                str(tmp_path / "a"),
                str(tmp_path / "b"),
                "-o",
                str(tmp_path / "r"),
                "--memory-limit",
                "-5GB",
            ]
        )
    err = capsys.readouterr().err
    assert err.startswith(
        "align: error: --memory-limit -5GB: a budget must be more than 0 bytes"
    ), err
