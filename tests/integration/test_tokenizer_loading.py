"""A checkpoint's tokenizer is used exactly as saved: align's token ids (through
`align.models.load_tokenizer`, and as stored by a real `align extract` run) equal those of the
`tokenizers` library reading the same tokenizer.json, for the demo's char-level tokenizer inside
a Qwen2 model folder (transformers' AutoTokenizer swaps in Qwen2's byte-level pre-tokenizer
there and drops every newline), for each family's test tokenizer, and for tokenizer.json files
laid out like Qwen 2.5's and Llama 3's (normalizer, split regex, ByteLevel post-processor,
BOS template), each in a folder whose config.json names its family.

The reference is `tokenizers.Tokenizer.from_file`; it never goes through align."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from tokenizers import Tokenizer

from tests.helpers.assertions import one_line_error
from tests.helpers.zoo import FAMILIES, config_for

TEXTS = [
    "12*(3-4)=-12\n7+8=15\n\n99-1=98\n",
    "  leading spaces\n\tand a tab, then  two   spaces",
    "unicode: é ü ß 中文 😀 — «quotes»\n",
    "digits 0123456789 12 + 7 = 19. 3.14159\n\n\nend",
    "\n\nstarts with newlines",
]

# Pre-tokenizer regexes of the real checkpoints (Qwen 2.5 splits digits one by one, Llama 3
# in groups of up to three).
QWEN25_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _reference(folder):
    return Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))


def _save_config(folder, family, vocab_size, **fields):
    config = config_for(family, vocab_size)
    for k, v in fields.items():
        setattr(config, k, v)
    config.save_pretrained(folder)


def _demo_folder(path):
    """The demo's char tokenizer saved by the demo's own code, beside a Qwen2 config.json and
    small random Qwen2 weights: the layout of a trained demo model."""
    import torch
    from transformers import Qwen2ForCausalLM

    from align.demo import tokenizer as demo_tokenizer
    from align.demo.train import TrainConfig, qwen2_config

    tok = demo_tokenizer.save(path)
    torch.manual_seed(0)
    Qwen2ForCausalLM(qwen2_config(TrainConfig(n_layers=1, d_model=16), len(tok))).save_pretrained(
        path
    )
    return path


def _real_layout_folder(path, kind):
    """A small BPE trained here but serialized with the components of the real Qwen 2.5 or
    Llama 3 tokenizer.json, and a tokenizer_config.json with the real special-token fields."""
    from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

    from tests.helpers.zoo import CORPUS_TEXT, _corpus_text

    split = QWEN25_SPLIT if kind == "qwen25" else LLAMA3_SPLIT
    specials = (
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        if kind == "qwen25"
        else ["<|begin_of_text|>", "<|end_of_text|>"]
    )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(
                pattern=__import__("tokenizers").Regex(split), behavior="isolated", invert=False
            ),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(
        [CORPUS_TEXT, _corpus_text(1), "é ü ß 中文 😀 — «quotes» 0123456789"], trainer
    )
    if kind == "qwen25":
        tok.normalizer = normalizers.NFC()
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        cfg = {
            "add_prefix_space": False,
            "bos_token": None,
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
            "unk_token": None,
            "errors": "replace",
            "model_max_length": 131072,
            "split_special_tokens": False,
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
            "tokenizer_class": "Qwen2Tokenizer",
            "clean_up_tokenization_spaces": False,
        }
        family = "qwen2"
    else:
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence(
            [
                processors.ByteLevel(trim_offsets=False),
                processors.TemplateProcessing(
                    single="<|begin_of_text|> $A",
                    pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                    special_tokens=[("<|begin_of_text|>", bos)],
                ),
            ]
        )
        cfg = {
            "bos_token": "<|begin_of_text|>",
            "eos_token": "<|end_of_text|>",
            "clean_up_tokenization_spaces": True,
            "model_input_names": ["input_ids", "attention_mask"],
            "model_max_length": 131072,
            "tokenizer_class": "PreTrainedTokenizerFast",
        }
        family = "llama"
    os.makedirs(path, exist_ok=True)
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    _save_config(path, family, tok.get_vocab_size())
    return path


@pytest.fixture(scope="module")
def folders(zoo, tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenizers")
    out = {fam: zoo(fam) for fam in FAMILIES}
    out["demo-in-qwen2-folder"] = _demo_folder(str(root / "demo"))
    out["qwen25-layout"] = _real_layout_folder(str(root / "qwen25"), "qwen25")
    out["llama3-layout"] = _real_layout_folder(str(root / "llama3"), "llama3")
    return out


KINDS = [*FAMILIES, "demo-in-qwen2-folder", "qwen25-layout", "llama3-layout"]


@pytest.mark.parametrize("kind", KINDS)
def test_load_tokenizer_gives_the_ids_of_tokenizer_json(folders, kind):
    from align.models import ModelSpec, load_tokenizer

    folder = folders[kind]
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        assert (
            json.load(f)["model_type"] in FAMILIES
        )  # the case AutoTokenizer gets wrong: a config names the family
    ref = _reference(folder)
    tok = load_tokenizer(ModelSpec(folder))
    assert tok.is_fast
    texts = TEXTS if kind != "demo-in-qwen2-folder" else [TEXTS[0], "\n\n1+1=2\n", "(3*4)-5=7\n8=8"]
    for text in texts:
        for special in (True, False):
            want = ref.encode(text, add_special_tokens=special)
            got = tok(text, add_special_tokens=special, return_offsets_mapping=True)
            assert got["input_ids"] == want.ids, (kind, text, special)
            assert [tuple(o) for o in got["offset_mapping"]] == [tuple(o) for o in want.offsets], (
                kind,
                text,
            )
    if kind == "demo-in-qwen2-folder":
        nl = ref.token_to_id("\n")
        assert nl is not None and tok("1\n2")["input_ids"] == [
            ref.token_to_id("1"),
            nl,
            ref.token_to_id("2"),
        ]
    # Special tokens as the files define them: Llama-style templates prepend BOS, the others add nothing.
    bos_first = kind in ("llama", "olmo2", "llama3-layout")
    assert (
        ref.encode("a b").ids[0] != ref.encode("a b", add_special_tokens=False).ids[0]
    ) == bos_first
    with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    for key in ("eos_token", "pad_token", "bos_token"):
        name = cfg.get(key)
        if isinstance(name, str):
            assert getattr(tok, key) == name and getattr(tok, key + "_id") == ref.token_to_id(
                name
            ), key
    assert len(tok) == ref.get_vocab_size(with_added_tokens=True)  # nothing added to the vocabulary


def _jsonl(path, texts):
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    return str(path)


@pytest.mark.parametrize("kind", ["demo-in-qwen2-folder", *FAMILIES])
def test_extract_stores_the_ids_of_tokenizer_json(folders, kind, tmp_path, cli):
    from align.store import open_activations

    folder = folders[kind]
    texts = (
        ["12*(3-4)=-12\n7+8=15\n\n99-1=98", "(3*4)-5=7\n8=8\n"]
        if kind == "demo-in-qwen2-folder"
        else TEXTS
    )
    corpus = _jsonl(tmp_path / "c.jsonl", texts)
    out = tmp_path / "s.zarr"
    code, _, err = cli("extract", folder, corpus, "-o", out, "--boundaries", "0")
    assert code == 0, err
    s = open_activations(str(out)).require_complete()
    ids, docs = s.tokens("token_id"), s.tokens("doc")
    ref = _reference(folder)
    for d, text in enumerate(texts):
        np.testing.assert_array_equal(
            ids[docs == d], ref.encode(text).ids, err_msg=f"{kind} doc {d}"
        )


@pytest.mark.parametrize("family", FAMILIES)
def test_modelzoo_reference_tokenizer_is_the_file(zoo, family):
    """modelzoo.reference_tokenizer (what other tests compare stored ids with) gives the ids of
    the `tokenizers` library reading the same file."""
    from tests.helpers.zoo import reference_tokenizer

    ref, tok = _reference(zoo(family)), reference_tokenizer(zoo(family))
    for text in TEXTS:
        assert tok(text)["input_ids"] == ref.encode(text).ids, text


def test_hub_id_from_the_cache_uses_its_tokenizer_json(folders, tmp_path, monkeypatch):
    """A hub id read from the hub cache (offline): its snapshot's tokenizer.json, as saved, and
    the snapshot's commit."""
    import shutil

    from huggingface_hub import constants

    from align.models import ModelSpec, hub_commit, load_config, load_tokenizer

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--demo-org--tiny-demo"
    shutil.copytree(folders["demo-in-qwen2-folder"], repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ref = _reference(str(repo / "snapshots" / commit))
    text = "12*(3-4)=-12\n7+8=15\n"
    spec = ModelSpec("demo-org/tiny-demo")
    assert load_tokenizer(spec)(text)["input_ids"] == ref.encode(text).ids
    assert load_config(spec).model_type == "qwen2"
    assert hub_commit(spec) == commit
    assert (
        hub_commit(ModelSpec(folders["demo-in-qwen2-folder"])) is None
    )  # a local folder has no commit


@pytest.mark.parametrize(
    "kind,flag,value",
    [
        ("llama", "add_bos_token", False),
        ("qwen2", "add_bos_token", True),
        ("qwen2", "add_eos_token", True),
    ],
)
def test_tokenizer_config_flags_that_contradict_the_file_are_refused(
    zoo, tmp_path, cli, corpus_file, kind, flag, value
):
    """add_bos_token/add_eos_token in tokenizer_config.json that say otherwise than the
    tokenizer.json's post-processor: which wrapping the model saw cannot be told, so refused."""
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(zoo(kind), folder)
    cfg_path = folder / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.update({"bos_token": "<s>", flag: value})
    cfg_path.write_text(json.dumps(cfg))
    code, _, err = cli("extract", folder, corpus_file, "-o", tmp_path / "s.zarr")
    one_line_error(code, err, str(folder), f"{flag}={str(value).lower()}", "disagree")
    # Flags that agree with the file load as before.
    cfg[flag] = not value if flag == "add_bos_token" else False
    cfg_path.write_text(json.dumps(cfg))
    from align.models import ModelSpec, load_tokenizer

    assert (
        load_tokenizer(ModelSpec(str(folder)))("a\nb")["input_ids"]
        == _reference(str(folder)).encode("a\nb").ids
    )
