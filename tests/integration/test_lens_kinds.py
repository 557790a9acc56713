"""The linear, tuned and cross-model lenses (docs/methods.md) against references written from
their definitions (tests/helpers/lens_reference.py: scikit-learn's Ridge, the model's own
transformers modules, the tuned lens of the paper and, where it is installed, the tuned-lens
package's TunedLens)."""

import copy

import numpy as np
import pytest
import torch

from tests.helpers import lens_reference as ref


def _run(output, **kw):
    from align.analyses.analysis_options import LensOptions
    from align.analyses.run import run_lens

    store = kw.pop("store", None)
    spec = kw.pop("spec", None)
    cspec = kw.pop("cspec", None)
    run_lens(
        str(output),
        store=store,
        spec=spec,
        cspec=cspec,
        options=LensOptions(**kw),
        log=lambda m: None,
    )
    from align.store import open_result

    return open_result(str(output), "lens")


def _tokens(store):
    return {k: store.tokens(k) for k in ("token_id", "doc", "seq", "pos")}


@pytest.mark.parametrize("family", ("qwen2", "llama"))  # tied and untied unembeddings
def test_linear_lens_equals_sklearn_ridge_then_the_head(family, extracted, hf_models, tmp_path):
    """Per boundary b: the map to boundary L is scikit-learn's Ridge at the α the fit chose
    (on the fit's training documents; W rtol 1e-6), and the lens's token-weighted KL, top-1
    agreement and cross-entropy on the held-out tokens equal Ridge's prediction read through the
    model's own final norm and unembedding in float64 (rtol 1e-4: align's head runs in float32)."""
    from align.store import open_activations, open_alignment

    path = extracted(family)
    res = _run(
        tmp_path / "lens.zarr", store=path, kind="linear", save_maps=str(tmp_path / "m.zarr")
    )
    maps = open_alignment(str(tmp_path / "m.zarr"))
    s, (model, _) = open_activations(path), hf_models(family)
    model = copy.deepcopy(model)
    t, L = _tokens(s), s.n_layers
    split = maps.attrs["split"]
    train = ref.training_rows(t["doc"], t["pos"], split["fit_docs"] + split["validation_docs"])
    test = ref.scored_rows(t["doc"], t["seq"], t["pos"], split["heldout_docs"])
    final = ref.logits(model, s.resid(L)[test])
    nxt = t["token_id"][test + 1]
    assert res.attrs["kind"] == "linear" and res.attrs["n_tokens"] == len(test)
    for b in range(L):
        alpha = float(maps["alpha"].sel(source_boundary=b, target_boundary=L))
        ridge, lens = ref.ridge_lens(
            model, s.resid(b)[train], s.resid(L)[train], alpha, s.resid(b)[test]
        )
        W = maps["W"].sel(source_boundary=b, target_boundary=L).values
        np.testing.assert_allclose(W, ridge.coef_.T, rtol=1e-6, atol=1e-6 * np.abs(W).max())
        want = ref.scores(lens, final, nxt)
        for m in ("kl", "ce"):
            got = float(res[m].sel(weighting="token", boundary=b))
            np.testing.assert_allclose(got, want[m].mean(), rtol=1e-4)
        assert abs(
            float(res["top1"].sel(weighting="token", boundary=b)) - want["top1"].mean()
        ) <= 1.5 / len(test)
    assert float(res["kl"].sel(weighting="token", boundary=L)) == pytest.approx(0, abs=1e-6)
    low, high = res["kl_low"].values, res["kl_high"].values
    assert np.all(low[:, :L] <= res["kl"].values[:, :L] + 1e-12) and np.all(
        res["kl"].values[:, :L] <= high[:, :L] + 1e-12
    )


def test_through_itself_equals_the_linear_lens(extracted, zoo, tmp_path):
    """A model read through its own head by its self-fit's maps is the linear lens."""
    path = extracted("llama")
    lin = _run(tmp_path / "lin.zarr", store=path, kind="linear", save_maps=str(tmp_path / "m.zarr"))
    thr = _run(tmp_path / "thr.zarr", maps=str(tmp_path / "m.zarr"), through=zoo("llama"))
    again = _run(tmp_path / "again.zarr", kind="linear", maps=str(tmp_path / "m.zarr"))
    assert thr.attrs["through"] == zoo("llama") and thr.attrs["kind"] == "linear"
    for m in ("kl", "overlap", "top1", "ce", "kl_low", "kl_high"):
        np.testing.assert_allclose(thr[m].values, lin[m].values, rtol=1e-12, atol=0)
        np.testing.assert_array_equal(again[m].values, lin[m].values)


def test_linear_lens_from_the_model_equals_the_store(extracted, zoo, corpus_file, tmp_path):
    """From MODEL and CORPUS the residuals are extracted first: the same result as the store."""
    from align.corpus import CorpusSpec
    from align.models import ModelSpec

    a = _run(tmp_path / "a.zarr", store=extracted("qwen2"), kind="linear")
    b = _run(
        tmp_path / "b.zarr",
        spec=ModelSpec(zoo("qwen2")),
        cspec=CorpusSpec(corpus_file),
        kind="linear",
    )
    np.testing.assert_allclose(b["kl"].values, a["kl"].values, rtol=1e-9)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr", "b.zarr"]  # no temporary left


def _translator(d, seed):
    g = torch.Generator().manual_seed(seed)
    return 0.05 * torch.randn(d, d, generator=g), 0.1 * torch.randn(d, generator=g)


def test_tuned_forward_equals_the_paper(extracted, hf_models):
    """head(T(h)) with T(h) = h + A h + c equals the paper's lens written out in float64
    (rtol 1e-5: align's head in float32)."""
    from align.analyses.lens import lens_logits
    from align.analyses.lens_run import store_head
    from align.analyses.lens_tuned import Translator
    from align.store import open_activations

    s = open_activations(extracted("llama"))
    model = copy.deepcopy(hf_models("llama")[0])
    A, c = _translator(s.d_model, 1)
    h = s.resid(1, 0, 50)
    got = lens_logits(
        store_head(s.provenance["model"], None, s), Translator(A, c)(torch.from_numpy(h))
    )
    want = ref.tuned_lens_logits(model, h, A.numpy(), c.numpy())
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_tuned_forward_equals_the_tuned_lens_package(extracted, hf_models):
    """The same translator loaded into the tuned-lens package's TunedLens gives the same logits
    (rtol 1e-5)."""
    tl = pytest.importorskip("tuned_lens", reason="the tuned-lens package is not installed")
    from align.analyses.lens import lens_logits
    from align.analyses.lens_run import store_head
    from align.analyses.lens_tuned import Translator
    from align.store import open_activations

    s = open_activations(extracted("llama"))
    model = copy.deepcopy(hf_models("llama")[0]).float()
    unembed = tl.nn.Unembed(model)
    lens = tl.TunedLens(unembed, tl.nn.TunedLensConfig("zoo-llama", s.d_model, s.n_layers))
    A, c = _translator(s.d_model, 2)
    with torch.no_grad():
        lens.layer_translators[1].weight.copy_(A)
        lens.layer_translators[1].bias.copy_(c)
        h = torch.from_numpy(s.resid(1, 0, 50))
        want = lens(h, idx=1)
    got = lens_logits(store_head(s.provenance["model"], None, s), Translator(A, c)(h))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_tuned_lens_lowers_the_heldout_kl_of_a_trained_model(demo_run, tmp_path):
    """On the demo's trained shallow model, the tuned lens's held-out KL is below the logit
    lens's (the model's head on the raw residual, written out in float64 on the same held-out
    tokens) at every boundary but the last, where both are 0."""
    from transformers import AutoModelForCausalLM

    from align.store import open_activations

    out, _ = demo_run
    store = f"{out}/stores/shallow.zarr"
    res = _run(tmp_path / "t.zarr", store=store, kind="tuned", steps=60, train_tokens=1024)
    s = open_activations(store)
    model = AutoModelForCausalLM.from_pretrained(s.provenance["model"], torch_dtype=torch.float64)
    t, L = _tokens(s), s.n_layers
    test = ref.scored_rows(t["doc"], t["seq"], t["pos"], res.attrs["split"]["heldout_docs"])
    final = ref.logits(model, s.resid(L)[test])
    tuned = res["kl"].sel(weighting="token").values
    for b in range(L):
        logit = ref.scores(ref.logits(model, s.resid(b)[test]), final, t["token_id"][test + 1])
        assert tuned[b] < logit["kl"].mean(), (b, tuned[b], logit["kl"].mean())
    assert tuned[L] == pytest.approx(0, abs=1e-6)
    assert np.all(np.diff(res["train_loss"].values[:L, [0, -1]], axis=1) < 0)


@pytest.mark.slow
def test_the_shallow_model_read_through_the_deep_one(demo_run, tmp_path):
    """The demo pair (one tokenizer): the shallow model's boundaries read through its maps onto
    the deep model's last boundary and the deep model's head agree more with the deep model's
    own predictions at its last boundary than at its first, with intervals around each value."""
    import align
    from align.fitting.fit_options import FitSpec
    from align.store import open_activations

    out, _ = demo_run
    shallow, deep = f"{out}/stores/shallow.zarr", f"{out}/stores/deep.zarr"
    L_B = open_activations(deep).n_layers
    maps = tmp_path / "maps.zarr"
    spec = FitSpec(target_boundaries=str(L_B), save_maps=True, bootstrap=0)
    align.fit(shallow, deep, str(maps), spec, log=lambda m: None)
    model_b = open_activations(deep).provenance["model"]
    res = _run(tmp_path / "t.zarr", maps=str(maps), through=model_b)
    top1 = res["top1"].sel(weighting="token").values
    assert top1[-1] > top1[0], top1
    low, high = (res[f"top1_{e}"].sel(weighting="token").values for e in ("low", "high"))
    assert np.all(low <= top1 + 1e-12) and np.all(top1 <= high + 1e-12) and np.any(high > low)
