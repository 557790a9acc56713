"""Every numeric option of every command (found by introspecting the click commands), given
0, −1, 1e400, 10³⁰ and a non-number: exit 2 or one `align: error:` line, never "internal
error" or a traceback. A value no option can take (1e400 is float infinity, 10³⁰ is beyond a
64-bit integer, a word is no number) is refused naming the option, before any input is read:
the inputs named here do not exist, so a value that got past parsing would meet them instead.
Nothing runs: `align demo`, which has no inputs, stops where its pipeline would start."""

from __future__ import annotations

import pytest

from align.models import ModelSpec
from tests.helpers.assertions import one_line_error

VALUES = ["0", "-1", "1e400", str(10**30), "many"]
NEVER = ("1e400", str(10**30), "many")  # no option can take these


def numeric_options() -> list[tuple[str, str]]:
    """(command, option) for every option whose type is a number, or a size in bytes."""
    import click

    from align.cli.main import COMMANDS, cli

    found = []
    for name in COMMANDS:
        command = cli.get_command(None, name)
        for p in command.params:
            if not isinstance(p, click.Option) or p.is_flag:
                continue
            number = isinstance(p.type, (click.types.IntParamType, click.types.FloatParamType))
            if number or p.metavar == "BYTES":
                found.append((name, p.opts[-1]))
    return found


def argv_of(name: str, option: str, value: str, tmp_path) -> list[str]:
    """`align NAME` with every argument a path that does not exist, -o where the command has
    one, and OPTION VALUE."""
    import click

    from align.cli.main import cli

    command = cli.get_command(None, name)
    args = []
    for i, p in enumerate(q for q in command.params if isinstance(q, click.Argument)):
        if p.required:
            args += [str(tmp_path / f"nope-{i}-{k}") for k in range(2 if p.nargs == -1 else 1)]
    for p in command.params:  # a required option is given, so that it is not what fails
        if isinstance(p, click.Option) and p.required and p.opts[-1] != option:
            args += [p.opts[-1], str(tmp_path / "out" if "-o" in p.opts else tmp_path / "nope")]
    return [name, *args, option, value]


def test_every_command_has_numeric_options_found():
    found = numeric_options()
    names = {name for name, _ in found}
    assert {"extract", "fit", "contrib", "skip", "plot", "demo", "compare"} <= names, names
    assert ("fit", "--memory-limit") in found and ("extract", "--seed") in found


@pytest.mark.parametrize("name,option", numeric_options())
def test_numeric_option_values_fail_in_one_line(name, option, cli, tmp_path, monkeypatch):
    from align.demo import pipeline
    from align.errors import InputError

    def stop(*args, **kwargs):
        raise InputError("the demo pipeline would start here")

    monkeypatch.setattr(pipeline, "run", stop)
    for value in VALUES:
        code, _, err = cli(*argv_of(name, option, value, tmp_path))
        line = one_line_error(code, err, progress=("align: warning: ",))
        if value in NEVER:
            assert option in line, (value, line)


BIG = str(10**30)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["demo", "--seeds", BIG], f"--seeds {BIG} must be a count from 1 to 100"),
        (
            ["demo", "--seeds", f"0,{BIG}"],
            f"--seeds {BIG}: a seed must be a whole number from 0 to 2**63 - 1",
        ),
        (["demo", "--seed", BIG], "'--seed'"),
    ],
)
def test_demo_seeds_beyond_the_range_are_one_line(cli, tmp_path, argv, needle, monkeypatch):
    from align.demo import pipeline
    from align.errors import InputError

    monkeypatch.setattr(pipeline, "run", lambda *a, **k: (_ for _ in ()).throw(InputError("ran")))
    code, _, err = cli(*argv, "-o", tmp_path / "d")
    one_line_error(code, err, needle)
    assert not (tmp_path / "d").exists()


def test_library_seeds_beyond_the_range_are_refused_naming_the_parameter(
    zoo, corpus_file, tmp_path
):
    """Through the Python API (no click to bound them): the random initialisation's seed, the
    fit's split seed and the bootstrap's seed."""
    import align
    from align.errors import InputError
    from align.fitting.planning.split import check_seed
    from align.stats.bootstrap import Resampling

    with pytest.raises(InputError) as e:
        align.extract(
            ModelSpec(zoo("qwen2"), random_init=True, seed=10**30),
            corpus_file,
            str(tmp_path / "s.zarr"),
        )
    assert f"`seed` {10**30}: a seed must be a whole number from 0 to 2**63 - 1" in str(e.value)
    assert not (tmp_path / "s.zarr").exists()
    for call, name in (
        (lambda: check_seed(2**63), "seed"),
        (lambda: Resampling(1000, 2**63), "bootstrap_seed"),
    ):
        with pytest.raises(InputError, match=f"`{name}` {2**63}: a seed must be"):
            call()
