"""A budget of 0 bytes or less (--memory-limit, --device-memory) is refused in one line naming
the value, before any work: 0 used to mean the default silently, and a negative size failed
later as "--memory-limit -4.7 GiB is too small"."""

from __future__ import annotations

import pytest

from tests.helpers.assertions import one_line_error

ADVICE = "a budget must be more than 0 bytes; write e.g. 8GB or 512MiB, or leave the option out for its default"


@pytest.mark.parametrize("value", ["0", "0GB", "-5GB", "-1"])
def test_store_fit_refuses_a_budget_of_zero_or_less(fit_pair, cli, tmp_path, value):
    out = tmp_path / "a.zarr"
    code, _, err = cli(
        "fit", *fit_pair, "-o", out, "--scheduler", "synchronous", "--memory-limit", value
    )
    line = one_line_error(code, err, f"--memory-limit {value}: {ADVICE}")
    assert "too small" not in line
    assert not out.exists()


@pytest.mark.parametrize(
    "option,value",
    [
        ("--memory-limit", "0"),
        ("--memory-limit", "-5GB"),
        ("--device-memory", "0"),
        ("--device-memory", "-1GB"),
    ],
)
def test_live_fit_refuses_a_budget_of_zero_or_less(zoo, corpus_file, cli, tmp_path, option, value):
    out = tmp_path / "a.zarr"
    code, _, err = cli(
        "fit",
        "--live",
        zoo("qwen2"),
        zoo("qwen2"),
        corpus_file,
        "-o",
        out,
        "--max-length",
        64,
        "--bootstrap",
        0,
        option,
        value,
    )
    one_line_error(code, err, f"{option} {value}: {ADVICE}")
    assert not out.exists()


def test_the_library_refuses_a_budget_of_zero_or_less_and_a_non_size():
    from align.errors import InputError
    from align.fitting import Execution

    for value, message in [
        (0, f"`memory_limit` 0: {ADVICE}"),
        (-(2**30), f"`memory_limit` -1073741824: {ADVICE}"),
        (
            True,
            "`memory_limit` True is not a size: write e.g. 8GB or 512MiB (or a number of bytes)",
        ),
        (
            8.5e9,
            "`memory_limit` 8500000000.0 is not a size: write e.g. 8GB or 512MiB (or a number "
            "of bytes)",
        ),
    ]:
        with pytest.raises(InputError) as e:
            Execution(memory_limit=value).checked()
        assert str(e.value) == message
    assert Execution(memory_limit="1KiB").checked().memory_limit == 1024
    assert Execution(memory_limit=None).checked().memory_limit is None
