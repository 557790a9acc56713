"""Residual erasure (docs/methods.md) against a plain one-position-at-a-time float64 loop with its
own hooks over boundaries 0..L as [P1]'s `measure_token_skip` (lib/token_skip.py) erases them
(boundary 0: block 0's input; b ≥ 1: block b−1's output, so b = L is the last block's output),
and the structural checks: erasing with the residual itself is exactly 0, erasing boundary 0 is
replacing the token's embedding, erasing boundary L moves only the erased position's own
prediction. The references never import align."""

import numpy as np
import pytest
import torch

from tests.helpers.zoo import CORPUS_TEXT, reference_tokenizer

FAMILIES = ("qwen2", "llama")
TEXTS = [
    ("the model reads every layer =", " 12 + 7 = 19"),
    ("so we fit linear maps", " from each layer"),
    ("a deeper network spreads the same computation over more layers while", " the shallow one"),
]


def _hf(path, dtype=torch.float64):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
    model.requires_grad_(False)
    return model


def _ref_ids(path, prompt, answer):
    """Token ids of prompt + answer and the answer-predicting mask, from the saved tokenizer:
    the answer's tokens are those after the prompt's own tokens (the texts above split there)."""
    tok = reference_tokenizer(path)
    full = tok(prompt + answer)["input_ids"]
    head = tok(prompt)["input_ids"]
    assert full[: len(head)] == head
    pred = np.zeros(len(full), bool)
    pred[len(head) - 1 : len(full) - 1] = True
    return full, pred


def _docs(n):
    return [d for d in CORPUS_TEXT.split("\n\n") if d.strip()][:n]


def _first(output):
    return output[0] if isinstance(output, tuple) else output


def ref_mean(model, path, docs, max_length=64):
    """Mean residual at each boundary 0..L over every token of the docs (float64 loop): block
    0's input, then each block's output (P1: `layers[0].inputs[0][0]`, `layers[l].output[0]`)."""
    tok = reference_tokenizer(path)
    layers = model.model.layers
    sums, n = [0.0] * (len(layers) + 1), 0
    for d in docs:
        ids = tok(d)["input_ids"][:max_length]
        seen = {}
        hs = [
            layers[0].register_forward_pre_hook(
                lambda m, a, k: seen.__setitem__(
                    0, (a[0] if a else k["hidden_states"])[0].double().sum(0)
                ),
                with_kwargs=True,
            )
        ]
        hs += [
            layer.register_forward_hook(
                lambda m, a, out, b=b: seen.__setitem__(b + 1, _first(out)[0].double().sum(0))
            )
            for b, layer in enumerate(layers)
        ]
        try:
            with torch.no_grad():
                model(input_ids=torch.tensor([ids]), use_cache=False)
        finally:
            for h in hs:
                h.remove()
        sums = [s + seen[b] for b, s in enumerate(sums)]
        n += len(ids)
    return torch.stack(sums).numpy() / n


def ref_erase(model, ids, pred, mean):
    """E[b, t] (L + 1, T): one forward per (boundary, position) as P1 runs them, the residual
    at t set to mean[b]: block 0's input for b = 0, block b−1's output for b ≥ 1; max over
    answer-predicting τ of the L2 change of the probabilities."""
    layers = model.model.layers
    x = torch.tensor([ids])
    with torch.no_grad():
        p = torch.softmax(model(input_ids=x, use_cache=False).logits[0].double(), -1)
    E = np.zeros((len(layers) + 1, len(ids)))
    taus = np.flatnonzero(pred)
    for b in range(len(layers) + 1):
        for t in range(len(ids)):

            def pre(m, args, kwargs, t=t):
                h = (args[0] if args else kwargs["hidden_states"]).clone()
                h[0, t] = torch.as_tensor(mean[0], dtype=h.dtype)
                if args:
                    return (h,) + tuple(args[1:]), kwargs
                return args, {**kwargs, "hidden_states": h}

            def post(m, args, output, t=t, b=b):
                h = _first(output).clone()
                h[0, t] = torch.as_tensor(mean[b], dtype=h.dtype)
                return (h,) + tuple(output[1:]) if isinstance(output, tuple) else h

            if b == 0:
                handle = layers[0].register_forward_pre_hook(pre, with_kwargs=True)
            else:
                handle = layers[b - 1].register_forward_hook(post)
            try:
                with torch.no_grad():
                    p2 = torch.softmax(model(input_ids=x, use_cache=False).logits[0].double(), -1)
            finally:
                handle.remove()
            E[b, t] = max(float((p2[tau] - p[tau]).norm()) for tau in taus)
    return E


def _align_prompts(path, texts=TEXTS, max_length=64):
    from align import models
    from align.analyses.answers import AnswerPrompt, tokenize_answer

    tok = models.load_tokenizer(models.ModelSpec(path))
    out = []
    for i, (q, a) in enumerate(texts):
        ids, labels, pred, answer = tokenize_answer(tok, q + a, len(q), max_length, f"prompt {i}")
        out.append(AnswerPrompt(ids, labels, pred, i, answer))
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_answer_positions_match_the_tokenizer(family, zoo):
    """The answer-predicting mask: the positions before each token of the answer's own tokens."""
    path = zoo(family)
    for p, (q, a) in zip(_align_prompts(path), TEXTS):
        ids, pred = _ref_ids(path, q, a)
        assert list(p.token_id) == ids
        np.testing.assert_array_equal(p.predicts_answer, pred)
        assert p.answer == a.strip()


@pytest.mark.parametrize("family", FAMILIES)
def test_erasure_matches_one_position_at_a_time_loop(family, zoo):
    """Batched (5 rows per forward, prompts of about 20 and 25 tokens, right padding) vs the float64
    loop, every (boundary 0..L, position) of every prompt: rtol 1e-5. The reference mean too."""
    from align.analyses import erase

    path = zoo(family)
    model = _hf(path)
    prompts = _align_prompts(path, TEXTS[:2])
    ref_prompts = [np.asarray(reference_tokenizer(path)(d)["input_ids"][:64]) for d in _docs(4)]
    mean, n = erase.reference_mean(model, ref_prompts, batch_size=3)
    np.testing.assert_allclose(mean, ref_mean(model, path, _docs(4)), rtol=1e-10, atol=1e-12)
    assert n == sum(len(r) for r in ref_prompts)
    res = erase.erasure(model, prompts, mean, batch_size=5)
    for i, p in enumerate(prompts):
        ids, pred = _ref_ids(path, *TEXTS[i])
        want = ref_erase(model, ids, pred, mean)
        np.testing.assert_allclose(res["E"][i, :, : len(ids)], want, rtol=1e-5, atol=1e-10)
        assert np.isnan(res["E"][i, :, len(ids) :]).all()
        assert (
            want[:-1, : int(np.flatnonzero(pred).max()) + 1].min() > 1e-6
        )  # the cells run are not trivially 0
        assert (
            want[-1, pred].min() > 1e-6
        )  # boundary L: non-zero at the answer-predicting positions
    rows = sum(int(np.flatnonzero(p.predicts_answer).max()) + 1 for p in prompts)
    assert res["n_rows"] == rows
    assert res["n_forwards"] == -(-rows // 5) * (1 + 2)
    assert res["n_forwards_one_at_a_time"] == len(prompts) + rows * 3  # boundaries 0, 1, 2


@pytest.mark.parametrize("family", FAMILIES)
def test_erasing_with_the_residual_itself_is_exactly_zero(family, zoo):
    from align.analyses import erase

    path = zoo(family)
    model = _hf(path, torch.float32)
    res = erase.erasure(model, _align_prompts(path), None, batch_size=4)
    E = res["E"]
    assert np.isfinite(E).sum() > 40
    assert (E[np.isfinite(E)] == 0.0).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_erasing_boundary_zero_is_replacing_the_embedding(family, zoo):
    """E[0, t] equals the change when the token's embedding row is replaced by μ_0 and the
    model is run on inputs_embeds (plain HF, no hooks)."""
    from align.analyses import erase

    path = zoo(family)
    model = _hf(path)
    prompts = _align_prompts(path)[:2]
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(3, model.config.hidden_size))
    res = erase.erasure(model, prompts, mean, batch_size=3)
    for i, (q, a) in enumerate(TEXTS[:2]):
        ids, pred = _ref_ids(path, q, a)
        with torch.no_grad():
            emb = model.get_input_embeddings()(torch.tensor([ids]))
            p = torch.softmax(model(inputs_embeds=emb, use_cache=False).logits[0].double(), -1)
            for t in (0, 3, len(ids) - 2):
                e2 = emb.clone()
                e2[0, t] = torch.as_tensor(mean[0])
                p2 = torch.softmax(model(inputs_embeds=e2, use_cache=False).logits[0].double(), -1)
                want = max(float((p2[tau] - p[tau]).norm()) for tau in np.flatnonzero(pred))
                np.testing.assert_allclose(res["E"][i, 0, t], want, rtol=1e-5, atol=1e-10)


@pytest.mark.parametrize("family", FAMILIES)
def test_erasing_boundary_L_moves_only_that_positions_prediction(family, zoo):
    """E[L, t] = ‖softmax(lm_head(norm(μ_L))) − p(t)‖₂ at answer-predicting t (by hand from the
    model's own final norm and head, no hooks) and exactly 0 at every other position."""
    from align.analyses import erase

    path = zoo(family)
    model = _hf(path)
    prompts = _align_prompts(path)[:2]
    mean = np.random.default_rng(1).normal(size=(3, model.config.hidden_size))
    res = erase.erasure(model, prompts, mean, batch_size=4)
    with torch.no_grad():
        q = torch.softmax(
            model.lm_head(model.model.norm(torch.as_tensor(mean[2])[None])).double(), -1
        )[0]
    for i, (qt, a) in enumerate(TEXTS[:2]):
        ids, pred = _ref_ids(path, qt, a)
        with torch.no_grad():
            p = torch.softmax(
                model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].double(), -1
            )
        want = np.array([float((q - p[t]).norm()) if pred[t] else 0.0 for t in range(len(ids))])
        np.testing.assert_allclose(res["E"][i, 2, : len(ids)], want, rtol=1e-6, atol=0)
        assert (res["E"][i, 2, : len(ids)][~pred] == 0).all() and want[pred].min() > 1e-3


def test_a_mean_without_boundary_L_is_refused(zoo):
    """Means for boundaries 0..L−1 only (the shape reference_mean gave before boundary L was
    erased) are refused in one line naming both shapes."""
    from align.analyses import erase
    from align.errors import InputError

    path = zoo("qwen2")
    model = _hf(path)
    d = model.config.hidden_size
    with pytest.raises(InputError) as e:
        erase.erasure(model, _align_prompts(path)[:1], np.zeros((2, d)), batch_size=4)
    msg = str(e.value)
    assert f"(2, {d})" in msg and f"(3, {d})" in msg and "0..2" in msg and "\n" not in msg
