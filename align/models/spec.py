"""Which weights run: `ModelSpec`, part of a store's defining options, and the compute dtypes."""

from __future__ import annotations

from dataclasses import dataclass, field

from align.declarations import Sides, flag, not_an_option, option
from align.errors import InputError
from align.models.families import NAMES

DTYPES = ("float32", "bfloat16", "float16")
DEVICES = ("cpu", "cuda", "auto")  # where a model runs (auto: accelerate's device_map)
DTYPE_HELP = "Compute dtype [default: float32 on CPU, bfloat16 on CUDA]."
# --device auto on the analyses' pages: accelerate may also place layers on the CPU there.
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
            doc="hub revision (branch, tag or commit)",
            doc_default="the hub's default",
            doc_metavar="TEXT",
            help="Hub revision (branch, tag or commit).",
            sides=Sides(
                source=flag("--source-revision", help="--live: hub revision of the source model."),
                target=flag("--target-revision", help="--live: hub revision of the target model."),
            ),
        ),
    )
    """Hub revision (branch, tag or commit); None: the hub's default."""
    dtype: str | None = field(
        default=None,
        metadata=option(
            "--dtype",
            doc="compute dtype",
            doc_default="float32 on CPU, bfloat16 on CUDA",
            doc_variants={
                "analyses": {"doc": "compute dtype (the metrics are taken in float32 or better)"},
                "lens": {
                    "doc": "compute dtype; with `--store`, the head's (default: the compute dtype "
                    "on `--device`). KL and overlap are taken in float32 or better"
                },
                "igrad": {
                    "doc": "compute dtype: only this command needs gradients, so it stays in "
                    "float32 unless told otherwise",
                    "doc_default": "float32, on a GPU too",
                },
            },
            help=DTYPE_HELP,
            choices=DTYPES,
            variants={
                "gradients": "Compute dtype [default: float32 on every device: gradients need it]."
            },
            sides=Sides(
                shared=flag(
                    "--dtype",
                    help="--live: compute dtype of both models [default: float32 on CPU, "
                    "bfloat16 on CUDA].",
                    choices=DTYPES,
                ),
                source=flag(
                    "--source-dtype",
                    help="--live: the source model's dtype [default: --dtype].",
                    choices=DTYPES,
                ),
                target=flag(
                    "--target-dtype",
                    help="--live: the target model's dtype [default: --dtype].",
                    choices=DTYPES,
                ),
            ),
        ),
    )
    """Compute dtype; None: bfloat16 where a GPU computes, float32 on CPU."""
    device: str = field(
        default="cpu",
        metadata=option(
            "--device",
            doc='`auto` is accelerate\'s `device_map="auto"`: a model too large for one GPU spreads over the GPUs it needs',
            doc_variants={
                "analyses": {"doc": AUTO_ANYWHERE},
                "lens": {
                    "doc": AUTO_ANYWHERE + "; with `--store`, where the head runs (`auto`: the "
                    "GPU when there is one)"
                },
            },
            help="auto: accelerate's device_map='auto' (spreads a large model over the GPUs).",
            choices=DEVICES,
        ),
    )
    """Where the model runs: cpu, cuda or auto (accelerate's device_map)."""
    trust_remote_code: bool = field(
        default=False,
        metadata=option(
            "--trust-remote-code",
            doc="let the checkpoint's own Python code run",
            help="Allow the checkpoint's own Python code to run.",
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
    """Allow the checkpoint's own Python code to run."""
    allow_pickle_weights: bool = field(
        default=False,
        metadata=option(
            "--allow-pickle-weights",
            doc="also load `.bin` (pickle) weights; by default only safetensors",
            help="Also load .bin (pickle) weights; default is safetensors only.",
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
    """Also load .bin (pickle) weights; safetensors only otherwise."""
    random_init: bool = field(
        default=False,
        metadata=option(
            "--random-init",
            doc="the same architecture from its config with seeded random weights: the untrained control",
            help="Same architecture, seeded random weights: the untrained control.",
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
    """The same architecture with seeded random weights: the untrained control."""
    seed: int = field(
        default=0,
        metadata=option(
            "--seed",
            doc="seed of `--random-init`",
            doc_metavar="N",
            help="Seed of --random-init.",
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
    """Seed of the random weights (`random_init`)."""
    family: str | None = field(
        default=None,
        metadata=option(
            "--family",
            doc="read the model as this family (a renamed `model_type`); checked by a probe forward at load ([models](../index.md#what-every-command-shares))",
            doc_default="the family table's entry for the config's `model_type`, or discovered",
            doc_metavar="NAME",
            help="Read the model as this family (a renamed model_type); checked by a probe "
            "forward at load [default: the family table's, or discovered and checked].",
            choices=NAMES,
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
    """A family asserted for the model_type; None: the table's, or discovered."""
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
