"""`align igrad`'s default is [P1]'s integrated gradients: a reference that follows P1's
`get_igrads_multiple` (lib/igrad.py of RobertCsordas/llm_effective_depth) line by line with
plain torch hooks on the HF model, and each of the five options switched alone against the
reference with that one change. The reference never imports align."""

import numpy as np
import pytest
import torch

from tests.helpers.zoo import reference_tokenizer
from tests.integration.test_interventions_igrad import TEXTS, _align_prompts

P1 = dict(object="residual", baseline="position-mean", target="prob", rule="left", steps=256)
# float32 on both sides, batched differently (P1's blocks of 16 points; align's 16 rows with the
# two end points first): the sums over 256 points agree to this.
RTOL, ATOL_OF_MAX = 1e-4, 1e-5


def _hf(path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    model.requires_grad_(False)
    return model


def _p1_ids(path, prompt, answer):
    """P1's tokenization: prompt + answer with the tokenizer's special tokens; the answer's
    length from the answer tokenized alone (the texts here split cleanly there)."""
    tok = reference_tokenizer(path)
    ids = tok(prompt + answer)["input_ids"]
    alen = len(tok(answer, add_special_tokens=False)["input_ids"])
    assert ids[: len(ids) - alen] == tok(prompt)["input_ids"]
    return ids, alen


def p1_igrads(
    model,
    ids,
    alen,
    what="layer",
    *,
    object="residual",
    baseline="position-mean",
    target="prob",
    rule="left",
    steps=256,
    block=16,
):
    """(L, T) float64: P1's get_igrads_multiple for one prompt. Per layer l, in blocks of 16
    points: the object of `what` (P1: `layers[l].output[0]`, `self_attn.output[0]`,
    `mlp.output`) replaced in a batch of copies of the prompt by orig·r + baseline·(1 − r),
    r = k/N, baseline = orig.mean(dim=1); the target oprobs[:, -alen:].sum() with oprobs the
    softmax probability of each next token; igrad += (grad · (orig − baseline)).sum(0);
    result l_igrads.sum(-1) / N. The options change one line each: object "delta" interpolates
    out − in of the block, baseline "zero", target "logprob" (log_softmax), rule "midpoint"
    (r = (k + ½)/N)."""
    layers = model.model.layers
    x = torch.tensor([ids])
    rows = []
    for l in range(len(layers)):
        mod = {"layer": layers[l], "attn": layers[l].self_attn, "mlp": layers[l].mlp}[what]
        l_igrads = 0
        for start in range(0, steps, block):
            k = torch.arange(start, min(start + block, steps), dtype=torch.float32)
            r = (k + (0.5 if rule == "midpoint" else 0.0)) / steps
            seen = {}

            def hook(m, args, kwargs, output):
                out = output[0] if isinstance(output, tuple) else output
                h_in = (
                    (args[0] if args else kwargs["hidden_states"])
                    if (what == "layer" and object == "delta")
                    else 0
                )
                orig = (out - h_in).clone().detach()
                base = (
                    orig.mean(dim=1, keepdim=True)
                    if baseline == "position-mean"
                    else torch.zeros_like(orig[:, :1])
                )
                tgt = (orig * r[:, None, None] + base * (1 - r[:, None, None])).requires_grad_()
                seen.update(orig=orig, base=base, tgt=tgt)
                new = h_in + tgt
                return (new,) + tuple(output[1:]) if isinstance(output, tuple) else new

            handle = mod.register_forward_hook(hook, with_kwargs=True)
            try:
                with torch.enable_grad():
                    logits = (
                        model(input_ids=x.repeat(len(r), 1), use_cache=False).logits[:, :-1].float()
                    )
                    scores = (
                        torch.softmax(logits, -1)
                        if target == "prob"
                        else torch.log_softmax(logits, -1)
                    )
                    tid = x[:, 1:].repeat(len(r), 1)
                    oprobs = scores.gather(-1, tid.unsqueeze(-1))[..., 0]
                    (grad,) = torch.autograd.grad(oprobs[:, -alen:].sum(), seen["tgt"])
            finally:
                handle.remove()
            l_igrads = l_igrads + (grad * (seen["orig"] - seen["base"])).detach().double().sum(0)
        rows.append(l_igrads.sum(-1) / steps)
    return torch.stack(rows).numpy()


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL_OF_MAX * np.abs(want).max())


@pytest.mark.parametrize(
    "family", ["llama", "qwen2"]
)  # llama's tokenizer adds a BOS, which the mean includes
def test_default_is_p1s_integrated_gradients(family, zoo):
    """align's default (no variant given) against the P1 reference, every part, layer and
    position of both prompts, rtol 1e-4 and atol 1e-5 of the largest |A| (float32 both)."""
    from align.analyses import igrad

    path = zoo(family)
    model = _hf(path)
    prompts = _align_prompts(path)
    res = igrad.integrated_gradients(model, prompts, batch_size=16)
    assert res["variant"] == igrad.Variant(**P1)
    for i, (q, a) in enumerate(TEXTS):
        ids, alen = _p1_ids(path, q, a)
        assert list(prompts[i].token_id) == ids
        np.testing.assert_array_equal(
            np.flatnonzero(prompts[i].predicts_answer), np.arange(len(ids) - 1 - alen, len(ids) - 1)
        )
        for pi, part in enumerate(igrad.PARTS):
            want = p1_igrads(model, ids, alen, part)
            assert np.abs(want).max() > 1e-4
            _close(res["A"][i, pi, :, : len(ids)], want)
        assert np.isnan(res["A"][i, :, :, len(ids) :]).all()


def _f(model, ids, alen, hook=None, module=None):
    """Σ of the answer tokens' probabilities of one plain forward, optionally under a hook."""
    handle = module.register_forward_hook(hook) if hook else None
    try:
        with torch.no_grad():
            p = torch.softmax(
                model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, :-1].double(), -1
            )
    finally:
        if handle:
            handle.remove()
    return float(sum(p[t, ids[t + 1]] for t in range(len(ids) - 1 - alen, len(ids) - 1)))


def test_p1s_completeness_is_reported(zoo):
    """f(x) is the plain model's summed answer probability, f(baseline) that of the model whose
    block output is its own mean over positions (a plain hook), and the stored gap is
    Σ_t A − (f(x) − f(baseline)), which falls as a first-order rule's does: 3 to 5 times from
    N = 64 to 256 in every layer (a midpoint rule's would fall about 16 times)."""
    from align.analyses import igrad

    path = zoo("llama")
    model = _hf(path)
    prompts = _align_prompts(path)
    fine = igrad.integrated_gradients(model, prompts, parts=("layer",))
    coarse = igrad.integrated_gradients(model, prompts, parts=("layer",), steps=64)
    for i, (q, a) in enumerate(TEXTS):
        ids, alen = _p1_ids(path, q, a)
        np.testing.assert_allclose(fine["f"][i], _f(model, ids, alen), rtol=1e-5)
        for l in range(2):

            def to_mean(m, args, output):
                h = output[0] if isinstance(output, tuple) else output
                new = h.mean(dim=1, keepdim=True).expand_as(h)
                return (new,) + tuple(output[1:]) if isinstance(output, tuple) else new

            np.testing.assert_allclose(
                fine["f_baseline"][i, 0, l],
                _f(model, ids, alen, to_mean, model.model.layers[l]),
                rtol=1e-5,
            )
        delta = fine["f"][i] - fine["f_baseline"][i]
        np.testing.assert_allclose(fine["gap"][i], np.nansum(fine["A"][i], -1) - delta, atol=1e-9)
        ratio = np.abs(coarse["gap"][i]) / np.abs(fine["gap"][i])
        assert ((ratio > 3) & (ratio < 5)).all(), ratio


@pytest.fixture(scope="module")
def llama_p1(zoo):
    """The llama zoo model, its first prompt and P1's reference attributions per part."""
    path = zoo("llama")
    model = _hf(path)
    ids, alen = _p1_ids(path, *TEXTS[0])
    return (
        path,
        model,
        ids,
        alen,
        {part: p1_igrads(model, ids, alen, part) for part in ("layer", "attn", "mlp")},
    )


SWITCHES = [
    ("object", "delta"),
    ("baseline", "zero"),
    ("target", "logprob"),
    ("rule", "midpoint"),
    ("steps", 64),
]


@pytest.mark.parametrize("option,value", SWITCHES)
def test_each_option_switched_alone(option, value, llama_p1):
    """P1's preset with one option changed equals the P1 reference with that one change
    (tolerances as above), differs from the default where the option applies (by more than ten
    times that tolerance; the rule's change at N = 256 is the smallest, about 0.15% of the
    largest |A|), and leaves the parts it does not apply to unchanged (--object: attn and
    mlp)."""
    from align.analyses import igrad

    path, model, ids, alen, defaults = llama_p1
    prompts = _align_prompts(path)[:1]
    v = igrad.variant("p1", **{option: value})
    assert v.protocol() == "custom" and getattr(v, option) == value
    res = igrad.integrated_gradients(model, prompts, variant=v)
    for pi, part in enumerate(igrad.PARTS):
        want = p1_igrads(model, ids, alen, part, **{**P1, option: value})
        got = res["A"][0, pi, :, : len(ids)]
        _close(got, want)
        default = defaults[part]
        if option == "object" and part != "layer":
            _close(got, default)
        else:
            assert np.abs(got - default).max() > 10 * ATOL_OF_MAX * np.abs(default).max(), (
                option,
                part,
            )


def test_the_align_preset_is_the_former_variant(zoo):
    """--protocol align: what the block adds, from zero, log p, midpoint, 64 steps (the
    reference with all four changed)."""
    from align.analyses import igrad

    path = zoo("qwen2")
    model = _hf(path)
    prompts = _align_prompts(path)[:1]
    ids, alen = _p1_ids(path, *TEXTS[0])
    v = igrad.variant("align")
    assert (
        v == igrad.Variant("delta", "zero", "logprob", "midpoint", 64) and v.protocol() == "align"
    )
    res = igrad.integrated_gradients(model, prompts, variant=v)
    for pi, part in enumerate(igrad.PARTS):
        _close(
            res["A"][0, pi, :, : len(ids)],
            p1_igrads(
                model,
                ids,
                alen,
                part,
                object="delta",
                baseline="zero",
                target="logprob",
                rule="midpoint",
                steps=64,
            ),
        )


def test_cli_default_is_p1_and_prints_its_completeness(cli, zoo, tmp_path):
    """`align igrad` with no variant option: attrs["variant"] is P1's, f(x) is the plain model's
    summed answer probability, and the log line names the variant and its completeness gap."""
    import json

    from align.store import open_result

    path = zoo("llama")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "".join(json.dumps({"text": q, "answer": a}) + "\n" for q, a in TEXTS), encoding="utf-8"
    )
    out = tmp_path / "g.zarr"
    code, _, err = cli("igrad", path, prompts, "--parts", "layer", "-o", out)
    assert code == 0, err
    assert (
        "variant p1: object residual, baseline position-mean, target prob, left rule, 256 steps"
        in err
    )
    assert "completeness: largest |Σ_t A − (f(x) − f(baseline))|" in err
    ds = open_result(str(out), "igrad")
    assert (
        ds.attrs["variant"] == {"protocol": "p1", **P1}
        and ds.attrs["rule"] == "left"
        and ds.attrs["steps"] == 256
    )
    model = _hf(path)
    for i, (q, a) in enumerate(TEXTS):
        ids, alen = _p1_ids(path, q, a)
        np.testing.assert_allclose(float(ds["f"][i]), _f(model, ids, alen), rtol=1e-5)
    code, _, err = cli("plot", out, "-o", tmp_path / "g.png")
    assert code == 0, err


@pytest.mark.parametrize(
    "option,value", [("--rule", "trapezoid"), ("--object", "heads"), ("--protocol", "p2")]
)
def test_a_bad_variant_option_is_one_line(option, value, cli, zoo, tmp_path):
    from tests.helpers.assertions import one_line_error

    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"text": "a b", "answer": " c"}\n', encoding="utf-8")
    out = tmp_path / "g.zarr"
    code, _, err = cli("igrad", zoo("qwen2"), prompts, option, value, "-o", out)
    one_line_error(code, err, option, value)
    assert not out.exists()
