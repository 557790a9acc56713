"""Bad input to `align extract`: one line on stderr naming the bad value, a non-zero exit,
and no store that looks complete."""

from __future__ import annotations

import os

import pytest

from align.store import exists, read_attrs
from tests.helpers.assertions import one_line_error


def _not_complete(out):
    if exists(str(out)):
        assert not read_attrs(str(out))["progress"]["complete"]


@pytest.fixture
def bad_corpora(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("first line\ncaf\xe9 au lait\n".encode("latin-1"))
    folder_named_txt = tmp_path / "folder.txt"
    folder_named_txt.mkdir()
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"text": "fine"}\n{"text": oops}\n')
    no_field = tmp_path / "nofield.jsonl"
    no_field.write_text('{"body": "x"}\n')
    return dict(
        empty=empty, latin1=latin1, folder=folder_named_txt, bad_json=bad_json, no_field=no_field
    )


def test_missing_model_folder(cli, corpus_file, tmp_path):
    out = tmp_path / "o.zarr"
    code, _, err = cli("extract", tmp_path / "no-such-model", corpus_file, "-o", out)
    one_line_error(code, err, "no-such-model", "does not exist")
    assert not out.exists()


def test_config_that_is_not_a_causal_lm(cli, zoo, corpus_file, tmp_path):
    out = tmp_path / "o.zarr"
    code, _, err = cli("extract", zoo("bert"), corpus_file, "-o", out)
    one_line_error(code, err, "'bert'", "qwen2", "llama", "qwen3", "olmo2")
    assert not out.exists()


@pytest.mark.parametrize(
    "which,needles",
    [
        ("empty", ["empty.txt", "no text"]),
        ("latin1", ["latin1.txt", "not UTF-8", "0xe9", "line 2"]),
        ("folder", ["folder.txt", "folder"]),
        ("bad_json", ["bad.jsonl line 2", "JSON"]),
        ("no_field", ["nofield.jsonl line 1", "'text'", "--text-field"]),
    ],
)
def test_bad_corpus(cli, zoo, bad_corpora, tmp_path, which, needles):
    out = tmp_path / "o.zarr"
    code, _, err = cli("extract", zoo("qwen2"), bad_corpora[which], "-o", out)
    one_line_error(code, err, *needles)
    _not_complete(out)


def test_missing_corpus(cli, zoo, tmp_path):
    code, _, err = cli("extract", zoo("qwen2"), tmp_path / "nope.txt", "-o", tmp_path / "o.zarr")
    one_line_error(code, err, "nope.txt", "does not exist")


@pytest.mark.parametrize(
    "spec,needle",
    [
        ("0,99", "99"),
        ("a", "'a'"),
        ("::0", "step"),
        ("1:2:3:4", "'1:2:3:4'"),
        ("0,,1", "empty"),
        ("5:9", "selects no"),
    ],
)
def test_bad_layers(cli, zoo, corpus_file, tmp_path, spec, needle):
    out = tmp_path / "o.zarr"
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out, "--boundaries", spec)
    one_line_error(code, err, "--boundaries", needle)
    assert not out.exists()


def test_bad_option_values_are_one_line(cli, zoo, corpus_file, tmp_path):
    code, _, err = cli(
        "extract", zoo("qwen2"), corpus_file, "-o", tmp_path / "o", "--batch-size", "zero"
    )
    one_line_error(code, err, "zero", "--batch-size")
    code, _, err = cli(
        "extract", zoo("qwen2"), corpus_file, "-o", tmp_path / "o", "--store-dtype", "int8"
    )
    one_line_error(code, err, "int8")
    code, _, err = cli("extract", zoo("qwen2"), corpus_file)
    one_line_error(code, err, "--output")


def test_existing_folder_that_is_not_a_store(cli, zoo, corpus_file, tmp_path):
    out = tmp_path / "precious"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out)
    one_line_error(code, err, "precious", "not an align store")
    assert sorted(os.listdir(out)) == ["notes.txt"]


def test_existing_store_of_another_schema(cli, zoo, corpus_file, tmp_path):
    import xarray as xr

    from align.store import write_result

    out = tmp_path / "result.zarr"
    write_result(str(out), xr.Dataset({"x": ("a", [1.0, 2.0])}), "lens")
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out)
    one_line_error(code, err, "result.zarr", "'lens'")


def test_not_enough_disk(cli, zoo, corpus_file, tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGN_FREE_DISK_BYTES", "100000")
    out = tmp_path / "o.zarr"
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out, "--sublayers")
    line = one_line_error(code, err, "o.zarr", "needs", "free")
    assert "97.7 KiB" in line  # 100000 bytes, as the disk reported it
    assert not out.exists()
