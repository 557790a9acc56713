"""The family conformance suite's numbers, for docs/families.md: runs tests/integration/test_families.py
(every family, on tiny models with its real options on) and writes what each check measured to
bench/results/families.json, with the versions it ran on. bench/tables.py renders the table.

    python bench/families.py            # about 6 minutes on 2 idle cores

Not run in CI (the suite itself is: this only keeps its measured numbers).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "results", "families.json")


def main() -> int:
    import torch
    import transformers

    with tempfile.TemporaryDirectory() as tmp:
        measured = os.path.join(tmp, "families.json")
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/integration/test_families.py",
        ]
        rc = subprocess.run(
            cmd, cwd=ROOT, env={**os.environ, "ALIGN_FAMILY_RESULTS": measured}
        ).returncode
        with open(measured, encoding="utf-8") as f:
            families = json.load(f)
    out = {
        "config": {
            "command": "python bench/families.py",
            "suite": "tests/integration/test_families.py",
            "passed": rc == 0,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "python": platform.python_version(),
            "dtype": "float32",
            "device": "cpu",
        },
        "families": families,
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(
        f"bench/families.py: {len(families)} families, suite {'passed' if rc == 0 else 'FAILED'}: {OUT}"
    )
    return rc


if __name__ == "__main__":
    sys.exit(main())
