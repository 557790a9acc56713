"""Every public function the API page documents has a numpydoc docstring (docs/development.md,
Docstrings): a one-line summary, a blank line, and a `Parameters` section naming every
parameter of its signature, and nothing else, then `Returns`. The functions are the API page's
`:::` entries, `align`'s public names (the lazy ones included), and the public functions of
`align.ridge`, `align.fitting` (its `__all__`), `align.stats.bootstrap`, `align.stats.jackknife`,
and the row measures and calibration of `align.measures`. The docstring is parsed by hand (a
section is a title over a line of dashes; a parameter line is `name : type` at the section's
indent)."""

from __future__ import annotations

import importlib
import inspect
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROW_MEASURES = ("mknn", "neighbours", "cknna", "rsa", "cka", "cka_debiased", "procrustes")
ROW_MEASURES += ("cca", "svcca")
# Each function's modules: align's installed names (store/ installs as align.store).
MODULES_WHOLE = (
    "align.stats.bootstrap",
    "align.stats.jackknife",
)  # every public function defined there
MODULES_ALL = ("align", "align.ridge", "align.fitting")  # the functions of their __all__
# the measures a researcher calls on rows, and the calibration's formulas
CALIBRATION = ("critical_value", "calibrated_score", "summarise", "draw_permutations")
NAMED = tuple(f"align.measures.rows.{n}" for n in ROW_MEASURES)
NAMED += tuple(f"align.measures.calibration.{n}" for n in CALIBRATION + ("check_permutations",))
NAMED += ("align.measures.parse_measures", "align.measures.variable")
# "module.function" -> why it keeps its prose docstring for now.
EXEMPT: dict = {}
# The option records (ModelSpec and CorpusSpec carry options too) get field docstrings there.
RECORDS = ("ExtractOptions", "FitSpec", "Execution", "LiveJob", "ModelSpec", "CorpusSpec")
RECORDS += ("SkipOptions", "LensOptions", "EraseOptions", "IgradOptions")


def _resolve(dotted: str):
    """The object `:::` names (store.x is align.store.x)."""
    parts = dotted.split(".")
    if parts[0] == "store":
        parts = ["align", *parts]
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise LookupError(dotted)


def _functions() -> dict:
    """{"module.name": function} of every function the test covers."""
    found = {}
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    objects = [_resolve(d) for d in re.findall(r"^::: (\S+)", page, re.M) + list(NAMED)]
    for name in MODULES_ALL:
        module = importlib.import_module(name)
        objects += [getattr(module, n) for n in module.__all__]
    for name in MODULES_WHOLE:
        module = importlib.import_module(name)
        objects += [
            f
            for n, f in vars(module).items()
            if inspect.isfunction(f) and not n.startswith("_") and f.__module__ == name
        ]
    for obj in objects:
        if inspect.isfunction(obj) or inspect.isclass(obj):
            found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


OBJECTS = _functions()
FUNCTIONS = {k: f for k, f in OBJECTS.items() if inspect.isfunction(f)}
# The API page's records: their fields as the constructor's parameters.
CLASSES = {k: c for k, c in OBJECTS.items() if inspect.isclass(c)}


def sections(doc: str) -> dict:
    """{title: [lines]} of a numpydoc docstring (inspect.getdoc's dedented text); the text
    before the first section under ""."""
    out, title, lines = {"": []}, "", doc.splitlines()
    i = 0
    while i < len(lines):
        underline = lines[i + 1] if i + 1 < len(lines) else ""
        if lines[i].strip() and re.fullmatch(r"-{3,}", underline.strip()):
            if len(underline.strip()) != len(lines[i].strip()):
                raise ValueError(f"section {lines[i]!r}: its dashes are not its length")
            title = lines[i].strip()
            out[title] = []
            i += 2
            continue
        out[title].append(lines[i])
        i += 1
    return out


def documented_names(lines: list) -> list:
    """The names of a Parameters section: each unindented line's names before ` : `, split
    at commas (`h, a, m : array`); `**keywords` as written."""
    names = []
    for line in lines:
        if line.strip() and not line.startswith(" "):
            names += [n.strip() for n in line.split(" : ")[0].split(",")]
    return names


def signature_names(function) -> list:
    return [
        {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + name
        for name, p in inspect.signature(function).parameters.items()
        if name not in ("self", "cls")
    ]


def test_the_walk_finds_the_api():
    # written out by hand: the entry points of `align` and one function of each list
    for name in (
        "align.fitting.store_route.pipeline.fit",
        "align.extraction.extract",
        "align.fitting.results.maps.apply_map",
        "align.store.reader.open_activations",
        "align.store.results.open_alignment",
        "align.ridge.closed_form.validation_sse",
        "align.stats.bootstrap.resampled_maxima",
        "align.analyses.skip.skipping",
        "align.fitting.planning.split.make_split",
        "align.measures.rows.procrustes",
    ):
        assert name in FUNCTIONS, name
    assert len(FUNCTIONS) >= 100


# The methods the page shows under a record: the public ones with a docstring.
METHODS = {
    f"{k}.{n}": f
    for k, c in CLASSES.items()
    if k.rsplit(".", 1)[1] not in RECORDS
    for n, f in vars(c).items()
    if inspect.isfunction(f) and not n.startswith("_") and f.__doc__
}


def test_the_methods_are_found():
    assert "align.ridge.backend.Backend.add_product" in METHODS
    assert "align.ridge.statistics.Statistics.merged" in METHODS


@pytest.mark.parametrize("name", sorted((set(FUNCTIONS) | set(METHODS)) - set(EXEMPT)))
def test_docstring_is_sectioned_and_names_every_parameter(name):
    function = FUNCTIONS.get(name) or METHODS[name]
    doc = inspect.getdoc(function)
    assert doc, f"{name}: no docstring"
    lines = doc.splitlines()
    assert len(lines) == 1 or lines[1] == "", f"{name}: the summary is not one line: {lines[:2]}"
    found = sections(doc)
    if inspect.signature(function).return_annotation not in (None, "None"):
        assert "Returns" in found, f"{name}: no Returns section"
    want = signature_names(function)
    if not want:
        return
    assert "Parameters" in found, f"{name}: no Parameters section"
    names = documented_names(found["Parameters"])
    assert names == want, f"{name}: Parameters documents {names}, the signature is {want}"


def test_the_parser_on_a_hand_written_docstring():
    doc = inspect.cleandoc(
        """Sum of rows.

        Parameters
        ----------
        x, y : array of shape (n_tokens, d_model)
            Rows; a description line
            on two lines.
        **keywords
            Passed on.

        Returns
        -------
        array of shape (d_model,)
            The sum.
        """
    )
    found = sections(doc)
    assert list(found) == ["", "Parameters", "Returns"]
    assert documented_names(found["Parameters"]) == ["x", "y", "**keywords"]

    def f(x, y, **keywords):
        pass

    assert signature_names(f) == ["x", "y", "**keywords"]
    with pytest.raises(ValueError, match="'Returns'"):
        sections("Sum.\n\nReturns\n----\nint\n")


@pytest.mark.parametrize("name", sorted(n for n in CLASSES if n.rsplit(".", 1)[1] not in RECORDS))
def test_record_docstring_names_every_field(name):
    """A class takes its fields as parameters: `Parameters` (a dataclass's constructor) or
    `Attributes` (a NamedTuple's fields) names each, in order."""
    doc = inspect.getdoc(CLASSES[name])
    lines = doc.splitlines()
    assert len(lines) == 1 or lines[1] == "", f"{name}: the summary is not one line: {lines[:2]}"
    found = sections(doc)
    listed = found.get("Parameters", found.get("Attributes"))
    assert listed is not None, f"{name}: no Parameters or Attributes section"
    want = signature_names(CLASSES[name])
    names = documented_names(listed)
    assert names == want, f"{name}: the docstring documents {names}, the signature is {want}"


def test_the_records_are_found():
    assert {"Statistics", "SolvedMap", "Resampling", "StoreShape"} <= {
        n.rsplit(".", 1)[1] for n in CLASSES
    }
    assert set(RECORDS) <= {n.rsplit(".", 1)[1] for n in CLASSES}
