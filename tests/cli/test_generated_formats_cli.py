"""Every command that reads a corpus takes a generated `--format` (addition:N, multiplication:N)
without CORPUS, by one rule: a generated format needs no CORPUS and refuses one; any other
format needs a CORPUS or --dataset. The problems are regenerated here from the documented
rule (numpy's default_rng([seed, N]), two N-digit integers a problem, "{a} + {b} = {a+b}")
and tokenized by the saved tokenizer.json, never through align."""

import re

import numpy as np
import pytest
import xarray as xr

from tests.helpers.assertions import one_line_error
from tests.helpers.zoo import reference_tokenizer


def _problems(n_digits: int, count: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng([seed, n_digits])
    low = 0 if n_digits == 1 else 10 ** (n_digits - 1)
    out = []
    for _ in range(count):
        a, b = (int(x) for x in rng.integers(low, 10**n_digits, size=2))
        out.append(f"{a} + {b} = {a + b}")
    return out


def _tokens(path, texts) -> int:
    tok = reference_tokenizer(path)
    return sum(len(tok(t)["input_ids"]) for t in texts)


def test_generated_format_in_every_command_that_reads_a_corpus(cli, zoo, tmp_path):
    """contrib, lens, skip, depthscore (over skip results of two digit counts) and fit --live run
    on `--format addition:N --max-docs K` with no CORPUS, and each reads exactly the problems the
    rule generates: the token counts they report equal the reference's."""
    model = zoo("qwen2")
    n2 = _tokens(model, _problems(2, 6))
    for command in ("contrib", "lens"):
        out = tmp_path / f"{command}.zarr"
        code, _, err = cli(
            command, model, "--format", "addition:2", "--max-docs", 6, "--bootstrap", 100, "-o", out
        )
        assert code == 0, err
        assert f"({n2} tokens" in err, err
        ds = xr.open_zarr(out)
        assert ds.attrs["corpus"]["source"] == "generated addition:2" and ds.sizes["prompt"] == 6

    levels = {}
    for digits in (2, 3):
        out = tmp_path / f"skip{digits}.zarr"
        code, _, err = cli(
            "skip",
            model,
            "--format",
            f"addition:{digits}",
            "--max-docs",
            6,
            "--split",
            "answer-start",
            "--bootstrap",
            100,
            "-o",
            out,
        )
        assert code == 0, err
        ds = xr.open_zarr(out)
        assert ds.sizes["prompt"] == 6 and ds.attrs["corpus"]["fmt"] == f"addition:{digits}"
        levels[digits] = out
    out = tmp_path / "ds.zarr"
    code, _, err = cli("depthscore", levels[2], levels[3], "--bootstrap", 100, "-o", out)
    assert code == 0, err
    assert xr.open_zarr(out)["level"].values.tolist() == [
        2,
        3,
    ]  # the digit counts, read from each result's corpus

    out = tmp_path / "fit.zarr"
    code, _, err = cli(
        "fit", "--live", model, model, "--format", "addition:2", "--max-docs", 40, "-o", out
    )
    assert code == 0, err
    ds = xr.open_zarr(out)
    assert ds.attrs["source"]["corpus"]["source"] == "generated addition:2"
    assert not ds.attrs["options"][
        "include_first_token"
    ]  # position 0 is left out of the fit and the scores
    tok = reference_tokenizer(model)
    lengths = [len(tok(t)["input_ids"]) for t in _problems(2, 40)]
    docs = [int(d) for d in ds["heldout_doc"].values]
    assert docs == ds.attrs["split"]["heldout_docs"]
    assert ds["doc_n_tokens"].values.tolist() == [lengths[d] - 1 for d in docs]


@pytest.mark.parametrize(
    "command", ["extract", "contrib", "lens", "skip", "erase", "igrad", "fit --live"]
)
def test_no_corpus_and_no_generated_format_is_one_line(cli, zoo, tmp_path, command):
    """Without CORPUS, --dataset or a generated --format every command says the same thing."""
    model = zoo("qwen2")
    words = command.split()
    extra = ["--reference", tmp_path / "r.txt"] if command == "erase" else []
    models = [model, model] if command == "fit --live" else [model]
    code, _, err = cli(*words, *models, *extra, "-o", tmp_path / "out.zarr")
    line = one_line_error(
        code,
        err,
        "give a CORPUS path, --dataset NAME[:CONFIG]:SPLIT or a generated --format",
        progress=(f"align {words[0]}",),
    )
    assert re.search(r"addition:N, multiplication:N", line)
    assert not (tmp_path / "out.zarr").exists()


def test_a_corpus_beside_a_generated_format_is_refused(cli, zoo, corpus_file, tmp_path):
    code, _, err = cli(
        "skip", zoo("qwen2"), corpus_file, "--format", "addition:2", "-o", tmp_path / "s.zarr"
    )
    one_line_error(
        code, err, "--format addition:2 generates its problems: give no CORPUS or --dataset with it"
    )
    assert not (tmp_path / "s.zarr").exists()
