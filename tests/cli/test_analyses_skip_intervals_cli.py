"""`align skip --equal-n` above the corpus's prompts is refused in one line before running."""

from __future__ import annotations

from tests.helpers.assertions import one_line_error


def test_cli_refuses_equal_n_before_running(cli, zoo, corpus_file, tmp_path):
    code, _, err = cli("skip", zoo("qwen2"), corpus_file, "-o", tmp_path / "s", "--equal-n", 500)
    one_line_error(code, err, "--equal-n 500", "current setting")
    assert not (tmp_path / "s").exists()
