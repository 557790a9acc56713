"""The study's `[fit]` is `align fit`'s options: every option of what a fit computes is a key of
the same name, type and default, and the others say where the study sets them. Each key's value
is written out twice by hand, as the command line's text and as TOML, and the two FitSpecs the
command and the study build from them must be equal."""

from __future__ import annotations

import click
import pytest

from align.cli.declared import Declared
from align.fitting import FitSpec

STUDY = """
[[models]]
name = "a"
path = "a"
[[models]]
name = "b"
path = "b"
[corpus]
path = "docs.txt"
{fit}
"""
# key: (the option's text on the command line, the key's value in TOML); a flag's text is None
EXAMPLES = {
    "test_fraction": ("0.3", "0.3"),
    "val_fraction": ("0.25", "0.25"),
    "seed": ("7", "7"),
    "alphas": ("0.1,1,10", "[0.1, 1, 10]"),
    "include_first_token": (None, "true"),
    "source_boundaries": ("0,2", '"0,2"'),
    "target_boundaries": ("::2", '"::2"'),
    "save_maps": (None, "true"),
    "bootstrap": ("200", "200"),
    "bootstrap_seed": ("5", "5"),
    "convergence": (None, "true"),
    "pairing": ("tokens", '"tokens"'),
    "min_coverage": ("0.5", "0.5"),
    "measures": ("cka,rsa", '["cka", "rsa"]'),
    "sample_rows": ("500", "500"),
    "permutations": ("9", "9"),
    "neighbours": ("5", "5"),
}


def _fit_command():
    from align.cli.main import cli

    return cli.get_command(click.Context(cli), "fit")


def _from_command(cli, monkeypatch, *args) -> FitSpec:
    """The FitSpec `align fit s t -o r ARGS` hands to the fit (the fit itself not run)."""
    got = []
    monkeypatch.setattr("align.cli.fit.fit", lambda s, t, o, spec, run, **k: got.append(spec))
    code, _, err = cli("fit", "s", "t", "-o", "r.zarr", *args)
    assert code == 0, err
    return got[0].checked()


def _from_study(tmp_path, fit: str) -> FitSpec:
    from align.study import load_study

    path = tmp_path / "s.toml"
    path.write_text(STUDY.format(fit=fit), encoding="utf-8")
    return load_study(str(path)).fit.checked()


def test_every_fit_option_is_a_key_or_says_where_the_study_sets_it():
    from align.study.schema import FIT_ELSEWHERE, FIT_RECORDS_ELSEWHERE, SECTIONS

    keys = []
    for p in _fit_command().params:
        if not isinstance(p, Declared) or p.name in FIT_ELSEWHERE:
            continue
        if p.fills.record is FitSpec:
            key = p.opts[-1].removeprefix("--").replace("-", "_")  # the option's own name
            assert key in SECTIONS["fit"], f"{p.opts[-1]} has no [fit] key"
            keys.append(key)
        else:
            assert p.fills.record is not None, f"{p.opts[-1]}: say where the study sets it"
            assert p.fills.record.__name__ in FIT_RECORDS_ELSEWHERE, p.opts[-1]
    assert sorted(keys) == sorted(SECTIONS["fit"]) == sorted(EXAMPLES)


def test_the_defaults_are_the_command_s(cli, monkeypatch, tmp_path):
    assert _from_study(tmp_path, "") == _from_command(cli, monkeypatch)


@pytest.mark.parametrize("key", sorted(EXAMPLES))
def test_each_key_is_its_option(cli, monkeypatch, tmp_path, key):
    """`[fit] KEY = VALUE` is `--KEY VALUE` (a list where the option takes a comma-separated
    one; true where it is a flag)."""
    text, toml = EXAMPLES[key]
    flag = "--" + key.replace("_", "-")
    given = _from_command(cli, monkeypatch, flag, *([text] if text is not None else []))
    assert given != _from_command(cli, monkeypatch)  # the example is no default
    assert _from_study(tmp_path, f"[fit]\n{key} = {toml}\n") == given


def test_every_key_at_once(cli, monkeypatch, tmp_path):
    args, lines = [], []
    for key, (text, toml) in EXAMPLES.items():
        args += ["--" + key.replace("_", "-"), *([text] if text is not None else [])]
        lines.append(f"{key} = {toml}")
    study = _from_study(tmp_path, "[fit]\n" + "\n".join(lines) + "\n")
    assert study == _from_command(cli, monkeypatch, *args)
    assert (study.bootstrap, study.bootstrap_seed) == (200, 5)
