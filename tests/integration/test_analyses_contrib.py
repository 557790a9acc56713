"""Contributions (docs/methods.md) against a plain per-token reference, batched vs one at a
time, from a store vs from the live model, and the store-without-sublayers error."""

import numpy as np
import pytest

from tests.helpers.assertions import one_line_error
from tests.helpers.fixtures_analyses import hf_prompts, ref_contributions
from tests.helpers.zoo import CORPUS_TEXT

FAMILIES = ("qwen2", "llama", "qwen3", "olmo2")


def test_hand_worked_case():
    """h=(3,4), a=(0,5), m=(−3,0): every ratio and cosine worked by hand."""
    from align.analyses import contributions

    h0 = np.array([[3.0, 4.0]])
    a = np.array([[0.0, 5.0]])
    m = np.array([[-3.0, 0.0]])
    h1 = h0 + a + m  # (0, 9)
    res = contributions(np.stack([h0, h1]), a[None], m[None])
    # attn: |a|/|h| = 5/5, cos(a,h) = 20/25; mlp: |m|/|h+a| = 3/sqrt(9+81), cos = -9/(3*sqrt(90));
    # layer: |h1-h0| = |(-3,5)| = sqrt(34), /5; cos = (−9+20)/(5 sqrt 34); resid cos = 36/(5*9)
    want_rel = [1.0, 3 / np.sqrt(90), np.sqrt(34) / 5]
    want_cos = [0.8, -9 / (3 * np.sqrt(90)), 11 / (5 * np.sqrt(34))]
    np.testing.assert_allclose(res["rel_norm"][:, 0, 0], want_rel, rtol=1e-6)
    np.testing.assert_allclose(res["cos"][:, 0, 1], want_cos, rtol=1e-6)  # one token: max = mean
    np.testing.assert_allclose(res["resid_cos"][0], [0.8, 0.8], rtol=1e-6)
    assert res["n_tokens"] == 1


def test_zero_residual_is_guarded():
    """A zero residual gives finite ratios (ε = 1e-6 in the denominator), not NaN."""
    from align.analyses import contributions

    z = np.zeros((1, 1, 4))
    res = contributions(np.concatenate([z, z + 1]), z + 0.5, z + 0.5)
    assert np.isfinite(res["rel_norm"]).all() and np.isfinite(res["cos"]).all()
    np.testing.assert_allclose(
        res["rel_norm"][0, 0, 0], 1.0 / 1e-6, rtol=1e-6
    )  # |a|=1, |h|=0 → 1/ε


@pytest.mark.parametrize("family", FAMILIES)
def test_model_matches_reference(family, hf_models):
    """Batched (3 per forward, right padding) vs the float64 per-token reference: rtol 1e-4."""
    from align.analyses import contributions_from_model

    model, tok = hf_models(family)
    prompts = [np.array(p) for p in hf_prompts(tok, CORPUS_TEXT, 5, 40)]
    assert len({len(p) for p in prompts}) > 1  # padding really happens
    rel, cos, rc = ref_contributions(model, family, [list(p) for p in prompts])
    res = contributions_from_model(model, [prompts[:3], prompts[3:]])
    np.testing.assert_allclose(res["rel_norm"], rel, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res["cos"], cos, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res["resid_cos"], rc, rtol=1e-4, atol=1e-5)
    assert res["n_tokens"] == sum(len(p) for p in prompts)


def test_batched_equals_one_at_a_time(hf_models):
    from align.analyses import contributions_from_model
    from tests.helpers.fixtures_analyses import hf_prompts

    model, tok = hf_models("llama")
    prompts = [np.array(p) for p in hf_prompts(tok, CORPUS_TEXT, 6, 60)]
    one = contributions_from_model(model, [[p] for p in prompts])
    many = contributions_from_model(model, [prompts])
    for k in ("rel_norm", "cos", "resid_cos"):
        np.testing.assert_allclose(many[k], one[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", ("qwen2", "olmo2"))
def test_store_equals_live_model(family, extracted, hf_models, corpus_file):
    """`contributions_from_store` on a float32 store with sublayers = the live model over the
    same sequences (rtol 1e-5: only the batch shape differs)."""
    from align import corpus, models
    from align.analyses import contributions_from_model, contributions_from_store, load_prompts
    from align.store import open_activations

    path = extracted(family, sublayers=True)
    store = open_activations(path)
    model, _ = hf_models(family)
    spec = models.ModelSpec(store.provenance["model"])
    prompts = load_prompts(corpus.CorpusSpec(corpus_file), models.load_tokenizer(spec))
    live = contributions_from_model(model, [prompts[i : i + 5] for i in range(0, len(prompts), 5)])
    stored = contributions_from_store(store, chunk_tokens=300)
    assert stored["n_tokens"] == live["n_tokens"] == store.n_tokens
    for k in ("rel_norm", "cos", "resid_cos"):
        np.testing.assert_allclose(stored[k], live[k], rtol=1e-5, atol=1e-6)


def test_cli_store_round_trip_and_schema(cli, extracted, tmp_path):
    """`align contrib --store` writes the "contributions" schema with provenance."""
    from align.store import open_result

    path = extracted("qwen2", sublayers=True)
    out = tmp_path / "c.zarr"
    code, _, err = cli("contrib", "--store", path, "-o", out)
    assert code == 0, err
    ds = open_result(out, "contributions")
    assert ds["rel_norm"].dims == ("part", "layer", "agg") and ds["resid_cos"].dims == (
        "layer",
        "agg",
    )
    assert list(ds["part"].values) == ["attn", "mlp", "layer"] and list(ds["agg"].values) == [
        "mean",
        "max",
    ]
    assert ds.attrs["n_layers"] == 2 and ds.attrs["n_tokens"] > 0
    for key in ("model", "config_hash", "tokenizer_hash", "corpus", "align_version", "options"):
        assert key in ds.attrs


def test_cli_store_without_sublayers_is_refused(cli, extracted, tmp_path, capsys):
    path = extracted("qwen2")
    capsys.readouterr()  # drop the extraction's progress lines
    code, out, err = cli("contrib", "--store", path, "-o", tmp_path / "c.zarr")
    assert code == 2
    one_line_error(code, err, path, "no sublayer outputs", "`align extract --sublayers`")
    assert not (tmp_path / "c.zarr").exists()


def test_cli_unknown_architecture(cli, zoo, corpus_file, tmp_path):
    code, _, err = cli("contrib", zoo("bert"), corpus_file, "-o", tmp_path / "c.zarr")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "'bert'" in lines[0] and "not in align's family table" in lines[0]
