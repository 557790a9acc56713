"""A store made with one tokenizer is never continued, nor reported complete, with another:
the tokenizer's behaviour is part of the store's identity, as the weights are."""

from __future__ import annotations

import json
import os
import shutil

import zarr

from tests.helpers.assertions import one_line_error


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


def test_store_made_meanwhile_with_other_inputs_is_refused_under_the_lock(extracted, tmp_path):
    """The store's one call for writing (align.store.writing_activations) compares identities
    again once it holds the lock: a store that appeared, made from other inputs, between a
    run's first look and its lock is refused (one line naming the key and both values), left
    as it was, and the lock released."""
    import pytest

    from align.errors import StoreMismatch
    from align.store import open_activations, writing_activations

    out = str(tmp_path / "s.zarr")
    shutil.copytree(extracted("qwen2", max_docs=2), out)
    s = open_activations(out)
    before = {n: os.path.getmtime(os.path.join(out, n)) for n in os.listdir(out)}
    prov = {**s.provenance, "identity": {**s.provenance["identity"], "max_length": 7}}
    with pytest.raises(StoreMismatch) as e:
        with writing_activations(out, s.layout, prov, iter(()), defining=("model", "max_length")):
            raise AssertionError("the block must not run")
    msg = str(e.value)
    assert "\n" not in msg and out in msg and "max_length: store has 512, now 7" in msg
    assert {n: os.path.getmtime(os.path.join(out, n)) for n in os.listdir(out)} == before
    assert not os.path.exists(os.path.join(out, "align.lock"))
