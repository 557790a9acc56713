"""Click options generated from the declarations of align's records (`align.declarations`), and
the records built back from the parsed values, field by field, by the declaration each click
option was generated from (never by matching local names).

A command lists what it takes, in the order of its help: `fields(Record, *names)` (a record's
declared fields; no names: all of them, in field order), `sides(Record, *names)` (the per-model
forms of `align fit --live`) and standalone `Flag`s (`align.cli.shared_options`: -o, --live,
...). `options_of(*parts)` is the decorator; in the command, `Parsed(values)` hands each record
its values (`record`, `side`) and each standalone flag its own (`take`), and `done()` refuses a
parsed value nothing took.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, replace
from dataclasses import fields as dataclass_fields

import click

from align.cli.numbers import FINITE, SEED, whole
from align.declarations import FROM_FIELD, Flag, declaration, declarations, plain
from align.fitting.fit_options import parse_memory
from align.stats.bootstrap import check_resamples


@dataclass(frozen=True)
class Fills:
    """What a generated option sets: field `name` of `record` (on `side`: None for a single
    model, "shared", "source" or "target"), or, with record None, the standalone flag `name`."""

    record: type | None
    name: str
    side: str | None = None


class Declared(click.Option):
    """A click option generated from a declaration; `fills` says what it sets."""

    def __init__(self, decls, fills: Fills, **kw):
        super().__init__(decls, **kw)
        self.fills = fills


@dataclass(frozen=True)
class Entry:
    """One option of a command: its flag, click's parameter name, its default, what it fills."""

    flag: Flag
    param: str
    default: object
    fills: Fills


def _field_default(record, name: str):
    for f in dataclass_fields(record):
        if f.name == name:
            return None if f.default is MISSING else f.default
    raise KeyError(name)


def fields(record, *names: str, variant=None) -> list[Entry]:
    """The single-model options of `record`'s fields `names` (none: every declared one), worded
    by the first of the variants `variant` (a name or a tuple) each has."""
    names = names or tuple(n for n, d in declarations(record).items() if d.flag is not None)
    out = []
    for name in names:
        d = declaration(record, name)
        if d is None or d.flag is None:
            raise KeyError(f"{record.__name__}.{name} is declared as no option")
        flag = d.flag.worded(variant)
        default = _field_default(record, name) if flag.default is FROM_FIELD else flag.default
        out.append(Entry(flag, name, default, Fills(record, name)))
    return out


def sides(record, *names: str) -> list[Entry]:
    """The per-model options of `record`'s fields `names`: each field's shared, source and
    target forms, in that order, those it has."""
    out = []
    for name in names:
        d = declaration(record, name)
        if d is None or d.sides is None:
            raise KeyError(f"{record.__name__}.{name} has no per-side options")
        for side in ("shared", "source", "target"):
            flag = getattr(d.sides, side)
            if flag is None:
                continue
            param = name if side == "shared" else flag.param
            default = _field_default(record, name) if flag.default is FROM_FIELD else flag.default
            out.append(Entry(flag, param, default, Fills(record, name, side)))
    return out


def standalone(flag: Flag) -> list[Entry]:
    """The option of a value that fills no record (`align.cli.shared_options`)."""
    default = None if flag.default is FROM_FIELD else flag.default
    return [Entry(flag, flag.param, default, Fills(None, flag.param))]


def worded(variant, *parts) -> list[Entry]:
    """The entries of `parts` (as `entries` takes them), each flag worded by the first of the
    variants `variant` (a name or a tuple) it has: the wording a command's help and its page's
    table share."""
    return [replace(e, flag=e.flag.worded(variant)) for e in entries(*parts)]


def _size(ctx, param, value):
    """A size option (--memory-limit, --device-memory) checked as it is parsed, before any
    input is read: the text as given, or its one-line refusal (`parse_memory`)."""
    parse_memory(value, param.opts[0])
    return value


def _alphas(ctx, param, value):
    """`--alphas auto` (the default grid, extended where an end wins) or a fixed list."""
    if value is None or value.strip().lower() == "auto":
        return None
    try:
        out = [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a comma-separated list of numbers (e.g. 1e-6,1e-3,1)"
        ) from None
    if not out:
        raise click.BadParameter(f"{value!r} lists no α")
    return out


def _resamples_or_none(ctx, param, value):
    """A bootstrap count: 0 (none) or within `check_resamples`' bounds."""
    return value if value == 0 else check_resamples(value)


def _resamples(ctx, param, value):
    """A bootstrap count within `check_resamples`' bounds."""
    return check_resamples(value)


PARSERS = {
    "size": _size,
    "alphas": _alphas,
    "resamples_or_none": _resamples_or_none,
    "resamples": _resamples,
}
TYPES = {"int": int, "seed": SEED, "finite": FINITE, "fraction": click.FloatRange(0, 1)}


def _click_type(flag: Flag):
    if flag.choices is not None:
        return click.Choice(flag.choices)
    if flag.type == "whole":
        return whole(flag.least) if flag.most is None else whole(flag.least, flag.most)
    if flag.type is not None:
        return TYPES[flag.type]
    return None


def click_option(entry: Entry) -> Declared:
    """The click option of one entry, with exactly the settings its flag declares."""
    flag = entry.flag
    kw = {"help": plain(flag.help)}
    if flag.shown_default is not None:
        kw["help"] += f"  [default: {flag.shown_default}]"  # spaced as click spaces its own
    elif not (flag.is_flag or flag.required or entry.default is None):
        kw["show_default"] = True
    if flag.is_flag:
        kw["is_flag"] = True
    elif entry.default is not None:  # click reads an explicit None as a value given
        kw["default"] = entry.default
    for key, value in (
        ("type", _click_type(flag)),
        ("metavar", flag.metavar),
        ("callback", PARSERS[flag.parse] if flag.parse else None),
    ):
        if value is not None:
            kw[key] = value
    for key in ("required", "multiple"):
        if getattr(flag, key):
            kw[key] = True
    return Declared([*flag.flags, entry.param], entry.fills, **kw)


def entries(*parts) -> list[Entry]:
    """Every entry of `parts` (lists of entries, or standalone Flags), in order."""
    out = []
    for part in parts:
        out.extend(standalone(part) if isinstance(part, Flag) else part)
    return out


def options_of(*parts):
    """The decorator adding the options of `parts` (see `entries`) in that order; two of one
    parameter name is a bug, refused at import."""
    listed = entries(*parts)
    names = [e.param for e in listed]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TypeError(f"options declared twice in one command: {twice}")

    def decorate(f):
        for entry in reversed(listed):
            option = click_option(entry)
            f.__dict__.setdefault("__click_params__", []).append(option)
        return f

    return decorate


def python_names(option: click.Option) -> tuple:
    """The Python names an option is shown for in messages: the record field it sets (a
    generated option's declaration; a side's option sets its own name), its own name, and
    each long flag's name."""
    field = (
        (option.fills.name,)
        if isinstance(option, Declared) and option.fills.record and not option.fills.side
        else ()
    )
    flags = (o[2:].replace("-", "_") for o in option.opts if o.startswith("--"))
    return (*field, option.name, *flags)


def param_names(*parts) -> tuple:
    """The click parameter names of `parts`."""
    return tuple(e.param for e in entries(*parts))


class Parsed:
    """click's parsed values of the running command, handed out by the declaration each option
    was generated from: `record(Record)`, `side(Record, side)`, `take(flag)`; `done()` refuses
    a value of a declared option that nothing took (an option that reaches no field)."""

    def __init__(self, values: dict, command: click.Command | None = None):
        command = command or click.get_current_context().command
        self.values = dict(values)
        self.fills = {
            p.name: p.fills for p in command.params if isinstance(p, Declared) and p.name in values
        }
        self.taken: set = set()

    def _of(self, record, side_names: tuple) -> dict:
        return {
            param: fills
            for param, fills in self.fills.items()
            if fills.record is record and fills.side in side_names
        }

    def fields(self, record) -> dict:
        """{field: value} of `record`'s single-model options this command has."""
        out = {}
        for param, fills in self._of(record, (None,)).items():
            out[fills.name] = self.values[param]
            self.taken.add(param)
        return out

    def record(self, record, **given):
        """`record(**given, **fields)`: its declared fields from the parsed values, `given`
        beside them (a given field replaces a parsed one)."""
        return record(**{**self.fields(record), **given})

    def side(self, record, side: str) -> dict:
        """{field: value} of `record`'s per-model options for `side` ("source", "target"): the
        side's own value, or the shared option's where the side's is not given."""
        shared, own = {}, {}
        for param, fills in self._of(record, ("shared", side)).items():
            (shared if fills.side == "shared" else own)[fills.name] = self.values[param]
            self.taken.add(param)
        out = {}
        for name in {**shared, **own}:
            value = own.get(name)
            if name in shared and (value is None or value is False):
                value = shared[name]
            out[name] = value
        return out

    def take(self, flag: Flag):
        """The value of a standalone flag."""
        self.taken.add(flag.param)
        return self.values[flag.param]

    def unused(self, names) -> None:
        """Mark the parameters `names` taken: options this form of the command refuses when
        given (what is left of them is their defaults)."""
        self.taken.update(names)

    def done(self) -> None:
        """Refuse (TypeError: a bug of the command) a declared option whose value nothing took."""
        left = sorted(set(self.fills) - self.taken)
        if left:
            raise TypeError(f"parsed options no record or value took: {left}")
