"""Every analysis on a model split over devices (issue 10, point 5), on a CPU-only machine.

Why this is honest. A real `device_map` puts each block's weights on a device and wraps the
block's forward (accelerate's AlignDevicesHook) so its inputs are moved there first; what a
block returns stays on its device, and torch refuses any operation that mixes tensors of two
devices ("expected all tensors to be on the same device"), except a 0-dim CPU scalar. Two CPU
"devices" cannot be told apart by torch, so this test gives every tensor a device of its own
in a `TorchFunctionMode`, which sees every torch call made from Python (align's code and
transformers' alike):

- each tensor carries a fake device index (weights: the one of their block; anything else:
  what it was made from), reported by `.device` as `cpu:k` (type "cpu", so transformers takes
  its CPU code paths);
- `.to(cpu:k)`, `.cpu()` and factory functions given `device=` move a tensor, i.e. set its
  index; accelerate's real AlignDevicesHook on each placed module (embedding, blocks, final
  norm, unembedding, rotary embedding) moves the module's inputs with `.to`, as under
  `--device auto`; `.numpy()` needs device 0 (the host), as on CUDA;
- any other call whose tensor arguments sit on two devices raises, as torch does on a GPU.

The numbers themselves are computed on the CPU exactly as without the mode, so the split run
must give the one-device run's results bit for bit (compared at rtol 1e-6 all the same), and
`test_the_instrument_catches_a_combination_without_a_move` shows the mode fails the very
combination contrib made before it moved h_{l+1} and a_l to h_l's device (`h + a`).
"""

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from tests.helpers.zoo import CORPUS_TEXT, reference_tokenizer

HOST = 0
_ATTR = "_fake_device"


class DeviceMismatch(RuntimeError):
    pass


def _index(device) -> int | None:
    """The fake index a device argument names, or None if it names none."""
    if device is None:
        return None
    if isinstance(device, int):
        return device
    d = torch.device(device) if isinstance(device, str) else device
    if isinstance(d, torch.device):
        if d.type != "cpu":
            raise DeviceMismatch(f"device {d} in a CPU-only split")
        return d.index or HOST
    return None


def _real(device):
    return torch.device("cpu") if isinstance(device, (torch.device, str, int)) else device


def _tensors(x, acc):
    if isinstance(x, torch.Tensor):
        acc.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _tensors(y, acc)
    elif isinstance(x, dict):
        for y in x.values():
            _tensors(y, acc)
    return acc


def dev_of(t) -> int:
    return getattr(t, _ATTR, HOST)


def _tag(x, k):
    for t in _tensors(x, []):
        try:
            setattr(t, _ATTR, k)
        except Exception:  # noqa: BLE001  (a tensor that takes no attribute keeps the host)
            pass
    return x


_FACTORIES = {
    torch.zeros,
    torch.ones,
    torch.empty,
    torch.full,
    torch.arange,
    torch.tensor,
    torch.as_tensor,
    torch.eye,
    torch.linspace,
    torch.rand,
    torch.randn,
    torch.randint,
    torch.zeros_like,
    torch.ones_like,
    torch.empty_like,
    torch.full_like,
    torch.rand_like,
    torch.randn_like,
    torch.Tensor.new_zeros,
    torch.Tensor.new_ones,
    torch.Tensor.new_empty,
    torch.Tensor.new_full,
    torch.Tensor.new_tensor,
}
_TO_HOST = {torch.Tensor.numpy, torch.Tensor.tolist, torch.Tensor.item}
_CHECKED_HOST_READS = {torch.Tensor.numpy}  # CUDA refuses .numpy(), not .tolist() or .item()
_DEVICE_GET = torch.Tensor.device.__get__


class FakeDevices(TorchFunctionMode):
    """Tracks a fake device per tensor and refuses cross-device operations (module docstring)."""

    def __init__(self):
        super().__init__()
        self.n_moves = 0
        self.devices_seen = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func == _DEVICE_GET:
            k = dev_of(args[0])
            return torch.device("cpu", k) if k else torch.device("cpu")
        if func in (torch.Tensor.to, torch.Tensor.cpu):
            return self._move(func, args, kwargs)
        if (
            func is torch.autograd.grad
        ):  # autograd crosses devices; each gradient is on its input's device
            inputs = args[1] if len(args) > 1 else kwargs["inputs"]
            grads = func(*args, **kwargs)
            for g, x in zip(grads, [inputs] if isinstance(inputs, torch.Tensor) else inputs):
                _tag(g, dev_of(x))
            return grads
        if func in _CHECKED_HOST_READS and dev_of(args[0]) != HOST:
            raise DeviceMismatch(
                f"{func.__name__}() of a tensor on fake device {dev_of(args[0])}: move it to the host first"
            )
        target = _index(kwargs.get("device"))
        if "device" in kwargs:
            kwargs["device"] = _real(kwargs["device"])
        ins = _tensors(list(args) + list(kwargs.values()), [])
        # torch lets a 0-dim CPU tensor (a scalar) meet a tensor of any device; nothing else.
        devs = {dev_of(t) for t in ins if not (t.dim() == 0 and dev_of(t) == HOST)}
        if len(devs) > 1 and func not in _FACTORIES:
            raise DeviceMismatch(
                f"{getattr(func, '__name__', func)} mixes tensors on fake devices {sorted(devs)}"
            )
        out = func(*args, **kwargs)
        if func in _TO_HOST:
            return out
        k = (
            target
            if target is not None
            else (devs.pop() if devs else (dev_of(ins[0]) if ins else HOST))
        )
        self.devices_seen.add(k)
        return _tag(out, k)

    def _move(self, func, args, kwargs):
        t = args[0]
        if func is torch.Tensor.cpu:
            k, out = HOST, func(t)
        else:
            rest = list(args[1:])
            k = None
            for i, a in enumerate(rest):
                if isinstance(a, (torch.device, str, int)) and not isinstance(a, bool):
                    k, rest[i] = _index(a), torch.device("cpu")
                elif isinstance(a, torch.Tensor):  # .to(other): other's device and dtype
                    k, rest[i] = dev_of(a), a.dtype
            if "device" in kwargs:
                k, kwargs["device"] = _index(kwargs["device"]), torch.device("cpu")
            out = func(t, *rest, **kwargs)
            k = dev_of(t) if k is None else k
        if k != dev_of(t):
            self.n_moves += 1
            if out is t:  # a move gives a new tensor on the other device
                out = t.detach().clone() if not t.requires_grad else t.clone()
        return _tag(out, k)


def split(model, first_device_blocks: int):
    """Put the embedding and blocks 0..first−1 on fake device 1, the later blocks, the final
    norm and the unembedding (untied; tied: device 1) on fake device 2, each with accelerate's
    own AlignDevicesHook (what a device_map installs), which moves a module's inputs to its
    device before its forward runs."""
    from align import models

    blocks = models.blocks(model)
    placed = [(model.get_input_embeddings(), 1)]
    placed += [(b, 1 if i < first_device_blocks else 2) for i, b in enumerate(blocks)]
    # Tied weights stay together (as accelerate places them): the unembedding then sits with
    # the embedding on device 1, and the final norm before it on device 2.
    tied = models.unembed(model).weight is model.get_input_embeddings().weight
    placed += [(models.final_norm(model), 2), (models.unembed(model), 1 if tied else 2)]
    base = models.base_model(model)
    rot = getattr(base, "rotary_emb", None)
    if rot is not None:
        placed.append((rot, 1))
    from accelerate.hooks import AlignDevicesHook, add_hook_to_module

    for module, k in placed:
        with FakeDevices():  # the hook "moves" the weights to cpu:k as it is added
            add_hook_to_module(
                module,
                AlignDevicesHook(execution_device=torch.device("cpu", k), io_same_device=False),
            )
        for t in list(module.parameters()) + list(
            module.buffers()
        ):  # rebuilt by the hook: tagged here
            setattr(t, _ATTR, k)
    # dispatch_model's hook on the whole model: inputs to the main device, outputs (the logits)
    # back to the inputs' device.
    add_hook_to_module(
        model,
        AlignDevicesHook(execution_device=torch.device("cpu", 1), io_same_device=True),
        append=True,
    )
    return model


def _hf(path, dtype=torch.float32):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval().requires_grad_(False)


def _prompts(path, n=4, max_length=24):
    tok = reference_tokenizer(path)
    docs = [d for d in CORPUS_TEXT.split("\n\n") if d.strip()][:n]
    return [np.asarray(tok(d)["input_ids"][:max_length]) for d in docs]


def _answer_prompts(path):
    from align import models
    from align.analyses.answers import AnswerPrompt, tokenize_answer

    tok = models.load_tokenizer(models.ModelSpec(path))
    out = []
    for i, (q, a) in enumerate(
        [("the model reads every layer =", " 12 + 7"), ("so we fit linear maps", " from each")]
    ):
        ids, labels, pred, answer = tokenize_answer(tok, q + a, len(q), 64, f"prompt {i}")
        out.append(AnswerPrompt(ids, labels, pred, i, answer))
    return out


def _both(path, fn, n_layers=4):
    """fn(model) on one device, then on the split model under FakeDevices."""
    one = fn(_hf(path))
    model = split(_hf(path), first_device_blocks=n_layers // 2)
    mode = FakeDevices()
    with mode:
        two = fn(model)
    assert mode.n_moves > 0 and {1, 2} <= mode.devices_seen  # the split was real
    return one, two


def _close(a, b):
    if isinstance(a, dict):
        for k in a:
            if isinstance(a[k], (np.ndarray, float, int)) and not isinstance(a[k], bool):
                _close(a[k], b[k])
        return
    np.testing.assert_allclose(
        np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-6, atol=1e-9, equal_nan=True
    )


def test_the_instrument_catches_a_combination_without_a_move():
    """The fake devices refuse what a GPU refuses: `h + a` across devices (contrib before it
    moved a_l to h_l's device), `.numpy()` off the host; a move makes both fine."""
    with FakeDevices():
        h = torch.ones(3, 4, device=torch.device("cpu", 1))
        a = torch.ones(3, 4, device=torch.device("cpu", 2))
        with pytest.raises(DeviceMismatch, match="mixes tensors on fake devices"):
            h + a
        with pytest.raises(DeviceMismatch):
            h.norm(dim=-1).numpy()
        assert (h + a.to(h.device)).sum().cpu().numpy() == 24
        assert str(h.device) == "cpu:1" and str(a.to(h.device).device) == "cpu:1"
        # the unfixed contrib: token_contributions on tensors of two blocks' devices
        from align.analyses.contrib import token_contributions

        token_contributions(h, a, a, a)  # fixed: moves everything to h's device


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def deep(zoo, request):
    """4 layers, split 2 + 2; qwen2 ties its unembedding to the embedding (lm_head on device 1
    after a norm on device 2), llama does not (both on device 2)."""
    return zoo(request.param, num_hidden_layers=4)


def test_contrib_on_a_split_model_equals_one_device(deep):
    from align.analyses.contrib import contributions_from_model

    ps = _prompts(deep)
    one, two = _both(deep, lambda m: contributions_from_model(m, [ps[:2], ps[2:]]))
    _close(one, two)


def test_skip_on_a_split_model_equals_one_device(deep):
    from align.analyses.skip import skipping

    ps = _prompts(deep, 3, 20)
    one, two = _both(deep, lambda m: skipping(m, ps, settings=("current", "future"), batch_size=2))
    _close(one["R"], two["R"])
    _close(one["O"], two["O"])
    assert one["R"].max() > 0


def test_lens_on_a_split_model_equals_one_device(deep):
    from align.analyses.lens import logit_lens

    ps = _prompts(deep)
    one, two = _both(deep, lambda m: logit_lens(m, [ps[:3], ps[3:]]))
    _close(one, two)


def test_erase_on_a_split_model_equals_one_device(deep):
    from align.analyses import erase

    ps, ap = _prompts(deep), _answer_prompts(deep)

    def run(m):
        mean, _ = erase.reference_mean(m, ps, batch_size=3)
        return {"mean": mean, **erase.erasure(m, ap, mean, batch_size=4)}

    one, two = _both(deep, run)
    _close(one["mean"], two["mean"])
    _close(one["E"], two["E"])
    assert np.nanmax(one["E"]) > 0


def test_igrad_on_a_split_model_equals_one_device(deep):
    from align.analyses import igrad

    ap = _answer_prompts(deep)[:1]
    one, two = _both(deep, lambda m: igrad.integrated_gradients(m, ap, steps=4, batch_size=3))
    for k in ("A", "f", "f_baseline", "gap"):
        _close(one[k], two[k])
