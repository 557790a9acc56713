"""Companion analyses (docs/methods.md): contribution, skipping, logit lens, effective depth,
residual erasure and integrated gradients.

Functions take arrays or a model and return arrays; `align.analyses.run` writes results.
Submodules import torch where a model runs, so importing this package is cheap."""

from align.analyses.answers import load_answer_prompts
from align.analyses.checkpoint import read_head
from align.analyses.contrib import (
    contributions,
    contributions_from_model,
    contributions_from_store,
    token_contributions,
)
from align.analyses.depth import depth_from_results, effective_depth
from align.analyses.erase import erasure, reference_mean
from align.analyses.igrad import integrated_gradients
from align.analyses.interventions_run import run_erase, run_igrad
from align.analyses.lens import logit_lens, logit_lens_from_store
from align.analyses.lens import token_metrics as lens_token_metrics
from align.analyses.prompts import load_prompts
from align.analyses.run import run_contrib, run_depth, run_lens, run_skip
from align.analyses.skip import skip_effects, skipping, split_points

__all__ = [
    "contributions",
    "contributions_from_model",
    "contributions_from_store",
    "depth_from_results",
    "effective_depth",
    "erasure",
    "integrated_gradients",
    "lens_token_metrics",
    "load_answer_prompts",
    "load_prompts",
    "logit_lens",
    "logit_lens_from_store",
    "read_head",
    "reference_mean",
    "run_contrib",
    "run_depth",
    "run_erase",
    "run_igrad",
    "run_lens",
    "run_skip",
    "skip_effects",
    "skipping",
    "split_points",
    "token_contributions",
]
