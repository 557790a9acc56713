"""The shape of the code: imports run one way without cycles, align's own modules are imported
at the top of files and heavy packages where they are used, and no module holds more than one
concept's worth of lines.

The modules are read with `ast` from the three folders the package is made of (align/ is
`align`, cli/ is `align.cli`, store/ is `align.store`); nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
while not (ROOT / "setup.py").exists():  # the test may sit in a tier folder
    ROOT = ROOT.parent
FOLDERS = {"align": "align", "align.cli": "cli", "align.store": "store"}
# Third-party packages whose import costs seconds or memory: imported inside the functions that
# use them, never at a module's top, so that `import align`, `align --help` and every command's
# start pay for none of them (a store-route `align fit` never imports torch).
HEAVY = (
    "torch",
    "transformers",
    "accelerate",
    "dask",
    "distributed",
    "zarr",
    "numcodecs",
    "matplotlib",
    "xarray",
    "sklearn",
    "scipy",
    "datasets",
    "tokenizers",
    "fsspec",
)
# 450 lines of the compact style before ruff format; the formatter spreads a wrapped call one
# argument a line, which grew the code 1.43x in lines (15,850 -> 22,671), not in statements
MAX_LINES = 700
# Which layer may import which: an arrow runs from the importer's layer to the imported's.
LAYERS = {"align.cli": 3, "align": 2, "align.store": 1}
BASE = (
    "align.errors",
    "align.faults",
    "align.messages",
    "align.version",
)  # imported by every layer


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [
                p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"
            ]
            found[".".join([package, *parts])] = path
    return found


MODULES = modules()


def _targets(node, name: str, is_package: bool) -> list[str]:
    """The align modules (and third-party top names) an import statement names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    out = []
    for a in node.names:
        full = f"{module}.{a.name}"
        out.append(full if full in MODULES else module)
    return out


def _is_top(node, tree) -> bool:
    """At module level, or inside a module-level if/try (TYPE_CHECKING, optional imports)."""

    def within(body):
        for n in body:
            if n is node:
                return True
            if isinstance(n, (ast.If, ast.Try)) and within(
                n.body
                + getattr(n, "orelse", [])
                + getattr(n, "finalbody", [])
                + [h for t in getattr(n, "handlers", []) for h in t.body]
            ):
                return True
        return False

    return within(tree.body)


def _loads_by_name(node) -> bool:
    """A call that imports a module named by a value: importlib.import_module(...),
    __import__(...)."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "import_module") or (
        isinstance(f, ast.Name) and f.id in ("import_module", "__import__")
    )


def imports_of(name: str, source: str, is_package: bool = False) -> tuple[set, list, set]:
    """Of module `name` with text `source`: the align modules it imports at the top, the align
    modules it imports inside functions or loads by name (with line numbers; a name-loading
    call counts as one import of "<by name>"), and the third-party top-level packages it
    imports at the top."""
    tree = ast.parse(source)
    top, lazy, third = set(), [], set()
    for node in ast.walk(tree):
        if _loads_by_name(node):
            lazy.append(("<by name>", node.lineno))
            continue
        if (
            not isinstance(node, (ast.Import, ast.ImportFrom))
            or getattr(node, "level", 0) == 0
            and isinstance(node, ast.ImportFrom)
            and node.module == "__future__"
        ):
            continue
        names = _targets(node, name, is_package)
        ours = [t for t in names if t in MODULES or t.split(".")[0] == "align"]
        if _is_top(node, tree):
            top.update(t for t in ours if t in MODULES)
            third.update(t.split(".")[0] for t in names if t.split(".")[0] != "align")
        else:
            lazy.extend((t, node.lineno) for t in ours if t in MODULES)
    return top, lazy, third


def imports() -> tuple[dict, dict, dict]:
    """`imports_of` for every module: three dicts by module name."""
    top, lazy, third = {}, {}, {}
    for name, path in MODULES.items():
        source = path.read_text(encoding="utf-8")
        top[name], lazy[name], third[name] = imports_of(name, source, path.name == "__init__.py")
    return top, lazy, third


TOP, LAZY, THIRD = imports()


def package(name: str) -> str:
    """The package a module belongs to, two names deep (align.fitting.planning.split -> align.fitting;
    align.errors stays itself)."""
    return ".".join(name.split(".")[:2])


# Every import an align module makes of another, at the top or inside a function: a cycle
# hidden in a function is a cycle all the same.
EDGES = {m: set(TOP[m]) | {t for t, _ in LAZY[m] if t in MODULES} for m in MODULES}
PACKAGE_EDGES: dict = {}
for _m, _targets_of in EDGES.items():
    for _t in _targets_of:
        if package(_m) != package(_t):
            PACKAGE_EDGES.setdefault(package(_m), set()).add(package(_t))


def cycles_of(graph: dict) -> list:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles():
    """No module imports, through any chain of imports at the top or inside functions, a
    module that imports it back."""
    assert not cycles_of(EDGES), f"import cycles: {cycles_of(EDGES)}"


def test_no_package_cycles():
    """The packages (align.fitting, align.extraction, ...) import one another one way: no
    chain of modules leads from a package back into it through another."""
    assert not cycles_of(PACKAGE_EDGES), f"package cycles: {cycles_of(PACKAGE_EDGES)}"


def test_align_modules_are_imported_at_the_top():
    """No align module is imported inside a function or loaded by name (importlib): none has a
    reason to be, since no module pulls in a heavy package at its top (below), so a lazy import
    would keep nothing off start-up and hide an arrow of the import graph from the reader."""
    bad = [
        f"{MODULES[m].relative_to(ROOT)}:{line} imports {t} inside a function: import it at the top"
        if t in MODULES
        else f"{MODULES[m].relative_to(ROOT)}:{line} loads a module by name: import it at the top"
        for m, items in LAZY.items()
        for t, line in items
    ]
    assert not bad, "\n".join(bad)


def test_imports_of_finds_what_runs_late():
    """The reader itself, on a hand-written module: a function-level import of an align module,
    a name-loading call and a heavy package at the top are each found; a heavy package inside a
    function and an import under a module-level `if` are not lazy."""
    source = (
        "import importlib\n"
        "import torch\n"
        "from align import errors\n"
        "if True:\n"
        "    from align import messages\n"
        "def f():\n"
        "    import zarr\n"
        "    from align.errors import InputError\n"
        "    return importlib.import_module('align.faults')\n"
    )
    top, lazy, third = imports_of("align.example", source)
    assert top == {"align.errors", "align.messages"}
    assert lazy == [("align.errors", 8), ("<by name>", 9)]
    assert third == {"importlib", "torch"}


def test_heavy_packages_are_imported_where_used():
    """No module imports torch, transformers, dask, zarr, matplotlib, ... at its top (HEAVY): each
    is imported inside the functions that use it, so that importing any part of align, and so
    starting any command, costs none of them."""
    bad = [
        f"{MODULES[m].relative_to(ROOT)} imports {h} at its top: import it inside the functions that use it"
        for m in MODULES
        for h in sorted(THIRD[m] & set(HEAVY))
    ]
    assert not bad, "\n".join(bad)


def test_imports_run_one_way():
    """cli → align → store: the library never imports the CLI, the store imports only the store
    and the base modules, and fitting does not import the analyses."""

    def layer(m):
        return max((LAYERS[p] for p in LAYERS if m == p or m.startswith(p + ".")), default=0)

    bad = []
    for m in MODULES:
        for t, line in [(t, None) for t in TOP[m]] + LAZY[m]:
            if t in BASE or t == "align":
                continue
            if layer(t) > layer(m) and m != "align.__main__":
                bad.append(f"{m} imports {t}")
            if m.startswith("align.fitting") and t.startswith("align.analyses"):
                bad.append(f"{m} imports {t} (fitting does not depend on the analyses)")
    assert not bad, "\n".join(bad)


def test_modules_are_small():
    long = {
        str(p.relative_to(ROOT)): n
        for p in MODULES.values()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by concept): {long}"


# The entry points that read as their pipeline: every stage a named call, the docstring short
# (the longer prose is docs/api.md's), all of it, `def` to last line, under this many lines.
PIPELINES = {
    "align.fitting.store_route.pipeline": "fit",
    "align.fitting.live_route.pipeline": "fit_live",
}
MAX_PIPELINE_LINES = 60


def function_lines(path: Path, name: str) -> int:
    """Lines of the module-level function `name` in `path`, its `def` to its last line (as
    inspect.getsourcelines counts an undecorated function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node.end_lineno - node.lineno + 1
    raise LookupError(f"{name} is not a function of {path}")


def test_the_fit_entry_points_read_as_their_pipeline():
    sizes = {f"{m}.{f}": function_lines(MODULES[m], f) for m, f in PIPELINES.items()}
    long = {k: n for k, n in sizes.items() if n >= MAX_PIPELINE_LINES}
    assert not long, f"entry points of {MAX_PIPELINE_LINES} lines or more: {long}"


def test_function_lines_counts_def_to_last_line(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('x = 1\n\n\ndef f(\n    a,\n):\n    """Doc.\n\n    More."""\n    return a\n')
    assert function_lines(path, "f") == 7  # lines 4 to 10
    with pytest.raises(LookupError, match=r"^g is not a function of .*m\.py$"):
        function_lines(path, "g")
