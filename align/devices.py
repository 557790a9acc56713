"""Where a command computes: the devices each kind of work accepts, and the one check of a
device asked for (before weights are hashed or a corpus is tokenized). Shared by extraction,
the analyses and the fit, so that none of them imports another for it."""

from __future__ import annotations

import re

from align.errors import InputError
from align.models.spec import DEVICES

FIT_DEVICES = ("cpu", "cuda", "cuda:N")  # where a fit's products and solves run (torch on a GPU)
MODEL_DEVICES = DEVICES  # where a model runs (auto: accelerate's device_map)


def check_device(device: str, accepted: tuple = FIT_DEVICES) -> None:
    """Refuse a device that is not one of `accepted` or does not exist here.

    Cheap: it runs before weights are hashed or a corpus is tokenized. FIT_DEVICES is where a
    fit computes, MODEL_DEVICES where `align extract` runs a model.

    Parameters
    ----------
    device : str
        The device asked for: "cpu", "cuda", "cuda:N" (a CUDA GPU by index) or "auto"
        (accelerate's device_map: any GPUs torch sees, or the CPU).
    accepted : tuple of str
        The devices this caller takes (FIT_DEVICES or MODEL_DEVICES).

    Raises
    ------
    InputError
        In one line naming the device: not accepted, or no such CUDA device here.
    """
    indexed = (
        "cuda:N" in accepted
        and isinstance(device, str)
        and re.fullmatch(r"cuda:\d+", device) is not None
    )
    if device not in accepted and not indexed:
        raise InputError(f"`device` {device!r} is not one of {', '.join(accepted)}")
    if device in ("cpu", "auto"):
        return
    import torch

    if not torch.cuda.is_available():
        raise InputError(
            f"`device` {device} was asked for but torch sees no CUDA device: use `device` cpu"
        )
    n = torch.cuda.device_count()
    if indexed and int(device.split(":")[1]) >= n:
        raise InputError(f"`device` {device}: torch sees {n} CUDA GPU(s), cuda:0 to cuda:{n - 1}")
