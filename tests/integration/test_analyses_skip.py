"""Layer skipping (docs/methods.md) against a plain one-prompt-at-a-time reference with its own
hooks, and the structural checks: deletion, zeroing, empty set, future-setting zeros."""

import numpy as np
import pytest
import torch

from tests.helpers.assertions import one_line_error
from tests.helpers.fixtures_analyses import (
    SUBLAYERS,
    hf_prompts,
    ref_forward,
    ref_skipping,
    ref_splits,
)
from tests.helpers.zoo import CORPUS_TEXT

FAMILIES = ("qwen2", "llama", "qwen3", "olmo2")


def _prompts(tok, n=4, max_length=30):
    ps = [np.array(p) for p in hf_prompts(tok, CORPUS_TEXT, 12, max_length)]
    # one short prompt (< 13 tokens: skipped by the future setting) and some long ones
    short = ps[0][:10]
    long = [p for p in ps[1:] if len(p) >= 13][: n - 1]
    return [short] + long


@pytest.mark.parametrize("family", FAMILIES)
def test_matches_reference(family, hf_models):
    """Both settings, all three parts, batched 3 rows per forward with right padding, vs the
    float64 reference: R and O per prompt, max and mean over prompts, rtol 1e-4 / atol 1e-5."""
    from align.analyses import skipping

    model, tok = hf_models(family)
    prompts = _prompts(tok)
    assert len(prompts[0]) < 13 and len({len(p) for p in prompts}) > 1
    res = skipping(model, prompts, batch_size=3, seed=7)
    assert res["n_prompts"] == {"current": 4, "future": 3} and res["n_prompts_too_short"] == 1
    for si, setting in enumerate(("current", "future")):
        Rp, Op = ref_skipping(model, family, [list(p) for p in prompts], setting, seed=7)
        np.testing.assert_allclose(res["per_prompt"][setting][0], Rp, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(res["per_prompt"][setting][1], Op, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(res["R"][si, :, 0], Rp.max(0), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(res["R"][si, :, 1], Rp.mean(0), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(res["O"][si, :, 0], Op.max(0), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(res["O"][si, :, 1], Op.mean(0), rtol=1e-4, atol=1e-5)
    # the effects are not trivially zero: skipping block 0 changes the output
    assert res["O"][0, 0, 0, 0] > 1e-3


def test_split_points_rule():
    """range(8, T−4, 8) shuffled, first 4; none below T = 13; reproducible per (seed, prompt)."""
    from align.analyses import split_points

    assert split_points(12, 0, 0) == [] and split_points(13, 0, 0) == [8]
    pts = split_points(100, 3, 5)
    assert len(pts) == 4 and set(pts) <= set(range(8, 96, 8)) and pts == split_points(100, 3, 5)
    assert pts == ref_splits(100, 3, 5)
    assert any(split_points(100, s, 5) != pts for s in range(4))  # the seed matters


def test_batched_equals_one_at_a_time(hf_models):
    from align.analyses import skipping

    model, tok = hf_models("qwen2")
    prompts = _prompts(tok, n=4, max_length=40)
    one = skipping(model, prompts, batch_size=1)
    many = skipping(model, prompts, batch_size=8)
    np.testing.assert_allclose(many["R"], one["R"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(many["O"], one["O"], rtol=1e-5, atol=1e-6)


def _deleted(model, family, s):
    """A copy of `model` with block s removed (weights of later blocks shifted down)."""
    from transformers import AutoModelForCausalLM

    cfg = model.config.to_dict()
    cfg["num_hidden_layers"] -= 1
    if cfg.get("layer_types"):
        cfg["layer_types"] = cfg["layer_types"][:s] + cfg["layer_types"][s + 1 :]
    config = type(model.config).from_dict(cfg)
    small = AutoModelForCausalLM.from_config(config).eval()
    state = {}
    for k, v in model.state_dict().items():
        if k.startswith("model.layers."):
            i = int(k.split(".")[2])
            if i == s:
                continue
            k = k.replace(f"model.layers.{i}.", f"model.layers.{i - 1 if i > s else i}.", 1)
        state[k] = v
    small.load_state_dict(state)
    return small


@pytest.mark.parametrize("family", ("llama", "olmo2"))
def test_skip_everywhere_equals_deleting_the_block(family, hf_models):
    """With the test-only switch (position 0 included), skipping block s = deleting it:
    O = max_τ ‖p_deleted − p‖ and R[s, l] (l > s) from the deleted model's C_{l−1}; rtol 1e-4."""
    from align.analyses import skipping

    model, tok = hf_models(family, num_hidden_layers=3)
    prompts = _prompts(tok, n=3)[1:]
    res = skipping(
        model,
        prompts,
        settings=("current",),
        parts=("layer",),
        batch_size=2,
        include_position_zero=True,
    )
    Rp, Op = res["per_prompt"]["current"]
    for s in range(3):
        small = _deleted(model, family, s)
        for i, ids in enumerate(prompts):
            clean = ref_forward(model, family, list(ids))
            gone = ref_forward(small, family, list(ids))
            O = np.linalg.norm(gone[3] - clean[3], axis=-1).max()
            np.testing.assert_allclose(Op[i, 0, s], O, rtol=1e-4, atol=1e-6)
            C = clean[0][1:] - clean[0][:-1]
            Cg = gone[0][1:] - gone[0][:-1]
            for l in range(s + 1, 3):
                R = (
                    np.linalg.norm(C[l] - Cg[l - 1], axis=-1) / np.linalg.norm(C[l], axis=-1)
                ).max()
                np.testing.assert_allclose(Rp[i, 0, s, l], R, rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(Rp[i, 0, s, s], 1.0, rtol=1e-6)  # C'_s = 0 everywhere


@pytest.mark.parametrize("family", ("qwen2", "olmo2"))
def test_skip_attention_equals_zeroing_its_output(family, hf_models):
    """Skipping attention at every position = a model whose attention adds nothing (o_proj,
    or OLMo2's post-attention norm, set to zero)."""
    from align.analyses import skipping

    model, tok = hf_models(family)
    prompts = _prompts(tok, n=3)[1:]
    res = skipping(
        model,
        prompts,
        settings=("current",),
        parts=("attn",),
        include_position_zero=True,
        batch_size=4,
    )
    Op = res["per_prompt"]["current"][1]
    for s in range(2):
        zeroed = type(model)(model.config).eval()
        zeroed.load_state_dict(model.state_dict())
        name = "o_proj" if SUBLAYERS[family][0] == "self_attn" else None
        with torch.no_grad():
            layer = zeroed.model.layers[s]
            target = layer.self_attn.o_proj if name else layer.post_attention_layernorm
            target.weight.zero_()
        for i, ids in enumerate(prompts):
            clean, z = ref_forward(model, family, list(ids)), ref_forward(zeroed, family, list(ids))
            np.testing.assert_allclose(
                Op[i, 0, s], np.linalg.norm(z[3] - clean[3], axis=-1).max(), rtol=1e-4, atol=1e-6
            )


@pytest.mark.parametrize("family", ("qwen2", "llama"))
def test_empty_intervention_is_exactly_zero(family, hf_models):
    from align.analyses.skip import Row, skip_effects

    model, tok = hf_models(family)
    prompts = _prompts(tok, n=3)
    rows = [Row(i, p, np.zeros(len(p), bool), np.ones(len(p), bool)) for i, p in enumerate(prompts)]
    R, O = skip_effects(model, rows)
    assert R.shape == (3, 2, 2, 3) and O.shape == (3, 2, 3)
    assert np.array_equal(R, np.zeros_like(R)) and np.array_equal(O, np.zeros_like(O))


def test_future_setting_zeros(hf_models):
    """Future setting: R[s, s] = 0 and R[s, l < s] = 0 exactly (block s's input is unchanged at
    measured positions); skipping the LAST block before the split changes nothing measured
    (positions ≥ t are not intervened on, positions < t are not measured): O = 0 exactly."""
    from align.analyses import skipping

    model, tok = hf_models("qwen3", num_hidden_layers=3)
    res = skipping(model, _prompts(tok, n=3)[1:], settings=("future",), batch_size=4)
    R, O = res["R"][0], res["O"][0]
    for s in range(3):
        assert np.all(R[:, :, s, s] == 0) and np.all(R[:, :, s, :s] == 0)
    assert np.all(O[:, :, 2] == 0) and np.all(R[:, :, 2] == 0)
    assert np.all(R[0, 0, 0, 1:] > 0) and np.all(O[:, :, 0] > 0)  # earlier blocks do reach them


def test_current_setting_never_touches_position_zero(hf_models):
    """Position 0 is never intervened on: for a one-token prompt nothing changes."""
    from align.analyses import skipping

    model, tok = hf_models("qwen2")
    res = skipping(model, [np.array([5]), np.array([7])], settings=("current",), batch_size=2)
    assert np.all(res["R"] == 0) and np.all(res["O"] == 0)


def test_no_prompt_long_enough(cli, zoo, corpus_file, tmp_path):
    code, _, err = cli(
        "skip",
        zoo("qwen2"),
        corpus_file,
        "-o",
        tmp_path / "s.zarr",
        "--max-length",
        "12",
        "--max-docs",
        "3",
    )
    assert code == 2
    one_line_error(code, err, "future setting", "13 tokens", "has 12")


def test_cli_skip_schema(cli, zoo, corpus_file, tmp_path):
    from align.store import open_result

    out = tmp_path / "s.zarr"
    code, _, err = cli(
        "skip",
        zoo("qwen2"),
        corpus_file,
        "-o",
        out,
        "--max-docs",
        "3",
        "--max-length",
        "40",
        "--split-seed",
        "3",
        "--batch-size",
        "16",
    )
    assert code == 0, err
    ds = open_result(out, "skipping")
    assert ds["R"].dims == ("setting", "part", "agg", "skipped", "later") and ds["O"].dims == (
        "setting",
        "part",
        "agg",
        "skipped",
    )
    assert list(ds["setting"].values) == ["current", "future"] and list(ds["part"].values) == [
        "layer",
        "attn",
        "mlp",
    ]
    assert (
        list(ds["agg"].values) == ["max", "mean_over_prompts"]
        and ds.sizes["skipped"] == ds.sizes["later"] == 2
    )
    assert (
        ds.attrs["seed"] == 3 and ds.attrs["n_layers"] == 2 and ds.attrs["n_prompts_too_short"] >= 0
    )
    assert ds.attrs["n_prompts"] > 0 and "config_hash" in ds.attrs and "corpus" in ds.attrs
    R = ds["R"].values
    assert np.all(R[..., 1, 0] == 0)  # later < skipped
    assert np.all(ds["R"].sel(agg="max").values >= ds["R"].sel(agg="mean_over_prompts").values)


def test_cli_bad_settings(cli, zoo, corpus_file, tmp_path):
    code, _, err = cli(
        "skip", zoo("qwen2"), corpus_file, "-o", tmp_path / "s.zarr", "--settings", "now"
    )
    assert code == 2
    one_line_error(code, err, "'now'", "current, future")
