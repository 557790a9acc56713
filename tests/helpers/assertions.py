"""Assertions shared by the tests. Nothing here imports align."""

from __future__ import annotations


def one_line_error(code, err, *needles, progress=(), blank_lines=False, absent=()):
    """The command failed (exit status `code` non-zero) with exactly one `align: error:` line on
    stderr, the last one, no traceback and no "internal error"; other lines may only be progress
    lines starting with one of `progress` (e.g. "align extract: "), or blank with `blank_lines`
    (click writes one before an interrupt's message). Every needle appears in the error line, no
    string of `absent` anywhere on stderr. Returns the error line."""
    lines = [line for line in err.strip().splitlines() if line.strip() or not blank_lines]
    assert code != 0, err
    errors = [line for line in lines if line.startswith("align: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in err, err
    assert all(line.startswith(("align: error: ", *progress)) for line in lines), err
    assert "internal error" not in errors[0], errors[0]
    for n in needles:
        assert str(n) in errors[0], (n, errors[0])
    for s in absent:
        assert s not in err, (s, err)
    return errors[0]
