"""`align study` killed (SIGKILL) at named points, then the same command: during an
extraction, between units, while the report is written. Each rerun runs no unit that had
completed, and the end state equals an undisturbed run of the single commands bit for bit."""

from __future__ import annotations

import sys

import numpy as np

from align.fitting import FitSpec
from tests.helpers.faults import killed_run
from tests.helpers.fixtures_study import study_text


def ran(stderr: str) -> list:
    return [
        line.removeprefix("align study: run ")
        for line in stderr.splitlines()
        if line.startswith("align study: run ")
    ]


def test_killed_study_resumes_without_rerunning_done_units(
    zoo, corpus_file, fit_pair, tmp_path, cli
):
    import align
    from align.store import open_activations, open_result

    path = tmp_path / "two.toml"
    path.write_text(study_text(zoo, corpus_file, models=("a", "b")), encoding="utf-8")
    root = str(tmp_path / "out")
    cmd = [sys.executable, "-m", "align", "study", str(path), "-o", root]
    first = killed_run(cmd, tmp_path / "f1.log", "between_batches:1")  # inside extract a
    assert ran(first.stderr) == ["extract a (new)"]
    second = killed_run(cmd, tmp_path / "f2.log", "study_unit_done:2")  # after extract b
    assert ran(second.stderr) == ["extract a (the last run stopped in it)", "extract b (new)"]
    third = killed_run(cmd, tmp_path / "f3.log", "report_before_rename")
    assert ran(third.stderr) == ["fit a->b (new)", "report (new)"]
    # The kills need processes of their own; the two last runs do not (this process).
    code, _, err = cli(*cmd[3:])
    assert code == 0, err
    assert ran(err) == ["report (the last run stopped in it)"]
    code, _, err = cli(*cmd[3:])
    assert code == 0 and ran(err) == []

    for name, single in zip("ab", fit_pair):
        mine, theirs = open_activations(f"{root}/stores/{name}.zarr"), open_activations(single)
        assert mine.complete
        for b in mine.boundaries:
            np.testing.assert_array_equal(mine.resid(b), theirs.resid(b))
    expected = align.fit(*fit_pair, None, FitSpec(bootstrap=200), log=lambda m: None).dataset
    result = open_result(f"{root}/results/fits/a--b.zarr")
    for name in expected.data_vars:
        np.testing.assert_array_equal(result[name].values, expected[name].values, err_msg=name)
    assert (tmp_path / "out" / "report" / "index.html").is_file()
    assert not (tmp_path / "out" / "report.partial").exists()
