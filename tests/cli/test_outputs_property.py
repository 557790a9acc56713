"""No writing command ever changes a byte outside its own result, whatever -o names.

Every command that writes (extract, fit, contrib, lens, skip, depth, erase, igrad, plot) is run with -o set
to an existing non-empty folder, the current folder, each of its own inputs and an existing
file, with and without --overwrite. Each run must be refused in one line naming the -o
value, and a snapshot of the whole temporary tree (every path; every file's sha256, size and
mtime) must be the same after the run as before it.

`align demo` is left out: its -o is a folder it creates and fills, and a run that is not
refused trains two models (tens of seconds per case); its own tests own that folder's rules.
"""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest

from tests.helpers.assertions import one_line_error


def snapshot(root) -> dict:
    """path -> (sha256, size, mtime_ns) for files, "dir" for folders, the link's target for links."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            out[os.path.relpath(p, root)] = ("link", os.readlink(p)) if os.path.islink(p) else "dir"
        for f in filenames:
            p = os.path.join(dirpath, f)
            if os.path.islink(p):
                out[os.path.relpath(p, root)] = ("link", os.readlink(p))
                continue
            st = os.stat(p)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = (
                    hashlib.sha256(fh.read()).hexdigest(),
                    st.st_size,
                    st.st_mtime_ns,
                )
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory, zoo, corpus_file, extracted):
    """A temporary tree holding every input of every command (model, corpus, two stores, two
    results), a folder holding notes.txt and a plain file: everything a run could harm."""
    from tests.conftest import run_cli

    root = tmp_path_factory.mktemp("world")
    shutil.copytree(zoo("qwen2"), root / "model")
    shutil.copy(corpus_file, root / "docs.txt")
    shutil.copytree(extracted("qwen2", sublayers=True), root / "S.zarr")
    shutil.copytree(
        extracted("qwen2", model_overrides={"num_hidden_layers": 4, "hidden_size": 96}),
        root / "T.zarr",
    )
    for args in (
        ["contrib", "--store", root / "S.zarr", "-o", root / "contrib.zarr"],
        ["lens", "--store", root / "S.zarr", "-o", root / "lens.zarr"],
    ):
        code, _, _ = run_cli([str(a) for a in args])
        assert code == 0, args
    (root / "prompts.jsonl").write_text(
        '{"text": "the model reads every layer =", "answer": " 12 + 7 = 19"}\n'
        '{"text": "so we fit linear maps", "answer": " from each layer"}\n',
        encoding="utf-8",
    )
    (root / "notes").mkdir()
    (root / "notes" / "notes.txt").write_text("my notes\n")
    (root / "file.txt").write_text("a file\n")
    return root


# command -> (argv without -o, given the world; its inputs by name; has --overwrite)
COMMANDS = {
    "extract": (lambda w: ["extract", w / "model", w / "docs.txt"], ("model", "docs.txt"), False),
    "fit": (
        lambda w: ["fit", w / "S.zarr", w / "T.zarr", "--scheduler", "synchronous"],
        ("S.zarr", "T.zarr"),
        True,
    ),
    "contrib": (lambda w: ["contrib", "--store", w / "S.zarr"], ("S.zarr",), True),
    "lens": (lambda w: ["lens", "--store", w / "S.zarr"], ("S.zarr",), True),
    "skip": (
        lambda w: ["skip", w / "model", w / "docs.txt", "--max-docs", "2"],
        ("model", "docs.txt"),
        True,
    ),
    "depth": (
        lambda w: ["depth", "--contrib", w / "contrib.zarr", "--lens", w / "lens.zarr"],
        ("contrib.zarr", "lens.zarr"),
        True,
    ),
    "erase": (
        lambda w: [
            "erase",
            w / "model",
            w / "prompts.jsonl",
            "--reference",
            w / "docs.txt",
            "--reference-docs",
            "2",
        ],
        ("model", "prompts.jsonl", "docs.txt"),
        True,
    ),
    "igrad": (
        lambda w: ["igrad", w / "model", w / "prompts.jsonl", "--steps", "2"],
        ("model", "prompts.jsonl"),
        True,
    ),
    "plot": (lambda w: ["plot", w / "contrib.zarr"], ("contrib.zarr",), False),
}


def _cases():
    for name, (_, inputs, has_overwrite) in COMMANDS.items():
        targets = ["non-empty folder", "current folder", "file"] + [f"input {i}" for i in inputs]
        for target in targets:
            for overwrite in (False, True) if has_overwrite else (False,):
                yield pytest.param(
                    name,
                    target,
                    overwrite,
                    id=f"{name}-{target.replace(' ', '_')}{'-overwrite' if overwrite else ''}",
                )


@pytest.mark.parametrize("command,target,overwrite", list(_cases()))
def test_no_byte_outside_the_result_changes(world, cli, monkeypatch, command, target, overwrite):
    argv, _, _ = COMMANDS[command]
    monkeypatch.chdir(world)
    out = {
        "non-empty folder": str(world / "notes"),
        "current folder": ".",
        "file": str(world / "file.txt"),
    }.get(target)
    if out is None:
        out = str(world / target.split(" ", 1)[1])
    before = snapshot(world)
    code, _, err = cli(*argv(world), "-o", out, *(["--overwrite"] if overwrite else []))
    one_line_error(code, err, out)
    after = snapshot(world)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"{command} -o {out} changed: {changed[:10]}"


# -- temporaries: what align may clean beside its output --------------------------------------

MARKER = "align-temporary.json"  # the marker align writes into each of its temporary folders


def _dead_pid() -> int:
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid += 1


def _mark(folder, holder: dict, name=None, inode=None) -> None:
    """A marker in align's format, naming `holder`, `name` and `inode` (default: the folder's own)."""
    import json

    folder.mkdir()
    (folder / "notes.txt").write_text("precious\n")
    (folder / MARKER).write_text(
        json.dumps(
            {
                "holder": holder,
                "name": name or folder.name,
                "inode": inode if inode is not None else os.lstat(folder).st_ino,
            }
        )
    )


def imitate_temporaries(folder, base: str) -> None:
    """Beside `base` in `folder`: everything that only looks like a temporary align left, none
    of which align made: folders and files named .BASE.tmp-* and .BASE.old-*, without a marker,
    with a forged marker (wrong inode, one copied from another folder, no process start time),
    with a marker of a writer on another host (it may be writing there now) and of a live one."""
    import socket

    import psutil

    dead, host = _dead_pid(), socket.gethostname()
    gone = {
        "host": host,
        "pid": dead,
        "started": "2020-01-01T00:00:00+0000",
        "process_start": 1.0e9,
        "boot_id": None,
    }
    live = {**gone, "pid": os.getpid(), "process_start": psutil.Process().create_time()}
    (folder / f".{base}.tmp-mine").mkdir()
    (folder / f".{base}.tmp-mine" / "notes.txt").write_text("precious\n")
    (folder / f".{base}.tmp-{dead}-0a1b2c3d").mkdir()
    (folder / f".{base}.tmp-{dead}-0a1b2c3d" / "notes.txt").write_text("precious\n")
    (folder / f".{base}.tmp-{dead}").write_text("precious\n")
    (folder / f".{base}.old-backup").write_text("precious\n")
    (folder / f".{base}.old-{dead}-0a1b2c3d").mkdir()
    (folder / f".{base}.old-{dead}-0a1b2c3d" / "notes.txt").write_text("precious\n")
    (folder / f".{base}.old-{dead}-0a1b2c3d" / MARKER).write_text("{}")
    _mark(folder / f".{base}.tmp-{dead}-forged", gone, inode=1)
    other = folder / f"elsewhere-{base}"
    _mark(other, gone)
    _mark(
        folder / f".{base}.tmp-{dead}-copied", gone, name=other.name, inode=os.lstat(other).st_ino
    )
    _mark(
        folder / f".{base}.tmp-{dead}-nostart",
        {k: v for k, v in gone.items() if k != "process_start"},
    )
    _mark(folder / f".{base}.tmp-{dead}-foreign", {**gone, "host": "another-host.example"})
    _mark(folder / f".{base}.tmp-{os.getpid()}-live", live)
    os.symlink(other, folder / f".{base}.tmp-{dead}-link")


WRITERS = {
    **{
        name: (argv, ".png" if name == "plot" else ".zarr")
        for name, (argv, _, _) in COMMANDS.items()
    },
    "compare": (lambda w: ["compare", w / "lens.zarr"], ".csv"),
}


@pytest.mark.parametrize("command", list(WRITERS))
def test_imitated_temporaries_beside_the_output_are_never_touched(world, cli, monkeypatch, command):
    """Each writing command, run to completion with -o beside sibling names that imitate its
    temporaries (`imitate_temporaries`), changes nothing but its own output (for compare, the
    table and its figure): nothing is removed, moved or written into."""
    argv, suffix = WRITERS[command]
    folder = world / f"beside-{command}"
    folder.mkdir()
    out = folder / f"out{suffix}"
    written = [out.name] + (["out.png"] if command == "compare" else [])
    for name in written:
        imitate_temporaries(folder, name)
    monkeypatch.chdir(world)
    before = snapshot(world)
    code, _, err = cli(*argv(world), "-o", out)
    assert code == 0, err
    after = snapshot(world)
    own = [os.path.join(folder.name, name) for name in written]
    changed = sorted(
        k
        for k in set(before) | set(after)
        if before.get(k) != after.get(k)
        and not any(k == o or k.startswith(o + os.sep) for o in own)
    )
    assert not changed, f"{command} -o {out} changed: {changed[:10]}"
    assert all(os.path.lexists(folder / o) for o in written)
