"""The logit lens's top-1 agreement and cross-entropy to the next token (docs/methods.md,
Logit lens) against float64 per-token loops over the model's own forward
(tests/helpers/fixtures_analyses.ref_forward): both weightings, a one-token prompt (no next
token: outside the cross-entropy's tokens and prompts); the store path equals the live one;
the prompt bootstrap of the cross-entropy equals numpy's resampling of the same indices."""

import numpy as np
import pytest
import torch

from tests.helpers.fixtures_analyses import hf_prompts, ref_forward
from tests.helpers.references import blocks, head
from tests.helpers.zoo import CORPUS_TEXT


def ref_scores(model, family, prompts):
    """top1, ce: (2 weightings token/prompt, L+1 boundaries) by explicit loops; the
    cross-entropy over the tokens with a next token and the prompts that have one."""
    L = len(blocks(model))
    tok = {"top1": np.zeros(L + 1), "ce": np.zeros(L + 1)}
    per = {"top1": [], "ce": []}
    n = n_ce = 0
    for ids in prompts:
        resid, _, _, probs = ref_forward(model, family, ids)
        p_top = np.argmax(probs, -1)
        t1, ce = np.zeros(L + 1), np.zeros(L + 1)
        for b in range(L + 1):
            with torch.no_grad():
                z = head(model, torch.tensor(resid[b], dtype=torch.float32)).double().numpy()
            z = z - z.max(-1, keepdims=True)
            logq = z - np.log(np.exp(z).sum(-1, keepdims=True))
            t1[b] = float((logq.argmax(-1) == p_top).sum())
            ce[b] = float(sum(-logq[t, ids[t + 1]] for t in range(len(ids) - 1)))
        tok["top1"] += t1
        tok["ce"] += ce
        per["top1"].append(t1 / len(ids))
        if len(ids) > 1:
            per["ce"].append(ce / (len(ids) - 1))
        n += len(ids)
        n_ce += len(ids) - 1
    top1 = np.stack([tok["top1"] / n, np.mean(per["top1"], 0)])
    ce = np.stack([tok["ce"] / n_ce, np.mean(per["ce"], 0)])
    return top1, ce


@pytest.mark.parametrize("family", ("qwen2", "llama"))
def test_top1_and_cross_entropy_match_the_reference(family, hf_models):
    """Top-1 agreement within one token's share of the token average (an argmax tie may flip
    in float32; none does here: the prompt averages agree to 1e-12), cross-entropy rtol 1e-4
    (float32 log-softmax)."""
    from align.analyses import logit_lens

    model, tok = hf_models(family)
    prompts = [np.array(p) for p in hf_prompts(tok, CORPUS_TEXT, 5, 40)]
    prompts[1] = prompts[1][:9]
    prompts[3] = prompts[3][:1]  # one token: no next token
    top1, ce = ref_scores(model, family, [list(p) for p in prompts])
    res = logit_lens(model, [prompts[:2], prompts[2:]])
    np.testing.assert_allclose(res["ce"], ce, rtol=1e-4, atol=1e-6)
    n = sum(map(len, prompts))
    np.testing.assert_allclose(res["top1"][0], top1[0], atol=1.01 / n)
    np.testing.assert_allclose(res["top1"][1], top1[1], atol=1e-12)
    assert np.allclose(res["top1"][:, -1], 1.0)  # boundary L is the output
    pp = res["per_prompt"]
    assert list(pp["ce_count"]) == [len(p) - 1 for p in prompts]


def test_the_store_path_equals_the_live_model(extracted, hf_models, corpus_file):
    from align import corpus, models
    from align.analyses import load_prompts, logit_lens, logit_lens_from_store, read_head
    from align.store import open_activations

    model, _ = hf_models("qwen2")
    store = open_activations(extracted("qwen2"))
    _, h = read_head(store.provenance["model"])
    prompts = load_prompts(
        corpus.CorpusSpec(corpus_file),
        models.load_tokenizer(models.ModelSpec(store.provenance["model"])),
    )
    live = logit_lens(model, [prompts[i : i + 6] for i in range(0, len(prompts), 6)])
    stored = logit_lens_from_store(store, h, tokens_per_step=500)
    np.testing.assert_allclose(stored["ce"], live["ce"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stored["top1"], live["top1"], atol=2e-3)
    np.testing.assert_array_equal(stored["per_prompt"]["ce_count"], live["per_prompt"]["ce_count"])


def test_the_cross_entropys_prompt_bootstrap_is_numpys_resampling():
    """Resample r's prompt-weighted cross-entropy: the mean over its drawn prompts that have a
    next token of sum / count; its token-weighted one Σ sums / Σ counts (numpy, the same
    indices); a prompt without a next token draws nothing into either."""
    from align.analyses.lens import curve_replicates

    rng = np.random.default_rng(3)
    P, B = 7, 4
    counts = rng.integers(1, 20, P)
    ce_count = counts - 1
    ce_count[2] = 0
    per = {
        "kl_sum": rng.random((P, B)) * counts[:, None],
        "token_count": counts,
        "ce_sum": rng.random((P, B)) * ce_count[:, None] * 5,
        "ce_count": ce_count,
    }
    idx = rng.integers(0, P, (50, P))
    got = curve_replicates(per, idx)["ce"]
    for r, draw in enumerate(idx):
        has = [i for i in draw if ce_count[i] > 0]
        want_prompt = np.mean([per["ce_sum"][i] / ce_count[i] for i in has], 0)
        want_token = per["ce_sum"][draw].sum(0) / ce_count[draw].sum()
        np.testing.assert_allclose(got[r, 1], want_prompt, rtol=1e-12)
        np.testing.assert_allclose(got[r, 0], want_token, rtol=1e-12)
