"""`--bootstrap 0` on the command line is refused in one line naming the option."""

from __future__ import annotations

from tests.helpers.assertions import one_line_error


def test_cli_refuses_zero_resamples(cli, tmp_path):
    code, _, err = cli(
        "depth",
        "--contrib",
        tmp_path / "c",
        "--lens",
        tmp_path / "l",
        "-o",
        tmp_path / "d",
        "--bootstrap",
        "0",
    )
    one_line_error(code, err, "--bootstrap")
