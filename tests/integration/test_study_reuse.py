"""`[extraction] reuse`: a study links a complete store of the same identity (weights,
tokenizer, corpus, options) found in a folder it is given, instead of extracting again; a store
of other options is passed over; the folder's files are left byte for byte; the fit on the
linked stores equals the fit of the study that made them (read with zarr)."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest
import zarr

from tests.helpers.assertions import one_line_error
from tests.helpers.fixtures_study import study_text


def tree_hash(folder) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(folder)):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            h.update(path.encode())
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def test_a_study_reuses_stores_of_the_same_identity(zoo, corpus_file, tmp_path):
    from align.study import load_study, run_study

    first = tmp_path / "first.toml"
    first.write_text(study_text(zoo, corpus_file, models=("a", "b")), encoding="utf-8")
    run_study(load_study(str(first)), str(tmp_path / "made"), log=lambda line: None)
    stores = tmp_path / "made" / "stores"
    before = tree_hash(stores)

    extra = f'[extraction]\nreuse = ["{stores}"]\n'
    second = tmp_path / "second.toml"
    second.write_text(study_text(zoo, corpus_file, extra, models=("a", "b")), encoding="utf-8")
    lines = []
    run_study(load_study(str(second)), str(tmp_path / "again"), log=lines.append)
    for name in ("a", "b"):
        link = tmp_path / "again" / "stores" / f"{name}.zarr"
        assert os.readlink(link) == str(stores / f"{name}.zarr")
        assert any(f"reusing store {stores / f'{name}.zarr'}" in line for line in lines), lines
    assert tree_hash(stores) == before
    fits = "results/fits/a--b.zarr"
    want = zarr.open_group(str(tmp_path / "made" / fits), mode="r")["relative_error"][:]
    got = zarr.open_group(str(tmp_path / "again" / fits), mode="r")["relative_error"][:]
    np.testing.assert_array_equal(got, want)

    # other options (every other boundary): the stores found are of another identity
    other = tmp_path / "other.toml"
    extra = f'[extraction]\nboundaries = "::2"\nreuse = ["{stores}"]\n'
    other.write_text(study_text(zoo, corpus_file, extra, models=("a", "b")), encoding="utf-8")
    lines = []
    run_study(load_study(str(other)), str(tmp_path / "other"), log=lines.append)
    assert not any("reusing store" in line for line in lines), lines
    assert not os.path.islink(tmp_path / "other" / "stores" / "a.zarr")
    assert tree_hash(stores) == before


def test_a_reuse_folder_that_does_not_exist_is_one_line(zoo, corpus_file, tmp_path, cli):
    path = tmp_path / "s.toml"
    extra = '[extraction]\nreuse = ["no-such-folder"]\n'
    path.write_text(study_text(zoo, corpus_file, extra, models=("a", "b")), encoding="utf-8")
    code, _, err = cli("study", path, "-o", tmp_path / "out", "--dry-run")
    line = one_line_error(code, err)
    assert line == (
        f"align: error: study file {path}: [extraction] reuse folder no-such-folder does not "
        "exist: give a folder of stores (e.g. demo-output/stores)"
    )
    assert not (tmp_path / "out").exists()


pytestmark = pytest.mark.slow
