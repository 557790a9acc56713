"""Which weights run: `ModelSpec`, part of a store's defining options, and the compute dtypes."""

from __future__ import annotations

from dataclasses import dataclass

from align.errors import InputError

DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class ModelSpec:
    """Everything that decides which weights run: part of a store's defining options."""

    name: str
    revision: str | None = None
    dtype: str | None = None  # None: bfloat16 where a GPU computes, float32 on CPU
    device: str = "cpu"  # cpu | cuda | auto
    trust_remote_code: bool = False
    allow_pickle_weights: bool = False
    random_init: bool = False
    seed: int = 0
    family: str | None = (
        None  # a family asserted for the model_type (--family); None: the table's, or discovered
    )
    # How the model is recorded (a model object in memory, saved into a temporary folder for
    # the run: "in memory: NAME"); None: its folder's absolute path or its hub id.
    label: str | None = None

    def resolved_dtype(self) -> str:
        if self.dtype is not None:
            if self.dtype not in DTYPES:
                raise InputError(f"`dtype` {self.dtype!r} is not one of {', '.join(DTYPES)}")
            return self.dtype
        if self.device == "cuda":
            return "bfloat16"
        if self.device == "auto":
            import torch

            return "bfloat16" if torch.cuda.is_available() else "float32"
        return "float32"
