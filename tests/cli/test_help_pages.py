"""Every command's --help is byte for byte its golden copy (tests/cli/data/help/), so that a
change of how options are declared cannot change what a user reads. After a deliberate change
of an option or its help: `python -m tests.helpers.help_pages`, and review the diff."""

import difflib

from tests.helpers.help_pages import GOLDEN, pages


def test_every_help_page_is_its_golden_copy():
    got = pages()
    want = {p.name: p.read_text(encoding="utf-8") for p in GOLDEN.glob("*.txt")}
    assert sorted(got) == sorted(want), "commands added or gone: rewrite the golden copies"
    for name in sorted(got):
        diff = "".join(
            difflib.unified_diff(
                want[name].splitlines(True), got[name].splitlines(True), name, "now"
            )
        )
        assert not diff, diff
