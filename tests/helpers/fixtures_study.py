"""Fixtures of the study tests: a tiny study of three zoo models (two qwen2 of different depth
and width with one tokenizer, a llama whose tokenizer adds a BOS: two tokenizers), run once
per session."""

from __future__ import annotations

import pytest

STUDY = """
[study]
name = "tiny"
[[models]]
name = "a"
path = "{a}"
analyses = ["depth"]
[[models]]
name = "b"
path = "{b}"
[[models]]
name = "c"
path = "{c}"
[corpus]
path = "{corpus}"
[pairs]
mode = "list"
list = [["a", "b"], ["a", "c"]]
[controls]
shuffle = true
{extra}
"""

B_SHAPE = {"num_hidden_layers": 4, "hidden_size": 96}  # as tests/helpers/fixtures_fit.fit_pair


def study_text(zoo, corpus_file, extra: str = "", models=("a", "b", "c")) -> str:
    """The tiny study's file; `extra` is appended (more sections)."""
    paths = {"a": zoo("qwen2"), "b": zoo("qwen2", **B_SHAPE), "c": zoo("llama")}
    resamples = "[fit]\nbootstrap = 200\n"  # beside the [fit] keys `extra` gives, if any
    extra = extra.replace("[fit]\n", resamples, 1) if "[fit]\n" in extra else resamples + extra
    text = STUDY.format(corpus=corpus_file, extra=extra, **paths)
    if models != ("a", "b", "c"):  # the two-model form: a and b, one pair, no control
        text = text.replace(f'[[models]]\nname = "c"\npath = "{paths["c"]}"\n', "")
        text = text.replace('list = [["a", "b"], ["a", "c"]]', 'list = [["a", "b"]]')
        text = text.replace('analyses = ["depth"]', "analyses = []")
        text = text.replace("shuffle = true", "shuffle = false")
    return text


@pytest.fixture(scope="session")
def tiny_study(zoo, corpus_file, tmp_path_factory):
    """(study file, DIR, log lines) of the tiny study, run once."""
    from align.study import load_study, run_study

    root = tmp_path_factory.mktemp("study")
    path = root / "tiny.toml"
    path.write_text(study_text(zoo, corpus_file), encoding="utf-8")
    lines = []
    run_study(load_study(str(path)), str(root / "out"), log=lines.append)
    return str(path), str(root / "out"), lines


LENSES = '[analyses]\nlens = ["logit", "linear", "tuned"]\nlens_through = true\n'


@pytest.fixture(scope="session")
def lens_study(zoo, corpus_file, tmp_path_factory):
    """DIR of the tiny study's two-model form (a -> b, one tokenizer) where a runs every lens
    kind and a is read through b's head (`[analyses] lens_through`), run once."""
    from align.study import load_study, run_study

    root = tmp_path_factory.mktemp("lens-study")
    path = root / "lenses.toml"
    text = study_text(zoo, corpus_file, LENSES, models=("a", "b"))
    text = text.replace("analyses = []", 'analyses = ["lens"]', 1)
    path.write_text(text, encoding="utf-8")
    run_study(load_study(str(path)), str(root / "out"), log=lambda m: None)
    return str(root / "out")
