"""align.store: the only code that imports zarr. Schemas, create/append/open, validation,
bfloat16 handling."""

from align.store import footprint
from align.store.group import clean_partial_writes, configure_zarr, exists, read_attrs
from align.store.layout import Layout, chunk_tokens_for
from align.store.lifecycle import (
    COMPLETE,
    Existing,
    Opened,
    end_run,
    inspect_activations,
    start_run,
    writing_activations,
)
from align.store.lock import write_lock
from align.store.outputs import (
    block_bytes,
    check_file_output,
    check_output,
    check_protocol,
    free_bytes,
    used_bytes,
)
from align.store.paths import is_local, local_path
from align.store.reader import ActivationStore, open_activations
from align.store.results import RESULT_SCHEMAS, open_alignment, open_result, write_result
from align.store.writer import ActivationWriter, PlanWriter, create_activations

__all__ = [
    "ActivationStore",
    "ActivationWriter",
    "Layout",
    "PlanWriter",
    "chunk_tokens_for",
    "clean_partial_writes",
    "configure_zarr",
    "create_activations",
    "exists",
    "is_local",
    "write_lock",
    "open_activations",
    "read_attrs",
    "COMPLETE",
    "Existing",
    "Opened",
    "end_run",
    "inspect_activations",
    "start_run",
    "writing_activations",
    "block_bytes",
    "check_file_output",
    "check_output",
    "check_protocol",
    "footprint",
    "free_bytes",
    "local_path",
    "used_bytes",
    "RESULT_SCHEMAS",
    "open_alignment",
    "open_result",
    "write_result",
]
