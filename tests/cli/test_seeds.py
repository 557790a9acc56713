"""A negative seed is refused in one line naming the option (numpy's generators take none; it
was "internal error: ValueError" for `align skip --split-seed -1`)."""

from __future__ import annotations

import pytest

from tests.helpers.assertions import one_line_error


@pytest.mark.parametrize(
    "argv,option",
    [
        (["skip", "{model}", "{corpus}", "--split-seed", "-1"], "--split-seed"),
        (["extract", "{model}", "{corpus}", "--random-init", "--seed", "-1"], "--seed"),
        (["contrib", "{model}", "{corpus}", "--random-init", "--seed", "-1"], "--seed"),
        (["fit", "{corpus}", "{corpus}", "--seed", "-1"], "--seed"),
        (["demo", "--seed", "-1"], "--seed"),
    ],
)
def test_negative_seed_is_named(zoo, corpus_file, tmp_path, cli, argv, option):
    out = tmp_path / "o"
    args = [a.format(model=zoo("qwen2"), corpus=corpus_file) for a in argv]
    code, _, err = cli(*args, "-o", out)
    one_line_error(code, err, option, "-1")
    assert not out.exists()
