"""`align.extract(model, ..., tokenizer=tok)` uses the tokenizer it is given, as documented, and
says so in a warning line where that tokenizer tokenizes otherwise than the tokenizer.json of
the folder it was loaded from: AutoTokenizer builds Qwen2's tokenizer class for a folder whose
config says qwen2, which replaces the saved normalizer, pre-tokenizer and model options with
Qwen2's (the zoo's byte-level BPE then gives other ids), where `align extract FOLDER` reads
the file as saved. What differs is found here with the `tokenizers` library reading the file."""

from __future__ import annotations

import json
import os

import pytest
import torch
from tokenizers import Tokenizer, normalizers

from align.corpus import CorpusSpec

COMPONENTS = ("normalizer", "pre_tokenizer", "model", "post_processor", "added_tokens")


def _differ(tok, path) -> list[str]:
    want = json.loads(Tokenizer.from_file(path).to_str())
    got = json.loads(tok.backend_tokenizer.to_str())
    return [k for k in COMPONENTS if got.get(k) != want.get(k)]


def _extract(model_folder, tok, corpus_file, tmp_path) -> list[str]:
    from transformers import AutoModelForCausalLM

    import align

    model = AutoModelForCausalLM.from_pretrained(model_folder, dtype=torch.float32)
    lines = []
    out = str(tmp_path / "mem.zarr")
    align.extract(model, CorpusSpec(corpus_file, max_docs=2), out, tokenizer=tok, log=lines.append)
    assert os.path.isdir(out)
    return lines


def test_auto_tokenizer_of_a_qwen2_folder_is_warned_naming_what_it_replaced(
    zoo, corpus_file, tmp_path
):
    from transformers import AutoTokenizer

    from align.models.tokenizer import PROBE_TEXT

    folder = zoo("qwen2")
    path = os.path.join(folder, "tokenizer.json")
    tok = AutoTokenizer.from_pretrained(folder)
    differ = _differ(tok, path)
    assert {"normalizer", "pre_tokenizer"} <= set(differ), differ  # transformers' swap
    theirs = len(tok(PROBE_TEXT)["input_ids"])
    ours = len(Tokenizer.from_file(path).encode(PROBE_TEXT).ids)
    assert theirs != ours
    lines = _extract(folder, tok, corpus_file, tmp_path)
    warned = [line for line in lines if "warning" in line]
    assert len(warned) == 1, lines
    assert warned[0] == (
        f"align extract: warning: the `tokenizer` given tokenizes otherwise than {path} "
        f"(its {', '.join(differ)} differ; a probe text gives {theirs:,} tokens where the file "
        f"gives {ours:,}); the store holds the given tokenizer's ids, not those `align extract "
        f"{folder}` gives; for the file's own, pass "
        f"align.models.load_tokenizer(ModelSpec({folder!r}))"
    )


@pytest.mark.parametrize("case", ["auto-llama", "file-qwen2"])
def test_a_tokenizer_that_agrees_with_the_file_is_not_warned(zoo, corpus_file, tmp_path, case):
    """AutoTokenizer of the llama folder (no class replaces its components) and the qwen2
    folder's tokenizer read from its file agree with tokenizer.json: no warning."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    family = "llama" if case == "auto-llama" else "qwen2"
    folder = zoo(family)
    load = AutoTokenizer if case == "auto-llama" else PreTrainedTokenizerFast
    tok = load.from_pretrained(folder)
    assert _differ(tok, os.path.join(folder, "tokenizer.json")) == []
    lines = _extract(folder, tok, corpus_file, tmp_path)
    assert not [line for line in lines if "warning" in line], lines


def test_a_tokenizer_object_changed_to_disagree_is_warned_naming_it(zoo, corpus_file, tmp_path):
    """A tokenizer of the llama folder whose normalizer was replaced (lowercasing) after
    loading: the warning names the normalizer alone and the folder's file."""
    from transformers import AutoTokenizer

    folder = zoo("llama")
    tok = AutoTokenizer.from_pretrained(folder)
    tok.backend_tokenizer.normalizer = normalizers.Lowercase()
    path = os.path.join(folder, "tokenizer.json")
    assert _differ(tok, path) == ["normalizer"]
    lines = _extract(folder, tok, corpus_file, tmp_path)
    (warned,) = [line for line in lines if "warning" in line]
    assert f"tokenizes otherwise than {path} (its normalizer differs;" in warned, warned
