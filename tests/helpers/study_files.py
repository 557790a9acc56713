"""Study files written from a few keyword arguments, for the tests that read one without
running it (the study's own fixtures, which run one, are tests/helpers/fixtures_study.py)."""

from __future__ import annotations

import json
import pathlib

MODELS = {"a": "m0", "b": "m1"}


def study_toml(
    models: dict | None = None,
    corpus: str = "docs.txt",
    *,
    analyses: dict | None = None,
    pairs: list | None = None,
    extra: str = "",
    name: str | None = None,
) -> str:
    """The TOML of a study of `models` ({name: path, or a list of paths: its checkpoints}, in
    order; default a at m0, b at m1) over the corpus at `corpus`: `analyses` {name:
    [analysis]} gives a model its list, `pairs` [[source, target]] a `[pairs]` table of mode
    "list", `name` the `[study]` name, and `extra` is appended last (so keys without a table
    header land in the file's last table: `[corpus]`, or `[pairs]`)."""
    analyses = analyses or {}
    lines = [] if name is None else ["[study]", f"name = {json.dumps(name)}"]
    for model, path in (models or MODELS).items():
        key = "paths" if isinstance(path, list) else "path"
        lines += ["[[models]]", f"name = {json.dumps(model)}", f"{key} = {json.dumps(path)}"]
        if model in analyses:
            lines.append(f"analyses = {json.dumps(analyses[model])}")
    lines += ["[corpus]", f"path = {json.dumps(corpus)}"]
    if pairs is not None:
        lines += ["[pairs]", 'mode = "list"', f"list = {json.dumps(pairs)}"]
    return "\n".join(lines) + "\n" + extra


def write_study(path, **keywords) -> pathlib.Path:
    """`study_toml(**keywords)` written to `path` (UTF-8); the path."""
    path = pathlib.Path(path)
    path.write_text(study_toml(**keywords), encoding="utf-8")
    return path
