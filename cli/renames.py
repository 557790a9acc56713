"""Options renamed in this release (a boundary is not a layer), still accepted for one release.

An old name is renamed only where click would parse it as that option: a token in an option's
place on the command line of a command that has the new option, not the value of another
option (`-o --layers` writes to a folder named `--layers`), and not after `--`. What the user
typed is remembered (`typed`), so that errors name the option as it was typed; the old and the
new name of one option given together are refused.
"""

from __future__ import annotations

import re

import click

DEPRECATED_OPTIONS = {
    "--layers": "--boundaries",
    "--source-layers": "--source-boundaries",
    "--target-layers": "--target-boundaries",
}


def _takes(option: click.Option) -> int:
    """How many tokens follow `option` on the command line (0 for a flag or a counter)."""
    return 0 if option.is_flag or option.count else option.nargs


def _options(command: click.Command) -> dict[str, click.Option]:
    """Every spelling of every option of `command` (`--x`, `-x`, `--no-x`) → the option."""
    return {
        o: p
        for p in command.params
        if isinstance(p, click.Option)
        for o in (*p.opts, *p.secondary_opts)
    }


def _after_short(token: str, options: dict) -> int:
    """Tokens taken after a short-option token (`-o`, `-vo`, `-oVALUE`): as click reads it,
    each letter is a flag until one takes a value, which is the rest of the token or the
    next tokens."""
    for i, letter in enumerate(token[1:], 1):
        option = options.get("-" + letter)
        if option is None:
            return 0
        n = _takes(option)
        if n:
            return n - 1 if i < len(token) - 1 else n
    return 0


def renamed(args: list[str], command: click.Command) -> tuple[list[str], dict[str, str]]:
    """(`args` of `command` with each old option name in an option's place replaced by the new
    one, also in `--old=value`; {new name: old name} of those replaced). An old name whose new
    option the command lacks stays as typed (click then says there is no such option). Giving
    the old and the new name of one option is a click.UsageError naming both."""
    options = _options(command)
    out, typed, given = [], {}, set()
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":
            out.extend(args[i - 1 :])
            break
        name, eq, value = token.partition("=")
        if token.startswith("--") and DEPRECATED_OPTIONS.get(name) in options:
            typed[DEPRECATED_OPTIONS[name]] = name
            token, name = DEPRECATED_OPTIONS[name] + eq + value, DEPRECATED_OPTIONS[name]
        elif token.startswith("--"):
            given.add(name)
        if token.startswith("--") and name in options:
            skip = 0 if eq else _takes(options[name])
        elif token.startswith("-") and not token.startswith("--") and len(token) > 1:
            skip = _after_short(token, options)
        else:
            skip = 0
        out.append(token)
        out.extend(args[i : i + skip])
        i += skip
    for new, old in typed.items():
        if new in given:
            raise click.UsageError(
                f"{old} and {new} are one option ({old} is its old name): give it once, as {new}"
            )
    return out, typed


def warnings(typed: dict[str, str]) -> list[str]:
    """One line per old name used."""
    return [
        f"align: warning: {old} is deprecated, use {new} (the old name is accepted until the next release)"
        for new, old in typed.items()
    ]


def as_typed(message: str, typed: dict[str, str]) -> str:
    """`message` with each renamed option named as the user typed it."""
    for new, old in typed.items():
        message = re.sub(rf"(?<![\w-]){re.escape(new)}(?![\w-])", old, message)
    return message
