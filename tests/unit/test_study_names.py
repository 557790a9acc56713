"""Every unit of a study writes an output of its own: the names the schema accepts map to
distinct outputs (enumerated from separators and suffixes), and the names that could share
one are refused in one line naming the name and the output it would share. A model of several
checkpoints is one model per checkpoint, NAME@K: its outputs are enumerated beside them."""

from __future__ import annotations

import itertools

import pytest

# Fragments a model name is built from: letters, the characters the schema allows, the pair
# separator and the suffixes the study appends (a twin, a shuffle control).
FRAGMENTS = ("a", "b", "-", "--", ".", "_", "random", ".random", "shuffle", ".shuffle", "A")
KINDS = ("extract", "contrib", "lens", "lens-linear", "lens-tuned", "skip", "depth")


def names_up_to(n: int) -> list:
    return sorted(
        {"".join(p) for k in range(1, n + 1) for p in itertools.product(FRAGMENTS, repeat=k)}
    )


def test_accepted_names_name_distinct_outputs():
    """Over every name of up to three fragments the schema accepts (each alone; names equal
    but for case refused together, below), every unit a study can make (extraction,
    analyses, each ordered pair's fit, its shuffle control and its random-init twin's fit,
    the twin's extraction) names a distinct output, also case-folded, and distinct unit
    names; the outputs are written out by hand here, as the docs give them."""
    from align.study.schema import name_refusal

    pool = [n for n in names_up_to(3) if name_refusal(n) is None]
    assert {"a", "a-b", "a.b", "a_random", "a.randoma", "a.shufflea"} <= set(pool)
    assert not {"a--b", "a.random", "b.shuffle", "-a", ".a"} & set(pool)
    folded = {}
    for n in pool:  # one of each case-folded name: the schema refuses two of them together
        folded.setdefault(n.casefold(), n)
    pool = sorted(folded.values())
    seen = {}

    def put(unit: str, output: str):
        key = output.casefold()
        assert key not in seen, f"{unit} and {seen[key]} both write {output}"
        seen[key] = unit

    from align.study.units import output_of

    for n in pool:
        for kind in KINDS:
            put(f"{kind} {n}", output_of(kind, (n,)))
        put(f"extract {n}.random", output_of("extract", (n + ".random",)))
        assert output_of("extract", (n,)) == f"stores/{n}.zarr"
    for s, t in itertools.permutations(pool, 2):
        put(f"fit {s}->{t}", output_of("fit", (s, t)))
        put(f"fit {s}->{t} shuffle", output_of("fit", (s, t), "shuffle"))
        put(f"fit {s}->{t}.random", output_of("fit", (s, t + ".random"), "random_init"))
        put(f"lens-through {s}->{t}", output_of("lens-through", (s, t)))
    assert output_of("fit", ("a", "b"), "shuffle") == "results/fits/a--b.shuffle.zarr"
    assert output_of("lens-tuned", ("a",)) == "results/lens-tuned/a.zarr"
    assert output_of("lens-through", ("a", "b")) == "results/lens-through/a--b"
    assert output_of("fit", ("a", "b.random"), "random_init") == "results/fits/a--b.random.zarr"
    assert len(seen) == 8 * len(pool) + 4 * len(pool) * (len(pool) - 1)
    # Replicates: checkpoint K of model n is the model n@K (its twin n@K.random), beside every
    # name; their fits with each other and with the names of up to two fragments; the spread.
    from align.study.schema import replicate_name

    replicas = [replicate_name(n, k) for n in pool for k in (1, 2)]
    assert replicas[:2] == [f"{pool[0]}@1", f"{pool[0]}@2"]
    for r in replicas:
        for kind in KINDS:
            put(f"{kind} {r}", output_of(kind, (r,)))
        put(f"extract {r}.random", output_of("extract", (r + ".random",)))
    short = {n for n in pool if n in names_up_to(2)}
    mixed = sorted(short | {replicate_name(n, k) for n in short for k in (1, 2)})
    pairs = [(s, t) for s, t in itertools.permutations(mixed, 2) if "@" in s + t]
    for s, t in pairs:
        put(f"fit {s}->{t}", output_of("fit", (s, t)))
        put(f"fit {s}->{t} shuffle", output_of("fit", (s, t), "shuffle"))
        put(f"fit {s}->{t}.random", output_of("fit", (s, t + ".random"), "random_init"))
        put(f"lens-through {s}->{t}", output_of("lens-through", (s, t)))
    put("replicates", output_of("replicates"))
    assert output_of("replicates") == "results/replicates.json"
    assert output_of("fit", ("a@1", "b@1")) == "results/fits/a@1--b@1.zarr"
    n = len(pool)
    assert len(seen) == 8 * n + 4 * n * (n - 1) + 8 * 2 * n + 4 * len(pairs) + 1


BASE = """
[[models]]
name = "{0}"
path = "m0"
[[models]]
name = "{1}"
path = "m1"
{more}
[corpus]
path = "docs.txt"
"""


def refused(tmp_path, names, more: str = "") -> str:
    from align.errors import InputError
    from align.study import load_study

    extra = "".join(
        f'[[models]]\nname = "{n}"\npath = "m{k + 2}"\n' for k, n in enumerate(names[2:])
    )
    p = tmp_path / "s.toml"
    p.write_text(BASE.format(*names, more=extra) + more, encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_study(str(p))
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"study file {p}: [[models]] ")
    return message.split(": ", 1)[1]


def test_the_colliding_names_are_refused_naming_the_output(tmp_path):
    # x--y -> z and x -> y--z both wrote results/fits/x--y--z.zarr
    assert refused(tmp_path, ["x--y", "z", "x", "y--z"]) == (
        "[[models]] 1 name = 'x--y' holds '--', which separates source and target in a pair's "
        "outputs (results/fits/SOURCE--TARGET.zarr): two pairs could write one output; rename it"
    )
    # b.shuffle beside [controls] shuffle: a -> b.shuffle wrote a -> b's shuffle control's output
    message = refused(tmp_path, ["b", "b.shuffle"], "[controls]\nshuffle = true\n")
    assert message == (
        "[[models]] 2 name = 'b.shuffle' ends in '.shuffle', which names a shuffle control's fit "
        "([controls] shuffle writes the pair S -> b to results/fits/S--b.shuffle.zarr): two units "
        "could write one output; rename it"
    )
    # b.random beside random_init = ["b"]: extracted twice under one name
    message = refused(tmp_path, ["b", "b.random"], "[controls]\nrandom_init = ['b']\n")
    assert message == (
        "[[models]] 2 name = 'b.random' ends in '.random', which names a random-init twin "
        "(random_init = ['b'] makes b.random, stores/b.random.zarr): two units could write one "
        "output; rename it"
    )
    assert refused(tmp_path, ["a", "A"]) == (
        "[[models]] 2 name = 'A' differs from 'a' only in case: on a case-insensitive disk their "
        "outputs are one file; rename one"
    )
    assert refused(tmp_path, ["a", "a"]) == "[[models]] 2 name = 'a' is used twice"


def test_twin_controls_are_found_by_exact_name():
    """The report pairs a -> b with b's own twin, never with the twin of a model whose name
    starts with b. (b.x's twin b.x.random used to be taken for b's when it came first.)"""
    from align.study.report import _controls_of

    fits = {
        ("a", "b", None): ("fit a->b", "trained"),
        ("a", "b.x.random", "random_init"): ("fit a->b.x.random", "twin of b.x"),
        ("a", "b.random", "random_init"): ("fit a->b.random", "twin of b"),
        ("a", "b", "shuffle"): ("fit a->b shuffle", "shuffled"),
    }
    assert _controls_of(fits, "a", "b") == {"random_init": "twin of b", "shuffle": "shuffled"}
    del fits[("a", "b.random", "random_init")]
    assert _controls_of(fits, "a", "b") == {"shuffle": "shuffled"}
