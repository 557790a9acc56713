"""The shape of align's public API: no public function takes more than MAX_PARAMETERS
parameters. Options travel as records (FitSpec, Execution, ExtractOptions, ...); a function
past the limit is one whose parameters want grouping. Read from the source with `ast`, so the
check imports nothing of align."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The folders of the installed package `align`: cli/ installs as align.cli, store/ as align.store.
FOLDERS = ("align", "cli", "store")
MAX_PARAMETERS = 8  # self / cls not counted
# "path:function" -> why it may keep more.
ALLOWED: dict[str, str] = {}


def _is_click_command(node) -> bool:
    """Decorated with click (a command, an option, a group): its parameters are the CLI's."""
    return any("click" in ast.unparse(d) for d in node.decorator_list)


def _count(node) -> int:
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    return len(names) - (1 if names and names[0] in ("self", "cls") else 0)


def _public_functions(tree):
    """(node, qualified name) of every function reachable from outside its module: at module
    level or a method of a public class (nested functions and private names left out)."""
    stack = [(tree, "")]
    while stack:
        parent, prefix = stack.pop()
        for node in ast.iter_child_nodes(parent):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                stack.append((node, f"{prefix}{node.name}."))
            elif isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef)
            ) and not node.name.startswith("_"):
                yield node, prefix + node.name


def offenders() -> list[str]:
    """'path:line name (n parameters)' of every public function over MAX_PARAMETERS."""
    out = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if any(
                part.startswith("_") and part != "__init__.py"
                for part in path.relative_to(ROOT).parts
            ):
                continue
            for node, name in _public_functions(ast.parse(path.read_text(), rel)):
                n = _count(node)
                if (
                    n > MAX_PARAMETERS
                    and not _is_click_command(node)
                    and f"{rel}:{name}" not in ALLOWED
                ):
                    out.append(f"{rel}:{node.lineno} {name} ({n} parameters)")
    return out


def test_no_public_function_takes_more_than_eight_parameters():
    found = offenders()
    assert not found, (
        f"public functions over {MAX_PARAMETERS} parameters (group them into a record): "
        + "; ".join(found)
    )


def test_the_check_sees_an_offender_and_spares_records_and_commands(tmp_path):
    """The walk itself, on a hand-written module: a 9-parameter function is named with its
    line; a dataclass's fields, a click command, a private helper and a method's self are not."""
    source = """
import click
from dataclasses import dataclass

def wide(a, b, c, d, e, f, g, h, i):
    pass

def narrow(a, b, c, d, e, f, g, h):
    pass

def _private(a, b, c, d, e, f, g, h, i):
    pass

@click.command()
def cmd(a, b, c, d, e, f, g, h, i):
    pass

@dataclass
class Record:
    a: int
    b: int

class Thing:
    def method(self, a, b, c, d, e, f, g, h):
        pass
"""
    tree = ast.parse(source)
    found = [
        (node.lineno, name, _count(node))
        for node, name in _public_functions(tree)
        if _count(node) > MAX_PARAMETERS and not _is_click_command(node)
    ]
    assert found == [(5, "wide", 9)]
