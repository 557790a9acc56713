"""The `align` console script: a click group that routes to the command modules.

Every error a user can cause ends as one line on stderr (`align: error: ...`) and a non-zero
exit, never a traceback: AlignError from the library, click's usage errors, and a missing
file or bad option value alike.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading

import click

from align import messages
from align.cli import (
    analyses,
    compare,
    declared,
    demo,
    depthscore,
    extract,
    fit,
    interventions,
    plot,
    renames,
    study,
)
from align.errors import AlignError

# The commands in the order `align --help` lists them; each module defines `commands`, a list
# of click commands. Every module of align imports its heavy packages (torch, zarr, dask,
# matplotlib, ...) where they are first used, so importing them all here stays fast.
_ORDER = (
    "extract",
    "info",
    "fit",
    "contrib",
    "skip",
    "lens",
    "depth",
    "erase",
    "igrad",
    "plot",
    "demo",
    "depthscore",
    "compare",
    "study",
    "report",
)
_ALL = {
    c.name: c
    for module in (extract, fit, analyses, interventions, plot, demo, depthscore, compare, study)
    for c in module.commands
}
COMMANDS = {name: _ALL[name] for name in _ORDER}


class Interrupted(BaseException):
    """Ctrl-C or SIGTERM carried past click, whose main() would print a blank line for a
    KeyboardInterrupt and turn it into Abort; `__cause__` is the original interrupt."""


# This run's command, and the options the user typed under their old names, {new: old}
# (align.cli.renames): messages name options as typed, and only options of this command.
_typed: dict[str, str] = {}
_command_name: list[str] = []


class AlignGroup(click.Group):
    """The `align` group: its commands from COMMANDS, options typed under their old names
    renamed (with a warning), and Ctrl-C carried past click as Interrupted."""

    def parse_args(self, ctx, args):
        # The command is the first token that is not one of the group's flags.
        at = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
        command = self.get_command(ctx, args[at]) if at is not None else None
        if command is not None:
            _command_name[:] = [command.name]
            rest, typed = renames.renamed(args[at + 1 :], command)
            _typed.clear()
            _typed.update(typed)
            for line in renames.warnings(typed):
                print(line, file=sys.stderr)
            args = [*args[: at + 1], *rest]
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:
            raise Interrupted() from e

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        return COMMANDS.get(name)


@click.group(
    cls=AlignGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="align-depth", prog_name="align")
def cli():
    """align: does a deeper language model use its depth?

    Extract every layer's residual stream of two models over one corpus, fit ridge maps from
    every layer of one to every layer of the other, and read the matrix of held-out errors.

    \b
    Start here:  align demo        the whole study on two small models trained here (CPU, offline)
    Then, in this order, on your own models (README.md, the GPU quick start):
      align extract MODEL CORPUS -o STORE      residual streams of each model, one store each
      align fit SOURCE_STORE TARGET_STORE -o RESULT   the matrix of held-out map errors
      align plot RESULT                        a PNG of any result
      align contrib | lens | skip  MODEL CORPUS -o RESULT, then  align depth   (one model)
      align erase | igrad  MODEL PROMPTS -o RESULT   what each cell / part does to an answer
      align compare RESULT RESULT...           results of one kind side by side, with 95% intervals
      align study STUDY.toml -o DIR            N models: every pair and analysis, resumable, and a report
      align info STORE                         what a store holds and whether it is complete
    `align COMMAND --help` for each command's options.
    """


@functools.cache
@functools.lru_cache(maxsize=None)
def option_names(name: str | None = None) -> dict[str, str]:
    """The option each Python parameter name is given as on the command line of command
    `name` (None: over every command), from the options' declarations: the record field an
    option sets (`n_workers` → --workers), a click option's own name and the name of each of its
    long flags (`fmt` and `format` → --format, `batch_size` → --batch-size), shown as the
    option is first declared (`output` → -o); made once a command (the caller reads it, never
    changes it)."""
    names: dict[str, str] = {}
    for command in COMMANDS.values() if name is None else [COMMANDS[name]]:
        for p in command.params:
            if isinstance(p, click.Option) and p.name:
                for python_name in declared.python_names(p):
                    names.setdefault(python_name, p.opts[0])
    return names


def option_of(name: str) -> str | None:
    """How the CLI spells the library's parameter `name` in this run: an option of the command
    that runs (advice never names an option the command lacks: a parameter it has no option
    for is shown in words, `max_tokens` → "max tokens"), as the user typed it (an old name
    stays old). Outside a command, over every command (None: a name no option has)."""
    if not _command_name:
        return option_names().get(name)
    option = option_names(_command_name[0]).get(name)
    return _typed.get(option, option) if option else name.replace("_", " ")


def fail(message: str, code: int = 2) -> None:
    print(f"align: error: {' '.join(str(message).split())}", file=sys.stderr)
    sys.exit(code)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that it unwinds like Ctrl-C: locks released,
    temporary results removed, an incomplete store left resumable."""


def _on_sigterm(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def _sigterm_unwinds():
    """While a command runs, SIGTERM unwinds like Ctrl-C (only possible from the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# What re-running the interrupted command does, per command (the interruption's message).
RERUN = {
    "extract": "`align extract` resumes the store where it stopped",
    "study": "`align study` resumes: the units recorded done are kept",
    "fit": "`align fit` starts the fit again: a fit keeps nothing to resume from",
}


def interrupted(by: str, argv) -> str:
    """The one line of an interrupted command: that nothing incomplete opens as complete, and
    what re-running this command does."""
    command = _command(argv)
    rerun = RERUN.get(command, f"`align {command}` runs again from the start" if command else "")
    return f"interrupted{by}: nothing incomplete opens as complete; re-run the same command" + (
        f" ({rerun})" if rerun else ""
    )


# What lowers the memory a command needs, per command (for out-of-memory messages).
LOWER_MEMORY = {
    "extract": "lower --batch-size (or --max-length), or spread the model with --device auto",
    "fit": "lower --task-tokens or --memory-limit, or fit fewer --source-boundaries/--target-boundaries at a time",
    "contrib": "lower --batch-size (or --max-length)",
    "lens": "lower --batch-size (or --max-length)",
    "skip": "lower --batch-size (or --max-length)",
    "erase": "lower --batch-size (or --max-length)",
    "igrad": "lower --batch-size or --steps (or --max-length)",
    "plot": "draw a smaller --size",
}


def _command(argv) -> str | None:
    """The subcommand named on the command line (the first argument that is one)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return next((a for a in args if a in COMMANDS), None)


def _is_device_oom(e: BaseException) -> bool:
    """torch's out-of-memory error (CUDA and other accelerators), without importing torch."""
    return any(
        c.__name__ == "OutOfMemoryError" and c.__module__.split(".")[0] == "torch"
        for c in type(e).__mro__
    )


def device_oom_message(text: str, command: str | None) -> str:
    """One line from torch's out-of-memory message: the device, what was asked, what was free,
    and the option that lowers it. torch says e.g. "CUDA out of memory. Tried to allocate
    2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.06 GiB is free. ..."."""
    import re

    asked = re.search(r"Tried to allocate ([\d.]+ ?[KMGT]?i?B)", text)
    where = re.search(
        r"GPU (\d+) has a total capacity of ([\d.]+ ?[KMGT]?i?B) of which ([\d.]+ ?[KMGT]?i?B) is free",
        text,
    )
    device = f"cuda:{where.group(1)}" if where else ("the GPU" if "CUDA" in text else "the device")
    parts = [f"out of memory on {device}"]
    if asked:
        parts.append(f"asked for {asked.group(1)}")
    if where:
        parts.append(f"{where.group(3)} free of {where.group(2)}")
    hint = LOWER_MEMORY.get(command, "use smaller inputs")
    return f"{', '.join(parts)}: {hint}"


def main(argv=None) -> None:
    _typed.clear()
    _command_name.clear()
    try:
        # The library's parameter names are shown as the options that set them.
        with _sigterm_unwinds(), messages.speaking(option_of):
            rv = cli.main(args=argv, prog_name="align", standalone_mode=False)
    except Interrupted as e:
        if isinstance(e.__cause__, Terminated):
            fail(interrupted(" by SIGTERM", argv), 143)
        fail(interrupted("", argv), 130)
    except Terminated:
        fail(interrupted(" by SIGTERM", argv), 143)
    except AlignError as e:
        fail(messages.shown(str(e), option_of), e.exit_code)
    except click.exceptions.NoArgsIsHelpError as e:
        print(e.ctx.get_help() if e.ctx else str(e))
        sys.exit(0)
    except click.UsageError as e:
        cmd = e.ctx.command_path if e.ctx else "align"
        fail(f"{renames.as_typed(e.format_message(), _typed)} (see `{cmd} --help`)")
    except click.ClickException as e:
        fail(renames.as_typed(e.format_message(), _typed))
    except click.exceptions.Abort as e:  # click turns Ctrl-C (and our SIGTERM) into Abort
        if isinstance(e.__context__, Terminated):
            fail(interrupted(" by SIGTERM", argv), 143)
        fail(interrupted("", argv), 130)
    except KeyboardInterrupt:
        fail(interrupted("", argv), 130)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as e:
        fail(f"{e.strerror or e}{': ' + str(e.filename) if getattr(e, 'filename', None) else ''}")
    except MemoryError:
        fail(f"out of host memory: {LOWER_MEMORY.get(_command(argv), 'use smaller inputs')}")
    except Exception as e:  # a bug, not a user error: still one line unless asked for more
        if _is_device_oom(e):
            fail(device_oom_message(str(e), _command(argv)))
        if os.environ.get("ALIGN_DEBUG"):
            raise
        fail(
            f"internal error: {type(e).__name__}: {e} (set ALIGN_DEBUG=1 to see the traceback, and report it)",
            1,
        )
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
