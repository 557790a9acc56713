"""Replicates in a study file: `paths` or `revisions` make one model per checkpoint (NAME@K),
paired checkpoint k with checkpoint k (a single checkpoint with each of the other's), each
with its controls; what cannot be paired is refused in one line. The verdicts across
replicates follow the separation rule, checked against hand-worked cases."""

from __future__ import annotations

import pytest

HEAD = '[corpus]\npath = "docs.txt"\n'


def load(tmp_path, models: str, more: str = ""):
    from align.study import load_study

    (tmp_path / "docs.txt").write_text("one document\n", encoding="utf-8")
    p = tmp_path / "s.toml"
    p.write_text(models + HEAD + more, encoding="utf-8")
    return load_study(str(p))


def refused(tmp_path, models: str, more: str = "") -> str:
    from align.errors import InputError

    with pytest.raises(InputError) as e:
        load(tmp_path, models, more)
    message = str(e.value)
    assert "\n" not in message
    prefix = f"study file {tmp_path / 's.toml'}: "
    assert message.startswith(prefix)
    return message[len(prefix) :]


TWO = '[[models]]\nname = "a"\npaths = ["a0", "a1"]\n[[models]]\nname = "b"\npaths = ["b0", "b1"]\n'


def test_checkpoints_are_paired_k_with_k_with_their_controls(tmp_path):
    from align.study.units import plan

    study = load(
        tmp_path,
        TWO,
        '[controls]\nrandom_init = ["b"]\nrandom_init_seed = 7\nshuffle = true\n[pairs]\nmode = "list"\nlist = [["a", "b"]]\n',
    )
    assert [m.name for m in study.models] == [
        "a@1",
        "a@2",
        "b@1",
        "b@2",
        "b@1.random",
        "b@2.random",
    ]
    assert [m.spec.name for m in study.models[:4]] == ["a0", "a1", "b0", "b1"]
    assert [m.spec.seed for m in study.models[4:]] == [7, 8]  # each twin its own initialisation
    assert [m.spec.name for m in study.models[4:]] == ["b0", "b1"]
    assert study.pairs == (("a@1", "b@1"), ("a@2", "b@2"))
    assert study.replicated == (("a", "b", (("a@1", "b@1"), ("a@2", "b@2"))),)
    units = {u.name: u for u in plan(study, None)}
    assert list(units) == [
        "extract a@1", "extract a@2", "extract b@1", "extract b@2",
        "extract b@1.random", "extract b@2.random",
        "fit a@1->b@1", "fit a@1->b@1 shuffle", "fit a@1->b@1.random",
        "fit a@2->b@2", "fit a@2->b@2 shuffle", "fit a@2->b@2.random",
        "replicates", "report",
    ]  # fmt: skip
    assert units["fit a@2->b@2.random"].output == "results/fits/a@2--b@2.random.zarr"
    assert units["extract b@2"].output == "stores/b@2.zarr"
    assert units["replicates"].output == "results/replicates.json"
    assert set(units["replicates"].inputs) == {n for n in units if n.startswith("fit ")}


def test_a_single_checkpoint_pairs_with_each_replicate_and_revisions_name_checkpoints(tmp_path):
    study = load(
        tmp_path,
        '[[models]]\nname = "a"\npath = "hub/a"\n[[models]]\nname = "b"\npath = "hub/b"\n'
        'revisions = ["r1", "r2", "r3"]\n',
        '[pairs]\nmode = "reference"\nreference = "b"\n',
    )
    assert [(m.name, m.spec.name, m.spec.revision) for m in study.models] == [
        ("a", "hub/a", None),
        ("b@1", "hub/b", "r1"),
        ("b@2", "hub/b", "r2"),
        ("b@3", "hub/b", "r3"),
    ]
    assert study.pairs == (("a", "b@1"), ("a", "b@2"), ("a", "b@3"))
    single = load(
        tmp_path, '[[models]]\nname = "a"\npath = "x"\n[[models]]\nname = "b"\npath = "y"\n'
    )
    assert [m.name for m in single.models] == ["a", "b"] and single.replicated == ()


def test_what_cannot_be_replicated_is_refused_in_one_line(tmp_path):
    three = '[[models]]\nname = "a"\npaths = ["a0", "a1", "a2"]\n[[models]]\nname = "b"\npaths = ["b0", "b1"]\n'
    assert refused(tmp_path, three, '[pairs]\nmode = "list"\nlist = [["a", "b"]]\n') == (
        "[pairs] a -> b: a names 3 checkpoints and b 2; replicates pair checkpoint k of one "
        "with checkpoint k of the other, so both need the same count (or one of them a single "
        "checkpoint)"
    )
    both = '[[models]]\nname = "a"\npath = "x"\npaths = ["a0", "a1"]\n[[models]]\nname = "b"\npath = "y"\n'
    assert refused(tmp_path, both) == (
        "[[models]] 1 has both path and paths: give path for one checkpoint or paths for several"
    )
    one = '[[models]]\nname = "a"\npaths = ["a0"]\n[[models]]\nname = "b"\npath = "y"\n'
    assert refused(tmp_path, one) == (
        "[[models]] 1 paths = ['a0'] must list at least two checkpoints as strings (one "
        "checkpoint: give path = ...)"
    )
    twice = '[[models]]\nname = "a"\npath = "x"\nrevisions = ["r", "r"]\n[[models]]\nname = "b"\npath = "y"\n'
    assert refused(tmp_path, twice) == (
        "[[models]] 1 revisions names checkpoint 'r' twice: its replicates would be one model "
        "and their spread nothing but a copy"
    )
    top = "[controls]\nrandom_init = ['a']\nrandom_init_seed = 9223372036854775807\n"
    assert refused(tmp_path, TWO, top) == (
        "[controls] random_init_seed = 9223372036854775807: the twins of a's 2 checkpoints take "
        "it to 9223372036854775808, past the largest seed 9223372036854775807: give a smaller "
        "random_init_seed"
    )
    mixed = '[[models]]\nname = "a"\npaths = ["a0", "a1"]\nrevisions = ["r", "s"]\n[[models]]\nname = "b"\npath = "y"\n'
    assert refused(tmp_path, mixed) == (
        "[[models]] 1 has both paths and revisions: give paths (one folder or hub id per "
        "checkpoint) or path with revisions, not both"
    )


def test_labels_name_each_checkpoint_on_the_pages_and_only_the_report_reads_them(tmp_path):
    """`labels` beside `paths` gives each replicate what the pages show beside NAME@K, in the
    checkpoints' order; the report unit's definition carries them, so an edit of them changes
    the report's key and no other unit's. A list of another length, an empty or a repeated
    label, or labels beside a single checkpoint are refused in one line naming them."""
    from align.study.units import plan

    labelled = TWO.replace(
        'paths = ["a0", "a1"]', 'paths = ["a0", "a1"]\nlabels = ["seed 0", "seed 1"]', 1
    )
    study = load(tmp_path, labelled)
    assert {m.name: m.label for m in study.models} == {
        "a@1": "seed 0",
        "a@2": "seed 1",
        "b@1": None,
        "b@2": None,
    }
    with_labels = {u.name: u for u in plan(study, None)}
    without = {u.name: u for u in plan(load(tmp_path, TWO), None)}
    assert with_labels.keys() == without.keys()
    changed = [n for n in without if with_labels[n].key != without[n].key]
    assert changed == ["report"], changed
    assert with_labels["report"].definition["labels"] == {"a@1": "seed 0", "a@2": "seed 1"}
    assert "labels" not in without["report"].definition  # a study run before keeps its report key

    def refusal(labels: str, entry: str = 'paths = ["a0", "a1"]') -> str:
        models = f'[[models]]\nname = "a"\n{entry}\nlabels = {labels}\n'
        return refused(tmp_path, models + '[[models]]\nname = "b"\npath = "y"\n')

    assert refusal('["seed 0"]') == (
        "[[models]] 1 labels = ['seed 0'] must list 2 strings, one for each of its 2 checkpoints "
        "in their order"
    )
    assert refusal('["seed 0", " "]') == (
        "[[models]] 1 labels = ['seed 0', ' '] must list 2 strings, one for each of its 2 "
        "checkpoints in their order"
    )
    assert refusal('["s", "s"]') == (
        "[[models]] 1 labels names 's' twice: give each checkpoint its own label, or leave "
        "labels out"
    )
    assert refusal('["only"]', 'path = "x"') == (
        "[[models]] 1 labels = ['only'] names checkpoints, and it has one: give labels beside "
        "paths or revisions, one a checkpoint, or leave it out"
    )


def test_analyses_run_on_every_checkpoint_or_the_first_only(tmp_path):
    """`[analyses] checkpoints` = "all" (the default) plans a model's analyses on each of its
    checkpoints, "first" on NAME@1 only (a single-checkpoint model keeps its own); any other
    value is refused naming it."""
    from align.study.units import plan

    models = TWO.replace('paths = ["a0", "a1"]', 'paths = ["a0", "a1"]\nanalyses = ["skip"]')
    models += '[[models]]\nname = "c"\npath = "c0"\nanalyses = ["skip"]\n'
    wanted = {
        "all": ["skip a@1", "skip a@2", "skip c"],
        "first": ["skip a@1", "skip c"],
    }
    for value, names in wanted.items():
        study = load(tmp_path, models, f'[analyses]\ncheckpoints = "{value}"\n')
        assert [u.name for u in plan(study, None) if u.kind == "skip"] == names
    default = load(tmp_path, models)
    assert [u.name for u in plan(default, None) if u.kind == "skip"] == wanted["all"]
    assert refused(tmp_path, models, '[analyses]\ncheckpoints = "last"\n') == (
        "[analyses] checkpoints = 'last' is not one of all, first"
    )


def _summary(slope, gap, spread, path):
    return {
        "slope": slope,
        "mean_depth_gap": gap,
        "soft_depth_spread": spread,
        "spearman": 0.5,
        "argmin_path": path,
    }


def test_the_verdicts_across_replicates_follow_the_rule_by_hand():
    """Two replicates. Slope: trained 0.8, 0.9 against the control's 0.1, 0.2: every trained
    value above the control's range. Gap: trained 0.1, 0.3 against 0.2, 0.4: 0.3 lies in the
    control's range. Spread: the control's is undefined in replicate 2. Paths: [1, 2] twice."""
    from align.stats import replicates as rules
    from align.study import replicates

    per = [
        {"replicate": 1, "trained": _summary(0.8, 0.1, 0.5, [1, 2]), "control": _summary(0.1, 0.2, 0.3, [0, 0])},
        {"replicate": 2, "trained": _summary(0.9, 0.3, 0.6, [1, 2]), "control": _summary(0.2, 0.4, None, [0, 1])},
    ]  # fmt: skip
    record = {
        "against": {"random_init": rules.statistics(per, "replicate")},
        "paths": [[1, 2], [1, 2]],
        "distinct_paths": 1,
    }
    assert replicates.sentences(record) == [
        "Robust (against the random-init control): the slope separates the trained pair from "
        "the control in both replicates (trained 0.80–0.90, control 0.10–0.20: every trained "
        "value lies above the control's range).",
        "Not robust (against the random-init control): the mean depth gap does not separate "
        "the trained pair from the control across the replicates (trained 0.100–0.300, "
        "control 0.200–0.400: the ranges overlap).",
        "Not established (against the random-init control): the soft-depth spread is undefined "
        "in some replicate (trained 0.500–0.600, control 0.300).",
        "Robust: the trained pair's exact argmin path is [1, 2] in both replicates.",
    ]
    record = {"against": {}, "paths": [[1, 2], [1, 3], [1, 2]], "distinct_paths": 2}
    assert replicates.sentences(record) == [
        "Not established: no control to separate the trained pair from (set [controls] "
        "random_init or shuffle).",
        "Not robust: the trained pair's exact argmin path differs across the replicates (2 "
        "distinct paths in 3 replicates: [1, 2], [1, 3], [1, 2]).",
    ]
    assert [replicates.holds(s) for s in replicates.sentences(record)] == [None, False]


def test_a_spread_file_the_study_no_longer_makes_is_not_shown(tmp_path):
    """results/replicates.json left by an earlier form of the study (its replicates since
    removed: no `replicates` unit in its order) is neither shown by the report nor by info."""
    from align.study import replicates

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "replicates.json").write_text('{"rule": "r", "pairs": []}')
    done = {"order": ["replicates", "report"], "units": {"replicates": {"state": "done"}}}
    assert replicates.read(str(tmp_path), done) == {"rule": "r", "pairs": []}
    assert replicates.read(str(tmp_path), {"order": ["report"], "units": {}}) is None
    failed = {"order": ["replicates"], "units": {"replicates": {"state": "failed"}}}
    assert replicates.read(str(tmp_path), failed) is None
    assert replicates.pages(str(tmp_path), {"order": ["report"]}, {"index.html": "x"}) == {}
