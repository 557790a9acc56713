"""One batch from the device to host memory: the forward with hooks, the finite check, the
gather of real tokens, the cast to the storage dtype and one copy into the batch's host
arrays (pinned, on a side stream, on CUDA), with no host-device synchronisation per boundary."""

from __future__ import annotations

import numpy as np

from align import models
from align.errors import OverflowError16
from align.extraction.batches import pad
from align.hooks import capture
from align.store.codecs import FLOAT16_MAX


def _storage_torch_dtype(store_dtype: str):
    import torch

    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[
        store_dtype
    ]


_side_streams: dict = {}


def _side_stream(device):
    """One copy stream per CUDA device, made once (device-to-host copies overlap the next forward)."""
    import torch

    if device not in _side_streams:
        _side_streams[device] = torch.cuda.Stream(device=device)
    return _side_streams[device]


def forward_batch(
    model, batch, boundaries, layers, store_dtype: str, locate=None, pending: list | None = None
) -> dict[str, np.ndarray]:
    """Run one batch of sequences; returns {kind: (n_kept, n_real_tokens, d_model)} encoded
    for storage, tokens in sequence order, padding dropped. Non-finite values are refused
    before anything is encoded (`capture.check_finite`: the batch's one host-device
    synchronisation). The per-boundary loop never synchronises: which tokens are real is
    known on the host, so the gather is an `index_select` with indices made there, and each
    captured tensor is gathered, cast to the storage dtype and copied once into the batch's
    output (on CPU straight into it; on CUDA into pinned host memory, on a side stream,
    non-blocking). On CUDA the copies may still be running when this returns: each
    device's completion event is added to `pending` (a list), and whoever reads the arrays
    waits for them first; without `pending` this function waits itself."""
    import torch

    lengths = [len(x) for x in batch]
    T, n = max(lengths), sum(lengths)
    padded = min(lengths) < T
    ids, mask = pad(batch, models.input_device(model))
    out = capture.run(model, ids, mask, boundaries, layers)
    capture.check_finite(out, mask.bool(), locate)
    if store_dtype == "float16":
        _check_float16(out)
    tdt = _storage_torch_dtype(store_dtype)
    idx_host = None
    if padded:
        idx_host = torch.cat([torch.arange(i * T, i * T + k) for i, k in enumerate(lengths)])
    idx_on: dict = {}
    events: dict = {}
    result = {}
    for kind, index in (("resid", boundaries), ("attn", layers), ("mlp", layers)):
        if not index:
            continue
        rows = None
        for r, i in enumerate(index):
            t = out[kind].pop(i)
            d = t.shape[-1]
            if rows is None:
                cuda = (
                    any(x.device.type == "cuda" for x in out[kind].values())
                    or t.device.type == "cuda"
                )
                rows = torch.empty(
                    (len(index), n, d), dtype=tdt, pin_memory=cuda and torch.cuda.is_available()
                )
            flat = t.reshape(-1, d)
            if t.device.type == "cuda":
                dev = t.device
                side = _side_stream(dev)
                if dev not in events:
                    side.wait_stream(torch.cuda.current_stream(dev))
                with torch.cuda.stream(side):
                    if padded:
                        if dev not in idx_on:
                            idx_on[dev] = idx_host.pin_memory().to(dev, non_blocking=True)
                        flat = flat.index_select(0, idx_on[dev])
                    rows[r].copy_(flat.to(tdt), non_blocking=True)
                    t.record_stream(side)
                    events[dev] = True
            elif padded and flat.dtype == tdt and t.device.type == "cpu":
                torch.index_select(
                    flat, 0, idx_host, out=rows[r]
                )  # gathered straight into the output
            else:
                if padded:
                    if t.device not in idx_on:
                        idx_on[t.device] = idx_host.to(t.device)
                    flat = flat.index_select(0, idx_on[t.device])
                rows[r].copy_(flat)  # the cast to the storage dtype happens in this copy
            del t, flat
        result[kind] = rows
    waits = []
    for dev in events:
        ev = torch.cuda.Event()
        ev.record(_side_stream(dev))
        waits.append(ev)
    if pending is not None:
        pending.extend(waits)
    else:
        for ev in waits:
            ev.synchronize()
    return {k: _as_stored(v, store_dtype) for k, v in result.items()}


def _as_stored(t, store_dtype: str) -> np.ndarray:
    """A host tensor in the storage dtype as the numpy array the store holds (bfloat16 as its
    uint16 bits), sharing memory."""
    import torch

    if store_dtype == "bfloat16":
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _check_float16(out: dict) -> None:
    """float16 storage refuses values beyond ±65504 (store.codecs.encode's check): one
    maximum per tensor on its device, the maxima gathered, one host read for the batch."""
    import torch

    named = [(k, i, t) for k in ("resid", "attn", "mlp") for i, t in out[k].items()]
    if not named:
        return
    dev = named[0][2].device
    amax = torch.stack([t.abs().amax().float().to(dev) for _, _, t in named]).cpu().numpy()
    for (kind, i, _), v in zip(named, amax):
        if not np.isfinite(v) or v > FLOAT16_MAX:
            raise OverflowError16(
                f"{kind} at {'boundary' if kind == 'resid' else 'layer'} {i} has a value of magnitude {float(v):.6g}, "
                f"beyond float16's {FLOAT16_MAX:g}: use `store_dtype` bfloat16 or float32"
            )
