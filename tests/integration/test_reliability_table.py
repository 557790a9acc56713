"""Every test that docs/reliability.md names exists and is collected by pytest."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

from tests.conftest import COLLECTED

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _collected(files: list[str], request) -> set[str]:
    """The node ids (parameters cut off) of the tests pytest collects from `files`: this
    session's collection where it read the file (the whole suite's run does), a `pytest
    --collect-only` of the others."""
    seen = request.config.stash.get(COLLECTED, frozenset())
    ids = {n.split("[")[0] for n in seen}
    read = {n.split("::")[0] for n in ids}
    rest = [f for f in files if f not in read]
    if rest:
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
            + rest,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        ).stdout
        ids |= {line.split("[")[0] for line in out.splitlines() if "::" in line}
    return ids


def test_every_named_test_is_collected(request):
    text = (ROOT / "docs" / "reliability.md").read_text()
    named = sorted(
        set(re.findall(r"`(tests/(?:unit|integration|cli|faults)/test_\w+\.py)::(test_\w+)`", text))
    )
    assert len(named) >= 15, "the table names its tests as `tests/TIER/FILE.py::test_name`"
    flat = re.findall(r"`tests/test_\w+\.py", text)
    assert not flat, f"docs/reliability.md names tests outside their tier folder: {flat}"
    collected = _collected(sorted({f for f, _ in named}), request)
    missing = [f"{f}::{t}" for f, t in named if f"{f}::{t}" not in collected]
    assert not missing, f"named in docs/reliability.md but not collected: {missing}"
