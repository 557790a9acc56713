"""Which integrated gradients `align igrad` computes: the variant's five choices and the two
presets (`align.analyses.igrad` has the definition).

Kept apart from the computation (no torch here) so that the CLI can take its choice lists
from these constants without loading a model library.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field

from align.declarations import option
from align.errors import InputError

OBJECTS = ("residual", "delta")  # part "layer": h_{l+1} itself, or what block l adds, h_{l+1} − h_l
BASELINES = ("position-mean", "zero")  # the object's mean over positions, or 0
TARGETS = ("prob", "logprob")  # Σ over answer-predicting τ of p(x_{τ+1}), or of log p(x_{τ+1})
RULES = ("left", "midpoint")  # r_k = k/N, or (k + ½)/N, k = 0..N−1
PRESETS = "the protocol's preset"  # the default of an option the protocol sets
_CHOICES = {"object": OBJECTS, "baseline": BASELINES, "target": TARGETS, "rule": RULES}


@dataclass(frozen=True)
class Variant:
    """One integrated-gradients variant: what is interpolated (`object`, for part "layer"),
    from which `baseline`, the `target` differentiated, the Riemann `rule` and its `steps` N."""

    object: str = field(
        metadata=option("--object", choices=OBJECTS, default=None, shown_default=PRESETS)
    )
    """What is interpolated for part `layer`: the residual h_{l+1} block l writes (`residual`)
    or what it adds, h_{l+1} − h_l (`delta`); `attn` and `mlp` interpolate the sublayer's output
    either way."""
    baseline: str = field(
        metadata=option("--baseline", choices=BASELINES, default=None, shown_default=PRESETS)
    )
    """The interpolation's start: the object's mean over the prompt's positions
    (`position-mean`), or 0 (`zero`)."""
    target: str = field(
        metadata=option("--target", choices=TARGETS, default=None, shown_default=PRESETS)
    )
    """What is differentiated: the answer tokens' summed probability (`prob`) or
    log-probability (`logprob`)."""
    rule: str = field(metadata=option("--rule", choices=RULES, default=None, shown_default=PRESETS))
    """The Riemann rule: points k/N (`left`) or (k + ½)/N (`midpoint`)."""
    steps: int = field(
        metadata=option(
            "--steps",
            metavar="N",
            type="whole",
            least=1,
            default=None,
            shown_default=PRESETS + " (256, 64)",
        )
    )
    """Interpolation points N."""

    def protocol(self) -> str:
        """The preset this variant is ("p1", "align"), or "custom" for any other mix."""
        return next((name for name, v in PROTOCOLS.items() if v == self), "custom")

    def to_attrs(self) -> dict:
        """The variant as a result's attrs["variant"] (JSON), its preset's name included."""
        return {"protocol": self.protocol(), **dataclasses.asdict(self)}

    def describe(self) -> str:
        return (
            f"{self.protocol()}: object {self.object}, baseline {self.baseline}, target {self.target}, "
            f"{self.rule} rule, {self.steps} steps"
        )


# P1's code (lib/igrad.py, get_igrads_multiple): the block's output residual, its mean over
# positions, the answer tokens' summed probability, r = k/N with N = 256. "align" is the
# completeness-checked variant align ran before: what the block adds, from zero, log p, midpoint.
PROTOCOLS = {
    "p1": Variant("residual", "position-mean", "prob", "left", 256),
    "align": Variant("delta", "zero", "logprob", "midpoint", 64),
}


def variant(protocol: str = "p1", **options) -> Variant:
    """The preset `protocol` with each option given (object, baseline, target, rule, steps;
    None keeps the preset's) in its place. InputError names a value that is not allowed."""
    if protocol not in PROTOCOLS:
        raise InputError(f"`protocol` {protocol!r} must be one of {', '.join(PROTOCOLS)}")
    unknown = [k for k in options if k not in _CHOICES and k != "steps"]
    if unknown:
        raise TypeError(f"variant() got an unknown option {unknown[0]!r}")
    given = {k: v for k, v in options.items() if v is not None}
    for name, value in given.items():
        if name in _CHOICES and value not in _CHOICES[name]:
            raise InputError(f"`{name}` {value!r} must be one of {', '.join(_CHOICES[name])}")
    steps = given.get("steps")
    if steps is not None and (
        isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 1
    ):
        raise InputError(f"`steps` {steps!r} must be a whole number of at least 1")
    if steps is not None:
        given["steps"] = int(steps)
    return dataclasses.replace(PROTOCOLS[protocol], **given)
