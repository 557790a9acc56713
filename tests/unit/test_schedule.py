"""`make test`'s schedule keeps the files that use a costly session fixture built per xdist
worker (the demo run, the tiny study and its lens form, the loopback Dask cluster) in one unit
of work (tests/helpers/schedule.py, `SHARED`), so that each is built once a run: a file that
names one of them and is left out of `SHARED` builds it a second time on the other worker."""

from __future__ import annotations

import pathlib
import re

from tests.helpers.schedule import SHARED

ROOT = pathlib.Path(__file__).resolve().parents[2]
# the session fixtures built per worker (tests/helpers/fixtures_demo.py, fixtures_study.py,
# tests/conftest.py)
PER_WORKER = ("demo_run", "tiny_study", "lens_study", "loopback_cluster")


def users(root: pathlib.Path) -> set:
    """The test files under `root`/tests that name a PER_WORKER fixture as a whole word."""
    pattern = re.compile(r"\b(" + "|".join(PER_WORKER) + r")\b")
    return {
        p.relative_to(root).as_posix()
        for p in (root / "tests").glob("*/test_*.py")
        if pattern.search(p.read_text(encoding="utf-8"))
    }


def test_every_user_of_a_per_worker_fixture_is_in_the_shared_unit():
    found = users(ROOT) - {pathlib.Path(__file__).relative_to(ROOT).as_posix()}  # names them
    assert "tests/integration/test_demo.py" in found  # the walk sees the fixtures' users
    assert found <= set(SHARED), f"not in schedule.SHARED: {sorted(found - set(SHARED))}"


def test_users_finds_whole_words_only(tmp_path):
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "test_a.py").write_text("def test(demo_run): pass\n")
    (tmp_path / "tests" / "unit" / "test_b.py").write_text("def test(demo_runs): pass\n")
    assert users(tmp_path) == {"tests/unit/test_a.py"}
