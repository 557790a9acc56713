"""A study's values are checked by the options' own declarations: a value the command line
refuses, the study refuses at load time (so at `--dry-run`, before anything is extracted),
with the command line's words, naming the study key and the option."""

from __future__ import annotations

import re

import pytest

from tests.helpers.study_files import write_study


def cli_words(err: str, flag: str) -> str:
    """What the command line says of a value it refuses, without click's frame."""
    m = re.fullmatch(
        rf"align: error: Invalid value for '{flag}': (.*)\. \(see `align \w+ --help`\)\n", err
    )
    assert m, err
    return m.group(1)


@pytest.mark.parametrize(
    "section, key, value, command",
    [
        ("corpus", "max_docs", "-5", ("extract", "m", "c.txt", "-o", "s.zarr", "--max-docs")),
        ("fit", "permutations", "-1", ("fit", "s", "t", "-o", "r.zarr", "--permutations")),
        (
            "extraction",
            "batch_size",
            "0",
            ("extract", "m", "c.txt", "-o", "s.zarr", "--batch-size"),
        ),
        ("fit", "seed", "-3", ("fit", "s", "t", "-o", "r.zarr", "--seed")),
        ("fit", "pairing", "'chars'", ("fit", "s", "t", "-o", "r.zarr", "--pairing")),
    ],
)
def test_a_value_the_command_line_refuses_is_refused_in_its_words(
    cli, tmp_path, section, key, value, command
):
    code, _, err = cli(*command, value.strip("'"))
    assert code == 2
    words = cli_words(err, command[-1])
    table = "" if section == "corpus" else f"[{section}]\n"  # [corpus] is the file's last table
    study = write_study(tmp_path / "s.toml", extra=f"{table}{key} = {value}\n")
    code, _, err = cli("study", study, "-o", tmp_path / "out", "--dry-run")
    assert code == 2 and err == (
        f"align: error: study file {study}: [{section}] {key} = {value}: {words} "
        f"(as {command[-1]} on the command line)\n"
    )
    assert not (tmp_path / "out").exists()


def test_permutations_below_zero_never_says_one_or_more(cli, tmp_path):
    """0 is the default (no calibration): -1 is out of range 0.., in the study and the API."""
    from align.errors import InputError
    from align.fitting import FitSpec

    code, _, err = cli("fit", "s", "t", "-o", "r.zarr", "--permutations", "-1")
    assert "0<=x" in err and "1 or more" not in err
    with pytest.raises(InputError) as e:
        FitSpec(permutations=-1).checked()
    assert str(e.value) == (
        "`permutations` -1: give 0 (no calibration) or a whole number of null permutations "
        "(99 gives p-values down to 0.01)"
    )


@pytest.mark.parametrize("key, value", [("test_fraction", "1.5"), ("val_fraction", "1.0")])
def test_a_fraction_out_of_range_fails_at_dry_run(cli, tmp_path, key, value):
    """The range the fit checks when it splits the documents is checked when the study (and
    `align fit`'s options) are read: before, `test_fraction = 1.5` passed `--dry-run` and the
    study failed after extracting."""
    code, _, fit_err = cli(
        "fit", "s", "t", "-o", tmp_path / "r.zarr", f"--{key.replace('_', '-')}", value
    )
    expected = {
        "test_fraction": f"{value} must be between 0 and 1 (exclusive)",
        "val_fraction": f"{value} must be between 0 and 1 (exclusive) to choose among several `alphas`",
    }[key]
    assert code == 2 and fit_err == (
        f"align: error: --{key.replace('_', '-')} {expected.replace('`alphas`', '--alphas')}\n"
    )
    study = write_study(tmp_path / "s.toml", extra=f"[fit]\n{key} = {value}\n")
    code, _, err = cli("study", study, "-o", tmp_path / "out", "--dry-run")
    assert code == 2 and err == (
        f"align: error: study file {study}: [fit] {key} {expected.replace('`alphas`', '[fit] alphas')}\n"
    )
    assert not (tmp_path / "out").exists()
