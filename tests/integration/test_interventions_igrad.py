"""Integrated gradients in the "align" variant (what a part adds, from zero, log p, midpoint
rule: `--protocol align`; P1's default is tested in tests/integration/test_igrad_p1.py) against a plain
loop over interpolation points with its own hooks, completeness (attributions sum to
f(x) − f(baseline), closer with more steps), and the end points against plain HF models
(clean, and with a sublayer's output projection zeroed). The references never import align."""

import numpy as np
import pytest
import torch

from tests.helpers.zoo import reference_tokenizer

FAMILIES = ("qwen2", "llama")
TEXTS = [
    ("the model reads every layer =", " 12 + 7 = 19"),
    ("so we fit linear maps", " from each layer"),
]


def _smooth_model(path):
    """The zoo model in float64 with its matrices halved: the zoo's weights (std 0.2) make
    f(α) too rough for a 64-point rule to show its convergence at layer 0."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64).eval()
    model.requires_grad_(False)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.mul_(0.5)
    return model


def _ref_ids(path, prompt, answer):
    tok = reference_tokenizer(path)
    full, head = tok(prompt + answer)["input_ids"], tok(prompt)["input_ids"]
    assert full[: len(head)] == head
    return full, len(head)


def _target(model, ids, n_head):
    """f = Σ log p(answer token | prefix) of a plain forward."""
    with torch.no_grad():
        logp = torch.log_softmax(
            model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].double(), -1
        )
    return float(sum(logp[t - 1, ids[t]] for t in range(n_head, len(ids))))


def ref_igrad(model, ids, n_head, part, layer, steps):
    """A[t] (T,) by a loop over α_k = (k + ½)/N, one forward and backward each: the part's
    output x at `layer` replaced by α·x, gradient of f with respect to it, times x."""
    block = model.model.layers[layer]
    mod = {"layer": block, "attn": block.self_attn, "mlp": block.mlp}[part]
    acc = torch.zeros(len(ids), dtype=torch.float64)
    for k in range(steps):
        alpha = (k + 0.5) / steps
        keep = {}

        def hook(m, args, kwargs, output):
            out = output[0] if isinstance(output, tuple) else output
            base = (
                (args[0] if args else kwargs["hidden_states"]).detach() if part == "layer" else 0.0
            )
            x = (out - base).detach()
            y = (alpha * x).requires_grad_(True)
            keep["x"], keep["y"] = x, y
            new = base + y
            return (new,) + tuple(output[1:]) if isinstance(output, tuple) else new

        h = mod.register_forward_hook(hook, with_kwargs=True)
        try:
            with torch.enable_grad():
                logp = torch.log_softmax(
                    model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].double(), -1
                )
                f = sum(logp[t - 1, ids[t]] for t in range(n_head, len(ids)))
                (g,) = torch.autograd.grad(f, keep["y"])
        finally:
            h.remove()
        acc += (g[0].double() * keep["x"][0].double()).sum(-1) / steps
    return acc.numpy()


def _align_prompts(path):
    from align import models
    from align.analyses.answers import AnswerPrompt, tokenize_answer

    tok = models.load_tokenizer(models.ModelSpec(path))
    out = []
    for i, (q, a) in enumerate(TEXTS):
        ids, labels, pred, answer = tokenize_answer(tok, q + a, len(q), 64, f"prompt {i}")
        out.append(AnswerPrompt(ids, labels, pred, i, answer))
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_igrad_matches_a_plain_loop_over_steps(family, zoo):
    """8 steps batched 5 points per pass (the end points share the first pass) vs the loop:
    every part, layer and position of one prompt, rtol 1e-5."""
    from align.analyses import igrad

    path = zoo(family)
    model = _smooth_model(path)
    prompts = _align_prompts(path)[:1]
    res = igrad.integrated_gradients(
        model, prompts, variant=igrad.PROTOCOLS["align"], steps=8, batch_size=5
    )
    ids, n_head = _ref_ids(path, *TEXTS[0])
    for pi, part in enumerate(igrad.PARTS):
        for l in range(2):
            want = ref_igrad(model, ids, n_head, part, l, 8)
            np.testing.assert_allclose(res["A"][0, pi, l], want, rtol=1e-5, atol=1e-9)
    assert np.abs(res["A"]).max() > 1e-2
    assert res["n_passes"] == 3 * 2 * 2  # 10 points (8 + the 2 end points) in passes of 5
    assert res["n_passes_one_at_a_time"] == 1 + 3 * 2 * (8 + 1)


@pytest.mark.parametrize("family", FAMILIES)
def test_completeness_tightens_with_steps(family, zoo):
    """Per prompt, part and layer: Σ_t A[l, t] = f(x) − f(baseline) up to the midpoint rule's
    error, which falls about as 1/N² (here at least 20× from 8 to 64 steps) to below 0.5% of the
    largest |f(x) − f(baseline)|; f(x) is the plain model's answer log-probability and f(0)
    that of the model with the part's output projection zeroed."""
    from align.analyses import igrad

    path = zoo(family)
    model = _smooth_model(path)
    prompts = _align_prompts(path)
    align = igrad.PROTOCOLS["align"]
    coarse = igrad.integrated_gradients(model, prompts, variant=align, steps=8, batch_size=16)
    fine = igrad.integrated_gradients(model, prompts, variant=align, steps=64, batch_size=33)
    for i, (q, a) in enumerate(TEXTS):
        ids, n_head = _ref_ids(path, q, a)
        f = _target(model, ids, n_head)
        np.testing.assert_allclose(fine["f"][i], f, rtol=1e-6)
        for l in range(2):
            for pi, part in enumerate(igrad.PARTS):
                zeroed = type(model)(model.config).to(torch.float64).eval()
                zeroed.load_state_dict(model.state_dict())
                with torch.no_grad():
                    blk = zeroed.model.layers[l]
                    if part in ("attn", "layer"):
                        blk.self_attn.o_proj.weight.zero_()
                    if part in ("mlp", "layer"):
                        blk.mlp.down_proj.weight.zero_()
                np.testing.assert_allclose(
                    fine["f_baseline"][i, pi, l], _target(zeroed, ids, n_head), rtol=1e-6
                )
        delta = fine["f"][i] - fine["f_baseline"][i]
        for res in (coarse, fine):
            np.testing.assert_allclose(np.nansum(res["A"][i], -1) - delta, res["gap"][i], atol=1e-9)
        g8, g64 = np.abs(coarse["gap"][i]).max(), np.abs(fine["gap"][i]).max()
        assert g64 <= g8 / 20, (g8, g64)
        assert g64 <= 5e-3 * np.abs(delta).max(), (g64, np.abs(delta).max())
