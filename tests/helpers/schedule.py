"""How `make test` shares the suite between its pytest-xdist workers (`--dist loadfile`).

A unit of work is a test file, so a file's module fixtures are built once. Two changes to
xdist's own schedule, which hands out files by their number of tests:

- Files that share a costly session fixture are one unit (`SHARED`): the demo run and the
  tiny study are built once, on one worker, not once on each.
- The heaviest unit left goes first (longest processing time first): its weight is its
  seconds in `tests/durations.json`, the files' times of a full run; a file the table does not
  know weighs its number of tests times the table's mean seconds per test. Handed out by
  count, a file of 5 slow tests (a Dask cluster's) started last and ran alone on one worker
  while the other had finished.

`python -m tests.helpers.schedule JUNIT.xml` rewrites the table from a run's JUnit report
(`make test PYTEST_ARGS="--junitxml=JUNIT.xml"`). A stale table only orders the files less
well: it never changes what runs.

Nothing here imports align."""

from __future__ import annotations

import json
import pathlib
import sys
import xml.etree.ElementTree as ET
from collections import Counter

from xdist.scheduler import LoadFileScheduling

TABLE = pathlib.Path(__file__).resolve().parent.parent / "durations.json"

# files that share a session fixture whose build costs seconds: one unit of work each group
SHARED = {
    "tests/integration/test_demo.py": "demo_run, tiny_study",
    "tests/integration/test_docs_tables.py": "demo_run, tiny_study",
    "tests/integration/test_fit_shuffle.py": "demo_run, tiny_study",
    "tests/integration/test_lens_kinds.py": "demo_run, tiny_study",
    "tests/integration/test_study.py": "demo_run, tiny_study",
    "tests/integration/test_study_lenses.py": "demo_run, tiny_study",
    "tests/integration/test_study_report_browser.py": "demo_run, tiny_study",
    "tests/integration/test_study_report_pages.py": "demo_run, tiny_study",
    "tests/integration/test_fit.py": "loopback_cluster",
    "tests/integration/test_fit_live_cluster.py": "loopback_cluster",
    "tests/integration/test_fit_live_cluster_measures.py": "loopback_cluster",
    "tests/integration/test_study_cluster.py": "loopback_cluster",
    "tests/integration/test_fit_live_rows_cluster.py": "loopback_cluster",
}


def load_table(path: pathlib.Path = TABLE) -> dict:
    """{"files": {path: seconds}, "tests": {path: count}} of a run, or empty ones."""
    try:
        with open(path) as f:
            table = json.load(f)
    except (OSError, ValueError):
        return {"files": {}, "tests": {}}
    return {"files": table.get("files", {}), "tests": table.get("tests", {})}


class WeightedFileScheduling(LoadFileScheduling):
    """xdist's file scheduling, with `SHARED` files as one unit and the heaviest unit first."""

    def __init__(self, config, log=None):
        super().__init__(config, log)
        table = load_table()
        self.seconds = table["files"]
        counts = sum(table["tests"].values())
        self.per_test = sum(self.seconds.values()) / counts if counts else 1.0

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return SHARED.get(path, path)

    def weight(self, scope: str) -> float:
        files = Counter(nodeid.split("::", 1)[0] for nodeid in self.workqueue[scope])
        return sum(self.seconds.get(path, self.per_test * count) for path, count in files.items())

    def _assign_work_unit(self, node) -> None:
        if self.workqueue:
            heaviest = max(self.workqueue, key=self.weight)
            self.workqueue.move_to_end(heaviest, last=False)
        super()._assign_work_unit(node)


def table_of(junit: str) -> dict:
    """{"files": {path: seconds}, "tests": {path: count}} from a JUnit report (each test's
    time: its setup, call and teardown)."""
    seconds, tests = Counter(), Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        path = "/".join(p for p in parts if not p[:1].isupper()) + ".py"
        seconds[path] += float(case.get("time") or 0)
        tests[path] += 1
    return {
        "files": {k: round(v, 1) for k, v in sorted(seconds.items())},
        "tests": dict(sorted(tests.items())),
    }


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m tests.helpers.schedule JUNIT.xml")
    table = table_of(sys.argv[1])
    TABLE.write_text(json.dumps(table, indent=1) + "\n")
    total = sum(table["files"].values())
    print(f"{TABLE}: {len(table['files'])} files, {total:.0f} s of tests")
