"""The study and the report own only what they made: a folder is a study's only when its
study.json carries align's marker, a report's only when it holds the report's marker; nothing
else is written or removed (every user folder's tree hashed before and after). Unreadable
study files and state files are one line naming the file."""

from __future__ import annotations

import hashlib
import os

from tests.helpers.study_files import study_toml, write_study


def tree(root) -> dict:
    """{relative path: what it is}: a file's sha256, a link's target, a folder; the root itself
    too (a link or a file at the root is hashed as such)."""
    out = {}
    root = str(root)

    def entry(path):
        if os.path.islink(path):
            return "link " + os.readlink(path)
        if os.path.isdir(path):
            return "folder"
        with open(path, "rb") as f:
            return "file " + hashlib.sha256(f.read()).hexdigest()

    out["."] = entry(root)
    if os.path.isdir(root) and not os.path.islink(root):
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                out[os.path.relpath(p, root)] = entry(p)
    return out


def one_line(code, err, expected: str):
    assert code == 2 and err == f"align: error: {expected}\n", err


def a_study_dir(tmp_path):
    """A study folder as `align study` leaves it before any unit (its state, marker first)."""
    from align.study.state import write_state

    root = tmp_path / "out"
    root.mkdir()
    write_state(str(root), {"name": "t", "order": [], "units": {}, "models": []})
    return root


def test_report_never_touches_a_users_partial_folder_or_file(cli, tmp_path):
    root = a_study_dir(tmp_path)
    mine = tmp_path / "rep.partial"
    (mine / "pairs").mkdir(parents=True)
    (mine / "notes.txt").write_text("mine", encoding="utf-8")
    (mine / "pairs" / "x.html").write_text("<p>mine</p>", encoding="utf-8")
    before = tree(mine)
    code, _, err = cli("report", root, "-o", tmp_path / "rep")
    assert code == 0, err
    assert (tmp_path / "rep" / "index.html").is_file() and (
        tmp_path / "rep" / ".align-report"
    ).is_file()
    assert tree(mine) == before
    code, _, err = cli("report", root, "-o", tmp_path / "rep")  # a report is replaced
    assert code == 0 and tree(mine) == before
    assert sorted(os.listdir(tmp_path)) == ["out", "rep", "rep.partial"]  # nothing left beside

    other = tmp_path / "file"
    other.mkdir()
    (other / "r.partial").write_text("a file of mine", encoding="utf-8")
    before = tree(other)
    code, _, err = cli("report", root, "-o", other / "r")
    assert code == 0, err
    before["r"] = "folder"
    assert {k: v for k, v in tree(other).items() if not k.startswith("r/")} == before


def test_report_to_a_link_is_refused_in_one_line(cli, tmp_path):
    root = a_study_dir(tmp_path)
    assert cli("report", root, "-o", tmp_path / "real")[0] == 0
    os.symlink(tmp_path / "real", tmp_path / "link")
    before = (tree(tmp_path / "real"), tree(tmp_path / "link"))
    code, _, err = cli("report", root, "-o", tmp_path / "link")
    one_line(
        code,
        err,
        f"-o {tmp_path / 'link'} is a symbolic link: give the report's folder itself (a new or "
        "empty folder, or a report)",
    )
    assert (tree(tmp_path / "real"), tree(tmp_path / "link")) == before


def test_a_folder_with_a_users_study_json_is_not_a_study(cli, tmp_path):
    study = write_study(tmp_path / "s.toml")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "study.json").write_text('{"my": "own study notes"}', encoding="utf-8")
    (mine / "data.csv").write_text("1,2\n", encoding="utf-8")
    before = tree(mine)
    expected = (
        f"{mine / 'study.json'} was not written by `align study` (no align study marker): {mine} "
        "is not a study; give the study a new or empty folder (align changes nothing in this one)"
    )
    for extra in ((), ("--dry-run",)):
        code, _, err = cli("study", study, "-o", mine, *extra)
        one_line(code, err, expected)
        assert tree(mine) == before
    code, _, err = cli("report", mine, "-o", tmp_path / "rep")
    one_line(code, err, expected)
    assert not (tmp_path / "rep").exists()
    code, _, err = cli("info", mine)
    one_line(code, err, expected)
    assert tree(mine) == before


def test_a_study_json_that_is_not_json_is_one_line(cli, tmp_path):
    study = write_study(tmp_path / "s.toml")
    root = tmp_path / "out"
    root.mkdir()
    (root / "study.json").write_bytes(b'{"units": {"extract a"')  # cut short
    before = tree(root)
    for args in (("study", study, "-o", root), ("info", root)):
        code, _, err = cli(*args)
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"align: error: study state {root / 'study.json'} is not JSON (")
        assert err.endswith(
            "it is damaged or not align's; give the study a new or empty folder (align changes "
            "nothing in this one), or restore the file\n"
        )
        assert tree(root) == before


def test_a_binary_or_utf16_study_file_is_one_line(cli, tmp_path):
    utf16 = tmp_path / "u.toml"
    utf16.write_bytes(study_toml().encode("utf-16"))
    code, _, err = cli("study", utf16, "-o", tmp_path / "out")
    one_line(
        code,
        err,
        f"study file {utf16} is UTF-16LE (its first bytes are UTF-16LE's byte-order mark), not "
        "UTF-8: convert it to UTF-8, e.g. iconv -f UTF-16LE -t utf-8",
    )
    binary = tmp_path / "b.toml"
    # 8 + 11 bytes of text, then a PNG header
    binary.write_bytes(b"[study]\nname = 'x'\n\x89PNG\r\n\x1a\n\x00\x00")
    code, _, err = cli("study", binary, "-o", tmp_path / "out", "--dry-run")
    one_line(
        code,
        err,
        f"study file {binary} is not UTF-8 (byte 0x89 at offset 19, line 3): convert it to "
        "UTF-8, e.g. iconv -f latin1 -t utf-8",
    )
    assert sorted(os.listdir(tmp_path)) == ["b.toml", "u.toml"]
