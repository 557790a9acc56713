"""`align info RESULT` prints a readable summary of a result (its headline, models, corpus,
intervals, variables) instead of raw attributes, and `align compare` labels a randomly
initialised target as one: both from hand-built results whose numbers are known."""

from __future__ import annotations

from tests.helpers.fixtures_demo import alignment_ds, depth_ds


def _write(ds, path, schema):
    from align.store import write_result

    return write_result(str(path), ds, schema)


def test_info_of_an_alignment_result(cli, tmp_path):
    ds = alignment_ds(name_s="shallow-4f2a9c01b3de", name_t="deep-0123456789ab")
    ds.attrs["summary"].update({"slope": 0.954, "slope_low": 0.801, "slope_high": 1.104})
    ds.attrs["target"] = {"random_init": True, "seed": 3}
    ds.attrs["route"] = "store"
    path = _write(ds, tmp_path / "a.zarr", "alignment")
    code, out, err = cli("info", path)
    assert code == 0, err
    lines = out.splitlines()
    path_ = ds.attrs["summary"]["argmin_path"]
    assert lines[0].startswith(f"{path}: align result, schema alignment")
    flat = " ".join(out.split())  # wrapped lines read as one
    assert lines[1].startswith("  headline    shallow → deep (random init): argmin path")
    assert (
        f"headline shallow → deep (random init): argmin path j*(i) {path_} for i = [1, 2, 3]; "
        "slope 0.95 [0.80, 1.10] (1: the diagonal, 0: flat); Spearman 0.80 source"
    ) in flat
    assert "  source      shallow (/models/shallow-4f2a9c01b3de, 3 layers)" in lines
    assert "  target      deep (/models/deep-0123456789ab, 6 layers, random init, seed 3)" in lines
    assert "  pairing     one token stream (both read the same tokens)" in lines
    grid = (
        flat.split("source_boundary 4 × target_boundary 7: ")[1]
        .split(" heldout_doc")[0]
        .split(" (every")[0]
    )
    assert set(grid.split(", ")) == {"relative_error", "norm_error", "r2", "alpha", "alpha_rel"}
    assert max(len(line) for line in lines if str(path) not in line) <= 100  # wrapped
    assert "{" not in out.split("options")[0]  # no raw JSON before the options


def test_info_of_a_depth_result_says_each_rule(cli, tmp_path):
    path = _write(depth_ds(), tmp_path / "d.zarr", "depth")
    code, out, err = cli("info", path)
    assert code == 0, err
    assert (
        "  depths      cosine 2; kl 1; overlap undefined (overlap never exceeds 0.3 before the "
        "last layer)"
    ) in out
    assert "  model       deep (/models/deep)" in out


def test_compare_labels_a_random_init_target_as_one(cli, tmp_path):
    trained = _write(alignment_ds(), tmp_path / "trained.zarr", "alignment")
    control = alignment_ds(seed=9)
    control.attrs["target"] = {"random_init": True, "seed": 1}
    control = _write(control, tmp_path / "control.zarr", "alignment")
    code, out, err = cli("compare", trained, control)
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "deep (random init)" in rows["control"]
    assert "random init" not in rows["trained"]
