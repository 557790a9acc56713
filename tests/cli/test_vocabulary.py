"""Inputs a model was not built for. A tokenizer whose ids run past the model's embedding table (a tokenizer that does not belong
to the weights) is refused in one line naming the id, where it occurs and the model's
vocabulary size, before any store or result exists (it was an IndexError deep in the forward,
reported as an internal error)."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.helpers.assertions import one_line_error

N_EMBED = 40


@pytest.fixture(scope="module")
def mismatched(zoo, tmp_path_factory):
    """A qwen2 model with 40 token embeddings beside the zoo's 300-token tokenizer."""
    import transformers as tf

    src = zoo("qwen2")
    dst = str(tmp_path_factory.mktemp("mismatch") / "model")
    config = tf.AutoConfig.from_pretrained(src)
    config.vocab_size = N_EMBED
    tf.AutoModelForCausalLM.from_config(config).save_pretrained(dst)
    for name in os.listdir(src):
        if name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(os.path.join(src, name), dst)
    return dst


def _largest_id(path, text):
    """The largest token id of the corpus's documents, by the tokenizers library."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    return max(max(tok.encode(d.rstrip("\n")).ids) for d in text.split("\n\n") if d.strip())


@pytest.mark.parametrize("command", ["extract", "contrib", "lens", "skip"])
def test_token_id_beyond_the_embeddings_is_named(mismatched, corpus_file, tmp_path, cli, command):
    out = tmp_path / "o.zarr"
    code, _, err = cli(command, mismatched, corpus_file, "-o", out)
    line = one_line_error(
        code,
        err,
        f"has {N_EMBED} token embeddings",
        "do not belong together",
        progress=("align extract: ",),
    )
    assert (
        f"token id {_largest_id(mismatched, open(corpus_file, encoding='utf-8').read())}" in line
    ), line
    assert not out.exists()


@pytest.mark.parametrize("command", ["contrib", "lens", "skip"])
def test_prompt_longer_than_the_positions_is_refused(zoo, corpus_file, tmp_path, cli, command):
    """The zoo's models have 1,024 positions; --max-length 2048 and a 1,500-token document
    (counted by the tokenizers library) would run positions the model has no rotary training for."""
    from tokenizers import Tokenizer

    model = zoo("qwen2")
    tok = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    text = " ".join(["layer"] * 3000)
    n = len(tok.encode(text).ids)
    assert n > 1024
    docs = tmp_path / "long.txt"
    docs.write_text(text + "\n", encoding="utf-8")
    out = tmp_path / "o.zarr"
    code, _, err = cli(command, model, docs, "-o", out, "--max-length", "4096")
    one_line_error(
        code,
        err,
        f"prompt 0 has {n:,} tokens",
        "max_position_embeddings 1,024",
        "--max-length 1024",
    )
    assert not out.exists()
