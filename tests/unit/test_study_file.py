"""The study file: every refusal one line naming the key, the value and what is allowed; the
template `align study --init` writes reads back; the units of each pair mode, and which keys an
edit changes (written out by hand for these small studies)."""

from __future__ import annotations

import pytest

BASE = """
[study]
name = "t"
[[models]]
name = "a"
path = "a"
analyses = ["depth"]
[[models]]
name = "b"
path = "b"
[[models]]
name = "c"
path = "c"
[corpus]
path = "docs.txt"
"""


def write(tmp_path, text: str) -> str:
    p = tmp_path / "s.toml"
    p.write_text(text, encoding="utf-8")
    return str(p)


def refused(tmp_path, text: str) -> str:
    from align.errors import InputError
    from align.study import load_study

    with pytest.raises(InputError) as e:
        load_study(write(tmp_path, text))
    message = str(e.value)
    assert "\n" not in message and message.startswith("study file ")
    return message


@pytest.mark.parametrize(
    "extra, expected",
    [
        (
            "[fit]\nmesures = ['ridge']\n",
            "[fit] has no key 'mesures'; the keys are test_fraction, val_fraction, seed, alphas,",
        ),
        (
            "[fit]\nmeasures = ['kca']\n",
            "[fit] measures = 'kca' is not one of ridge, cka, cka-debiased",
        ),
        ("[fit]\ntest_fraction = 'half'\n", "[fit] test_fraction = 'half' must be a number"),
        ("[pairs]\nmode = 'some'\n", "[pairs] mode = 'some' is not one of all, list, reference"),
        (
            "[pairs]\nmode = 'list'\nlist = [['a', 'z']]\n",
            "[pairs] list = 'z' is not one of a, b, c",
        ),
        ("[pairs]\nmode = 'reference'\n", "[pairs] reference = None is not one of a, b, c"),
        ("[controls]\nrandom_init = ['q']\n", "[controls] random_init = 'q' is not one of a, b, c"),
        ("[controls]\nshuffle = 1\n", "[controls] shuffle = 1 must be true or false"),
        ("[route]\nkind = 'cloud'\n", "[route] kind = 'cloud' is not one of stores, live"),
        ("[extras]\nx = 1\n", "no section [extras]; the sections are models, study,"),
        ("[analyses]\nbatch_size = 0\n", "[analyses] batch_size = 0 must be at least 1"),
        (
            "[analyses]\nskip_docs = 0\n",
            "[analyses] skip_docs = 0 must be at least 1 document (leave it out to read the whole corpus)",
        ),
        ("[analyses]\nskip_docs = 'few'\n", "[analyses] skip_docs = 'few' must be a whole number"),
        (
            "[fit]\nbootstrap = 5\n",
            "[fit] bootstrap 5: a 95% percentile interval needs at least 100",
        ),
        (
            "[bootstrap]\nresamples = 200\n",
            "[bootstrap] resamples is now [fit] bootstrap (as the command line's option of that name): "
            "write bootstrap = 200 under [fit]",
        ),
        (
            "[bootstrap]\nseed = 3\n",
            "[bootstrap] seed is now [fit] bootstrap_seed (as the command line's option of that name): "
            "write bootstrap_seed = 3 under [fit]",
        ),
        (
            "[bootstrap]\n",
            "no section [bootstrap]; its keys are now [fit] bootstrap, [fit] bootstrap_seed",
        ),
        (
            "[extraction]\nmax_tokens = 500\n",
            "[extraction] max_tokens is now [corpus] max_tokens (as the command line's option of "
            "that name): write max_tokens = 500 under [corpus]",
        ),
        (
            "[extraction]\noverwrite = true\n",
            "[extraction] has no key 'overwrite': a unit's output is replaced when its key changes",
        ),
        (
            "[fit]\ncontrol = 'shuffle'\n",
            "[fit] has no key 'control': [controls] shuffle: each pair's shuffle control is fitted",
        ),
        ("[corpus.more]\n", "[corpus] has no key 'more'"),
        (
            "[fit]\nmeasures = ['rsa']\npermutations = 0\n",
            "[fit] measures rsa come with their calibration: give [fit] permutations 1 or more",
        ),
        ("[fit]\npermutations = 'many'\n", "[fit] permutations = 'many' must be a whole number"),
    ],
)
def test_bad_values_are_refused_naming_key_and_value(tmp_path, extra, expected):
    assert expected in refused(tmp_path, BASE + extra)


def test_bad_models_are_refused(tmp_path):
    one = '[[models]]\nname = "a"\npath = "a"\n[corpus]\npath = "d.txt"\n'
    assert "compares at least two [[models]], found 1" in refused(tmp_path, one)
    twice = BASE.replace('name = "b"', 'name = "a"')
    assert "[[models]] 2 name = 'a' is used twice" in refused(tmp_path, twice)
    bad = BASE.replace('analyses = ["depth"]', 'analyses = ["probe"]')
    assert "[[models]] 1 analyses = 'probe' is not one of contrib, lens, skip, depth" in refused(
        tmp_path, bad
    )
    typo = BASE.replace('path = "b"', 'pth = "b"')
    assert "[[models]] 2 has no key 'pth'" in refused(tmp_path, typo)
    assert "is not valid TOML" in refused(tmp_path, BASE + "[fit\n")


def test_template_reads_back(tmp_path):
    from align.study import load_study, write_template

    path = str(tmp_path / "new.toml")
    write_template(path)
    study = load_study(path)
    assert [m.name for m in study.models] == ["small", "large"]
    assert study.pairs == (("small", "large"), ("large", "small"))
    assert study.measures == ("ridge",)


def test_the_measures_reach_the_fits(tmp_path):
    """[fit] measures and permutations are the FitSpec every fit of the study runs with (and
    so in every fit unit's definition): ridge first, then the measures in align's order."""
    from align.study import load_study
    from align.study.units import plan

    text = BASE + "[fit]\nmeasures = ['procrustes', 'cka']\npermutations = 3\n"
    study = load_study(write(tmp_path, text))
    assert study.fit.checked().measures == ("ridge", "cka", "procrustes")
    assert study.fit.permutations == 3
    fits = [u for u in plan(study) if u.kind == "fit"]
    assert fits and all(
        u.definition["spec"]["measures"] == ("procrustes", "cka")
        and u.definition["spec"]["permutations"] == 3
        for u in fits
    )


def names(study):
    from align.study.units import plan

    return [u.name for u in plan(study)]


def test_units_of_each_pair_mode(tmp_path):
    from align.study import load_study

    all_pairs = load_study(write(tmp_path, BASE))
    assert names(all_pairs) == [
        "extract a",
        "extract b",
        "extract c",
        "fit a->b",
        "fit a->c",
        "fit b->a",
        "fit b->c",
        "fit c->a",
        "fit c->b",
        "contrib a",
        "lens a",
        "depth a",
        "report",
    ]
    ref = load_study(
        write(
            tmp_path,
            BASE + "[pairs]\nmode = 'reference'\nreference = 'c'\n[controls]\n"
            "random_init = ['c']\nshuffle = true\n",
        )
    )
    assert names(ref)[:9] == [
        "extract a",
        "extract b",
        "extract c",
        "extract c.random",
        "fit a->c",
        "fit a->c shuffle",
        "fit a->c.random",
        "fit b->c",
        "fit b->c shuffle",
    ]
    live = load_study(
        write(
            tmp_path, BASE + "[route]\nkind = 'live'\n[pairs]\nmode = 'list'\nlist = [['a', 'b']]\n"
        )
    )
    assert names(live) == ["fit a->b", "contrib a", "lens a", "depth a", "report"]


def test_an_edit_changes_the_keys_of_its_units_and_downstream_only(tmp_path):
    from align.study import load_study
    from align.study.units import plan

    before = {u.name: u.key for u in plan(load_study(write(tmp_path, BASE)))}
    after = {u.name: u.key for u in plan(load_study(write(tmp_path, BASE + "[fit]\nseed = 1\n")))}
    assert {n for n in before if before[n] != after[n]} == {
        "fit a->b",
        "fit a->c",
        "fit b->a",
        "fit b->c",
        "fit c->a",
        "fit c->b",
        "report",
    }
    edited = BASE.replace('path = "docs.txt"', 'path = "docs.txt"\nmax_length = 128')
    after = {u.name: u.key for u in plan(load_study(write(tmp_path, edited)))}
    assert all(before[n] != after[n] for n in before)


def test_every_unit_has_its_own_key(tmp_path):
    from align.study import load_study
    from align.study.units import plan

    units = plan(
        load_study(write(tmp_path, BASE + "[controls]\nshuffle = true\nrandom_init = ['b']\n"))
    )
    assert len({u.key for u in units}) == len(units)


SKIPPED = BASE.replace('analyses = ["depth"]', 'analyses = ["skip", "depth"]')


def test_skip_docs_reaches_the_skip_units_only(tmp_path):
    """`[analyses] skip_docs` is the skip unit's corpus's max_docs (the smaller of it and the
    corpus's own), so an edit of it changes the skip unit's key and the report's, nothing
    else."""
    from align.study import load_study
    from align.study.units import plan

    def units(extra):
        return {u.name: u for u in plan(load_study(write(tmp_path, SKIPPED + extra)))}

    none, two, three = (
        units(""),
        units("[analyses]\nskip_docs = 2\n"),
        units("[analyses]\nskip_docs = 3\n"),
    )
    assert none["skip a"].definition["corpus"]["max_docs"] is None
    assert two["skip a"].definition["corpus"]["max_docs"] == 2
    assert (
        two["contrib a"].definition["corpus"]["max_docs"] is None
    )  # contrib and lens: the whole corpus
    assert {n for n in two if two[n].key != three[n].key} == {"skip a", "report"}
    assert {n for n in none if none[n].key != two[n].key} == {"skip a", "report"}
    capped = SKIPPED.replace('path = "docs.txt"', 'path = "docs.txt"\nmax_docs = 1')
    study = load_study(write(tmp_path, capped + "[analyses]\nskip_docs = 2\n"))
    assert {u.name: u for u in plan(study)}["skip a"].definition["corpus"]["max_docs"] == 1


@pytest.mark.parametrize(
    "extra, from_store",
    [
        ("", False),  # no sublayers: the stores hold too little
        ("[extraction]\nsublayers = true\n", True),
        ("[extraction]\nsublayers = true\nboundaries = '::2'\n", False),  # not every boundary
        ("[extraction]\nsublayers = true\n[route]\nkind = 'live'\n", False),  # no store
    ],
)
def test_contrib_and_lens_read_the_store_when_it_holds_what_they_read(tmp_path, extra, from_store):
    """On the stores route with sublayers and every boundary, contrib and lens read the
    model's store: they name it, read the unit that extracts it (so they run after it) and
    hold no corpus; otherwise they run the model. Skip always runs the model."""
    from align.study import load_study
    from align.study.units import plan

    units = {u.name: u for u in plan(load_study(write(tmp_path, SKIPPED + extra)))}
    for kind in ("contrib", "lens"):
        u = units[f"{kind} a"]
        if from_store:
            assert u.inputs == ("extract a",) and u.definition["store"] == "stores/a.zarr"
            assert "corpus" not in u.definition
        else:
            assert u.inputs == () and "store" not in u.definition and "corpus" in u.definition
    assert units["skip a"].inputs == () and "corpus" in units["skip a"].definition
    order = list(units)
    if from_store:
        assert order.index("extract a") < order.index("contrib a") < order.index("depth a")
