"""A study of two models of two checkpoints each (the zoo's tiny models under two seeds):
checkpoint k of a is fitted with checkpoint k of b and with b's k-th random-init twin; the
spread across replicates that DIR/results/replicates.json holds equals numpy's over the fits'
summaries read with zarr; its verdicts follow the separation rule worked here from those
numbers; the report, `align info` and `--dry-run` show them."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import zarr

from tests.helpers.fixtures_study import B_SHAPE
from tests.helpers.study_files import write_study

REST = '[fit]\nbootstrap = 100\n[controls]\nrandom_init = ["b"]\n'  # after [pairs]
UNITS = [
    "extract a@1",
    "extract a@2",
    "extract b@1",
    "extract b@2",
    "extract b@1.random",
    "extract b@2.random",
    "fit a@1->b@1",
    "fit a@1->b@1.random",
    "fit a@2->b@2",
    "fit a@2->b@2.random",
    "replicates",
    "report",
]
KEYS = {
    "slope": "slope",
    "mean_depth_gap": "mean depth gap",
    "soft_depth_spread": "soft-depth spread",
}


@pytest.fixture(scope="module")
def replicate_study(zoo, corpus_file, tmp_path_factory):
    from align.study import load_study, run_study

    root = tmp_path_factory.mktemp("replicates")
    paths = {
        "a0": zoo("qwen2"),
        "a1": zoo("qwen2", seed=1),
        "b0": zoo("qwen2", **B_SHAPE),
        "b1": zoo("qwen2", seed=1, **B_SHAPE),
    }
    path = write_study(
        root / "study.toml",
        models={m: [str(paths[f"{m}0"]), str(paths[f"{m}1"])] for m in "ab"},
        corpus=str(corpus_file),
        pairs=[["a", "b"]],
        name="replicates",
        extra=REST,
    )
    lines = []
    run_study(load_study(str(path)), str(root / "out"), log=lines.append)
    return str(path), str(root / "out"), lines, paths


def summary(root: str, stem: str) -> dict:
    return dict(zarr.open_group(f"{root}/results/fits/{stem}.zarr", mode="r").attrs["summary"])


def test_each_replicate_pair_is_fitted_with_its_control(replicate_study):
    _, root, lines, paths = replicate_study
    ran = [
        x.split(" (")[0][len("align study: run ") :]
        for x in lines
        if x.startswith("align study: run ")
    ]
    assert ran == UNITS
    for name, folder in (("a@1", "a0"), ("a@2", "a1"), ("b@1", "b0"), ("b@2", "b1")):
        meta = json.loads(
            json.dumps(dict(zarr.open_group(f"{root}/stores/{name}.zarr", mode="r").attrs))
        )
        assert folder and paths[folder] in json.dumps(meta), name  # the checkpoint it read
    for stem in ("a@1--b@1", "a@1--b@1.random", "a@2--b@2", "a@2--b@2.random"):
        assert os.path.isdir(f"{root}/results/fits/{stem}.zarr")
    # different seeds, different models: the two replicates' matrices differ
    assert summary(root, "a@1--b@1") != summary(root, "a@2--b@2")


def test_the_spread_equals_numpys_and_the_verdicts_follow_the_rule(replicate_study):
    _, root, _, _ = replicate_study
    with open(f"{root}/results/replicates.json", encoding="utf-8") as f:
        record = json.load(f)
    (pair,) = record["pairs"]
    assert (pair["source"], pair["target"]) == ("a", "b")
    assert pair["pairs"] == [["a@1", "b@1"], ["a@2", "b@2"]]
    trained = [summary(root, "a@1--b@1"), summary(root, "a@2--b@2")]
    control = [summary(root, "a@1--b@1.random"), summary(root, "a@2--b@2.random")]
    for key in ("slope", "mean_depth_gap", "soft_depth_spread", "spearman"):
        x = np.array([np.nan if s[key] is None else s[key] for s in trained], dtype=float)
        x = x[np.isfinite(x)]  # an undefined value (a path that never moves) is left out
        got = pair["spread"][key]
        assert got["n_defined"] == len(x)
        if key == "slope":
            assert len(x) == 2
        if len(x) == 0:
            assert got["mean"] is got["sd"] is got["min"] is got["max"] is None
            continue
        assert got["mean"] == pytest.approx(np.mean(x), rel=1e-12)
        if len(x) > 1:
            assert got["sd"] == pytest.approx(np.std(x, ddof=1), rel=1e-12, abs=1e-15)
        assert (got["min"], got["max"]) == (np.min(x), np.max(x))
        for k, row in enumerate(pair["per_replicate"]):  # each run's value beside its interval
            got_row = [row[key], row[f"{key}_low"], row[f"{key}_high"]]
            want = [trained[k][key], trained[k][f"{key}_low"], trained[k][f"{key}_high"]]
            np.testing.assert_array_equal(np.array(got_row, float), np.array(want, float))
    said = pair["sentences"]
    for k, (key, label) in enumerate(KEYS.items()):  # the rule, worked from the numbers here
        t = [s[key] for s in trained]
        c = [s[key] for s in control]
        if not np.all(np.isfinite(np.array(t + c, dtype=float))):
            assert said[k].startswith(
                f"Not established (against the random-init control): the {label} "
            )
            continue
        if min(t) > max(c):
            side = "above"
        elif max(t) < min(c):
            side = "below"
        else:
            side = None
        head = "Robust" if side else "Not robust"
        assert said[k].startswith(f"{head} (against the random-init control): the {label} "), said[
            k
        ]
        if side:
            assert said[k].endswith(f"every trained value lies {side} the control's range).")
    paths = [s["argmin_path"] for s in trained]
    assert said[3] == (
        f"Robust: the trained pair's exact argmin path is {paths[0]} in both replicates."
        if paths[0] == paths[1]
        else "Not robust: the trained pair's exact argmin path differs across the replicates "
        f"(2 distinct paths in 2 replicates: {paths[0]}, {paths[1]})."
    )
    assert len(said) == 4


def test_report_info_and_dry_run_show_the_replicates(replicate_study, cli):
    path, root, _, paths = replicate_study
    with open(f"{root}/results/replicates.json", encoding="utf-8") as f:
        pair = json.load(f)["pairs"][0]
    with open(f"{root}/report/replicates.html", encoding="utf-8") as f:
        page = f.read()
    # each replicate by its position and the folder the study file named (the folders differ)
    folder = {k: os.path.basename(v.rstrip("/")) for k, v in paths.items()}
    assert f"a@1 ({folder['a0']}) → b@1 ({folder['b0']})" in page
    assert f"a@2 ({folder['a1']}) → b@2 ({folder['b1']})" in page
    s = pair["spread"]["slope"]
    assert f"mean {s['mean']:.2f}, sd {s['sd']:.2f}, range {s['min']:.2f} – {s['max']:.2f}" in page
    row = pair["per_replicate"][0]
    assert f"{row['slope']:.2f} [{row['slope_low']:.2f}, {row['slope_high']:.2f}]" in page
    with open(f"{root}/report/index.html", encoding="utf-8") as f:
        index = f.read()
    assert 'href="replicates.html"' in index
    assert f"mean {s['mean']:.2f}, sd {s['sd']:.2f}, range {s['min']:.2f} – {s['max']:.2f}" in index
    code, out, _ = cli("info", root)
    assert code == 0 and "  done     replicates" in out
    assert "    a -> b (2 replicate pairs)" in out
    for sentence in pair["sentences"]:
        assert f"      {sentence}" in out
    code, out, _ = cli("study", path, "-o", root, "--dry-run")
    assert code == 0
    assert [r[2:36].strip() for r in out.splitlines()[2:-1]] == UNITS


def test_labels_added_to_a_study_run_rewrite_its_pages_and_run_nothing_else(
    replicate_study, tmp_path
):
    """`labels` added to the entry of a study already run (a copy of it): the rerun writes the
    report anew and runs no other unit, and the pages show each replicate of `a` by its label
    (b's, unlabelled, keep their folders' names)."""
    import shutil

    from align.study import load_study, run_study

    path, root, _, paths = replicate_study
    copy = tmp_path / "out"
    shutil.copytree(root, copy)
    text = open(path, encoding="utf-8").read()
    a_paths = f"paths = {json.dumps([str(paths['a0']), str(paths['a1'])])}"
    assert text.count(a_paths) == 1, text
    labelled = tmp_path / "study.toml"
    labelled.write_text(
        text.replace(a_paths, a_paths + '\nlabels = ["first seed", "second seed"]'), "utf-8"
    )
    lines = []
    run_study(load_study(str(labelled)), str(copy), log=lines.append)
    ran = [line for line in lines if line.startswith("align study: run ")]
    assert len(ran) == 1 and ran[0].startswith("align study: run report "), lines
    with open(copy / "report" / "replicates.html", encoding="utf-8") as f:
        page = f.read()
    folder = {k: os.path.basename(str(v).rstrip("/")) for k, v in paths.items()}
    assert f"a@1 (first seed) → b@1 ({folder['b0']})" in page
    assert f"a@2 (second seed) → b@2 ({folder['b1']})" in page
