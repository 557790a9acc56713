"""What a wrong model name says: a folder without tokenizer files is named with the files
looked for (not "corpus has no text"); a name that is no folder here and looks like a hub id
fails at once in one line when offline mode is set or the hub cannot be reached, naming the
path, instead of half a minute of hub retries."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import free_port
from tests.helpers.assertions import one_line_error

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
)


@pytest.fixture(params=["nothing", "tokenizer_config.json"])
def no_tokenizer(zoo, tmp_path, request):
    """A zoo model folder with its weights and config but no tokenizer files, or only a
    tokenizer_config.json (which holds no vocabulary)."""
    folder = tmp_path / "model-without-tokenizer"
    shutil.copytree(zoo("qwen2"), folder)
    for name in TOKENIZER_FILES:
        if (folder / name).exists() and name != request.param:
            os.remove(folder / name)
    assert (folder / "config.json").exists() and (folder / "model.safetensors").exists()
    return folder


@pytest.mark.parametrize("command", ["extract", "skip"])
def test_model_folder_without_tokenizer_is_named(cli, no_tokenizer, corpus_file, tmp_path, command):
    out = tmp_path / "out.zarr"
    code, _, err = cli(command, no_tokenizer, corpus_file, "-o", out)
    line = one_line_error(
        code, err, str(no_tokenizer), "no tokenizer files", "tokenizer.json", "tokenizer.model"
    )
    assert "corpus" not in line
    assert not out.exists()


def test_typo_path_in_offline_mode_fails_in_one_line(cli, corpus_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "models").mkdir()
    code, _, err = cli("extract", "mdoels/tiny", corpus_file, "-o", "out.zarr")
    one_line_error(
        code,
        err,
        "'mdoels/tiny'",
        "no folder",
        "offline mode is set",
        "HF_HUB_OFFLINE=1",
        "check the path",
    )
    assert not (tmp_path / "out.zarr").exists()


def test_typo_path_with_the_hub_unreachable_fails_in_one_line(
    cli, corpus_file, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(var, "0")
    endpoint = (
        f"http://127.0.0.1:{free_port()}"  # a port nobody listens on: connection refused at once
    )
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    code, _, err = cli("skip", "mdoels/tiny", corpus_file, "-o", "out.zarr")
    one_line_error(
        code, err, "'mdoels/tiny'", "no folder", "could not be reached", endpoint, "check the path"
    )


def test_missing_path_that_is_no_hub_id(cli, corpus_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("extract", "./models/tiny", corpus_file, "-o", "out.zarr")
    one_line_error(code, err, "'./models/tiny'", "does not exist", "check the path")
    code, _, err = cli(
        "extract", corpus_file, corpus_file, "-o", "out.zarr"
    )  # a file where a folder belongs
    one_line_error(code, err, corpus_file, "is a file, not a folder")


def test_folder_with_only_a_slow_tokenizer_still_loads(zoo, tmp_path):
    """vocab.json + merges.txt and no tokenizer.json: transformers converts them (a fast
    tokenizer with offsets); the vocabulary is the file's."""
    import json

    from align.models import ModelSpec, load_tokenizer

    folder = tmp_path / "slow"
    shutil.copytree(zoo("qwen2"), folder)
    spec = json.loads((folder / "tokenizer.json").read_text())
    (folder / "vocab.json").write_text(json.dumps(spec["model"]["vocab"]))
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    os.remove(folder / "tokenizer.json")
    vocab = spec["model"]["vocab"]
    word = max(
        (w for w in vocab if w.isalpha() and w.isascii()), key=len
    )  # a whole merged word of the file
    tok = load_tokenizer(ModelSpec(str(folder)))
    enc = tok(word, return_offsets_mapping=True)
    assert (
        tok.is_fast
        and enc["input_ids"] == [vocab[word]]
        and [tuple(o) for o in enc["offset_mapping"]] == [(0, len(word))]
    )
