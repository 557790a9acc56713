"""Boundaries are called boundaries: the alignment result's dims and summary keys, the
options that choose them, the deprecated option names, and results of schema version 1.

tests/data/alignment-schema1.zarr was written by the release before the rename (schema
version 1: dims source_layer/target_layer), by `align fit --bootstrap 100` on two synthetic
stores (3 and 4 boundaries, d 4 and 5, 40 documents). Its values are read here with zarr
directly as the reference.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.assertions import one_line_error

OLD = Path(__file__).parents[1] / "data" / "alignment-schema1.zarr"


def raw(path, name):
    """An array of a Zarr group and its dimension names, read with zarr alone."""
    a = zarr.open_group(str(path), mode="r")[name]
    return np.asarray(a[...]), tuple(a.metadata.dimension_names)


def test_an_old_result_opens_under_the_new_names():
    import align

    ds = align.open_alignment(str(OLD))
    err, dims = raw(OLD, "relative_error")
    assert dims == ("source_layer", "target_layer")  # the file really is the old schema
    assert ds["relative_error"].dims == ("source_boundary", "target_boundary")
    np.testing.assert_array_equal(ds["relative_error"].values, err)
    np.testing.assert_array_equal(ds["source_boundary"].values, raw(OLD, "source_layer")[0])
    np.testing.assert_array_equal(ds["target_boundary"].values, raw(OLD, "target_layer")[0])
    assert ds["doc_error_sq_sum"].dims == ("heldout_doc", "source_boundary", "target_boundary")
    assert "source_layer" not in ds.dims and "target_layer" not in ds.variables
    old = json.loads((OLD / "zarr.json").read_text())["attributes"]
    s = ds.attrs["summary"]
    assert s["source_boundaries"] == old["summary"]["source_layers"] == [1, 2]
    assert s["target_boundaries"] == old["summary"]["target_layers"]
    assert s["nulls"]["flat"]["target_boundary"] == old["summary"]["nulls"]["flat"]["target_layer"]
    assert (
        s["slope"] == old["summary"]["slope"] and s["argmin_path"] == old["summary"]["argmin_path"]
    )
    assert ds.attrs["options"]["source_boundaries"] == old["options"]["source_layers"]
    assert not any("layers" in k for k in s) and "source_layers" not in ds.attrs["options"]


def test_a_result_of_an_unknown_version_is_refused_in_one_line(tmp_path):
    import align
    from align.errors import StoreError

    path = tmp_path / "future.zarr"
    shutil.copytree(OLD, path)
    meta = json.loads((path / "zarr.json").read_text())
    meta["attributes"]["align"]["version"] = 3
    (path / "zarr.json").write_text(json.dumps(meta))
    with pytest.raises(StoreError) as e:
        align.open_alignment(str(path))
    line = str(e.value)
    assert "\n" not in line and "schema version 3" in line and "reads version 1, 2" in line


def test_the_new_and_the_old_option_names(fit_pair, tmp_path, cli):
    """New results are version 2 with boundary dims; the old option names give the same result
    with one warning line each."""
    src, tgt = fit_pair
    runs = {}
    for name, flags in {
        "new": ["--source-boundaries", "1:", "--target-boundaries=0,2"],
        "old": ["--source-layers", "1:", "--target-layers=0,2"],
    }.items():
        out = str(tmp_path / f"{name}.zarr")
        code, _, err = cli("fit", src, tgt, "-o", out, *flags)
        assert code == 0, err
        runs[name] = (out, err)
    (new, err_new), (old, err_old) = runs["new"], runs["old"]
    attrs = json.loads((Path(new) / "zarr.json").read_text())["attributes"]
    assert attrs["align"]["version"] == 2
    err, dims = raw(new, "relative_error")
    assert dims == ("source_boundary", "target_boundary") and err.shape == (2, 2)
    np.testing.assert_array_equal(raw(new, "source_boundary")[0], [1, 2])
    np.testing.assert_array_equal(raw(new, "target_boundary")[0], [0, 2])
    assert (
        attrs["options"]["source_boundaries"] == "1:"
        and attrs["options"]["target_boundaries"] == "0,2"
    )
    assert attrs["summary"]["source_boundaries"] == [1, 2]
    warnings = [line for line in err_old.splitlines() if "deprecated" in line]
    assert warnings == [
        "align: warning: --source-layers is deprecated, use --source-boundaries "
        "(the old name is accepted until the next release)",
        "align: warning: --target-layers is deprecated, use --target-boundaries "
        "(the old name is accepted until the next release)",
    ]
    assert "deprecated" not in err_new
    np.testing.assert_array_equal(raw(old, "relative_error")[0], err)


def test_a_bad_boundary_spec_names_the_option_as_typed(fit_pair, tmp_path, cli):
    src, tgt = fit_pair
    code, _, err = cli("fit", src, tgt, "-o", tmp_path / "r.zarr", "--source-layers", "9")
    one_line_error(
        code,
        err,
        "--source-layers '9'",
        "index 9 is out of range",
        progress=("align: warning: --source-layers is deprecated",),
    )


def test_a_store_made_before_the_rename_is_still_the_same_store(zoo, corpus_file, tmp_path, cli):
    """Activation stores made before the rename record their kept boundaries as identity
    "layers": the same command still finds the store complete, and other boundaries are refused."""
    out = tmp_path / "s.zarr"
    args = ["extract", zoo("qwen2"), corpus_file, "-o", out, "--max-docs", "2"]
    assert cli(*args)[0] == 0
    meta = json.loads((out / "zarr.json").read_text())
    identity = meta["attributes"]["provenance"]["identity"]
    identity["layers"] = identity.pop("boundaries")
    (out / "zarr.json").write_text(json.dumps(meta))
    code, _, err = cli(*args)
    assert code == 0 and "already complete" in err, err
    code, _, err = cli(*args, "--boundaries", "0,2")
    one_line_error(code, err, "boundaries: store has [0, 1, 2], now [0, 2]")


@pytest.mark.parametrize(
    "version,found,other", [(2, "source_layer, target_layer", 1), (1, None, 2)]
)
def test_a_marker_that_contradicts_the_dims_is_refused_in_one_line(
    tmp_path, cli, version, found, other
):
    """A version 1 result whose marker was edited to say version 2 (its dims keep version 1's
    names), and a version 2 result marked version 1: `align compare` and `open_alignment`
    refuse it in one line naming the file, the names found and the version they belong to."""
    import align
    from align.errors import StoreError

    path = tmp_path / "edited.zarr"
    shutil.copytree(OLD, path)
    if version == 1:  # a version 2 result: the dims renamed as version 2 writes them
        import xarray as xr

        ds = align.open_alignment(str(OLD)).load()
        ds.attrs["align"] = {"schema": "alignment", "version": 1, "complete": True}
        shutil.rmtree(path)
        ds.to_zarr(path, zarr_format=3, consolidated=True)
        assert "source_boundary" in xr.open_zarr(path).dims
        found = "source_boundary, target_boundary"
    meta = json.loads((path / "zarr.json").read_text())
    meta["attributes"]["align"]["version"] = version
    (path / "zarr.json").write_text(json.dumps(meta))
    needle = f"{path} says schema version {version} but holds {found}, a name of version {other}"
    code, _, err = cli("compare", path, path)
    one_line_error(code, err, needle, "marker")
    with pytest.raises(StoreError) as e:
        align.open_alignment(str(path))
    assert needle in str(e.value) and "\n" not in str(e.value)
