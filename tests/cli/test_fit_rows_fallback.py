"""`align fit --workers 2` where a worker's share of the budget cannot hold the row measures'
rows and working memory: they run in this process (rows_tasks.runner), and the fit's output
says so in one line naming the bytes a worker would hold and its share; the result holds the
measure."""

from __future__ import annotations

import pytest

NEED = 7 * 2**40  # the working memory counted for the row measures: the input of this case


@pytest.mark.slow  # starts a local cluster of two worker processes: ~30 s
def test_the_row_measures_held_back_from_the_workers_are_said(fit_pair, cli, tmp_path, monkeypatch):
    from align.fitting.measuring import rows_tasks
    from align.store import open_result

    monkeypatch.setattr(rows_tasks, "row_measures_bytes", lambda shape: NEED)
    S, T = fit_pair
    out = tmp_path / "r.zarr"
    code, _, err = cli(
        "fit",
        S,
        T,
        "-o",
        out,
        "--workers",
        "2",
        "--memory-limit",
        "3GB",
        "--alphas",
        "0.01",
        "--measures",
        "mknn",
        "--permutations",
        "3",
        "--sample-rows",
        "60",
        "--bootstrap",
        "0",
        "--target-boundaries",
        "2",
    )
    assert code == 0, err
    said = [line for line in err.splitlines() if "run in this process, not on the" in line]
    assert len(said) == 1, err
    assert said[0].startswith(
        "align fit: the row measures (mknn) run in this process, not on the 2 workers: a "
        "worker would hold 7.0 TiB"
    ), said[0]
    assert "more than its share of the budget" in said[0], said[0]
    assert open_result(str(out), "alignment")["mknn"].notnull().all()
