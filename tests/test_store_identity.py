"""A store made with one tokenizer is never continued, nor reported complete, with another:
the tokenizer's behaviour is part of the store's identity, as the weights are."""

from __future__ import annotations

import json
import os
import shutil

import zarr

from assertions import one_line_error


def test_other_tokenizer_behaviour_is_refused_naming_it(zoo, corpus_file, tmp_path, cli):
    model = str(tmp_path / "model")
    shutil.copytree(zoo("qwen2"), model)
    out = tmp_path / "s.zarr"
    code, _, err = cli("extract", model, corpus_file, "-o", out, "--max-docs", "2")
    assert code == 0, err
    before = {n: os.path.getmtime(os.path.join(out, n)) for n in os.listdir(out)}
    path = os.path.join(model, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    tok["normalizer"] = {"type": "Lowercase"}  # the same files otherwise: other ids for capitals
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tok, f)
    code, _, err = cli("extract", model, corpus_file, "-o", out, "--max-docs", "2")
    one_line_error(code, err, str(out), "tokenizer: store has")
    assert {n: os.path.getmtime(os.path.join(out, n)) for n in os.listdir(out)} == before
    assert zarr.open_group(str(out), mode="r").attrs["progress"]["complete"]
