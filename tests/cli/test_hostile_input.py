"""Property-based tests over the corpus readers, the layer-spec parser and the CLI options:
every failure is an InputError (a one-line message), never a traceback; nothing in a store's
attributes is ever executed or unpickled."""

from __future__ import annotations

import json
import pathlib
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from align.boundaries import parse_boundaries
from align.corpus import CorpusSpec, documents, sequences
from align.errors import AlignError

SETTINGS = settings(
    deadline=None,
    derandomize=True,
    max_examples=60,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _one_line(e: Exception):
    assert isinstance(e, AlignError), repr(e)
    assert "\n" not in str(e) and str(e)


@SETTINGS
@given(spec=st.text(alphabet="0123456789:-, ab+.\t", max_size=12), n=st.integers(0, 64))
def test_layer_specs(spec, n):
    try:
        got = parse_boundaries(spec, n)
    except Exception as e:  # noqa: BLE001 - the property is about the exception's type
        _one_line(e)
        assert repr(spec) in str(e) or "`boundaries`" in str(e)
        return
    assert got == sorted(set(got)) and all(0 <= i <= n for i in got) and got


@SETTINGS
@given(
    raw=st.binary(max_size=400),
    kind=st.sampled_from(["txt", "jsonl"]),
    split=st.sampled_from([None, "blank", "line", "file"]),
)
def test_corpus_readers_on_arbitrary_bytes(tmp_path_factory, raw, kind, split):
    path = tmp_path_factory.mktemp("h") / f"c.{kind}"
    path.write_bytes(raw)
    try:
        docs = list(documents(CorpusSpec(str(path), doc_split=split)))
    except Exception as e:  # noqa: BLE001
        _one_line(e)
        return
    assert all(isinstance(d, str) for d in docs)


@SETTINGS
@given(
    text=st.text(max_size=300),
    max_length=st.integers(2, 40),
    overflow=st.sampled_from(["split", "truncate"]),
    max_tokens=st.one_of(st.none(), st.integers(1, 50)),
)
def test_sequences_are_consistent(zoo, tmp_path_factory, text, max_length, overflow, max_tokens):
    tok = _tokenizer(zoo("llama"))
    path = tmp_path_factory.mktemp("s") / "c.txt"
    path.write_text(text, encoding="utf-8")
    docs = list(documents(CorpusSpec(str(path))))
    try:
        seqs = list(
            sequences(
                CorpusSpec(
                    str(path), max_length=max_length, overflow=overflow, max_tokens=max_tokens
                ),
                tok,
            )
        )
    except Exception as e:  # noqa: BLE001
        _one_line(e)
        return
    total = sum(len(s) for s in seqs)
    assert max_tokens is None or total <= max_tokens
    for k, s in enumerate(seqs):
        assert s.seq == k and 1 <= len(s) <= max_length
        doc = docs[s.doc]
        for a, b in zip(s.char_start, s.char_end):
            assert (a == b == -1) or 0 <= a <= b <= len(doc)


_tok_cache: dict = {}


def _options_strategy(values: dict):
    """1 to 3 of the options in `values`, each with a value drawn from its strategy."""
    return st.dictionaries(
        st.sampled_from(sorted(values)), st.just(None), min_size=1, max_size=3
    ).flatmap(lambda d: st.fixed_dictionaries({k: values[k] for k in d}))


def _run_with_options(args: list[str], opts: dict) -> int:
    """Run the CLI with `opts` appended; the property: success, or exactly one
    `align: error:` line that is not an internal error, and never a traceback."""
    import contextlib
    import io

    from tests.conftest import run_cli

    for k, v in opts.items():
        args = args + [k, v]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code, _, _ = run_cli(args)
    text = err.getvalue()
    assert "Traceback" not in text
    if code != 0:
        errors = [line for line in text.splitlines() if line.startswith("align: error:")]
        assert len(errors) == 1 and "internal error" not in errors[0], text
    return code


def _tokenizer(path):
    from tests.helpers.zoo import reference_tokenizer

    if path not in _tok_cache:
        _tok_cache[path] = reference_tokenizer(path)
    return _tok_cache[path]


OPTION_VALUES = {
    "--batch-size": st.one_of(st.integers(-3, 9).map(str), st.text(max_size=4)),
    "--max-length": st.one_of(st.integers(-2, 600).map(str), st.just("1e3")),
    "--boundaries": st.text(alphabet="0123456789:-,x ", max_size=8),
    "--store-dtype": st.sampled_from(["float32", "float16", "bfloat16", "int8", "", "FLOAT32"]),
    "--codec": st.sampled_from(["crc32c", "none", "zstd", "lzma", ""]),
    "--max-tokens": st.one_of(st.integers(-1, 50).map(str), st.just("many")),
    "--dtype": st.sampled_from(["float32", "bf16", "float64"]),
    "--device": st.sampled_from(["cpu", "gpu", "auto", "cuda:9"]),
    "--overflow": st.sampled_from(["split", "truncate", "wrap"]),
    "--format": st.sampled_from(["plain", "gsm8k", "csv"]),
}


@settings(
    deadline=None,
    derandomize=True,
    max_examples=25,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(opts=_options_strategy(OPTION_VALUES))
def test_cli_options_fail_in_one_line(zoo, corpus_file, tmp_path_factory, opts):
    out = tmp_path_factory.mktemp("o") / "s.zarr"
    _run_with_options(
        ["extract", zoo("qwen2"), corpus_file, "-o", str(out), "--dry-run", "--max-docs", "1"], opts
    )
    assert not out.exists()  # a dry run or a refusal writes nothing


def test_store_attributes_are_never_executed(extracted, tmp_path, cli):
    """Attributes are JSON, read as data: a payload that would create a file if evaluated or
    unpickled does nothing."""
    import shutil

    import zarr

    src = extracted("qwen2", batch_size=4)
    dst = str(tmp_path / "evil.zarr")
    shutil.copytree(src, dst)
    marker = tmp_path / "pwned"
    payload = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    g = zarr.open_group(dst, mode="r+")
    prov = g.attrs["provenance"]
    prov["model"] = payload
    prov["options"]["layers"] = payload
    g.attrs["provenance"] = prov
    g.attrs["pickle"] = "gASVIAAAAAAAAACMBXBvc2l4lIwGc3lzdGVtlJOUjAV0b3VjaJSFlFKULg=="
    from align.store import open_activations

    s = open_activations(dst)
    s.resid(1)
    assert cli("info", dst)[0] == 0 and cli("info", dst, "--json")[0] == 0
    assert not marker.exists()
    # And the package never evaluates or unpickles anything.
    root = pathlib.Path(__file__).resolve().parents[2]
    for f in [*root.glob("align/**/*.py"), *root.glob("store/*.py"), *root.glob("cli/*.py")]:
        src_text = f.read_text()
        assert not re.search(
            r"(?<![.\w])(eval|exec)\(|pickle\.loads?\(|yaml\.load\(|torch\.load\(", src_text
        ), f
    json.dumps(g.attrs.asdict())


FIT_VALUES = {
    "--test-fraction": st.sampled_from(["0.2", "0", "1", "-0.5", "1.5", "nan", "x"]),
    "--val-fraction": st.sampled_from(["0.25", "0", "0.99", "2", "inf"]),
    "--alphas": st.sampled_from(["1e-3,1", "0", "-1", "a,b", "", "1e-6,,1", "1e400"]),
    "--source-boundaries": st.text(alphabet="0123456789:-,x ", max_size=6),
    "--target-boundaries": st.sampled_from(["1:", "::2", "99", "-1", "a"]),
    "--memory-limit": st.sampled_from(["8GB", "1KB", "lots", "-5MB", "0", "2.5GiB"]),
    "--task-tokens": st.sampled_from(["256", "0", "-1", "many"]),
    "--device": st.sampled_from(["cpu", "tpu", "cuda:7"]),
}


@settings(
    deadline=None,
    derandomize=True,
    max_examples=20,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(opts=_options_strategy(FIT_VALUES))
def test_fit_options_fail_in_one_line(extracted, tmp_path_factory, opts):
    """`align fit` with arbitrary option values: a result, or exactly one error line."""
    src = extracted("qwen2", batch_size=4)
    out = tmp_path_factory.mktemp("f") / "a.zarr"
    if (
        _run_with_options(["fit", src, src, "-o", str(out), "--scheduler", "synchronous"], opts)
        != 0
    ):
        assert not out.exists()
