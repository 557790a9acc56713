"""What align may remove or move beside its output (docs/reliability.md, "Output safety").

A writer makes its output whole in a temporary folder beside it, marked with its holder
(host, pid, process start time); a later writer of the same path cleans only such a folder,
and only when its holder is provably gone on this host. Here: folders and files of the user
named like temporaries survive a fit; a plot killed (SIGKILL) in the middle of its write
leaves a temporary that the next plot removes, but not when the marker says another host
wrote it; `align compare` on a full disk (a real tmpfs) writes neither its table nor its
figure. The property test over every writing command is
tests/cli/test_outputs_property.py::test_imitated_temporaries_beside_the_output_are_never_touched.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import psutil

from tests.cli.test_compare import depth_result
from tests.cli.test_outputs_property import snapshot
from tests.helpers.assertions import one_line_error
from tests.helpers.faults import killed_run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk, which follows the 8-byte signature."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG_SIGNATURE and head[12:16] == b"IHDR", head
    return struct.unpack(">II", head[16:24])


def test_folders_and_files_named_like_temporaries_survive_a_fit(
    fit_pair, cli, tmp_path, monkeypatch
):
    """`mkdir .r.zarr.tmp-mine && echo precious > .r.zarr.tmp-mine/notes.txt` and
    `echo precious > .r.zarr.old-backup`, then `align fit a.zarr b.zarr -o r.zarr`: the fit
    deleted the folder and moved the file onto r.zarr, with exit 0."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".r.zarr.tmp-mine").mkdir()
    (tmp_path / ".r.zarr.tmp-mine" / "notes.txt").write_text("precious\n")
    (tmp_path / ".r.zarr.old-backup").write_text("precious\n")
    (tmp_path / ".r.zarr.tmp-12345").mkdir()  # a number that no process of this host need have
    (tmp_path / ".r.zarr.tmp-12345" / "notes.txt").write_text("precious\n")
    before = snapshot(tmp_path)
    code, _, err = cli(
        "fit", *fit_pair, "-o", "r.zarr", "--scheduler", "synchronous", "--alphas", "1e-3,1e-1"
    )
    assert code == 0, err
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("r.zarr")} == before
    assert os.path.isdir(tmp_path / "r.zarr") and os.path.isfile(tmp_path / "r.zarr" / "zarr.json")


def _killed_plot(result, png, log):
    cmd = [sys.executable, "-m", "align.cli.main", "plot", result, "-o", str(png)]
    killed_run(cmd, log, "figure_before_rename")
    return cmd


def test_plot_killed_while_writing_its_figure_is_cleaned_by_the_next_plot(tmp_path, cli):
    """SIGKILL between drawing the PNG and renaming it over x.png: the old x.png is intact and
    the dead run's temporary is beside it; the next `align plot` of x.png removes it (before,
    `.x.png.tmp-PID` stayed for ever) and writes a whole PNG."""
    result = depth_result(tmp_path / "d.zarr", 6, ed=[1, 2, 3])
    png = tmp_path / "x.png"
    png.write_bytes(b"the old figure")
    cmd = _killed_plot(result, png, tmp_path / "fault.log")
    assert png.read_bytes() == b"the old figure"
    left = [n for n in os.listdir(tmp_path) if n.startswith(".x.png.tmp-")]
    assert len(left) == 1, os.listdir(tmp_path)
    code, _, err = cli(*cmd[3:])  # only the kill needs a process of its own
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == ["d.zarr", "fault.log", "x.png"]
    assert png_size(png) == (700, 450)  # the depth plot's default size


def _killed_plot_with_holder(tmp_path, **holder):
    """A plot of a depth result killed at figure_before_rename, its temporary's marker then
    edited to name another holder (`holder`'s fields): (png, the plot's command, the folder)."""
    result = depth_result(tmp_path / "d.zarr", 6, ed=[1, 2, 3])
    png = tmp_path / "x.png"
    cmd = _killed_plot(result, png, tmp_path / "fault.log")
    [left] = [tmp_path / n for n in os.listdir(tmp_path) if n.startswith(".x.png.tmp-")]
    marker = left / "align-temporary.json"
    info = json.loads(marker.read_text())
    info["holder"].update(holder)
    marker.write_text(json.dumps(info))
    return png, cmd, left


def test_a_killed_plots_temporary_from_another_host_is_kept(tmp_path, cli):
    """The same temporary, its marker saying another host wrote it (a folder shared between
    machines: a writer there may be using it): the next plot leaves it as it is."""
    png, cmd, left = _killed_plot_with_holder(tmp_path, host="another-host.example")
    kept = snapshot(left)
    code, _, err = cli(*cmd[3:])
    assert code == 0, err
    assert snapshot(left) == kept
    assert png_size(png) == (700, 450)


def test_a_killed_plots_temporary_whose_pid_was_reused_is_cleaned(tmp_path):
    """The same temporary, its marker's pid now that of a running process (this one) that
    started at another time than the marker says: the pid was reused, the writer is gone, and
    the next plot removes its folder. The plot runs as a process of its own: the marker names
    this process, which must be another one than the plot's."""
    # this running process's pid, with a start time that is not this process's
    png, cmd, left = _killed_plot_with_holder(
        tmp_path, pid=os.getpid(), process_start=psutil.Process().create_time() + 1000.0
    )
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert not left.exists()
    assert png_size(png) == (700, 450)


def test_compare_on_a_full_disk_writes_neither_table_nor_figure(cli, tmp_path, tmpfs):
    """A real 64 KiB tmpfs with room for the table but not its figure: `align compare -o`
    wrote the table and then failed on the figure. Now one line naming the figure and "no
    space left"; neither file, and no temporary, is left, and with --overwrite the old table
    and figure stay as they were."""
    a = depth_result(tmp_path / "a.zarr", 6, ed=[1, 2, 3])
    b = depth_result(tmp_path / "b.zarr", 6, ed=[2, 2, 4])
    (tmpfs / "filler").write_bytes(b"\0" * (44 << 10))
    code, _, err = cli("compare", a, b, "-o", tmpfs / "t.csv")
    one_line_error(code, err, str(tmpfs / "t.png"), "no space left")
    assert os.listdir(tmpfs) == ["filler"]
    (tmpfs / "t.csv").write_text("old table\n")
    (tmpfs / "t.png").write_bytes(b"old figure")
    code, _, err = cli("compare", a, b, "-o", tmpfs / "t.csv", "--overwrite")
    one_line_error(code, err, str(tmpfs / "t.png"), "no space left")
    assert sorted(os.listdir(tmpfs)) == ["filler", "t.csv", "t.png"]
    assert (tmpfs / "t.csv").read_text() == "old table\n" and (
        tmpfs / "t.png"
    ).read_bytes() == b"old figure"
