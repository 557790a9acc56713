"""Logit lens (docs/methods.md) against a plain reference; the lens at boundary L is the
model's output; the store + checkpoint-head path equals the live model (tied and untied)."""

import numpy as np
import pytest
import torch

from tests.helpers.fixtures_analyses import hf_prompts, ref_lens
from tests.helpers.zoo import CORPUS_TEXT

FAMILIES = ("qwen2", "llama", "qwen3", "olmo2")


@pytest.mark.parametrize("family", FAMILIES)
def test_matches_reference(family, hf_models):
    """Token- and prompt-weighted KL and top-5 overlap at boundaries 0..L vs float64 per-token
    loops; KL rtol 1e-4 (float32 log-softmax), overlap exact up to top-5 ties (atol 1e-9)."""
    from align.analyses import logit_lens

    model, tok = hf_models(family)
    prompts = [np.array(p) for p in hf_prompts(tok, CORPUS_TEXT, 5, 40)]
    prompts[1] = prompts[1][:9]  # unequal lengths: the two weightings differ
    kl, ov = ref_lens(model, family, [list(p) for p in prompts])
    res = logit_lens(model, [prompts[:2], prompts[2:]])
    assert res["n_tokens"] == sum(map(len, prompts)) and res["n_prompts"] == 5
    np.testing.assert_allclose(res["kl"], kl, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res["overlap"], ov, atol=1e-9)
    assert not np.allclose(res["kl"][0], res["kl"][1])


def test_boundary_L_is_the_model_output(hf_models):
    from align.analyses import logit_lens

    model, tok = hf_models("llama", num_hidden_layers=3)
    prompts = [np.array(p) for p in hf_prompts(tok, CORPUS_TEXT, 4, 50)]
    res = logit_lens(model, [prompts])
    assert np.all(np.abs(res["kl"][:, 3]) < 1e-6)
    assert np.all(res["overlap"][:, 3] == 1.0)
    assert np.all(res["kl"][:, 0] > 0.1)  # the embedding is far from the output


def test_batched_equals_one_at_a_time(hf_models):
    from align.analyses import logit_lens

    model, tok = hf_models("qwen3")
    prompts = [np.array(p) for p in hf_prompts(tok, CORPUS_TEXT, 6, 60)]
    one, many = logit_lens(model, [[p] for p in prompts]), logit_lens(model, [prompts])
    np.testing.assert_allclose(many["kl"], one["kl"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(many["overlap"], one["overlap"], atol=1e-9)


@pytest.mark.parametrize("family", ("qwen2", "llama"))  # tied and untied embeddings
def test_store_with_checkpoint_head_equals_live(family, extracted, hf_models, corpus_file):
    from align import corpus, models
    from align.analyses import load_prompts, logit_lens, logit_lens_from_store, read_head
    from align.store import open_activations

    model, _ = hf_models(family)
    assert model.config.tie_word_embeddings == (family == "qwen2")
    store = open_activations(extracted(family))
    config, head = read_head(store.provenance["model"])
    # the head holds exactly the model's tensors (the embedding when tied)
    assert torch.equal(head.norm.weight, model.model.norm.weight)
    assert torch.equal(head.unembed.weight, model.lm_head.weight)
    prompts = load_prompts(
        corpus.CorpusSpec(corpus_file),
        models.load_tokenizer(models.ModelSpec(store.provenance["model"])),
    )
    live = logit_lens(model, [prompts[i : i + 6] for i in range(0, len(prompts), 6)])
    stored = logit_lens_from_store(store, head, tokens_per_step=500)
    assert stored["n_tokens"] == live["n_tokens"] and stored["n_prompts"] == live[
        "n_prompts"
    ] == len(prompts)
    np.testing.assert_allclose(stored["kl"], live["kl"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        stored["overlap"], live["overlap"], atol=1e-3
    )  # a rare top-5 tie may flip


def test_read_head_reads_no_block(zoo, monkeypatch):
    """Only the final norm and the unembedding (or embedding) tensors are read."""
    import safetensors

    from align.analyses import read_head

    read = []
    real = safetensors.safe_open

    class Spy:
        def __init__(self, *a, **k):
            self.f = real(*a, **k)

        def __enter__(self):
            self.f.__enter__()
            return self

        def __exit__(self, *a):
            return self.f.__exit__(*a)

        def keys(self):
            return self.f.keys()

        def get_tensor(self, k):
            read.append(k)
            return self.f.get_tensor(k)

    monkeypatch.setattr(safetensors, "safe_open", Spy)
    read_head(zoo("qwen2"))
    assert sorted(read) == ["model.embed_tokens.weight", "model.norm.weight"]
    read.clear()
    read_head(zoo("llama"))
    assert sorted(read) == ["lm_head.weight", "model.norm.weight"]


def test_cli_lens_store_and_model(cli, extracted, zoo, corpus_file, tmp_path, capsys):
    from align.store import open_result

    path = extracted("llama")
    capsys.readouterr()
    code, _, err = cli("lens", "--store", path, "-o", tmp_path / "a.zarr")
    assert code == 0, err
    code, _, err = cli(
        "lens", zoo("llama"), corpus_file, "-o", tmp_path / "b.zarr", "--batch-size", "5"
    )
    assert code == 0, err
    a, b = open_result(tmp_path / "a.zarr", "lens"), open_result(tmp_path / "b.zarr", "lens")
    assert a["kl"].dims == ("weighting", "boundary") and list(a["weighting"].values) == [
        "token",
        "prompt",
    ]
    assert list(a["boundary"].values) == [0, 1, 2] and a.attrs["n_layers"] == 2
    assert (
        a.attrs["n_tokens"] == b.attrs["n_tokens"] and a.attrs["n_prompts"] == b.attrs["n_prompts"]
    )
    np.testing.assert_allclose(a["kl"].values, b["kl"].values, rtol=1e-5, atol=1e-6)
