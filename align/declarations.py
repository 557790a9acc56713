"""Each option declared once: a record field carries how the command line sets it.

A field of an options record (`FitSpec`, `Execution`, `LiveJob`, `ExtractOptions`,
`ModelSpec`, `CorpusSpec`, the analyses' records) is declared with `option(...)` as its
`dataclasses.field` metadata and documented by the docstring under it:

    seed: int = field(default=0, metadata=option("--seed", metavar="N", type="seed"))
    # the next line, a string: the field's docstring, "Seed of the document split."

The declaration holds the flag, metavar, number type or choices, the command line's default
where it differs from the field's, and, for a model's fields, the per-side forms of `align fit
--live` (`--source-*`, `--target-*`); the docstring is the option's one text: the API page
shows it as written, the command's option table too, and `--help` shows it without its
Markdown (`plain`). A field no option sets says so with `not_an_option(why)`. The CLI
(`align.cli.declared`) generates the click options from these declarations, builds the records
from the parsed values field by field, and names the library's parameters in messages by them;
the study file's keys are derived from them too (`keys`). Nothing here imports click.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math
import re
import sys
from dataclasses import dataclass

from align.seeding import MAX_SEED

FROM_FIELD = object()  # a Flag's default: the record field's own
MAX_WHOLE = 2**63 - 1  # the largest whole number any option takes (a 64-bit integer)
KEY = "option"  # the metadata key of a field's declaration


@dataclass(frozen=True)
class Flag:
    """How one value is set on the command line.

    flags: the option's spellings as click declares them (the first is the one messages show);
    help: the option's one text, Markdown, shown as written in its command's option table and
    without its marks by `--help` (a record field's: its docstring, `texts`); metavar: the
    value's name in both; type: None (text), "int", "whole" (a whole number from `least`),
    "seed", "finite" (a finite decimal), "fraction" (a decimal in 0..1); least, most: a whole
    number's bounds (most None: 2⁶³ − 1); choices: the values allowed; default: the command
    line's default (FROM_FIELD: the field's own); shown_default: the default in words where it
    is not a value (`[default: ...]` in the help, the table's default cell); parse: a check the
    CLI runs as the value is parsed ("size", "alphas", "resamples", "resamples_or_none");
    variants: ((name, ((key, value), ...)), ...), the help, shown_default or metavar of the
    commands that word the option otherwise (`worded`: a command names the variants it reads,
    for its help and its table alike); name: the Python name of a standalone flag's value,
    where it is not the flag's."""

    flags: tuple
    help: str
    metavar: str | None = None
    type: str | None = None
    least: int | None = None
    most: int | None = None
    choices: tuple | None = None
    default: object = FROM_FIELD
    shown_default: str | None = None
    is_flag: bool = False
    required: bool = False
    multiple: bool = False
    parse: str | None = None
    variants: tuple = ()
    name: str | None = None

    @property
    def param(self) -> str:
        """The Python name of a value set by this flag alone: `name`, or its longest flag in
        snake case."""
        longest = max(self.flags, key=len).lstrip("-")
        return self.name or longest.replace("-", "_")

    def worded(self, names) -> "Flag":
        """This flag as the first of the variants `names` (one or a tuple) it has words it (none:
        as it is)."""
        variants = dict(self.variants)
        for name in (names,) if isinstance(names, str) else tuple(names or ()):
            if name in variants:
                return dataclasses.replace(self, **dict(variants[name]), variants=())
        return self


@dataclass(frozen=True)
class Sides:
    """The per-model forms of a model's field when one command runs two models (`align fit
    --live`): `shared` sets both (None: none), `source` and `target` one each (None: none);
    a side's own value wins over the shared one when given."""

    shared: Flag | None = None
    source: Flag | None = None
    target: Flag | None = None


@dataclass(frozen=True)
class Declaration:
    """A field's declaration: its single form (`flag`; None: none) and its per-side forms."""

    flag: Flag | None
    sides: Sides | None = None
    why_not: str | None = None


def flag(*flags: str, help: str, variants: dict | None = None, **how) -> Flag:
    """A Flag (see its fields); `variants` {name: its text, or {"help": ..., "shown_default":
    ..., "metavar": ...}}, each with what that wording changes."""
    worded = tuple(
        (name, tuple(({"help": cells} if isinstance(cells, str) else cells).items()))
        for name, cells in (variants or {}).items()
    )
    return Flag(tuple(flags), help, variants=worded, **how)


def option(*flags: str, help: str = "", sides: Sides | None = None, **how) -> dict:
    """The metadata of a field set by `flags` (none: only by `sides`)."""
    single = flag(*flags, help=help, **how) if flags else None
    return {KEY: Declaration(single, sides)}


def not_an_option(why: str) -> dict:
    """The metadata of a field no option sets, and why (a test fails on a field with neither)."""
    return {KEY: Declaration(None, None, why)}


def declaration(record, name: str) -> Declaration | None:
    """The declaration of field `name` of the dataclass `record` (None: undeclared), its flag's
    text its docstring where the declaration gives none."""
    for f in dataclasses.fields(record):
        if f.name == name:
            return _worded(record, name, f.metadata.get(KEY))
    raise KeyError(f"{record.__name__} has no field {name!r}")


def declarations(record) -> dict:
    """{field name: Declaration} of every field of `record` set by an option, in field order."""
    out = {}
    for f in dataclasses.fields(record):
        d = f.metadata.get(KEY)
        if d is not None and (d.flag is not None or d.sides is not None):
            out[f.name] = _worded(record, f.name, d)
    return out


def _worded(record, name: str, d: Declaration | None) -> Declaration | None:
    if d is None or d.flag is None or d.flag.help:
        return d
    text = texts(record).get(name)
    if not text:
        raise TypeError(f"{record.__name__}.{name} is an option with no text: write its docstring")
    return dataclasses.replace(d, flag=dataclasses.replace(d.flag, help=text))


@functools.cache
def texts(record) -> dict:
    """{field: its docstring as one paragraph} of the dataclass `record`, read from its source
    (the string under a field is its docstring for Sphinx, mkdocstrings and this)."""
    tree = ast.parse(inspect.getsource(sys.modules[record.__module__]))
    body = next(
        n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == record.__name__
    )
    out = {}
    for field, under in zip(body, body[1:]):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(under, ast.Expr)
            and isinstance(under.value, ast.Constant)
            and isinstance(under.value.value, str)
        ):
            out[field.target.id] = " ".join(under.value.value.split())
    return out


LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")


def plain(text: str) -> str:
    """An option's text as the terminal shows it: its Markdown links as their words, no code
    marks, no table escapes."""
    return LINK.sub(r"\1", text).replace("`", "").replace("\\|", "|")


TOML_TYPES = {"bool": bool, "int": int, "float": float, "str": str, "tuple": list}


def keys(record, leave_out=()) -> dict:
    """{key: (type, default, field)} of the options of `record` as a file sets them (the study's
    `[fit]`): each key the option's name (`--bootstrap-seed`: `bootstrap_seed`), its type the
    field's (a tuple a list; a field that may be None takes its type or is left out), its default
    the field's. `leave_out`: fields the file sets elsewhere or not at all."""
    out = {}
    for f in dataclasses.fields(record):
        d = declaration(record, f.name)
        if d is None or d.flag is None or f.name in leave_out:
            continue
        named = [t.strip() for t in str(f.type).split("|") if t.strip() != "None"]
        if len(named) != 1 or named[0] not in TOML_TYPES:
            raise TypeError(f"{record.__name__}.{f.name}: {f.type} is no type a file's key takes")
        default = f.default
        out[d.flag.param] = (
            TOML_TYPES[named[0]],
            list(default) if isinstance(default, tuple) else default,
            f.name,
        )
    return out


def undeclared(record) -> list[str]:
    """The fields of `record` with no declaration at all (neither an option nor why not)."""
    return [f.name for f in dataclasses.fields(record) if KEY not in f.metadata]


def refusal(flag: Flag, value) -> str | None:
    """Why the command line would refuse `value` for `flag`, in its words (those of the click
    type `align.cli.declared` makes of the flag: "-5 is not in the range 1<=x<=…", "'x' is not
    one of …", "inf is not a finite number"), or None when it takes it. What is checked is the
    flag's declared limits: its choices and its number type's range; a value given in a file
    (the study's TOML) is checked by them as the option's text is."""
    if value is None or isinstance(value, bool):
        return None
    if flag.choices is not None:
        if value not in flag.choices:
            return f"{value!r} is not one of {', '.join(map(repr, flag.choices))}"
        return None
    bounds = {
        "whole": (flag.least, MAX_WHOLE if flag.most is None else flag.most),
        "seed": (0, MAX_SEED),
        "fraction": (0, 1),
    }.get(flag.type)
    if (
        isinstance(value, float)
        and not math.isfinite(value)
        and flag.type in ("finite", "fraction")
    ):
        return f"{value!r} is not a finite number"
    if bounds is None or not isinstance(value, (int, float)):
        return None
    low, high = bounds
    if (low is not None and value < low) or (high is not None and value > high):
        shown = "<=".join([str(low)] * (low is not None) + ["x"] + [str(high)] * (high is not None))
        return f"{value} is not in the range {shown}"
    return None


def refuse_fields(caller: str, keywords: dict, records: tuple, renamed: dict | None = None):
    """Refuse fields of `records` given to `caller` as flat keywords, in one line that says
    which record each belongs in: ``align.fit() got seed=1: pass it in FitSpec(seed=1)``.

    The Python API takes its options as records only; this names the record a keyword of the
    earlier flat form belongs to, so that a call written for it says how to write it now. Nothing
    is built from the keywords. A keyword that is a field of none of `records` is refused as
    Python refuses an unexpected keyword.

    Parameters
    ----------
    caller : str
        The function as the message names it (`align.fit`).
    keywords : dict
        The keywords the call was given beyond its signature (none: nothing is refused).
    records : tuple of dataclass types
        The records the function takes, in the order a field is looked for.
    renamed : dict, optional
        {old keyword: field} where the flat form spelled a field otherwise (`format`: `fmt`).

    Raises
    ------
    TypeError
        When `keywords` holds anything, naming the first keyword and its record.
    """
    if not keywords:
        return
    renamed = renamed or {}
    key, value = next(iter(keywords.items()))
    name = renamed.get(key, key)
    for record in records:
        fields = dataclasses.fields(record)
        if any(f.name == name for f in fields):
            required = [
                f.name
                for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            ]
            args = ", ".join([*required, f"{name}={value!r}"])
            more = f" (and {len(keywords) - 1} more keyword(s))" if len(keywords) > 1 else ""
            raise TypeError(
                f"{caller}() got {key}={value!r}{more}: pass it in {record.__name__}({args})"
            )
    raise TypeError(f"{caller}() got an unexpected keyword argument {key!r}")
