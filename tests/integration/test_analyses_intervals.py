"""Prompt-bootstrap intervals of the contributions' means and the lens curves: per-token values
from a direct HF forward (float64 loops, tests/helpers/fixtures_analyses.py), grouped by prompt,
resampled with the documented indices numpy.random.default_rng(seed).integers(0, n, size=(B,
n)), each resample's mean recomputed from the raw per-token values; rtol 1e-5 (align's
per-token values are float32). Also: the options reach the result, and a store route's
prompts are its sequences, with the live model's prompt identity."""

from __future__ import annotations

import numpy as np
import torch

from tests.helpers.fixtures_analyses import EPS, hf_prompts, ref_forward
from tests.helpers.zoo import CORPUS_TEXT

B, SEED = 120, 3


def _cos(x, y):
    return float(x @ y) / max(np.linalg.norm(x) * np.linalg.norm(y), EPS)


def _rel(x, y):
    return np.linalg.norm(x) / max(np.linalg.norm(y), EPS)


def ref_contrib_tokens(model, family, ids):
    """rel (3, L, T), cos (3, L, T), resid_cos (L, T) of one prompt."""
    resid, attn, mlp, _ = ref_forward(model, family, ids)
    L, T = attn.shape[0], len(ids)
    rel, cos, rc = np.zeros((3, L, T)), np.zeros((3, L, T)), np.zeros((L, T))
    for l in range(L):
        for t in range(T):
            h, a, m, hn = resid[l, t], attn[l, t], mlp[l, t], resid[l + 1, t]
            for p, (x, y) in enumerate(((a, h), (m, h + a), (hn - h, h))):
                rel[p, l, t], cos[p, l, t] = _rel(x, y), _cos(x, y)
            rc[l, t] = _cos(hn, h)
    return rel, cos, rc


def ref_lens_tokens(model, family, ids):
    """kl, overlap (L+1, T) of one prompt."""
    resid, _, _, probs = ref_forward(model, family, ids)
    logp = np.log(probs)
    kl, ov = np.zeros((resid.shape[0], len(ids))), np.zeros((resid.shape[0], len(ids)))
    for b in range(resid.shape[0]):
        with torch.no_grad():
            z = (
                model.lm_head(model.model.norm(torch.tensor(resid[b], dtype=torch.float32)))
                .double()
                .numpy()
            )
        for t in range(len(ids)):
            logq = z[t] - z[t].max()
            logq = logq - np.log(np.exp(logq).sum())
            kl[b, t] = np.sum(np.exp(logq) * (logq - logp[t]))
            ov[b, t] = len(set(np.argsort(-logq)[:5]) & set(np.argsort(-logp[t])[:5])) / 5
    return kl, ov


def _prompts(tok):
    prompts = [np.array(p) for p in hf_prompts(tok, CORPUS_TEXT, 6, 30)]
    prompts[2] = prompts[2][:7]  # unequal lengths: token and prompt weighting differ
    return prompts


def test_contribution_intervals_match_reference(hf_models):
    from align.analyses.contrib import contributions_from_model, to_dataset
    from align.stats.bootstrap import Resampling

    model, tok = hf_models("qwen2")
    prompts = _prompts(tok)
    per = [ref_contrib_tokens(model, "qwen2", list(p)) for p in prompts]
    ds = to_dataset(
        contributions_from_model(model, [prompts[:4], prompts[4:]]), {}, Resampling(B, SEED)
    )
    idx = np.random.default_rng(SEED).integers(0, len(prompts), size=(B, len(prompts)))
    for k, (var, dims) in enumerate(
        (("rel_norm", ("part", "layer")), ("cos", ("part", "layer")), ("resid_cos", ("layer",)))
    ):
        reps = np.array([np.concatenate([per[p][k] for p in ix], -1).mean(-1) for ix in idx])
        np.testing.assert_allclose(
            ds[f"{var}_low"].transpose(*dims).values,
            np.percentile(reps, 2.5, axis=0),
            rtol=1e-5,
            atol=1e-6,
        )
        np.testing.assert_allclose(
            ds[f"{var}_high"].transpose(*dims).values,
            np.percentile(reps, 97.5, axis=0),
            rtol=1e-5,
            atol=1e-6,
        )
        point = np.concatenate([x[k] for x in per], -1).mean(-1)
        np.testing.assert_allclose(
            ds[var].sel(agg="mean").transpose(*dims).values, point, rtol=1e-5, atol=1e-6
        )
    np.testing.assert_array_equal(ds["token_count"].values, [len(p) for p in prompts])
    assert ds.attrs["bootstrap"]["n"] == len(prompts) and ds.attrs["bootstrap"]["resamples"] == B
    assert ds.attrs["bootstrap"]["seed"] == SEED


def test_lens_intervals_match_reference(hf_models):
    from align.analyses.lens import logit_lens, to_dataset
    from align.stats.bootstrap import Resampling

    model, tok = hf_models("llama")
    prompts = _prompts(tok)
    per = [ref_lens_tokens(model, "llama", list(p)) for p in prompts]
    L = model.config.num_hidden_layers
    ds = to_dataset(logit_lens(model, [prompts[:3], prompts[3:]]), {}, L, Resampling(B, SEED))
    idx = np.random.default_rng(SEED).integers(0, len(prompts), size=(B, len(prompts)))
    for k, var in enumerate(("kl", "overlap")):
        token = np.array([np.concatenate([per[p][k] for p in ix], -1).mean(-1) for ix in idx])
        prompt = np.array([np.mean([per[p][k].mean(-1) for p in ix], 0) for ix in idx])
        for w, reps in (("token", token), ("prompt", prompt)):
            got = (
                ds[f"{var}_low"].sel(weighting=w).values,
                ds[f"{var}_high"].sel(weighting=w).values,
            )
            np.testing.assert_allclose(
                got[0], np.percentile(reps, 2.5, axis=0), rtol=1e-4, atol=1e-5
            )
            np.testing.assert_allclose(
                got[1], np.percentile(reps, 97.5, axis=0), rtol=1e-4, atol=1e-5
            )
    assert ds.attrs["bootstrap"]["n"] == len(prompts)


def test_cli_options_reach_the_result_and_store_prompts_are_sequences(cli, extracted, tmp_path):
    """contrib --store: prompts are the store's sequences (token counts per sequence), the
    options are recorded, and the same prompts through the live model give the same identity."""
    import json

    from align.store import open_activations, open_result

    store = extracted("qwen2", sublayers=True)
    code, _, err = cli(
        "contrib", "--store", store, "-o", tmp_path / "c", "--bootstrap", 140, "--bootstrap-seed", 7
    )
    assert code == 0, err
    ds = open_result(str(tmp_path / "c"), "contributions")
    s = open_activations(store)
    seq = s.tokens("seq")
    np.testing.assert_array_equal(ds["token_count"].values, np.bincount(seq)[np.bincount(seq) > 0])
    assert ds.attrs["bootstrap"]["resamples"] == 140 and ds.attrs["bootstrap"]["seed"] == 7
    assert ds.attrs["prompts_hash"].startswith("sha256:")
    prov = s.provenance
    corpus = prov["corpus"]
    code, _, err = cli(
        "lens",
        prov["model"],
        corpus["source"],
        "-o",
        tmp_path / "l",
        "--bootstrap",
        140,
        "--max-length",
        str(corpus.get("max_length")) if corpus.get("max_length") else "512",
    )
    assert code == 0, err + json.dumps(corpus)
    lens = open_result(str(tmp_path / "l"), "lens")
    assert lens.attrs["prompts_hash"] == ds.attrs["prompts_hash"]
