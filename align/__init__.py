"""align: does a deeper language model use its depth?

Public entry points (`extract` and the stores' functions are imported on first use, so that
`import align` stays fast: align.extraction loads torch):

- `align.extract(...)`: residual streams of a model over a corpus into an activation store
  (`align.extraction`; the model as `align.ModelSpec`, the corpus as `align.CorpusSpec`, how
  the store is written as `align.ExtractOptions`).
- `align.fit(...)`: ridge maps from every boundary of one store to every boundary of another
  (`align.fitting`; what it computes as `align.FitSpec`, where it runs as `align.Execution`).
- `align.open_alignment(path)`: the alignment result as an xarray Dataset.
- `align.apply_map(result, x, source_boundary, target_boundary)`: a map saved with `save_maps`
  applied to new activations (x W + c).
- `align.store.open_activations(path)`: per-boundary access to an activation store.
"""

from align.fitting import Execution, FitSpec, apply_map, fit
from align.version import __version__

__all__ = [
    "CorpusSpec",
    "Execution",
    "ExtractOptions",
    "FitSpec",
    "ModelSpec",
    "apply_map",
    "fit",
    "__version__",
    "extract",
    "open_alignment",
    "open_activations",
]

_LAZY = {
    "CorpusSpec": ("align.corpus", "CorpusSpec"),
    "ExtractOptions": ("align.extraction", "ExtractOptions"),
    "ModelSpec": ("align.models", "ModelSpec"),
    "extract": ("align.extraction", "extract"),
    "open_alignment": ("align.store", "open_alignment"),
    "open_activations": ("align.store", "open_activations"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'align' has no attribute {name!r}")


def __dir__():
    """The module's names with the lazily imported ones, so that completion offers `extract`."""
    return sorted(set(globals()) | set(_LAZY))
