"""What `align fit --live` says when it refuses: non-finite activations name the model (source
or target, its path), the boundary, the document, position and token, and advise a float32
run only where the model computed in 16 bits; too few documents speak of the corpus and the
options that cut it, not of stores. Nothing is written at -o.

Expected locations come from the `tokenizers` library reading the model's tokenizer.json,
never from align."""

from __future__ import annotations

import os

import pytest

from tests.cli.test_analyses_nonfinite import _poisoned
from tests.helpers.assertions import one_line_error

DOCS = [
    "the model reads every layer of the residual stream",
    "so we fit linear maps from each layer to each layer",
    "a deeper network spreads the same computation over more layers",
    "while the shallow one finishes early in its depth",
    "and we look at the errors of every map",
]
ARGS = ["--max-length", "64", "--batch-size", "2", "--bootstrap", "0"]
D_MODEL = 64  # the zoo's models


@pytest.fixture(scope="module")
def docs_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("live-messages") / "docs.txt"
    p.write_text("\n\n".join(DOCS) + "\n", encoding="utf-8")
    return p


def once_token(model_dir):
    """A token id that occurs exactly once in DOCS, not in the first document nor at position
    0: (id, document, position, its index among all tokens, documents in order, one sequence
    each)."""
    from tokenizers import Tokenizer

    ids = [
        Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json")).encode(d).ids for d in DOCS
    ]
    flat = [t for row in ids for t in row]
    d, p = next(
        (d, p)
        for d, row in enumerate(ids)
        for p, t in enumerate(row)
        if d > 0 and p > 0 and flat.count(t) == 1
    )
    return ids[d][p], d, p, sum(len(row) for row in ids[:d]) + p


@pytest.mark.parametrize("side,dtype", [("source", "float32"), ("target", "bfloat16")])
def test_a_nan_activation_names_the_model_boundary_document_and_position(
    zoo, docs_file, cli, tmp_path, side, dtype
):
    """The embedding row of one token set to NaN in one model: boundary 0 holds d_model NaN at
    that one token. float32 gets no dtype advice; bfloat16 is told how to run that model in
    float32 (--SIDE-dtype). Neither speaks of a store."""
    clean = zoo("qwen2")
    tid, d, p, g = once_token(clean)

    def edit(m):
        m.model.embed_tokens.weight[tid, :] = float("nan")

    poisoned = _poisoned(zoo, tmp_path / "nan-embed", "qwen2", edit)
    models = (poisoned, clean) if side == "source" else (clean, poisoned)
    out = tmp_path / "r.zarr"
    code, _, err = cli("fit", "--live", *models, docs_file, "-o", out, *ARGS, "--dtype", dtype)
    advice = (
        "check the checkpoint's weights for NaN/inf (it computed in float32)"
        if dtype == "float32"
        else f"check the checkpoint's weights for NaN/inf, or compute it in float32 (--{side}-dtype float32)"
    )
    line = one_line_error(
        code,
        err,
        f"non-finite activations of the {side} model {poisoned} at boundary 0: "
        f"{D_MODEL} NaN/inf values in 1 token of this batch, first at document {d}, "
        f"position {p} (token {g}); the fit stopped and wrote nothing: {advice}",
        progress=("align fit --live: ",),
    )
    assert "store" not in line
    assert not out.exists()


@pytest.mark.parametrize("case", ["folder of two files", "max-docs"])
def test_too_few_documents_speak_of_the_corpus_and_its_options(zoo, docs_file, cli, tmp_path, case):
    if case == "folder of two files":
        corpus = tmp_path / "two"
        corpus.mkdir()
        for k in range(2):
            (corpus / f"{k}.txt").write_text(
                DOCS[k] + "\n\n" + DOCS[k + 2] + "\n", encoding="utf-8"
            )
        extra, how, more = [], "file", "give a corpus of more documents or another --doc-split"
    else:
        corpus, extra, how = docs_file, ["--max-docs", "2"], "blank"
        more = "give a corpus of more documents or another --doc-split, or raise --max-docs 2"
    out = tmp_path / "r.zarr"
    code, _, err = cli(
        "fit", "--live", zoo("qwen2"), zoo("qwen2"), corpus, "-o", out, *ARGS, *extra
    )
    line = one_line_error(
        code,
        err,
        f"the corpus {corpus} (--doc-split {how}) gives 2 document(s): a split by document "
        f"needs at least 3 (fit, validation and held-out); {more}",
    )
    assert "store" not in line and "extract" not in line
    assert not out.exists()


def test_a_part_without_tokens_speaks_of_the_corpus(zoo, cli, tmp_path):
    """Documents of one token each (one letter: one token of the byte-level vocabulary):
    position 0 is left out, so the fit part has no token."""
    corpus = tmp_path / "one-token-docs.txt"
    corpus.write_text("a\n\nb\n\nc\n\nd\n\ne\n", encoding="utf-8")
    out = tmp_path / "r.zarr"
    code, _, err = cli("fit", "--live", zoo("qwen2"), zoo("qwen2"), corpus, "-o", out, *ARGS)
    line = one_line_error(
        code,
        err,
        "part of the split has no token (position 0 excluded): change the fractions, "
        "or give a corpus of more documents or another --doc-split",
    )
    assert "store" not in line and "extract" not in line
    assert not out.exists()
