"""A device out-of-memory error is one line naming the device, what was asked and what was
free, and the option of the command that lowers it.

No GPU here: torch's own OutOfMemoryError is raised, with the message CUDA gives, from the
place where a real run meets it (loading the model onto the GPU; a statistics product), and the
real CLI reports it."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.assertions import one_line_error
from tests.helpers.fixtures_fit import fit_pair  # noqa: F401

CUDA_TEXT = (
    "CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of 79.15 GiB of which "
    "1.06 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in use. Of the "
    "allocated memory 77.50 GiB is allocated by PyTorch. If reserved but unallocated memory is large try "
    "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)


def _oom(*args, **kwargs):
    raise torch.OutOfMemoryError(CUDA_TEXT)


def _one_line(code, err):
    line = one_line_error(code, err, progress=("align fit: ", "align extract: "))
    assert line.startswith("align: error: out of memory on cuda:0"), line
    assert "asked for 2.50 GiB" in line and "1.06 GiB free of 79.15 GiB" in line, line
    return line


def test_extract_oom_names_device_sizes_and_batch_size(
    zoo, corpus_file, tmp_path, cli, monkeypatch
):
    import align.models

    monkeypatch.setattr(align.models, "load_model", _oom)
    out = tmp_path / "s.zarr"
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out)
    assert "--batch-size" in _one_line(code, err)
    assert not out.exists()  # the model is loaded before the store is created


@pytest.mark.parametrize("command", ["contrib", "lens", "skip"])
def test_analysis_oom_names_batch_size(zoo, corpus_file, tmp_path, cli, monkeypatch, command):
    import align.models

    monkeypatch.setattr(align.models, "load_model", _oom)
    out = tmp_path / "r.zarr"
    code, _, err = cli(command, zoo("qwen2"), corpus_file, "-o", out)
    assert "--batch-size" in _one_line(code, err)
    assert not out.exists()


def test_fit_oom_names_task_tokens(fit_pair, tmp_path, cli, monkeypatch):  # noqa: F811
    import align.fitting.store_route.graph

    monkeypatch.setattr(align.fitting.store_route.graph, "chunk_statistics", _oom)
    out = tmp_path / "r.zarr"
    code, _, err = cli("fit", *fit_pair, "-o", out, "--scheduler", "synchronous")
    assert "--task-tokens" in _one_line(code, err)
    assert not out.exists()
