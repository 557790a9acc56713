"""align's numbers against the definitions in the two papers' own code (docs/fidelity.md).

P1: Csordás, Manning, Potts, "Do Language Models Use Their Depth Efficiently?", code
robertcsordas/llm_effective_depth. P2: Hu, Zhou, Zhang, "What Affects the Effective Depth of
Large Language Models?", code AheadOFpotato/what_affects_effective_depth. Each reference
below restates, in plain torch/numpy, what the named function of that code computes (one
prompt per forward, as the papers run); nothing here imports align except the code under
test, and no line of the papers' code is copied.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.helpers.fixtures_analyses import hf_load, hf_prompts, ref_forward
from tests.helpers.zoo import CORPUS_TEXT, reference_tokenizer

FAMILIES = ("qwen2", "llama")  # P1 and P2 run Qwen 2.5 (no BOS) and Llama 3.1 (BOS)


def _p1_norms(model, family, prompts):
    """P1 analysis/analyze_norms.py `analyze_norms`: per prompt the relative contributions
    ‖x‖ / clamp(‖y‖, 1e-6) and torch's cosine_similarity, summed over positions; means are the
    sums over all prompts divided by the total token count; maxima over every token (P1 returns
    them for attention and MLP). Computed in float32, as P1 casts with .float()."""
    L = len(model.model.layers)
    sums = {
        k: torch.zeros(L, dtype=torch.float64)
        for k in ("rc_att", "rc_mlp", "rc_layer", "cos_att", "cos_mlp", "cos_layer", "cos_io")
    }
    max_att, max_mlp = torch.zeros(L), torch.zeros(L)
    cnt = 0
    for ids in prompts:
        resid, attn, mlp, _ = ref_forward(model, family, ids)
        f32 = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731
        h, a, m, out = f32(resid[:-1]), f32(attn), f32(mlp), f32(resid[1:])  # (L, T, d)
        mlp_in, diff = a + h, out - h
        rc_att = a.norm(dim=-1) / h.norm(dim=-1).clamp(min=1e-6)
        rc_mlp = m.norm(dim=-1) / mlp_in.norm(dim=-1).clamp(min=1e-6)
        rc_layer = diff.norm(dim=-1) / h.norm(dim=-1).clamp(min=1e-6)
        per = {
            "rc_att": rc_att,
            "rc_mlp": rc_mlp,
            "rc_layer": rc_layer,
            "cos_att": F.cosine_similarity(a, h, dim=-1),
            "cos_mlp": F.cosine_similarity(m, mlp_in, dim=-1),
            "cos_layer": F.cosine_similarity(diff, h, dim=-1),
            "cos_io": F.cosine_similarity(out, h, dim=-1),
        }
        for k, v in per.items():
            sums[k] += v.sum(1).double()
        max_att, max_mlp = (
            torch.maximum(max_att, rc_att.max(1).values),
            torch.maximum(max_mlp, rc_mlp.max(1).values),
        )
        cnt += len(ids)
    means = {k: (v / cnt).numpy() for k, v in sums.items()}
    return means, max_att.double().numpy(), max_mlp.double().numpy()


@pytest.mark.parametrize("family", FAMILIES)
def test_contributions_equal_p1_analyze_norms(family, hf_models):
    """`contributions_from_model` (3 prompts per right-padded forward) = P1's analyze_norms,
    one prompt at a time: the token means of the three relative norms and four cosines, and
    the maxima of the attention and MLP relative norms, rtol 1e-5 / atol 1e-6 (float32)."""
    from align.analyses import contributions_from_model

    model, tok = hf_models(family)
    prompts = hf_prompts(tok, CORPUS_TEXT, 5, 40)
    means, max_att, max_mlp = _p1_norms(model, family, prompts)
    res = contributions_from_model(
        model, [[np.array(p) for p in prompts[:3]], [np.array(p) for p in prompts[3:]]]
    )
    tol = dict(rtol=1e-5, atol=1e-6)
    for k, name in enumerate(("att", "mlp", "layer")):  # align's parts: attn, mlp, layer
        np.testing.assert_allclose(
            res["rel_norm"][k, :, 0], means[f"rc_{name}"], err_msg=name, **tol
        )
        np.testing.assert_allclose(res["cos"][k, :, 0], means[f"cos_{name}"], err_msg=name, **tol)
    np.testing.assert_allclose(res["resid_cos"][:, 0], means["cos_io"], **tol)
    np.testing.assert_allclose(res["rel_norm"][0, :, 1], max_att, **tol)
    np.testing.assert_allclose(res["rel_norm"][1, :, 1], max_mlp, **tol)


def _papers_lens(model, family, prompts, K=5):
    """Logit lens at the inputs of blocks 0..L−1 (boundaries 0..L−1), as P1 analysis/logitlens.py
    `run_logitlens` and P2 plot_logit_lens.py `run_logitlens` compute it: KL(lens ‖ final) from
    float32 log-softmaxes, top-K overlap from one-hot top-K masks. P1 averages over a prompt's
    tokens, then over prompts; P2 sums over every token of every prompt and divides by the
    token count. Returns {"p1": (kl, overlap), "p2": (kl, overlap)}, each (L,)."""
    L = len(model.model.layers)
    V = model.lm_head.weight.shape[0]
    p1_kl, p1_ov, p2_kl, p2_ov, cnt = [], [], 0.0, 0.0, 0
    for ids in prompts:
        resid, _, _, _ = ref_forward(model, family, ids)
        with torch.no_grad():
            lout = (
                model(input_ids=torch.tensor([ids]), use_cache=False)
                .logits[0]
                .float()
                .log_softmax(-1)
            )
            real = F.one_hot(lout.topk(K, dim=-1).indices, V).sum(-2).float()  # (T, V)
            kl, ov = [], []
            for b in range(L):
                h = torch.tensor(resid[b], dtype=torch.float32)
                lay = model.lm_head(model.model.norm(h)).float().log_softmax(-1)
                per_kl = (lay.exp() * (lay - lout)).sum(-1)
                mine = F.one_hot(lay.topk(K, dim=-1).indices, V).sum(-2).float()
                per_ov = (mine * real).sum(-1) / K
                kl.append(per_kl)
                ov.append(per_ov)
        kl, ov = torch.stack(kl).double(), torch.stack(ov).double()  # (L, T)
        p1_kl.append(kl.mean(1))
        p1_ov.append(ov.mean(1))
        p2_kl, p2_ov, cnt = p2_kl + kl.sum(1), p2_ov + ov.sum(1), cnt + len(ids)
    return {
        "p1": (torch.stack(p1_kl).mean(0).numpy(), torch.stack(p1_ov).mean(0).numpy()),
        "p2": ((p2_kl / cnt).numpy(), (p2_ov / cnt).numpy()),
    }


@pytest.mark.parametrize("family", FAMILIES)
def test_lens_weightings_equal_p1_and_p2_code(family, hf_models):
    """align's prompt-weighted lens = P1's run_logitlens, its token-weighted lens = P2's, at
    boundaries 0..L−1 (the papers' taps); align's extra boundary L is the model's output (KL 0,
    overlap 1). KL rtol 1e-4 / atol 1e-6 (float32 log-softmax), overlap atol 1e-9."""
    from align.analyses import logit_lens

    model, tok = hf_models(family)
    prompts = hf_prompts(tok, CORPUS_TEXT, 5, 40)
    L = len(model.model.layers)
    want = _papers_lens(model, family, prompts)
    res = logit_lens(
        model, [[np.array(p) for p in prompts[:2]], [np.array(p) for p in prompts[2:]]]
    )
    for row, paper in ((0, "p2"), (1, "p1")):  # align's rows: token, prompt
        kl, ov = want[paper]
        np.testing.assert_allclose(res["kl"][row, :L], kl, rtol=1e-4, atol=1e-6, err_msg=paper)
        np.testing.assert_allclose(res["overlap"][row, :L], ov, atol=1e-9, err_msg=paper)
    np.testing.assert_allclose(res["kl"][:, L], 0.0, atol=1e-6)
    np.testing.assert_allclose(res["overlap"][:, L], 1.0, atol=1e-9)
    assert res["kl"][0, :L].min() > 1e-3  # the lens differs from the output before boundary L


def _p2_cosine_ed(att, mlp, layer):
    """P2 exp3_universal_metric_simple.ipynb `calc_ed_cosine_similarity`: the last l in 0..L−2
    with mean cosine c_l < 0 <= c_{l+1}; P2's code raises IndexError when there is none."""
    c = torch.stack([att, mlp, layer]).mean(0)
    hits = [l for l in range(len(c) - 1) if c[l] < 0 and c[l + 1] >= 0]
    return hits[-1]


def _p2_kl_ed(kl, threshold=0.5):
    """`calc_ed_logitlens_kl` at P2's threshold 0.5: the first l in 0..L−2 with KL_l below
    0.5 · the maximum over the curve's L entries; -1 when none."""
    for l in range(len(kl) - 1):
        if kl[l] < threshold * kl.max():
            return l
    return -1


def _p2_overlap_ed(ov, threshold=0.3):
    """`calc_ed_logitlens_overlap` at P2's threshold 0.3: the first l in 0..L−2 with overlap > 0.3; -1 when none."""
    for l in range(len(ov) - 1):
        if ov[l] > threshold:
            return l
    return -1


def _curves(rng, L):
    """Random curves with crossings, plateaus and exact threshold values in them."""
    noise = rng.normal(0, 0.05, (3, L)) * rng.integers(
        0, 2
    )  # none in half the cases: values on the grid, 0 included
    cos = torch.tensor(rng.choice([-0.3, -0.1, 0.0, 0.05, 0.4], size=(3, L)) + noise)
    kl = torch.tensor(
        np.sort(rng.exponential(2.0, L))[::-1].copy()
        if rng.random() < 0.5
        else rng.exponential(2.0, L)
    )
    if rng.random() < 0.2:
        kl[rng.integers(0, L)] = 0.5 * kl.max()  # exactly half the maximum is not below it
    ov = torch.tensor(rng.choice([0.0, 0.2, 0.3, 0.4, 0.6, 1.0], size=L))
    return cos, kl, ov


def test_effective_depth_rules_equal_p2_notebook():
    """`effective_depth` on 3,000 random curves (L = 2..12) = P2's three calc_ed_* functions
    with its thresholds (cosine 0, KL 0.5 of the maximum, overlap 0.3), exactly; where P2's code
    returns -1 (KL, overlap) or raises IndexError (cosine) align gives NaN with a reason. P2's
    ratio (ED + 1) / L too. P2 divides its cosine sums by a count other than the token count
    (see docs/fidelity.md); the cosine rule reads only signs, so its ED is that of align's means."""
    from align.analyses import effective_depth

    rng = np.random.default_rng(0)
    undefined = {"cosine": 0, "kl": 0, "overlap": 0}
    for case in range(3000):
        L = int(rng.integers(2, 13))
        cos, kl, ov = _curves(rng, L)
        # align's lens curves run over boundaries 0..L; P2's over 0..L−1 (the blocks' inputs)
        got = effective_depth(*cos.numpy(), np.r_[kl.numpy(), 0.0], np.r_[ov.numpy(), 1.0])
        try:
            want_cos = _p2_cosine_ed(*(cos * 37.0 / 4096))  # P2's count: a positive factor
        except IndexError:
            want_cos = -1
        want = {"cosine": want_cos, "kl": _p2_kl_ed(kl), "overlap": _p2_overlap_ed(ov)}
        for k, rule in enumerate(("cosine", "kl", "overlap")):
            ed = got["effective_depth"][k]
            if want[rule] == -1:
                assert np.isnan(ed) and got["reasons"][rule], (case, rule, ed)
                undefined[rule] += 1
            else:
                assert ed == want[rule], (case, rule, ed, want[rule])
                assert got["ratio"][k] == (want[rule] + 1) / L
    assert all(100 < n < 2900 for n in undefined.values()), undefined  # both branches are exercised


# P1 analysis/lib/datasets/mquake.py: "Question: {q}\nAnswer:" + " {answer}" (align's --format mquake).
# Each answer's first word and its leading space are one token of the zoo's tokenizer, as for
# most words in Llama 3's and Qwen 2.5's: where the space is a token of its own (" in" here,
# " 1987" there), P1 starts the answer at the space and align at the word (docs/fidelity.md).
MQUAKE = [
    ("Who wrote the book about the layers of the network?", "the shallow model"),
    ("Where was the deeper network trained before it read every document?", "the corpus"),
    ("Which map fits the residual stream of each layer?", "a linear one"),
    ("What does a deeper model spread over more layers?", "the same computation"),
]


def _p1_future_effect(model, family, ids, t):
    """P1 analysis/analyze_future_effects.py `test_effect` for one prompt and split point t,
    part "layer": per skipped layer s (h_{s+1} := h_s at positions 1..t−1), the max over
    positions t..T−1 of ‖C_l − C'_l‖ / clamp(‖C_l‖, 1e-6) for EVERY layer l (P1 computes all
    of them), and of ‖p' − p‖₂. Returns (dall (L, L), dout (L,))."""
    L = len(model.model.layers)
    clean = ref_forward(model, family, ids)
    C = clean[0][1:] - clean[0][:-1]
    dall, dout = np.zeros((L, L)), np.zeros(L)
    for s in range(L):
        skip = ref_forward(model, family, ids, ("layer", s, range(1, t)))
        C2 = skip[0][1:] - skip[0][:-1]
        rel = np.linalg.norm(C[:, t:] - C2[:, t:], axis=-1) / np.maximum(
            np.linalg.norm(C[:, t:], axis=-1), 1e-6
        )
        dall[s] = rel.max(-1)
        dout[s] = np.linalg.norm(skip[3][t:] - clean[3][t:], axis=-1).max()
    return dall, dout


def _p1_depth_score(m):
    """P1 analysis/skip_max_depth.py `effect_layer_score`: Σ_s s·m_s / Σ_s m_s over s = 0..len(m)−1."""
    m = torch.as_tensor(m)
    return float((torch.arange(m.shape[0]) * m).sum() / m.sum())


def _p1_layer_reduce(dall):
    """P1 skip_max_depth.py `main`: dall.sum(-1) / arange(L−1, −1, −1).clamp(min=1): the sum over
    every later-layer column divided by the number of layers after s (1 for the last)."""
    dall = torch.as_tensor(dall)
    L = dall.shape[0]
    return (dall.sum(-1) / torch.arange(L - 1, -1, -1).clamp(min=1)).numpy()


def test_future_depth_score_equals_p1_skip_max_depth(zoo, cli, tmp_path):
    """`align skip --split answer-start --settings future --parts layer` on MQuAKE-format prompts
    and `align depthscore`, against P1's skip_max_depth.py on a 4-layer Llama (BOS prepended, as
    P1's Llama 3.1): split at P1's answer start (the prompt's token count minus the answer's,
    tokenized alone), R and O one prompt at a time, max and mean over prompts, P1's layer
    reduction and centre of mass. DS of the layer and the output effect, both aggregations,
    rtol 1e-4 (float32 runs against a float64 reference)."""
    from align.store import open_result

    path = zoo("llama", num_hidden_layers=4)
    corpus = tmp_path / "mq.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"questions": [q], "answer": a, "single_hops": [{}, {}]}) + "\n"
            for q, a in MQUAKE
        )
    )
    code, _, err = cli(
        "skip",
        path,
        corpus,
        "--format",
        "mquake",
        "--split",
        "answer-start",
        "--settings",
        "future",
        "--parts",
        "layer",
        "--batch-size",
        "2",
        "-o",
        tmp_path / "skip",
    )
    assert code == 0, err
    code, _, err = cli("depthscore", tmp_path / "skip", "--levels", "2", "-o", tmp_path / "ds")
    assert code == 0, err
    ds = open_result(str(tmp_path / "ds"), "depthscore")

    model, _ = hf_load(path)
    tok = reference_tokenizer(path)
    per_prompt = []
    for q, a in MQUAKE:
        prompt, answer = f"Question: {q}\nAnswer:", f" {a}"
        ids = tok(prompt + answer)["input_ids"]
        t = len(ids) - len(tok(answer, add_special_tokens=False)["input_ids"])  # P1's a_start_pos
        assert t > 1
        per_prompt.append(_p1_future_effect(model, "llama", ids, t))
    dall = np.stack([d for d, _ in per_prompt])
    dout = np.stack([o for _, o in per_prompt])
    for agg, reduce in (("max", lambda x: x.max(0)), ("mean_over_prompts", lambda x: x.mean(0))):
        want_layer = _p1_depth_score(_p1_layer_reduce(reduce(dall)))
        want_output = _p1_depth_score(reduce(dout))
        cell = ds["DS"].sel(level=2, setting="future", part="layer", agg=agg)
        np.testing.assert_allclose(
            float(cell.sel(effect="layer")), want_layer, rtol=1e-4, err_msg=agg
        )
        np.testing.assert_allclose(
            float(cell.sel(effect="output")), want_output, rtol=1e-4, err_msg=agg
        )
    # Not a trivial centre: the layer effect is spread over several skipped layers.
    m = _p1_layer_reduce(dall.max(0))
    assert (m[:-1] > 1e-3).sum() >= 2, m
