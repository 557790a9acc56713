"""The study's `[corpus]`, `[extraction]` and `[fit]` are the options of `align extract` and
`align fit`: every option of the corpus, the extraction and what a fit computes is a key of the
same name, type and default, and the others say where the study sets them. Each key's value is
written out twice by hand, as the command line's text and as TOML, and the records the command
and the study build from them must be equal."""

from __future__ import annotations

import click
import pytest

from align.cli.declared import Declared
from align.fitting import FitSpec

STUDY = """
[[models]]
name = "a"
path = "a"
[[models]]
name = "b"
path = "b"
[corpus]
path = "docs.txt"
{fit}
"""
# key: (the option's text on the command line, the key's value in TOML); a flag's text is None
EXAMPLES = {
    "test_fraction": ("0.3", "0.3"),
    "val_fraction": ("0.25", "0.25"),
    "seed": ("7", "7"),
    "alphas": ("0.1,1,10", "[0.1, 1, 10]"),
    "include_first_token": (None, "true"),
    "source_boundaries": ("0,2", '"0,2"'),
    "target_boundaries": ("::2", '"::2"'),
    "save_maps": (None, "true"),
    "bootstrap": ("200", "200"),
    "bootstrap_seed": ("5", "5"),
    "measure_interval": ("bootstrap", '"bootstrap"'),
    "convergence": (None, "true"),
    "pairing": ("tokens", '"tokens"'),
    "min_coverage": ("0.5", "0.5"),
    "measures": ("cka,rsa", '["cka", "rsa"]'),
    "sample_rows": ("500", "500"),
    "permutations": ("9", "9"),
    "neighbours": ("5", "5"),
}


def _command(name):
    from align.cli.main import cli

    return cli.get_command(click.Context(cli), name)


CORPUS_EXAMPLES = {
    "dataset": ("user/set:train", '"user/set:train"'),
    "text_field": ("body", '"body"'),
    "format": ("addition:2", '"addition:2"'),  # generated: no corpus file
    "doc_split": ("line", '"line"'),
    "max_length": ("64", "64"),
    "overflow": ("truncate", '"truncate"'),
    "max_tokens": ("5000", "5000"),
    "max_docs": ("7", "7"),
    "pack": ("\\n\\n", '"\\n\\n"'),  # typed escapes on the command line, TOML's own in the file
    "stand_in_token": ("0", "0"),
}
EXTRACTION_EXAMPLES = {
    "batch_size": ("3", "3"),
    "boundaries": ("::2", '"::2"'),
    "sublayers": (None, "true"),
    "store_dtype": ("float16", '"float16"'),
    "codec": ("zstd", '"zstd"'),
    "chunk_tokens": ("256", "256"),
    "allow_long": (None, "true"),
}


def _args(examples: dict) -> list:
    out = []
    for key, (text, _) in examples.items():
        out += ["--" + key.replace("_", "-"), *([text] if text is not None else [])]
    return out


def _extracted(cli, monkeypatch, *args):
    """The (CorpusSpec, ExtractOptions) `align extract m docs.txt -o s.zarr ARGS` hands to the
    extraction (not run)."""
    got = []
    monkeypatch.setattr("align.cli.extract.extract", lambda m, c, o, opts: got.append((c, opts)))
    code, _, err = cli("extract", "m", "docs.txt", "-o", "s.zarr", *args)
    assert code == 0, err
    return got[0]


def _study_corpus(tmp_path, corpus: str, extraction: str = ""):
    """(CorpusSpec, ExtractOptions) of a study whose [corpus] and [extraction] are these."""
    from align.study import load_study

    path = tmp_path / "s.toml"
    text = STUDY.format(fit="").replace('[corpus]\npath = "docs.txt"\n', "")
    path.write_text(text + f"[corpus]\n{corpus}\n[extraction]\n{extraction}\n", "utf-8")
    study = load_study(str(path))
    return study.corpus, study.extraction


@pytest.mark.parametrize("key", [*CORPUS_EXAMPLES, *EXTRACTION_EXAMPLES, None])
def test_each_corpus_and_extraction_key_is_extract_s_option(cli, monkeypatch, tmp_path, key):
    """`[corpus] KEY = VALUE` (or `[extraction]`) is `align extract --KEY VALUE` (None: the
    defaults of both); the corpus file is docs.txt on both sides, or none beside `dataset` and a
    generated `format`."""
    examples = {**CORPUS_EXAMPLES, **EXTRACTION_EXAMPLES}
    (tmp_path / "docs.txt").write_text("a b\n\nc d\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    one = {key: examples[key]} if key else {}
    corpus_file = [] if key in ("dataset", "format") else ["docs.txt"]
    got = []
    monkeypatch.setattr("align.cli.extract.extract", lambda m, c, o, opts: got.append((c, opts)))
    code, _, err = cli("extract", "m", *corpus_file, "-o", "s.zarr", *_args(one))
    assert code == 0, err
    cspec, opts = got[0]
    if key is not None:  # the example is no default
        assert (cspec, opts) != (cspec.__class__(path=cspec.path), opts.__class__())
    lines = [f"{k} = {toml}" for k, (_, toml) in one.items()]
    in_corpus = [line for line in lines if line.split(" ")[0] in CORPUS_EXAMPLES]
    path = ['path = "docs.txt"'] if corpus_file else []
    study = _study_corpus(
        tmp_path, "\n".join(path + in_corpus), "\n".join(set(lines) - set(in_corpus))
    )
    if corpus_file:  # the study reads a path from its file's folder
        cspec = cspec.__class__(**{**cspec.__dict__, "path": str(tmp_path / "docs.txt")})
    assert study == (cspec, opts)


def _from_command(cli, monkeypatch, *args) -> FitSpec:
    """The FitSpec `align fit s t -o r ARGS` hands to the fit (the fit itself not run)."""
    got = []
    monkeypatch.setattr("align.cli.fit.fit", lambda s, t, o, spec, run, **k: got.append(spec))
    code, _, err = cli("fit", "s", "t", "-o", "r.zarr", *args)
    assert code == 0, err
    return got[0].checked()


def _from_study(tmp_path, fit: str) -> FitSpec:
    from align.study import load_study

    path = tmp_path / "s.toml"
    path.write_text(STUDY.format(fit=fit), encoding="utf-8")
    return load_study(str(path)).fit.checked()


@pytest.mark.parametrize("command", ["extract", "fit"])
def test_every_option_is_a_key_or_says_where_the_study_sets_it(command):
    from align.corpus import CorpusSpec
    from align.extraction import ExtractOptions
    from align.study.schema import ELSEWHERE, RECORDS_ELSEWHERE, SECTIONS

    sections = {CorpusSpec: "corpus", ExtractOptions: "extraction", FitSpec: "fit"}
    for p in _command(command).params:
        if not isinstance(p, Declared) or p.name in ELSEWHERE:
            continue
        record = p.fills.record
        if record in sections:
            key = p.opts[-1].removeprefix("--").replace("-", "_")  # the option's own name
            assert key in SECTIONS[sections[record]], f"{p.opts[-1]} has no study key"
        else:
            assert record is not None, f"{p.opts[-1]}: say where the study sets it"
            assert record.__name__ in RECORDS_ELSEWHERE, p.opts[-1]


def test_every_key_of_the_three_sections_is_an_option_s():
    from align.study.schema import SECTIONS

    assert sorted(SECTIONS["fit"]) == sorted(EXAMPLES)
    assert sorted(SECTIONS["corpus"]) == sorted({"path", *CORPUS_EXAMPLES})
    assert sorted(SECTIONS["extraction"]) == sorted({"reuse", *EXTRACTION_EXAMPLES})


def test_the_defaults_are_the_command_s(cli, monkeypatch, tmp_path):
    assert _from_study(tmp_path, "") == _from_command(cli, monkeypatch)


@pytest.mark.parametrize("key", sorted(EXAMPLES))
def test_each_key_is_its_option(cli, monkeypatch, tmp_path, key):
    """`[fit] KEY = VALUE` is `--KEY VALUE` (a list where the option takes a comma-separated
    one; true where it is a flag)."""
    text, toml = EXAMPLES[key]
    flag = "--" + key.replace("_", "-")
    given = _from_command(cli, monkeypatch, flag, *([text] if text is not None else []))
    assert given != _from_command(cli, monkeypatch)  # the example is no default
    assert _from_study(tmp_path, f"[fit]\n{key} = {toml}\n") == given


def test_every_key_at_once(cli, monkeypatch, tmp_path):
    args, lines = [], []
    for key, (text, toml) in EXAMPLES.items():
        args += ["--" + key.replace("_", "-"), *([text] if text is not None else [])]
        lines.append(f"{key} = {toml}")
    study = _from_study(tmp_path, "[fit]\n" + "\n".join(lines) + "\n")
    assert study == _from_command(cli, monkeypatch, *args)
    assert (study.bootstrap, study.bootstrap_seed) == (200, 5)
