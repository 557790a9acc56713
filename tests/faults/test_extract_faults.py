"""Crash safety and flat memory of `align extract`, with real processes.

A run is killed with SIGKILL at a named fault point (ALIGN_FAULT), the test checks the point
was reached (ALIGN_FAULT_LOG) and that the store reads as incomplete, then re-runs the same
command and compares the result array for array, bit for bit, with an uninterrupted run of
the same batch size.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import zarr

import align
from align.extraction import ExtractOptions
from align.store import open_activations
from tests.helpers.faults import killed_run

ARGS = ["--batch-size", "2", "--chunk-tokens", "256", "--sublayers"]


def _cmd(model, corpus, out, *extra):
    return [
        sys.executable,
        "-m",
        "align.cli.main",
        "extract",
        model,
        corpus,
        "-o",
        out,
        *ARGS,
        *extra,
    ]


def _assert_same_store(a: str, b: str):
    ga, gb = zarr.open_group(a, mode="r"), zarr.open_group(b, mode="r")
    names = sorted(k for k, _ in ga.arrays())
    assert names == sorted(k for k, _ in gb.arrays())
    for name in names:
        np.testing.assert_array_equal(ga[name][...], gb[name][...], err_msg=name)
    assert ga.attrs["progress"] == gb.attrs["progress"]
    assert ga.attrs["layout"] == gb.attrs["layout"]


@pytest.fixture(scope="module")
def baseline(zoo, corpus_file, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("base") / "base.zarr")
    align.extract(
        zoo("qwen2"),
        corpus_file,
        out,
        ExtractOptions(batch_size=2, chunk_tokens=256, sublayers=True),
        log=lambda m: None,
    )
    return out


@pytest.mark.parametrize("point", ["between_batches:3", "mid_chunk_write:2", "final_metadata"])
def test_killed_run_resumes_to_identical_store(zoo, corpus_file, tmp_path, baseline, point, cli):
    out = str(tmp_path / "s.zarr")
    log = tmp_path / "fault.log"
    killed_run(_cmd(zoo("qwen2"), corpus_file, out), log, point)
    name = point.partition(":")[0]
    killed = open_activations(out)
    assert not killed.complete  # a killed store never reads as complete
    assert os.path.exists(os.path.join(out, "align.lock"))  # the dead run's lock is still there
    if name != "final_metadata":
        assert killed.progress["committed_tokens"] < killed.n_tokens
    # What a write killed inside zarr leaves behind: a temporary file beside a chunk.
    stray = os.path.join(out, "resid", "c", "stray.partial")
    os.makedirs(os.path.dirname(stray), exist_ok=True)
    open(stray, "wb").write(b"\0" * 100)

    # The kill needs a process of its own; the rerun does not (this process, the same command).
    code, _, err = cli(*_cmd(zoo("qwen2"), corpus_file, out)[3:])
    assert code == 0, err
    assert "resuming" in err and "stale lock" in err
    _assert_same_store(out, baseline)
    leftovers = [
        f for _, _, fs in os.walk(out) for f in fs if f.endswith(".partial") or f == "align.lock"
    ]
    assert leftovers == []


def _max_rss_kib(cmd) -> int:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert os.waitstatus_to_exitcode(status) == 0, err
    return usage.ru_maxrss


def test_peak_memory_is_flat_in_corpus_size(zoo, tmp_path):
    """Peak RSS with a corpus 8x larger stays within 5%. Chunks of 1024 tokens, so both runs
    reach the writer's steady state (the smaller corpus already spans ~10 chunks)."""
    words = "the residual stream of every layer is written to the store in chunks".split()
    rng = np.random.default_rng(0)
    docs = [" ".join(rng.choice(words, size=60)) for _ in range(150)]
    small, large = tmp_path / "small.txt", tmp_path / "large.txt"
    small.write_text("\n\n".join(docs))
    large.write_text("\n\n".join(docs * 8))
    model = zoo("qwen2")
    rss = {}
    for name, corpus in (("small", small), ("large", large)):
        out = str(tmp_path / f"{name}.zarr")
        rss[name] = _max_rss_kib(
            [
                sys.executable,
                "-m",
                "align.cli.main",
                "extract",
                model,
                str(corpus),
                "-o",
                out,
                "--batch-size",
                "16",
                "--chunk-tokens",
                "1024",
            ]
        )
    n_small, n_large = (
        open_activations(str(tmp_path / "small.zarr")).n_tokens,
        open_activations(str(tmp_path / "large.zarr")).n_tokens,
    )
    assert n_large == 8 * n_small
    assert rss["large"] <= 1.05 * rss["small"], rss
