"""`align.extract` given a model object in memory (a transformers PreTrainedModel and its
tokenizer) instead of a folder: the residuals equal a direct forward of that object, the store
records the model as in memory with the sha256 of its weights, the same object again resumes
(finds the store complete) and other weights are refused as another store."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest
import torch

from align.corpus import CorpusSpec
from align.models import ModelSpec
from tests.helpers.references import residuals


@pytest.fixture(scope="module")
def loaded(zoo):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = zoo("qwen2")
    return (
        path,
        AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32),
        (AutoTokenizer.from_pretrained(path)),
    )


def test_model_object_is_extracted_and_its_weights_hashed(loaded, corpus_file, tmp_path):
    import align
    from align.errors import StoreMismatch
    from align.store import open_activations

    path, model, tok = loaded
    out, lines = str(tmp_path / "mem.zarr"), []
    align.extract(model, CorpusSpec(corpus_file, max_docs=3), out, tokenizer=tok, log=lines.append)
    s = open_activations(out).require_complete()
    doc, pos, ids = s.tokens("doc"), s.tokens("pos"), s.tokens("token_id")
    for d in range(3):
        idx = np.flatnonzero(doc == d)
        assert (pos[idx] == np.arange(len(idx))).all()
        ref = residuals(model, ids[idx])["resid"]
        got = np.stack([s.resid(b, idx[0], idx[-1] + 1) for b in s.boundaries])
        # the same float32 weights; a padded batch of other shape than the reference's single
        # sequence rounds differently: tests/integration/test_extract.py's tolerance (1e-4)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    prov = s.provenance
    assert prov["model"] == f"in memory: {path}"
    assert prov["identity"]["model"] == f"in memory: {path}"
    # the weights' hash is the sha256 of the safetensors file save_pretrained writes for them
    ref_dir = tmp_path / "saved"
    model.save_pretrained(ref_dir, safe_serialization=True)
    with open(ref_dir / "model.safetensors", "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    assert prov["weights"]["files"]["model.safetensors"]["sha256"] == digest
    # the temporary folder the object was written to is recorded nowhere
    assert "align-model-" not in json.dumps(prov)
    # the same object again: the same store, complete
    lines.clear()
    # as a ModelSpec's name, with the dtype it was run in: the same identity
    held = ModelSpec(model, dtype="float32")
    align.extract(held, CorpusSpec(corpus_file, max_docs=3), out, tokenizer=tok, log=lines.append)
    assert any("already complete" in line for line in lines), lines
    # other weights are another store
    torch.manual_seed(1)
    changed = type(model)(model.config)  # the same architecture, freshly drawn weights
    with pytest.raises(
        StoreMismatch, match=r"different options or inputs \(weights: store has sha256"
    ):
        align.extract(
            changed, CorpusSpec(corpus_file, max_docs=3), out, tokenizer=tok, log=lines.append
        )


def test_model_object_refusals(loaded, corpus_file, tmp_path):
    import align
    from align.errors import InputError

    path, model, tok = loaded
    out = str(tmp_path / "m.zarr")
    with pytest.raises(
        InputError, match=r"^`model` is a model object \(Qwen2ForCausalLM\): pass its `tokenizer`"
    ):
        align.extract(model, corpus_file, out)
    with pytest.raises(InputError, match=r"^`tokenizer` is a str, not a transformers tokenizer"):
        align.extract(model, corpus_file, out, tokenizer=path)
    with pytest.raises(InputError, match=r"^`revision` names how a checkpoint is loaded"):
        align.extract(ModelSpec(model, revision="main"), corpus_file, out, tokenizer=tok)
    with pytest.raises(InputError, match=r"^`tokenizer` goes with a model object in memory"):
        align.extract(path, corpus_file, out, tokenizer=tok)
    assert not os.path.exists(out)
