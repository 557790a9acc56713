"""`align fit SOURCE TARGET --dry-run` on two stores: the plan and the estimate of every part
(ridge's statistics and held-out pass, the streamed measures' sums, values, interval and
procrustes-heldout's rotations, the calibration's null and the row measures), timed on the
stores' own rows, and nothing written: no result, nothing new beside it, the stores' files
unchanged; a plan over an hour says so in its first line."""

from __future__ import annotations

import os


def _files(folder) -> dict:
    """{path: (size, mtime_ns)} of every file under `folder`."""
    out = {}
    for root, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(root, n)
            st = os.stat(p)
            out[p] = (st.st_size, st.st_mtime_ns)
    return out


ARGS = (
    "--scheduler",
    "synchronous",
    "--alphas",
    "0.01",
    "--bootstrap",
    "100",
    "--measures",
    "cka,procrustes,procrustes-heldout,mknn",
    "--permutations",
    "3",
    "--sample-rows",
    "60",
    "--target-boundaries",
    "0,2",
)


def test_dry_run_prints_the_plan_and_every_part_and_writes_nothing(fit_pair, cli, tmp_path):
    S, T = fit_pair
    before = {**_files(S), **_files(T)}
    code, out, err = cli("fit", S, T, "-o", tmp_path / "a.zarr", "--dry-run", *ARGS)
    assert code == 0, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("align fit --dry-run: whole run ~"), lines[0]
    assert "nothing was written" in lines[0]
    assert any("pairs in 1 block(s)" in line for line in lines), err
    parts = next(line for line in lines[1:] if line.startswith("align fit --dry-run: statistics"))
    for part in (
        "statistics",
        "held-out",
        "measure sums",
        "measure values",
        "measure interval",
        "measure group passes",
        "procrustes-heldout rotations",
        "procrustes-heldout null",
        "row measures, interval and calibration",
    ):
        assert f"{part} " in parts and " s" in parts, (part, parts)
    memory = lines[-1]
    assert "memory per worker (the plan)" in memory and "sampled rows" in memory, memory
    assert "the measures' sums, with the interval" in memory, memory
    assert os.listdir(tmp_path) == []
    assert {**_files(S), **_files(T)} == before


def test_a_plan_over_an_hour_says_so_first(fit_pair, cli, tmp_path, monkeypatch):
    """The first line names a plan over an hour (the hour made a millisecond here, the
    input of this case: the bench's stores take seconds)."""
    from align.fitting.store_route import estimate as store_estimate

    monkeypatch.setattr(store_estimate, "HOUR", 1e-3)
    S, T = fit_pair
    code, _, err = cli(
        "fit", S, T, "-o", tmp_path / "b.zarr", "--dry-run", *ARGS[:4], "--target-boundaries", "0"
    )
    assert code == 0, err
    first = err.strip().splitlines()[0]
    assert first.startswith("align fit --dry-run: over an hour (~"), first
