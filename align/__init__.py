"""align: does a deeper language model use its depth?

Public entry points (torch, zarr, xarray and the other heavy packages are imported where they
are first used, so `import align` stays fast):

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

from align.corpus import CorpusSpec
from align.extraction import ExtractOptions, extract
from align.fitting import Execution, FitSpec, apply_map, fit
from align.models import ModelSpec
from align.store import open_activations, open_alignment
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
