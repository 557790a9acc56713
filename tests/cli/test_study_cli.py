"""`align study` on the command line: `--init` writes a file that reads back and is never
written over; a bad study file is one line; a failing unit stops the study naming it, and
`--keep-going` runs the rest, blocks what reads the failed unit and still writes the report."""

from __future__ import annotations

import json
import os

STUDY = """
[[models]]
name = "a"
path = "{a}"
analyses = ["contrib"]
[[models]]
name = "z"
path = "{missing}"
[corpus]
path = "{corpus}"
[pairs]
mode = "list"
list = [["a", "z"]]
[fit]
bootstrap = 100
"""


def test_init_writes_a_template_once(cli, tmp_path):
    path = tmp_path / "s.toml"
    code, out, _ = cli("study", "--init", path)
    assert code == 0 and path.read_text(encoding="utf-8").startswith("# An align study")
    code, _, err = cli("study", "--init", path)
    assert (
        code == 2
        and err == f"align: error: {path} exists: give a new file name for the study file\n"
    )


def test_a_bad_study_file_is_one_line(cli, tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[[models]]\nname = "a"\npath = "a"\ncolour = "red"\n', encoding="utf-8")
    code, _, err = cli("study", path, "-o", tmp_path / "out")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(
        f"align: error: study file {path}: [[models]] 1 has no key 'colour'; the keys are name, path,"
    )
    assert not (tmp_path / "out").exists()


def test_a_failing_unit_stops_or_is_kept_going_past(cli, zoo, corpus_file, tmp_path):
    path = tmp_path / "s.toml"
    missing = str(tmp_path / "no-such-model")
    path.write_text(
        STUDY.format(a=zoo("qwen2"), missing=missing, corpus=corpus_file), encoding="utf-8"
    )
    out = tmp_path / "out"
    code, _, err = cli("study", path, "-o", out)
    errors = [line for line in err.splitlines() if line.startswith("align: error:")]
    assert code == 2 and len(errors) == 1 and err.endswith(errors[0] + "\n")
    assert errors[0].startswith("align: error: study unit extract z failed: ")
    assert missing in errors[0] and errors[0].endswith("(fix it and re-run; done units are kept)")
    state = json.loads((out / "study.json").read_text())["units"]
    assert state["extract a"]["state"] == "done" and state["extract z"]["state"] == "failed"
    assert "fit a->z" not in state

    code, stdout, err = cli("study", path, "-o", out, "--keep-going")
    assert code == 1
    assert "1 unit(s) run" not in stdout and "1 failed, 1 blocked" in stdout
    state = json.loads((out / "study.json").read_text())["units"]
    assert {n: u["state"] for n, u in state.items()} == {
        "extract a": "done",
        "extract z": "failed",
        "fit a->z": "blocked",
        "contrib a": "done",
        "report": "done",
    }
    assert "align study: extract z failed: " in err
    assert os.path.isfile(out / "report" / "models" / "a.html")
    code, info, _ = cli("info", out)
    assert "  failed   extract z: " in info and "  blocked  fit a->z" in info
