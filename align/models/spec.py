"""Which weights run: `ModelSpec`, part of a store's defining options, and the compute dtypes."""

from __future__ import annotations

from dataclasses import dataclass, field

from align.declarations import Sides, flag, not_an_option, option
from align.errors import InputError
from align.models.families import NAMES

DTYPES = ("float32", "bfloat16", "float16")
DEVICES = ("cpu", "cuda", "auto")  # where a model runs (auto: accelerate's device_map)
# --device auto in the analyses: accelerate may also place layers on the CPU there.
AUTO_ANYWHERE = (
    '`auto` is accelerate\'s `device_map="auto"`: a model too large for one GPU spreads over '
    "several (and the CPU)"
)


@dataclass(frozen=True)
class ModelSpec:
    """Everything that decides which weights run: part of a store's defining options."""

    name: str = field(metadata=not_an_option("the MODEL argument"))
    """A model folder or a hub id; for `align.extract`, also a model object in memory (a
    transformers PreTrainedModel), saved into a temporary folder for the run."""
    revision: str | None = field(
        default=None,
        metadata=option(
            "--revision",
            metavar="TEXT",
            shown_default="the hub's default",
            sides=Sides(
                source=flag("--source-revision", help="--live: hub revision of the source model."),
                target=flag("--target-revision", help="--live: hub revision of the target model."),
            ),
        ),
    )
    """Hub revision (branch, tag or commit)."""
    dtype: str | None = field(
        default=None,
        metadata=option(
            "--dtype",
            choices=DTYPES,
            shown_default="float32 on CPU, bfloat16 on CUDA",
            variants={
                "analyses": "Compute dtype (the metrics are taken in float32 or better).",
                "lens": "Compute dtype; with `--store`, the head's (default: the compute dtype "
                "on `--device`). KL and overlap are taken in float32 or better.",
                "igrad": {
                    "help": "Compute dtype: only this command needs gradients, so it stays in "
                    "float32 unless told otherwise.",
                    "shown_default": "float32, on a GPU too",
                },
            },
            sides=Sides(
                shared=flag(
                    "--dtype",
                    help="--live: compute dtype of both models.",
                    choices=DTYPES,
                    shown_default="float32 on CPU, bfloat16 on CUDA",
                ),
                source=flag(
                    "--source-dtype",
                    help="--live: the source model's dtype.",
                    choices=DTYPES,
                    shown_default="--dtype",
                ),
                target=flag(
                    "--target-dtype",
                    help="--live: the target model's dtype.",
                    choices=DTYPES,
                    shown_default="--dtype",
                ),
            ),
        ),
    )
    """Compute dtype."""
    device: str = field(
        default="cpu",
        metadata=option(
            "--device",
            choices=DEVICES,
            variants={
                "analyses": AUTO_ANYWHERE + ".",
                "lens": AUTO_ANYWHERE + "; with `--store`, where the head runs (`auto`: the "
                "GPU when there is one).",
            },
        ),
    )
    """Where the model runs: `cpu`, `cuda`, or `auto`, accelerate's `device_map="auto"`: a model
    too large for one GPU spreads over the GPUs it needs."""
    trust_remote_code: bool = field(
        default=False,
        metadata=option(
            "--trust-remote-code",
            is_flag=True,
            sides=Sides(
                shared=flag(
                    "--trust-remote-code",
                    help="--live: allow the checkpoints' own Python code to run.",
                    is_flag=True,
                )
            ),
        ),
    )
    """Let the checkpoint's own Python code run."""
    allow_pickle_weights: bool = field(
        default=False,
        metadata=option(
            "--allow-pickle-weights",
            is_flag=True,
            sides=Sides(
                shared=flag(
                    "--allow-pickle-weights",
                    help="--live: also load .bin (pickle) weights.",
                    is_flag=True,
                )
            ),
        ),
    )
    """Also load `.bin` (pickle) weights; safetensors only otherwise."""
    random_init: bool = field(
        default=False,
        metadata=option(
            "--random-init",
            is_flag=True,
            sides=Sides(
                shared=flag(
                    "--random-init",
                    help="--live: both models with seeded random weights (the untrained control).",
                    is_flag=True,
                ),
                source=flag(
                    "--source-random-init",
                    help="--live: the source model only with random weights.",
                    is_flag=True,
                ),
                target=flag(
                    "--target-random-init",
                    help="--live: the target model only with random weights.",
                    is_flag=True,
                ),
            ),
        ),
    )
    """The same architecture from its config with seeded random weights: the untrained
    control."""
    seed: int = field(
        default=0,
        metadata=option(
            "--seed",
            metavar="N",
            type="seed",
            sides=Sides(
                source=flag(
                    "--source-init-seed",
                    help="--live: seed of the source's random weights (`align extract --seed`).",
                    type="seed",
                ),
                target=flag(
                    "--target-init-seed",
                    help="--live: seed of the target's random weights.",
                    type="seed",
                ),
            ),
        ),
    )
    """Seed of the random weights of `--random-init`."""
    family: str | None = field(
        default=None,
        metadata=option(
            "--family",
            metavar="NAME",
            choices=NAMES,
            shown_default="the family table's entry for the config's `model_type`, or discovered",
            sides=Sides(
                source=flag(
                    "--source-family",
                    help="--live: read the source model as this family (`align extract --family`).",
                    choices=NAMES,
                ),
                target=flag(
                    "--target-family",
                    help="--live: read the target model as this family.",
                    choices=NAMES,
                ),
            ),
        ),
    )
    """Read the model as this family (a renamed `model_type`), checked by a probe forward at
    load."""
    label: str | None = field(
        default=None, metadata=not_an_option("set by align.extract for a model object in memory")
    )
    """How the model is recorded (a model object in memory, saved into a temporary folder for
    the run: "in memory: NAME"); None: its folder's absolute path or its hub id."""

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
