"""`align depthscore --dry-run`: what it reads (each level's prompts), the resamples it will
draw, counted by hand from hand-built skip results; nothing written. Off a terminal the run
prints a progress line of its resamples."""

from __future__ import annotations

import re

from tests.cli.test_depthscore_intervals import PARTS, _random_prompts, _skip_result

B, SIZES, LEVELS = 200, (7, 5), (3, 2)
L = 4


def _results(tmp_path):
    """One skip result (the future setting) per level, of SIZES[i] prompts."""
    data = [_random_prompts(i + 1, n) for i, n in enumerate(SIZES)]
    return [_skip_result(tmp_path / f"s{i}", *d) for i, d in enumerate(data)]


def _depthscore(paths, out, *more):
    levels = ",".join(str(v) for v in LEVELS)
    return ("depthscore", *paths, "--levels", levels, "--bootstrap", B, "-o", out, *more)


def test_dry_run_counts_prompts_and_resamples(cli, tmp_path):
    paths = _results(tmp_path)
    out = tmp_path / "ds.zarr"
    code, _, err = cli(*_depthscore(paths, out, "--dry-run"))
    assert code == 0, err
    assert not out.exists()
    lines = [line.strip() for line in err.splitlines()]
    assert lines[0] == f"align depthscore --dry-run: {out} (a depthscore result)"
    assert f"reads      2 skip results of {L} layers:" in lines
    for path, level, n in zip(paths, LEVELS, SIZES):
        assert f"level {level}  {path}: {n} prompts (resampled: future {n})" in lines
    cells = len(PARTS) * 2 * 2  # parts × aggregations (max, mean) × effects (layer, output)
    (computes,) = [line for line in lines if line.startswith("computes")]
    assert computes == (
        f"computes   DS of {cells} cells (parts × aggs × effects) per level, setting and "
        f"resample: {B} resamples × 2 levels × 1 setting = {B * 2} resamples over "
        f"{B * sum(SIZES):,} prompts drawn"
    )
    (timed,) = [line for line in lines if line.startswith("one batch")]
    assert timed.startswith(
        f"one batch  50 resamples of level {LEVELS[0]} (future, {SIZES[0]} prompts)"
    )
    assert re.fullmatch(
        r"time +~[\d.,e+-]+ s \(reading the results not counted\); nothing was written", lines[-1]
    )


def test_run_shows_progress_off_a_terminal(cli, tmp_path):
    paths = _results(tmp_path)
    code, _, err = cli(*_depthscore(paths, tmp_path / "ds.zarr"))
    assert code == 0, err
    n = B * len(SIZES)  # one setting a level
    last = [line for line in err.splitlines() if "resample" in line and "ETA" in line]
    assert last and re.fullmatch(
        rf"align depthscore: level {LEVELS[-1]} future, resample {n}/{n}, [\d,]+ resamples/s, "
        r"ETA 0 s",
        last[-1],
    ), err
