"""The conformance suite: every decoder family align reads, on a tiny config built from
transformers' own config class with the family's real options on (parallel residuals,
soft-capping, multipliers, mixtures of experts, GQA, projections), saved with save_pretrained
and read through align's real loading path. Each test compares align with transformers' own
forward or with the plain references of fixtures_analyses, whose knowledge of where each
family keeps its parts is tests/helpers/references.py, written independently of align.

Per family: stored h_b against `output_hidden_states` (b < L) and the head of h_L against the
model's logits; h_{l+1} = h_l + a_l + m_l; the lens at L; contributions and skip effects
against the references; a fit between two depths of the family, store route and --live.
`FAMILY_RESULTS` collects what each check measured, for the docs' family table."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from align.corpus import CorpusSpec
from align.extraction import ExtractOptions
from align.fitting import Execution
from align.models import ModelSpec
from tests.helpers.fixtures_analyses import hf_prompts, ref_contributions, ref_skipping
from tests.helpers.references import ARCH, head
from tests.helpers.zoo import CORPUS_TEXT, FAMILY_TYPES, reference_tokenizer, tiny

# Tolerances, float32 throughout: the stored residuals are the forward's own tensors (batch of
# one: bit for bit); identities and heads to a few float32 roundings.
RESID_TOL = 0.0
IDENTITY_TOL = 1e-5  # relative to the largest |h|
LOGITS_TOL = 1e-5  # max abs difference of the head of h_L and the model's logits
RESULTS = os.environ.get(
    "ALIGN_FAMILY_RESULTS"
)  # where to write the measured numbers (bench/families.py)
FAMILY_RESULTS: dict[str, dict] = {}


def _record(model_type, **values):
    FAMILY_RESULTS.setdefault(model_type, {}).update(values)
    if RESULTS:
        with open(RESULTS, "w") as f:
            json.dump(FAMILY_RESULTS, f, indent=1, sort_keys=True)


@pytest.fixture(scope="session")
def family_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    built = {}

    def get(model_type: str, n_layers: int = 3) -> str:
        key = (model_type, n_layers)
        if key not in built:
            built[key] = tiny(model_type, str(root / f"{model_type}-{n_layers}"), n_layers=n_layers)
        return built[key]

    return get


@pytest.fixture(scope="session")
def family_corpus(tmp_path_factory):
    """Six short documents of the shared corpus text (at most ~45 words each)."""
    docs = [d for d in CORPUS_TEXT.split("\n\n") if len(d.split()) <= 45][:6]
    p = tmp_path_factory.mktemp("family-corpus") / "docs.txt"
    p.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return str(p)


def _hf(path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    model.requires_grad_(False)
    return model


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


@pytest.mark.parametrize("model_type", FAMILY_TYPES)
def test_extraction_sublayers_and_head(model_type, family_model, family_corpus, tmp_path):
    """Stored h_b equal transformers' hidden states (b < L) bit for bit; the model's own final
    norm (and projection) of the stored h_L is its last hidden state and its head the logits;
    what attention and the MLP add sums to each block's change; the store names the family."""
    import align
    from align.store import open_activations

    path = family_model(model_type)
    out = str(tmp_path / "s.zarr")
    align.extract(
        path,
        CorpusSpec(family_corpus, max_length=64),
        out,
        ExtractOptions(sublayers=True, batch_size=1),
        log=lambda m: None,
    )
    s = open_activations(out).require_complete()
    model = _hf(path)
    L = model.config.num_hidden_layers
    seq = s.tokens("seq")
    worst = {"resid": 0.0, "identity": 0.0, "logits": 0.0, "last_hidden": 0.0}
    for k in range(int(seq.max()) + 1):
        idx = np.flatnonzero(seq == k)
        a, b = idx[0], idx[-1] + 1
        ids = torch.tensor(s.tokens("token_id")[idx])[None]
        with torch.no_grad():
            ref = model(input_ids=ids, output_hidden_states=True, use_cache=False)
        got = [s.resid(bd, a, b) for bd in range(L + 1)]
        for bd in range(L):
            worst["resid"] = max(worst["resid"], _rel(got[bd], ref.hidden_states[bd][0]))
        with torch.no_grad():
            h_L = torch.from_numpy(got[L])[None]
            worst["logits"] = max(
                worst["logits"], float((head(model, h_L) - ref.logits).abs().max())
            )
            arch = ARCH[model_type]
            pre = h_L
            for p in (arch["norm"], *arch["after"]):
                m = model.get_submodule(p) if p else None
                pre = m(pre) if m is not None else pre
            worst["last_hidden"] = max(worst["last_hidden"], _rel(pre[0], ref.hidden_states[L][0]))
        for l in range(L):
            worst["identity"] = max(
                worst["identity"], _rel(got[l] + s.attn(l, a, b) + s.mlp(l, a, b), got[l + 1])
            )
    _record(model_type, **worst)
    assert worst["resid"] <= RESID_TOL, worst
    assert worst["last_hidden"] <= IDENTITY_TOL and worst["logits"] <= LOGITS_TOL, worst
    assert worst["identity"] <= IDENTITY_TOL, worst
    assert s.provenance["family"]["found"] == "table" and s.provenance["model_type"] == model_type


@pytest.mark.parametrize("model_type", FAMILY_TYPES)
def test_bfloat16_extraction(model_type, family_model, family_corpus, tmp_path):
    """In bfloat16 (what a GPU computes in), stored h_b equal transformers' bfloat16 hidden
    states (b < L) to the dtype's tolerance: 2 ulp of bf16 (2·2⁻⁸) of the largest |h|."""
    from transformers import AutoModelForCausalLM

    import align
    from align.store import open_activations

    path = family_model(model_type)
    out = str(tmp_path / "bf16.zarr")
    align.extract(
        ModelSpec(path, dtype="bfloat16"),
        CorpusSpec(family_corpus, max_length=64, max_docs=2),
        out,
        ExtractOptions(batch_size=1),
        log=lambda m: None,
    )
    s = open_activations(out).require_complete()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).eval()
    seq = s.tokens("seq")
    worst = 0.0
    for k in range(int(seq.max()) + 1):
        idx = np.flatnonzero(seq == k)
        a, b = idx[0], idx[-1] + 1
        with torch.no_grad():
            hs = model(
                input_ids=torch.tensor(s.tokens("token_id")[idx])[None], output_hidden_states=True
            ).hidden_states
        for bd in range(model.config.num_hidden_layers):
            worst = max(worst, _rel(s.resid(bd, a, b), hs[bd][0].float()))
    _record(model_type, bf16_resid=worst)
    assert worst <= 2 * 2.0**-8, worst


def _prompts(path):
    tok = reference_tokenizer(path)
    ps = [np.array(p) for p in hf_prompts(tok, CORPUS_TEXT, 12, 30)]
    return [p for p in ps if len(p) >= 13][:3]


@pytest.mark.parametrize("model_type", FAMILY_TYPES)
def test_lens_contributions_and_skip(model_type, family_model):
    """align's lens at boundary L reproduces the logits (KL 0, overlap 1); contributions and the
    skip effects R and O (both settings, every part) equal the plain references."""
    from align import models
    from align.analyses import contributions_from_model, logit_lens, skipping

    path = family_model(model_type)
    model, _ = models.load_model(models.ModelSpec(path))
    prompts = _prompts(path)
    lens = logit_lens(model, [prompts])
    L = model.config.num_hidden_layers
    assert np.abs(lens["kl"][:, L]).max() <= 1e-6 and (lens["overlap"][:, L] == 1).all(), lens[
        "kl"
    ][:, L]

    hf = _hf(path)
    got = contributions_from_model(model, [prompts])
    rel, cos, rc = ref_contributions(hf, model_type, [list(p) for p in prompts])
    np.testing.assert_allclose(got["rel_norm"], rel, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["cos"], cos, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["resid_cos"], rc, rtol=1e-4, atol=1e-5)
    contrib = max(float(np.abs(got["rel_norm"] - rel).max()), float(np.abs(got["cos"] - cos).max()))
    res = skipping(model, prompts, batch_size=2, seed=3)
    skip = 0.0
    for si, setting in enumerate(("current", "future")):
        Rp, Op = ref_skipping(hf, model_type, [list(p) for p in prompts], setting, seed=3)
        np.testing.assert_allclose(res["per_prompt"][setting][0], Rp, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(res["per_prompt"][setting][1], Op, rtol=1e-4, atol=1e-5)
        skip = max(skip, float(np.abs(res["per_prompt"][setting][0] - Rp).max()))
    _record(
        model_type, lens_kl_at_L=float(np.abs(lens["kl"][:, L]).max()), contrib=contrib, skip_R=skip
    )


@pytest.mark.parametrize("model_type", FAMILY_TYPES)
def test_fit_between_two_depths_store_and_live(model_type, family_model, family_corpus, tmp_path):
    """A 2-layer and a 3-layer model of the family: the store route and --live give the same
    relative errors (1e-10), every cell finite."""
    import align
    from align.fitting.live_route.pipeline import LiveJob, fit_live
    from align.models import ModelSpec

    shallow, deep = family_model(model_type, 2), family_model(model_type, 3)
    stores = []
    for p, name in ((shallow, "a"), (deep, "b")):
        out = str(tmp_path / f"{name}.zarr")
        align.extract(
            p,
            CorpusSpec(family_corpus, max_length=64),
            out,
            ExtractOptions(batch_size=4),
            log=lambda m: None,
        )
        stores.append(out)
    # A fixed, moderate α grid: on ~150 tokens of 32-wide models the auto grid reaches α 1e-12,
    # where the solve's conditioning turns float64 rounding of the two routes' sums into 1e-5.
    opts = align.FitSpec(bootstrap=0, alphas=(1e-3, 1e-2, 1e-1, 1.0), extend_alphas=False)
    # Both results as computed (output None): writing one is the same code for every family
    # and is tested with the fit itself (tests/integration/test_fit.py).
    a = align.fit(stores[0], stores[1], None, opts, log=lambda m: None).dataset
    from align import corpus

    job = LiveJob(
        ModelSpec(shallow), ModelSpec(deep), corpus.CorpusSpec(family_corpus, max_length=64), 4
    )
    b = fit_live(job, None, opts, Execution(device="cpu"), log=lambda m: None).dataset
    a, b = a["relative_error"].values, b["relative_error"].values
    assert a.shape == (3, 4) and np.isfinite(a).all()
    diff = float(np.abs(a - b).max())
    _record(model_type, fit_store_vs_live=diff)
    assert diff <= 1e-10, diff


# Top-k expert routing makes the answer's probability piecewise along the interpolation path:
# integrated gradients miss the jumps, so completeness is not an identity there (recorded only).
ROUTED = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v3", "gpt_oss", "granitemoe")


@pytest.mark.parametrize("model_type", FAMILY_TYPES)
def test_interventions_and_their_identities(model_type, family_model):
    """Erasing each cell with its own value changes nothing (E = 0 everywhere); integrated
    gradients of every part (layer, attn, mlp) are complete, Σ_t A → f(x) − f(baseline) as the
    midpoint rule refines (align's variant, zero baseline): within 10% at 64 steps and closer
    than at 16, except where expert routing makes the path piecewise (ROUTED)."""
    from align import corpus, models
    from align.analyses import erasure
    from align.analyses.answers import load_answer_prompts
    from align.analyses.igrad import integrated_gradients
    from align.analyses.igrad_options import PROTOCOLS

    path = family_model(model_type)
    spec = models.ModelSpec(path)
    model, _ = models.load_model(spec)
    prompts = load_answer_prompts(
        corpus.CorpusSpec(fmt="addition:2", max_docs=2), models.load_tokenizer(spec)
    )
    E = erasure(model, prompts, None)["E"]
    assert np.nanmax(np.abs(E)) == 0.0
    gaps = []
    for steps in (16, 64):
        res = integrated_gradients(model, prompts[:1], variant=PROTOCOLS["align"], steps=steps)
        assert np.isfinite(res["A"][~np.isnan(res["A"])]).all()
        change = np.abs(res["f"][:, None, None] - res["f_baseline"])
        gaps.append(float((np.abs(res["gap"]) / np.maximum(change, 1e-3)).max()))
    _record(model_type, igrad_completeness=gaps[1])
    if model_type not in ROUTED:
        assert gaps[1] <= 0.1 and gaps[1] < gaps[0], gaps
