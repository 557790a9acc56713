"""Companion analyses (docs/methods.md): contribution, skipping, logit lens, effective depth,
residual erasure and integrated gradients.

Functions take arrays or a model and return arrays; `align.analyses.run` writes results.
Submodules import torch lazily, so importing this package is cheap."""

_LAZY = {
    "contributions": ("align.analyses.contrib", "contributions"),
    "contributions_from_model": ("align.analyses.contrib", "contributions_from_model"),
    "contributions_from_store": ("align.analyses.contrib", "contributions_from_store"),
    "token_contributions": ("align.analyses.contrib", "token_contributions"),
    "skipping": ("align.analyses.skip", "skipping"),
    "skip_effects": ("align.analyses.skip", "skip_effects"),
    "split_points": ("align.analyses.skip", "split_points"),
    "logit_lens": ("align.analyses.lens", "logit_lens"),
    "logit_lens_from_store": ("align.analyses.lens", "logit_lens_from_store"),
    "lens_token_metrics": ("align.analyses.lens", "token_metrics"),
    "read_head": ("align.analyses.checkpoint", "read_head"),
    "effective_depth": ("align.analyses.depth", "effective_depth"),
    "depth_from_results": ("align.analyses.depth", "depth_from_results"),
    "load_prompts": ("align.analyses.prompts", "load_prompts"),
    "run_contrib": ("align.analyses.run", "run_contrib"),
    "run_skip": ("align.analyses.run", "run_skip"),
    "run_lens": ("align.analyses.run", "run_lens"),
    "run_depth": ("align.analyses.run", "run_depth"),
    "erasure": ("align.analyses.erase", "erasure"),
    "reference_mean": ("align.analyses.erase", "reference_mean"),
    "integrated_gradients": ("align.analyses.igrad", "integrated_gradients"),
    "load_answer_prompts": ("align.analyses.answers", "load_answer_prompts"),
    "run_erase": ("align.analyses.interventions_run", "run_erase"),
    "run_igrad": ("align.analyses.interventions_run", "run_igrad"),
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'align.analyses' has no attribute {name!r}")
