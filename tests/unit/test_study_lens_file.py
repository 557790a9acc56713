"""`[analyses] lens` and `lens_through` in the study file: the kinds a model's lens runs, each
a unit of its own, the logit lens's unit and key unchanged; bad values refused in one line
naming them (the units written out by hand for these small studies)."""

from __future__ import annotations

import pytest

from tests.helpers.study_files import study_toml


def study(tmp_path, extra: str = ""):
    from align.study import load_study

    p = tmp_path / "s.toml"
    models, analyses = {"a": "a", "b": "b"}, {"a": ["lens"], "b": ["depth"]}
    p.write_text(study_toml(models, analyses=analyses, extra=extra), encoding="utf-8")
    return load_study(str(p))


def units(tmp_path, extra: str = "") -> dict:
    from align.study.units import plan

    return {u.name: u for u in plan(study(tmp_path, extra))}


def refused(tmp_path, extra: str) -> str:
    from align.errors import InputError

    with pytest.raises(InputError) as e:
        study(tmp_path, extra)
    message = str(e.value)
    assert "\n" not in message and message.startswith("study file ")
    return message


@pytest.mark.parametrize("value", ("true", '["logit"]', '"logit"'))
def test_lens_true_is_the_logit_lens_with_the_key_of_a_study_without_it(tmp_path, value):
    plain = units(tmp_path)
    same = units(tmp_path, f"[analyses]\nlens = {value}\n")
    assert list(same) == list(plain)
    assert {n: u.key for n, u in same.items()} == {n: u.key for n, u in plain.items()}
    assert [n for n in plain if n.startswith("lens")] == ["lens a", "lens b"]


def test_each_kind_is_a_unit_reading_its_models_store(tmp_path):
    plain = units(tmp_path)
    got = units(tmp_path, '[analyses]\nlens = ["logit", "linear", "tuned"]\n')
    lens = [n for n in got if n.startswith("lens")]
    # b's depth needs the logit lens alone; a's lens runs every kind
    assert lens == ["lens a", "lens-linear a", "lens-tuned a", "lens b"]
    assert got["lens a"].key == plain["lens a"].key
    assert got["lens-linear a"].output == "results/lens-linear/a.zarr"
    assert got["lens-tuned a"].output == "results/lens-tuned/a.zarr"
    assert got["lens-tuned a"].inputs == ("extract a",)
    assert got["lens-tuned a"].definition["kind"] == "tuned"
    assert got["lens-tuned a"].definition["steps"] == 250
    assert "lens-linear a" in got["report"].inputs


def test_kinds_without_logit_run_no_logit_lens_but_for_depth(tmp_path):
    got = units(tmp_path, '[analyses]\nlens = ["linear"]\n')
    assert [n for n in got if n.startswith("lens")] == ["lens-linear a", "lens b"]


def test_the_live_route_reads_the_corpus(tmp_path):
    got = units(tmp_path, '[analyses]\nlens = ["tuned"]\n[route]\nkind = "live"\n')
    u = got["lens-tuned a"]
    assert u.inputs == () and "corpus" in u.definition and "store" not in u.definition


def test_lens_through_reads_each_pair_through_its_targets_head(tmp_path):
    got = units(tmp_path, "[analyses]\nlens_through = true\n")
    through = {n: u for n, u in got.items() if n.startswith("lens-through")}
    assert list(through) == ["lens-through a->b", "lens-through b->a"]
    u = through["lens-through a->b"]
    assert u.output == "results/lens-through/a--b"
    assert u.inputs == ("extract a", "extract b")
    assert u.definition["spec"]["target_boundaries"] == "-1"
    assert u.definition["spec"]["save_maps"] is True
    assert "lens-through" not in "".join(n for n in units(tmp_path))  # off by default


@pytest.mark.parametrize(
    "extra, expected",
    [
        (
            '[analyses]\nlens = ["logit", "probe", "x"]\n',
            "[analyses] lens names unknown kinds 'probe', 'x'; the kinds are logit, linear, tuned",
        ),
        ("[analyses]\nlens = 3\n", "[analyses] lens = 3 must be true or a list of lens kinds"),
        ("[analyses]\nlens = []\n", "[analyses] lens = [] must be true or a list"),
        ("[analyses]\nlens = false\n", "[analyses] lens = False must be true or a list"),
        ("[analyses]\nlens_through = 1\n", "[analyses] lens_through = 1 must be true or false"),
        (
            '[analyses]\nlens_through = true\n[route]\nkind = "live"\n',
            "[analyses] lens_through = true reads the models' activation stores: set [route] "
            "kind = \"stores\" (it is 'live')",
        ),
    ],
)
def test_bad_lens_values_are_refused_naming_them(tmp_path, extra, expected):
    assert expected in refused(tmp_path, extra)


def test_lens_steps_reach_the_tuned_unit_and_leave_the_default_key_alone(tmp_path):
    """`[analyses] lens_steps` is the tuned unit's `steps` (its key changes with it); 250,
    `align lens --steps`'s default, keys the unit as a study that leaves it out."""
    tuned = '[analyses]\nlens = ["tuned"]\n'
    plain = units(tmp_path, tuned)["lens-tuned a"]
    assert plain.definition["steps"] == 250
    assert units(tmp_path, tuned + "lens_steps = 250\n")["lens-tuned a"].key == plain.key
    three = units(tmp_path, tuned + "lens_steps = 3\n")["lens-tuned a"]
    assert three.definition["steps"] == 3 and three.key != plain.key
    linear = units(tmp_path, '[analyses]\nlens = ["linear"]\nlens_steps = 3\n')["lens-linear a"]
    assert "steps" not in linear.definition  # the linear lens trains nothing


@pytest.mark.parametrize(
    "value, expected",
    [
        ("0", "[analyses] lens_steps = 0: 0 is not in the range 1<=x<="),
        ("-3", "[analyses] lens_steps = -3: -3 is not in the range 1<=x<="),
        ("2.5", "[analyses] lens_steps = 2.5 must be a whole number"),
        ('"many"', "[analyses] lens_steps = 'many' must be a whole number"),
        ("true", "[analyses] lens_steps = True must be a whole number"),
    ],
)
def test_bad_lens_steps_are_refused_naming_the_value(tmp_path, value, expected):
    message = refused(tmp_path, f'[analyses]\nlens = ["tuned"]\nlens_steps = {value}\n')
    assert expected in message, message
    if "range" in expected:
        assert message.endswith("(as --steps on the command line)"), message
