"""--random-init draws on the target device, seeded, and records where; --device cuda loads a
checkpoint straight to the GPU.

The CPU path is checked against an independent build (transformers' own `from_config` under
`torch.manual_seed`, no align involved). The CUDA branches are checked by what they ask of
transformers (the device a random model is built under, the kwargs of from_pretrained),
with transformers' entry points replaced, so they run on a machine without a GPU."""

from __future__ import annotations

import pytest
import torch
import transformers
from torch.overrides import _get_current_function_mode_stack
from transformers import AutoConfig, AutoModelForCausalLM

from align import models, provenance
from align.store import open_activations


def test_random_init_on_cpu_equals_seeded_from_config(zoo):
    path = zoo("qwen2")
    model, _ = models.load_model(models.ModelSpec(path, device="cpu", random_init=True, seed=7))
    torch.manual_seed(7)
    ref = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path), dtype=torch.float32)
    got, want = model.state_dict(), ref.state_dict()
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].device.type == "cpu"
        assert torch.equal(got[k], want[k]), k  # bit for bit
    other, _ = models.load_model(models.ModelSpec(path, device="cpu", random_init=True, seed=8))
    assert not torch.equal(
        other.state_dict()["model.embed_tokens.weight"], want["model.embed_tokens.weight"]
    )


def test_random_init_provenance_records_the_device(zoo, corpus_file, tmp_path, cli):
    out = tmp_path / "r.zarr"
    code, _, err = cli(
        "extract",
        zoo("qwen2"),
        corpus_file,
        "-o",
        out,
        "--random-init",
        "--seed",
        "3",
        "--max-docs",
        "2",
    )
    assert code == 0, err
    w = open_activations(str(out)).provenance["weights"]
    assert w["kind"] == "random_init" and w["seed"] == 3 and w["init_device"] == "cpu"
    # A CPU draw keeps the identity stores made before the device was recorded have.
    assert w["id"].startswith("random init seed 3, config sha256 ")


class _Fake(torch.nn.Module):
    """What the replaced transformers entry points return: no tensors, and no `.to` (a model
    already on its device is never moved)."""

    def to(self, *a, **k):  # noqa: D401
        raise AssertionError(f"model moved after loading: .to{a}")


def _context_device():
    """The device of the active `with torch.device(...)` block (where new tensors go), or None."""
    found = [
        m.device for m in _get_current_function_mode_stack() if type(m).__name__ == "DeviceContext"
    ]
    return found[-1] if found else None


def test_cuda_random_init_builds_under_the_cuda_device(zoo, monkeypatch):
    seen = {}

    def from_config(config, **kwargs):
        seen["device"] = _context_device()
        seen["kwargs"] = kwargs
        seen["seed"] = torch.initial_seed()
        return _Fake()

    spec = models.ModelSpec(zoo("qwen2"), device="cuda", random_init=True, seed=11)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_config", from_config)
    models.load_model(spec)
    assert seen["device"] == torch.device("cuda")  # parameters are created and drawn there
    assert seen["seed"] == 11
    assert seen["kwargs"]["dtype"] == torch.bfloat16
    assert _context_device() is None  # the context ends with the build
    w = provenance.weights_identity(spec, models.load_config(spec))
    assert w["init_device"] == "cuda" and w["id"].startswith(
        "random init seed 11 on cuda, config sha256 "
    )
    cpu = provenance.weights_identity(
        models.ModelSpec(spec.name, random_init=True, seed=11), models.load_config(spec)
    )
    assert cpu["id"] != w["id"]  # another generator, other weights: another store


@pytest.mark.parametrize("device,want", [("cuda", {"": "cuda"}), ("auto", "auto"), ("cpu", None)])
def test_checkpoint_device_map(zoo, monkeypatch, device, want):
    seen = {}

    def from_pretrained(name, **kwargs):
        seen.update(kwargs)
        # as transformers answers output_loading_info=True: every tensor loaded, none unused
        info = {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": [], "error_msgs": []}
        return (_Fake(), info) if kwargs.get("output_loading_info") else _Fake()

    spec = models.ModelSpec(zoo("qwen2"), device=device)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    models.load_model(spec)
    assert seen.get("device_map") == want


def test_auto_random_init_draws_on_cpu(zoo):
    assert models.init_device("auto") == "cpu" and models.init_device("cpu") == "cpu"
    assert models.init_device("cuda") == "cuda"
