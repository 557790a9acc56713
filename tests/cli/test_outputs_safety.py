"""What -o may name, and how a result replaces another (docs/reliability.md, "Output safety").

check_output's rules are pinned case by case; --overwrite replaces only a result of the same
schema, by rename once the new one is complete (a kill before or between the renames keeps
the old result); file:// works and an unknown protocol is one line; a full disk (a real
tmpfs) is one line with nothing left that opens as a result; `align plot` refuses folders,
inputs, non-PNG files and sizes it cannot draw.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.cli.test_outputs_property import snapshot
from tests.helpers.assertions import one_line_error
from tests.helpers.faults import killed_run


def _tiny(value: float = 1.0):
    import xarray as xr

    return xr.Dataset({"x": ("i", np.full(3, value))}, attrs={"note": "t"})


@pytest.fixture(scope="module")
def results(tmp_path_factory, extracted):
    """A contributions and a lens result of one store (what `align depth` reads)."""
    from tests.conftest import run_cli

    root = tmp_path_factory.mktemp("results")
    store = extracted("qwen2", sublayers=True)
    for cmd in ("contrib", "lens"):
        code, _, _ = run_cli([cmd, "--store", store, "-o", str(root / f"{cmd}.zarr")])
        assert code == 0
    return {"store": store, "contrib": str(root / "contrib.zarr"), "lens": str(root / "lens.zarr")}


# (what is at -o, schema, overwrite) -> None when allowed, else a phrase of the refusal
RULES = [
    ("absent", "lens", False, None),
    ("empty folder", "lens", False, None),
    ("lens result", "lens", True, None),
    ("lens result", "lens", False, "pass `overwrite`"),
    (
        "depth result",
        "lens",
        True,
        "holds an align store of schema 'depth' (a depth result), not a lens result",
    ),
    ("activation store", "lens", True, "holds an align store of schema 'activations'"),
    ("folder with notes.txt", "lens", True, "folder holding other files"),
    ("file", "lens", True, "existing file"),
    ("current folder", "lens", True, "current folder"),
    ("parent of the current folder", "lens", True, "current folder or holds it"),
    ("an input", "lens", True, "is this command's input"),
    ("inside an input", "lens", True, "lies inside this command's input"),
    ("holding an input", "lens", True, "holds this command's input"),
    ("symbolic link", "lens", True, "symbolic link"),
    ("unknown protocol", "lens", False, "unknown storage protocol 'foo'"),
    ("under a file", "lens", False, "notes.txt is a file, not a folder"),
]


@pytest.mark.parametrize(
    "what,schema,overwrite,refusal", RULES, ids=[r[0].replace(" ", "_") for r in RULES]
)
def test_check_output_rules(tmp_path, monkeypatch, extracted, what, schema, overwrite, refusal):
    from align.errors import OutputRefused
    from align.store import check_output, write_result

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    inputs = []
    out = str(tmp_path / "out.zarr")
    if what == "empty folder":
        os.mkdir(out)
    elif what in ("lens result", "depth result"):
        write_result(out, _tiny(), what.split()[0])
    elif what == "activation store":
        shutil.copytree(extracted("qwen2"), out)
    elif what == "folder with notes.txt":
        os.mkdir(out)
        (tmp_path / "out.zarr" / "notes.txt").write_text("x")
    elif what == "file":
        (tmp_path / "out.zarr").write_text("x")
    elif what == "current folder":
        out = "."
    elif what == "parent of the current folder":
        out = str(tmp_path)
    elif what in ("an input", "inside an input", "holding an input"):
        (tmp_path / "in").mkdir()
        inputs = {"--store in": str(tmp_path / "in")}
        out = {
            "an input": str(tmp_path / "in"),
            "inside an input": str(tmp_path / "in" / "r.zarr"),
            "holding an input": str(tmp_path),
        }[what]
        monkeypatch.chdir(tmp_path.parent)
    elif what == "symbolic link":
        os.mkdir(tmp_path / "real")
        os.symlink(tmp_path / "real", out)
    elif what == "unknown protocol":
        out = "foo://x/r.zarr"
    elif what == "under a file":
        (tmp_path / "notes.txt").write_text("x")
        out = str(tmp_path / "notes.txt" / "sub" / "r.zarr")
    before = snapshot(tmp_path)
    if refusal is None:
        check_output(out, schema, inputs=inputs, overwrite=overwrite)
    else:
        with pytest.raises(OutputRefused) as e:
            check_output(out, schema, inputs=inputs, overwrite=overwrite)
        assert refusal in str(e.value) and out in str(e.value) and "\n" not in str(e.value)
    assert snapshot(tmp_path) == before


def test_overwrite_replaces_a_same_schema_result_by_rename(tmp_path):
    """The new result replaces the old one whole; nothing else is left beside it."""
    from align.errors import OutputRefused
    from align.store import open_result, write_result

    out = str(tmp_path / "r.zarr")
    write_result(out, _tiny(1.0), "depth")
    write_result(out, _tiny(2.0), "depth", overwrite=True)
    np.testing.assert_array_equal(open_result(out, "depth")["x"].values, [2.0, 2.0, 2.0])
    assert sorted(os.listdir(tmp_path)) == ["r.zarr"]
    with pytest.raises(OutputRefused, match="not a lens result"):
        write_result(out, _tiny(3.0), "lens", overwrite=True)
    np.testing.assert_array_equal(open_result(out, "depth")["x"].values, [2.0, 2.0, 2.0])


@pytest.mark.parametrize("point", ["result_before_rename", "result_old_aside"])
def test_killed_overwrite_keeps_the_old_result(results, tmp_path, point, cli):
    """`align depth --overwrite` killed (SIGKILL) before the new result is renamed in, or
    between moving the old aside and renaming the new in: the old result survives (at its
    place, or beside it where the next run puts it back), and the same command then works."""
    from align.store import open_result

    out = str(tmp_path / "depth.zarr")
    cmd = [
        sys.executable,
        "-m",
        "align.cli.main",
        "depth",
        "--contrib",
        results["contrib"],
        "--lens",
        results["lens"],
        "-o",
        out,
        "--overwrite",
    ]
    assert cli(*cmd[3:])[0] == 0  # only the kill needs a process of its own
    old = open_result(out, "depth")["effective_depth"].values.copy()
    log = tmp_path / "fault.log"
    killed_run(cmd, log, point)
    # The old result is at its place, or in the killed writer's temporary folder as `old`.
    survivors = [
        str(p)
        for p in [tmp_path / "depth.zarr", *tmp_path.glob(".depth.zarr.tmp-*/old")]
        if p.is_dir()
    ]
    assert len(survivors) == 1
    np.testing.assert_array_equal(open_result(survivors[0], "depth")["effective_depth"].values, old)
    code, _, err = cli(*cmd[3:])
    assert code == 0, err
    assert sorted(n for n in os.listdir(tmp_path) if "depth" in n) == ["depth.zarr"]
    np.testing.assert_array_equal(open_result(out, "depth")["effective_depth"].values, old)


def test_file_url_is_a_local_path_and_an_unknown_protocol_is_one_line(cli, results, tmp_path):
    from align.store import open_result

    out = tmp_path / "d.zarr"
    code, _, err = cli(
        "depth", "--contrib", results["contrib"], "--lens", results["lens"], "-o", f"file://{out}"
    )
    assert code == 0, err
    assert open_result(str(out), "depth").attrs["contributions"] == results["contrib"]
    code, _, err = cli(
        "depth", "--contrib", results["contrib"], "--lens", results["lens"], "-o", "foo://x"
    )
    one_line_error(code, err, "foo://x", "unknown storage protocol")


@pytest.mark.parametrize("command", ["contrib", "lens"])
def test_store_given_as_its_own_output_is_refused_even_with_overwrite(
    cli, extracted, tmp_path, command
):
    store = str(tmp_path / "s.zarr")
    shutil.copytree(extracted("qwen2", sublayers=True), store)
    before = snapshot(tmp_path)
    code, _, err = cli(command, "--store", store, "-o", store, "--overwrite")
    one_line_error(code, err, store, "input")
    assert snapshot(tmp_path) == before


FULL_DISK_WRITER = """
import sys, numpy as np, xarray as xr
from align.errors import AlignError
from align.store import write_result
# 3 arrays of 400 chunks: zarr writes them concurrently, and most of them fail
ds = xr.Dataset({f"v{i}": (("a", "b"), np.random.rand(400, 400)) for i in range(3)})
for v in ds.values():
    v.encoding["chunks"] = (20, 20)
try:
    write_result(sys.argv[1], ds, "alignment")
except AlignError as e:
    print("align: error:", e, file=sys.stderr)
    sys.exit(2)
"""


def test_full_disk_while_writing_a_result_is_one_line(tmpfs):
    """ENOSPC inside zarr's concurrent writes: the one error, none of asyncio's hundreds of
    lines (also at exit), and nothing left that opens as a result."""
    out = str(tmpfs / "r.zarr")
    p = subprocess.run(
        [sys.executable, "-c", FULL_DISK_WRITER, out], capture_output=True, text=True, timeout=300
    )
    one_line_error(p.returncode, p.stderr, out, "no space left")
    assert os.listdir(tmpfs) == []


def test_full_disk_under_the_cli_is_one_line(results, tmpfs):
    out = str(tmpfs / "d.zarr")
    (tmpfs / "filler").write_bytes(b"\0" * (60 << 10))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "align.cli.main",
            "depth",
            "--contrib",
            results["contrib"],
            "--lens",
            results["lens"],
            "-o",
            out,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    one_line_error(p.returncode, p.stderr, out, "no space left")
    assert os.listdir(tmpfs) == ["filler"]


# -- align plot


def test_plot_output_rules(cli, results, tmp_path):
    """A .png that is absent or a regular file is (re)written; a folder, a non-PNG file and
    an input are refused with nothing changed."""
    png = tmp_path / "c.png"
    code, _, err = cli("plot", results["contrib"], "-o", png)
    assert code == 0, err and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png.write_bytes(b"old")
    code, _, err = cli("plot", results["contrib"], "-o", png)
    assert code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "folder.png").mkdir()
    (tmp_path / "folder.png" / "notes.txt").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    for out, why in (
        (tmp_path / "folder.png", "is a folder"),
        (tmp_path / "notes.txt", "does not end in .png"),
        (results["contrib"], ".png"),
        (os.path.join(results["contrib"], "x.png"), "input"),
    ):
        before = snapshot(tmp_path)
        code, _, err = cli("plot", results["contrib"], "-o", out)
        one_line_error(code, err, out, why)
        assert snapshot(tmp_path) == before
    assert [n for n in os.listdir(tmp_path) if ".tmp-" in n] == []


@pytest.mark.parametrize("size", ["100000x100000", "20001x100", "15000x15000"])
def test_plot_size_beyond_what_can_be_drawn_is_refused_naming_size(cli, results, tmp_path, size):
    code, _, err = cli("plot", results["contrib"], "-o", tmp_path / "x.png", "--size", size)
    line = one_line_error(code, err, "--size", size)
    assert "--batch-size" not in line and "--memory-limit" not in line
    assert not (tmp_path / "x.png").exists()
