"""A checkpoint whose config unties the unembedding (`tie_word_embeddings: false`) but whose
weights lack it is refused in one line on every route that reads weights: transformers would
fill the head at random and every logit, lens KL and fit through it would be noise. The
checkpoint is a zoo model saved with save_pretrained, its lm_head.weight removed from the
safetensors with `safetensors` alone; its config is left as saved."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from safetensors import safe_open
from safetensors.torch import save_file

from tests.helpers.assertions import one_line_error

PROMPTS = [{"text": "the model reads every layer =", "answer": " 12 + 7 = 19"}]
NEEDLE = (
    "its config unties the unembedding (tie_word_embeddings false) but the weights hold no "
    "lm_head.weight: it would be drawn at random; set tie_word_embeddings true"
)


@pytest.fixture
def headless(zoo, tmp_path):
    """A copy of the untied llama zoo model without lm_head.weight in its weights."""
    folder = tmp_path / "headless"
    shutil.copytree(zoo("llama"), folder)
    assert json.loads((folder / "config.json").read_text())["tie_word_embeddings"] is False
    path = str(folder / "model.safetensors")
    with safe_open(path, "pt") as f:
        kept = {k: f.get_tensor(k) for k in f.keys() if k != "lm_head.weight"}
        metadata = f.metadata()
    assert "lm_head.weight" not in kept and len(kept) > 10
    save_file(kept, path, metadata=metadata)
    return folder


def listing(root) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
    )


def test_the_library_refuses_it_in_one_line(headless):
    from align.errors import ModelError
    from align.models import ModelSpec, load_model

    with pytest.raises(ModelError) as e:
        load_model(ModelSpec(str(headless)))
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"model {str(headless)!r}: "), line
    assert NEEDLE in line, line


def test_the_same_checkpoint_with_its_head_loads_the_saved_head(zoo):
    """The check refuses only the missing head: the untied checkpoint as saved loads, its
    unembedding the saved tensor (not the embedding), as `safetensors` reads it."""
    import torch

    from align.models import ModelSpec, load_model

    with safe_open(os.path.join(zoo("llama"), "model.safetensors"), "pt") as f:
        saved = f.get_tensor("lm_head.weight")
    model, _ = load_model(ModelSpec(zoo("llama")))
    assert torch.equal(model.lm_head.weight, saved)
    assert not torch.equal(model.lm_head.weight, model.model.embed_tokens.weight)


@pytest.mark.parametrize(
    "command",
    [
        ("lens", "{model}", "{corpus}"),
        ("extract", "{model}", "{corpus}"),
        ("extract", "{model}", "{corpus}", "--dry-run"),
        ("contrib", "{model}", "{corpus}"),
        ("skip", "{model}", "{corpus}"),
        ("fit", "--live", "{other}", "{model}", "{corpus}"),
        ("fit", "--live", "{model}", "{other}", "{corpus}", "--dry-run"),
        ("erase", "{model}", "{prompts}", "--reference", "{corpus}"),
        ("igrad", "{model}", "{prompts}", "--steps", "2"),
        ("lens", "--store", "{store}", "{model}"),
        ("lens", "--store", "{store}", "{model}", "--dry-run"),
    ],
    ids=lambda c: "-".join(a.strip("{}-") for a in c),
)
def test_every_route_that_reads_weights_refuses_it_writing_nothing(
    headless, zoo, extracted, corpus_file, tmp_path, cli, command
):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS), encoding="utf-8")
    store = extracted("llama") if "--store" in command else None
    where = {
        "model": headless,
        "other": zoo("llama"),
        "corpus": corpus_file,
        "prompts": prompts,
        "store": store,
    }
    args = [a.format(**where) for a in command]
    before = listing(tmp_path)
    out = tmp_path / "out.zarr"
    code, _, err = cli(*args, "-o", out)
    start = "checkpoint" if "--store" in command else "model"
    line = one_line_error(code, err, NEEDLE, f"{start} {str(headless)!r}: ", progress=("align ",))
    assert "nothing was written" in line
    assert not out.exists() and listing(tmp_path) == before


def test_the_lens_over_a_store_reads_a_head_saved_under_another_name(tmp_path):
    """GPT-NeoX's untied unembedding is `lm_head` in the model and `embed_out` in its saved
    weights (transformers renames it when it loads): the lens over a store reads that tensor,
    as `safetensors` holds it (it read the embedding `gpt_neox.embed_in` in its place)."""
    import torch

    from align.analyses import read_head
    from tests.helpers.zoo import tiny

    folder = tiny("gpt_neox", str(tmp_path / "neox"))
    assert (
        json.loads(open(os.path.join(folder, "config.json")).read())["tie_word_embeddings"] is False
    )
    with safe_open(os.path.join(folder, "model.safetensors"), "pt") as f:
        assert "lm_head.weight" not in f.keys()
        saved, embedding = (
            f.get_tensor("embed_out.weight"),
            f.get_tensor("gpt_neox.embed_in.weight"),
        )
    _, head = read_head(folder)
    assert torch.equal(head.unembed.weight, saved)
    assert not torch.equal(head.unembed.weight, embedding)
