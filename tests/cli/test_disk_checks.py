"""The disk checks count what is really written (docs/reliability.md, "Output safety").

`align extract` and `align fit` check the free space before computing anything. They
counted the bytes of the values alone: `extract --dry-run` said 15.5 MiB where the store took
~30 MiB (each boundary's last partial chunk is written whole; files and folders take whole
blocks; metadata), and on a 64 KiB tmpfs extract and fit passed the check, computed, and
failed at the write ("No space left on device", no path). Here the arithmetic is compared
with what `du` reports for stores and results really written, and the checks run on a real
small tmpfs (skipped, with the reason, where it cannot be mounted).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace

import pytest

from align.extraction import ExtractOptions
from tests.helpers.assertions import one_line_error

KiB = 1 << 10


def du(path) -> int:
    """Bytes `path` takes on disk, as du(1) counts them (allocated blocks)."""
    return int(
        subprocess.run(
            ["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True, check=True
        ).stdout.split()[0]
    )


STORES = {
    "chunks of 2048 tokens, sublayers": {"chunk_tokens": 2048, "sublayers": True},
    "default": {},
    "bfloat16, no codec, sublayers": {
        "store_dtype": "bfloat16",
        "codec": "none",
        "sublayers": True,
    },
    "40 tokens": {"max_tokens": 40},
}


@pytest.mark.parametrize("options", list(STORES.values()), ids=list(STORES))
def test_store_bytes_count_what_a_written_store_takes(extracted, options):
    """`plan.store_bytes` against du of a store `align extract` wrote: each chunked array is
    never more than du says (every chunk whole, the last one padded: 2,455 tokens in chunks
    of 2,048 take 4,096), and at most 2% + 4 blocks above it (folders a file system charges
    less for); the whole store likewise, within 5% + 64 KiB (the group's metadata is counted
    twice, as a progress update writes it beside the old one, and the lock file)."""
    from align.extraction import plan
    from align.store import open_activations

    path = extracted("qwen2", **options)
    store = open_activations(path)
    sizes = plan.store_bytes(store.layout, store.provenance)
    for name in os.listdir(path):
        if os.path.isdir(os.path.join(path, name)) and name in sizes:
            measured = du(os.path.join(path, name))
            assert measured <= sizes[name] <= 1.02 * measured + 16 * KiB, (
                name,
                sizes[name],
                measured,
            )
    total, measured = sum(sizes.values()), du(path)
    assert measured <= total <= 1.05 * measured + 64 * KiB, (total, measured)


def test_dry_run_says_what_the_run_writes(zoo, corpus_file, tmp_path):
    """The dry run's total against du of the store the same command then writes (chunks of
    2,048 tokens for 2,455: the old figure, the values alone, was 60% of it)."""
    import align

    out = tmp_path / "s.zarr"
    options = ExtractOptions(chunk_tokens=2048, sublayers=True)
    report = align.extract(
        zoo("qwen2"), corpus_file, str(out), replace(options, dry_run=True), log=lambda m: None
    )
    assert not out.exists()
    align.extract(zoo("qwen2"), corpus_file, str(out), options, log=lambda m: None)
    measured = du(out)
    assert measured <= report.dry_run["total_bytes"] <= 1.05 * measured + 64 * KiB, (
        report.dry_run["total_bytes"],
        measured,
    )


def test_extract_on_a_small_disk_is_refused_before_computing(cli, zoo, corpus_file, tmpfs):
    """40 tokens: the values take 31 KiB, the store written ~200 KiB; on a 64 KiB tmpfs the
    run used to compute and fail at the write, leaving a store behind."""
    out = tmpfs / "s.zarr"
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out, "--max-tokens", "40")
    line = one_line_error(code, err, str(out), "needs", "is free there", "nothing was computed")
    assert "64.0 KiB" in line  # what the file system says is free
    assert os.listdir(tmpfs) == []


def test_extract_whose_disk_fills_while_writing_names_the_store(
    cli, zoo, corpus_file, tmpfs, monkeypatch
):
    """The check told there is room (the disk fills after it, as when another process takes
    the space): one line naming the store and that it resumes, not a bare "No space left on
    device"."""
    monkeypatch.setenv("ALIGN_FREE_DISK_BYTES", str(1 << 40))
    out = tmpfs / "s.zarr"
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out, "--max-tokens", "40")
    one_line_error(
        code,
        err,
        f"no space left on the device while writing store {out}",
        "resumes",
        progress=("align extract: ",),
    )


def test_fit_on_a_small_disk_is_refused_before_computing(cli, fit_pair, tmpfs):
    """Without --save-maps a result of 3 x 5 pairs is ~30 arrays of a few hundred bytes, and
    ~540 KiB on disk (every file and folder a block): the check counted ~60 KiB, passed on a
    64 KiB tmpfs, and the fit failed at the write."""
    out = tmpfs / "a.zarr"
    code, _, err = cli(
        "fit", *fit_pair, "-o", out, "--scheduler", "synchronous", "--alphas", "1e-3,1e-1"
    )
    one_line_error(
        code, err, f"-o {out}", "needs up to", "only 64.0 KiB is free", "nothing was computed"
    )
    assert os.listdir(tmpfs) == []


def test_live_fit_on_a_small_disk_is_refused_before_computing(cli, zoo, corpus_file, tmpfs):
    out = tmpfs / "a.zarr"
    code, _, err = cli(
        "fit",
        "--live",
        zoo("qwen2"),
        zoo("qwen2", num_hidden_layers=4, hidden_size=96),
        corpus_file,
        "-o",
        out,
        "--alphas",
        "1e-3,1e-1",
    )
    one_line_error(
        code,
        err,
        f"-o {out}",
        "needs up to",
        "only 64.0 KiB is free",
        "nothing was computed",
        progress=("align fit: ",),
    )
    assert os.listdir(tmpfs) == []


@pytest.mark.parametrize(
    "extra",
    [[], ["--save-maps"], ["--convergence", "--save-maps"]],
    ids=["scores", "maps", "convergence"],
)
def test_result_bytes_bound_what_a_fit_writes(cli, fit_pair, tmp_path, extra):
    """`budget.result_bytes` for the fit's pairs, held-out documents and attributes (as the
    check before the fit counts them) against du of the result written: never less, at most
    1.5x (it counts every array a result can hold)."""
    from align.fitting.planning.budget import ResultShape, result_bytes
    from align.store import open_result

    out = tmp_path / "a.zarr"
    code, _, err = cli("fit", *fit_pair, "-o", out, "--scheduler", "synchronous", *extra)
    assert code == 0, err
    ds = open_result(str(out), "alignment")
    attrs = len(
        json.dumps(
            {"source": ds.attrs["source"], "target": ds.attrs["target"], "split": ds.attrs["split"]}
        )
    )
    need = result_bytes(
        ResultShape(
            ds.sizes["source_boundary"],
            ds.sizes["target_boundary"],
            64,
            96,
            ds.sizes["heldout_doc"],
        ),
        "W" in ds,
        attrs,
    )
    measured = du(out)
    assert measured <= sum(need) <= 1.5 * measured, (need, measured)
