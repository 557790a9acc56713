"""A checkpoint loads only when its weights are exactly what its config's architecture expects:
every tensor present and used, every file whole, a config that does not contradict itself. Each
refusal is one line; the expected tensors are read from the files with `safetensors` alone."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from safetensors import safe_open

from tests.helpers.assertions import one_line_error


def tensors(folder) -> list[str]:
    """The tensor names of every safetensors file of `folder`, read with safetensors alone."""
    names = []
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(folder, f), "pt") as st:
                names += list(st.keys())
    return sorted(names)


def copy_with(zoo, tmp_path, name="m", family="qwen2", **config_changes):
    """A copy of a zoo model whose config.json has `config_changes` applied."""
    folder = tmp_path / name
    shutil.copytree(zoo(family), folder)
    path = folder / "config.json"
    config = json.loads(path.read_text())
    if "num_hidden_layers" in config_changes and "layer_types" in config:
        # qwen2's config lists a layer type per block: kept consistent with the new depth
        config["layer_types"] = [config["layer_types"][0]] * config_changes["num_hidden_layers"]
    config.update(config_changes)
    path.write_text(json.dumps(config))
    return folder


def refusal(folder, **spec) -> str:
    from align.errors import ModelError
    from align.models import ModelSpec, load_model

    with pytest.raises(ModelError) as e:
        load_model(ModelSpec(str(folder), **spec))
    line = str(e.value)
    assert "\n" not in line, line
    return line


def test_a_config_of_more_blocks_than_the_weights_is_refused(zoo, tmp_path):
    folder = copy_with(zoo, tmp_path, num_hidden_layers=3)
    held = tensors(folder)
    block2 = sorted(n for n in held if n.startswith("model.layers.1."))
    expected_missing = sorted(n.replace("model.layers.1.", "model.layers.2.") for n in block2)
    line = refusal(folder)
    assert f"{len(expected_missing)} expected tensor(s) not in the weights" in line, line
    assert f"(first {expected_missing[0]})" in line, line
    assert "use the config saved with these weights" in line


def test_a_config_of_fewer_blocks_than_the_weights_is_refused(zoo, tmp_path):
    folder = copy_with(zoo, tmp_path, num_hidden_layers=1)
    unused = sorted(n for n in tensors(folder) if n.startswith("model.layers.1."))
    line = refusal(folder)
    assert f"{len(unused)} tensor(s) of the weights unused (first {unused[0]})" in line, line
    assert "not in the weights" not in line


def test_qwen2_weights_under_a_llama_config_are_refused_naming_the_unused_biases(zoo, tmp_path):
    folder = copy_with(
        zoo, tmp_path, model_type="llama", architectures=["LlamaForCausalLM"], head_dim=16
    )
    biases = sorted(
        n for n in tensors(folder) if n.endswith(("q_proj.bias", "k_proj.bias", "v_proj.bias"))
    )
    assert biases  # qwen2's attention has q/k/v biases, llama's none
    line = refusal(folder)
    assert f"{len(biases)} tensor(s) of the weights unused (first {biases[0]})" in line, line


def test_a_hidden_size_that_disagrees_with_the_weights_is_one_line(zoo, tmp_path):
    folder = copy_with(zoo, tmp_path, hidden_size=32, head_dim=16)
    line = refusal(folder)
    assert "model" in line and ("shape" in line or "size" in line), line


def test_the_same_checkpoint_unchanged_loads(zoo):
    """The check refuses nothing a whole checkpoint holds (qwen2's tied unembedding is not in
    its file: tied weights are excepted by transformers' own rule)."""
    from align.models import ModelSpec, load_model

    assert "lm_head.weight" not in tensors(zoo("qwen2"))
    model, _ = load_model(ModelSpec(zoo("qwen2")))
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def test_a_sharded_checkpoint_with_one_shard_truncated_is_refused(zoo, tmp_path):
    from transformers import AutoModelForCausalLM

    folder = tmp_path / "sharded"
    shutil.copytree(zoo("qwen2"), folder)
    os.remove(folder / "model.safetensors")
    AutoModelForCausalLM.from_pretrained(zoo("qwen2")).save_pretrained(
        folder, max_shard_size="100KB"
    )
    shards = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    assert len(shards) > 2
    victim = folder / shards[1]
    size = victim.stat().st_size
    with open(victim, "r+b") as f:
        f.truncate(size - 100)
    line = refusal(folder)
    assert f"weights file {victim} is truncated" in line, line
    assert f"the file holds {size - 100:,} bytes" in line and f"up to byte {size:,}" in line


@pytest.mark.parametrize("damage", ["empty", "header"])
def test_an_empty_or_cut_weights_file_is_one_line(zoo, tmp_path, damage):
    folder = copy_with(zoo, tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(b"" if damage == "empty" else weights.read_bytes()[:50])
    line = refusal(folder)
    want = "is empty (0 bytes)" if damage == "empty" else "is truncated or not safetensors"
    assert f"weights file {weights} {want}" in line, line


@pytest.mark.parametrize(
    "changes,needle",
    [
        ({"num_hidden_layers": 0}, "num_hidden_layers 0; a model has 1 to 10,000 blocks"),
        ({"num_hidden_layers": -1}, "num_hidden_layers -1; a model has 1 to 10,000 blocks"),
        ({"num_hidden_layers": 10**9}, "num_hidden_layers 1000000000; a model has 1 to"),
        ({"num_hidden_layers": 2.5}, "num_hidden_layers 2.5; a model has 1 to"),
        (
            {"layer_types": ["full_attention"] * 3},
            "num_hidden_layers 2 but lists 3 layer_types",
        ),
    ],
)
def test_a_config_that_contradicts_itself_is_one_line(zoo, tmp_path, cli, changes, needle):
    folder = copy_with(zoo, tmp_path)
    path = folder / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    out = tmp_path / "s.zarr"
    (tmp_path / "c.txt").write_text("a b c\n")
    code, _, err = cli("extract", folder, tmp_path / "c.txt", "-o", out)
    one_line_error(code, err, needle)
    assert not out.exists()


def test_a_wrong_family_is_one_line(zoo, tmp_path, cli):
    (tmp_path / "c.txt").write_text("a b c\n")
    out = tmp_path / "s.zarr"
    code, _, err = cli("extract", zoo("qwen2"), tmp_path / "c.txt", "-o", out, "--family", "gpt2")
    one_line_error(code, err, "has no module 'transformer.h', where family gpt2 keeps a part")
    assert "--family" in err and not out.exists()


@pytest.mark.parametrize("command", ["extract", "contrib"])
def test_extract_and_analyses_write_nothing_from_a_config_of_more_blocks(
    zoo, tmp_path, cli, command
):
    folder = copy_with(zoo, tmp_path, num_hidden_layers=3)
    (tmp_path / "c.txt").write_text("one two three four\n")
    out = tmp_path / "out.zarr"
    code, _, err = cli(command, folder, tmp_path / "c.txt", "-o", out)
    one_line_error(code, err, "expected tensor(s) not in the weights (first model.layers.2.")
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["c.txt", "m"]


def test_fit_live_writes_nothing_from_weights_the_config_leaves_unused(
    zoo, corpus_file, tmp_path, cli
):
    folder = copy_with(
        zoo, tmp_path, model_type="llama", architectures=["LlamaForCausalLM"], head_dim=16
    )
    out = tmp_path / "r.zarr"
    code, _, err = cli("fit", "--live", zoo("qwen2"), folder, corpus_file, "-o", out)
    one_line_error(
        code,
        err,
        "tensor(s) of the weights unused (first model.layers.0.self_attn.k_proj.bias)",
        progress=("align fit --live: ",),
    )
    assert not out.exists()


def test_random_init_is_exempt(zoo, tmp_path):
    """A random initialisation reads no weights: a config of more blocks builds, with its own
    number of blocks."""
    from align.models import ModelSpec, load_model

    folder = copy_with(zoo, tmp_path, num_hidden_layers=3)
    model, _ = load_model(ModelSpec(str(folder), random_init=True, seed=1))
    assert len(model.model.layers) == 3


def test_a_damaged_file_not_checked_before_loading_is_still_one_line(zoo, tmp_path, monkeypatch):
    """Where the files are not checked first (a hub id's cached snapshot), safetensors' own
    error when transformers reads a truncated file is one line naming the checkpoint."""
    from align.models import weights

    monkeypatch.setattr(weights, "tensor_names", lambda folder: [])
    folder = copy_with(zoo, tmp_path)
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    line = refusal(folder)
    assert f"cannot load the weights of {str(folder)!r}: Error while deserializing header" in line
