"""`align.extract(...)` at the import path `align` resolves it from: the code lives in the
package align.extraction. This module goes once `align/__init__.py` takes `extract` from
align.extraction."""

from __future__ import annotations

import sys
import types

from align.extraction import ExtractOptions, ExtractReport, dropped_summary, extract

__all__ = ["ExtractOptions", "ExtractReport", "dropped_summary", "extract"]


class _CallableModule(types.ModuleType):
    """`align.extract(...)` calls the function even after `import align.extract`."""

    def __call__(self, *args, **kwargs):
        return extract(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
