"""Every kind of tokenizer the decoder families ship is read exactly as saved: byte-level BPE
(GPT-2, GPT-NeoX, Llama 3, Qwen), SentencePiece-style BPE and Unigram with byte fallback
(Llama 2's normalizer layout, Mistral's Metaspace pre-tokenizer, Gemma's space replacement),
with and without BOS/EOS wrapping. Each is built here with the `tokenizers` library (trained
on a few ASCII lines, so that every non-ASCII character goes through byte fallback), saved with
`PreTrainedTokenizerFast.save_pretrained` beside a tiny model of its family
(tests/helpers/references.py), and run through `align extract`: the stored token ids and character
spans (char_start, char_end) equal the `tokenizers` library's `encode` of the saved
tokenizer.json (ids and offsets; the tokens its post-processor adds have span -1), on text with
multi-byte characters, decomposed characters, whitespace runs, characters outside the
vocabulary and literal special-token text; the store records as its special-token prefix and
suffix what the file's post-processor adds.

The reference is `tokenizers.Tokenizer.from_file`; nothing it computes goes through align."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from tokenizers import (
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

from tests.helpers.zoo import tiny

LINES = [
    "the quick brown fox jumps over the lazy dog while the model reads every layer",
    "hello world, hello there: a deeper network spreads the same computation over more layers",
    "12 + 7 = 19, 3.14159 and 0123456789; (a*b) - c / d = e!",
    "We fit linear maps from each layer to each layer and look at the errors.",
] * 4

# Text align must tokenize as the file does: multi-byte characters (2, 3 and 4 UTF-8 bytes),
# a decomposed e + combining acute (NFC composes it), a ligature, whitespace runs of spaces,
# tabs, newlines and CRLF, trailing spaces.
TEXTS = [
    "héllo wörld: naïve café, 中文字符 and 😀 emoji — «quotes»",
    "  two leading spaces,\ta tab,   three spaces\n\n\nthree newlines\r\n crlf",
    "e\u0301 decomposed, ﬁ ligature, Å and ẞ",
    "12+7=19, 3.14159 and 0123456789\n",
    "ends with spaces   ",
]

SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
BYTES = [f"<0x{b:02X}>" for b in range(256)]


def _byte_level(specials, normalizer=None, split=False, trim_offsets=False, template=None):
    """A byte-level BPE (GPT-2's bytes-to-characters map), optionally behind a split regex
    (Llama 3, Qwen) and a normalizer, with a ByteLevel post-processor and an optional template."""
    tok = Tokenizer(models.BPE())
    if split:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(pattern=Regex(SPLIT), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(
            add_prefix_space=False, trim_offsets=trim_offsets
        )
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        LINES,
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=specials,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    if normalizer is not None:
        tok.normalizer = normalizer
    level = processors.ByteLevel(trim_offsets=trim_offsets)
    tok.post_processor = (
        level if template is None else processors.Sequence([level, _template(tok, *template)])
    )
    return tok


def _template(tok, single, specials):
    return processors.TemplateProcessing(
        single=single,
        pair=f"{single} $B:1",
        special_tokens=[(s, tok.token_to_id(s)) for s in specials],
    )


def _with_byte_fallback(tok, specials):
    """The trained model rebuilt as SentencePiece models are laid out: the special tokens, then
    the 256 byte tokens <0x00>..<0xFF>, then the learned pieces; byte_fallback on."""
    spec = json.loads(tok.to_str())
    model = spec["model"]
    if model["type"] == "BPE":
        vocab = {t: i for i, t in enumerate([*specials, *BYTES])}
        for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1]):
            vocab.setdefault(t, len(vocab))
        model.update(vocab=vocab, byte_fallback=True, fuse_unk=True, unk_token=specials[0])
    else:  # Unigram: (piece, log-probability) pairs, the byte pieces scored below every learned one
        learned = [p for p in model["vocab"] if p[0] not in specials]
        floor = min(s for _, s in learned) - 1.0
        model.update(
            vocab=[[s, 0.0] for s in specials] + [[b, floor] for b in BYTES] + learned,
            unk_id=0,
            byte_fallback=True,
        )
        vocab = {p[0]: i for i, p in enumerate(model["vocab"])}
    for added in spec["added_tokens"]:
        added["id"] = vocab[added["content"]]
    return Tokenizer.from_str(json.dumps(spec))


def _sentencepiece(specials, layout, template, unigram=False):
    """A SentencePiece-style tokenizer with byte fallback. layout: "legacy" (Llama 2's
    tokenizer.json: a Prepend("▁") + Replace(" ", "▁") normalizer, no pre-tokenizer),
    "metaspace" (Mistral's: a Metaspace pre-tokenizer prepending "▁" to the first word), "gemma"
    (Replace(" ", "▁") only: no prefix), "metaspace-always" (a "▁" before every word)."""
    if unigram:
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(
            vocab_size=160, special_tokens=specials, unk_token=specials[0], show_progress=False
        )
    else:
        tok = Tokenizer(models.BPE(unk_token=specials[0]))
        trainer = trainers.BpeTrainer(vocab_size=160, special_tokens=specials, show_progress=False)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="always", split=True
    )
    tok.train_from_iterator(LINES, trainer)
    tok = _with_byte_fallback(tok, specials)
    if layout == "legacy":
        tok.normalizer = normalizers.Sequence(
            [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]
        )
        tok.pre_tokenizer = None
    elif layout == "gemma":
        tok.normalizer = normalizers.Replace(" ", "▁")
        tok.pre_tokenizer = None
    else:
        scheme = "first" if layout == "metaspace" else "always"
        tok.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement="▁", prepend_scheme=scheme, split=layout != "metaspace"
        )
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    tok.decoder = decoders.Sequence(
        steps + ([] if layout == "gemma" else [decoders.Strip(" ", 1, 0)])
    )
    tok.post_processor = _template(tok, *template)
    return tok


SP = ["<unk>", "<s>", "</s>"]
GEMMA = ["<unk>", "<pad>", "<eos>", "<bos>"]
# kind -> (model_type of the tiny model beside it, tokenizer builder, named special tokens,
#          tokenizer_config.json's add_bos_token/add_eos_token where the real checkpoints set them,
#          the tokens the post-processor puts before and after a text)
KINDS = {
    "gpt2": (
        "gpt2",
        lambda: _byte_level(["<|endoftext|>"]),
        dict(bos_token="<|endoftext|>", eos_token="<|endoftext|>"),
        {},
        ([], []),
    ),
    "gpt_neox": (
        "gpt_neox",
        lambda: _byte_level(["<|endoftext|>", "<|padding|>"], normalizers.NFC(), trim_offsets=True),
        dict(bos_token="<|endoftext|>", eos_token="<|endoftext|>", pad_token="<|padding|>"),
        {},
        ([], []),
    ),
    "llama3": (
        "llama",
        lambda: _byte_level(
            ["<|begin_of_text|>", "<|end_of_text|>"],
            split=True,
            template=("<|begin_of_text|> $A", ["<|begin_of_text|>"]),
        ),
        dict(bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>"),
        {},
        (["<|begin_of_text|>"], []),
    ),
    "qwen2": (
        "qwen2",
        lambda: _byte_level(
            ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], normalizers.NFC(), split=True
        ),
        dict(eos_token="<|endoftext|>", pad_token="<|endoftext|>"),
        {},
        ([], []),
    ),
    "byte-level-eos": (
        "gpt_neox",
        lambda: _byte_level(["<|endoftext|>"], template=("$A <|endoftext|>", ["<|endoftext|>"])),
        dict(eos_token="<|endoftext|>"),
        {},
        ([], ["<|endoftext|>"]),
    ),
    "llama2": (
        "llama",
        lambda: _sentencepiece(SP, "legacy", ("<s> $A", ["<s>"])),
        dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>"),
        dict(add_bos_token=True, add_eos_token=False),
        (["<s>"], []),
    ),
    "mistral": (
        "mistral",
        lambda: _sentencepiece(SP, "metaspace", ("<s> $A", ["<s>"])),
        dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>"),
        dict(add_bos_token=True, add_eos_token=False),
        (["<s>"], []),
    ),
    "gemma": (
        "gemma",
        lambda: _sentencepiece(GEMMA, "gemma", ("<bos> $A", ["<bos>"])),
        dict(bos_token="<bos>", eos_token="<eos>", unk_token="<unk>", pad_token="<pad>"),
        dict(add_bos_token=True, add_eos_token=False),
        (["<bos>"], []),
    ),
    "unigram-bos-eos": (
        "llama",
        lambda: _sentencepiece(
            SP, "metaspace-always", ("<s> $A </s>", ["<s>", "</s>"]), unigram=True
        ),
        dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>"),
        dict(add_bos_token=True, add_eos_token=True),
        (["<s>"], ["</s>"]),
    ),
}
SENTENCEPIECE = ("llama2", "mistral", "gemma", "unigram-bos-eos")


def _texts(kind, specials):
    """TEXTS and two documents with the kind's special tokens written literally: inside the
    text and at its very start (where a Metaspace "first" scheme decides on the "▁" prefix)."""
    names = list(dict.fromkeys(specials.values()))
    return [
        *TEXTS,
        f"literal {' and '.join(names)} in the text{names[0]}.",
        f"{names[-1]}starts with a special",
    ]


def _folder(kind, path):
    """A tiny model of the kind's family (embeddings resized to the tokenizer's vocabulary) with
    the kind's tokenizer saved by transformers, as a checkpoint carries it."""
    import transformers as tf

    model_type, build, specials, flags, _ = KINDS[kind]
    tiny(model_type, path, 1)
    for f in os.listdir(path):  # the tiny model's own tokenizer files
        if f.startswith("tokenizer") or f == "special_tokens_map.json":
            os.remove(os.path.join(path, f))
    tok = build()
    n = tok.get_vocab_size(with_added_tokens=True)
    model = tf.AutoModelForCausalLM.from_pretrained(path)
    model.resize_token_embeddings(n, mean_resizing=False)
    model.config.bos_token_id = (
        tok.token_to_id(specials["bos_token"]) if "bos_token" in specials else None
    )
    model.config.eos_token_id = tok.token_to_id(specials["eos_token"])
    model.config.pad_token_id = None
    model.save_pretrained(path)
    tf.PreTrainedTokenizerFast(tokenizer_object=tok, **specials).save_pretrained(path)
    if (
        flags
    ):  # Llama 2, Mistral and Gemma checkpoints state the wrapping in tokenizer_config.json too
        cfg_path = os.path.join(path, "tokenizer_config.json")
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        with open(cfg_path, "w", encoding="utf-8") as f:
            json.dump({**cfg, **flags}, f)
    return path


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenizer-kinds")
    return {kind: _folder(kind, str(root / kind)) for kind in KINDS}


def _reference(folder):
    return Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))


def _saved(folder):
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("kind", KINDS)
def test_the_saved_file_is_the_kind(folders, kind):
    """What save_pretrained wrote is the kind built: byte fallback and the "▁" layout for the
    SentencePiece kinds, byte-level for the others, and the template's wrapping; the texts do
    reach byte fallback (a character outside the vocabulary becomes its UTF-8 bytes)."""
    spec, ref = _saved(folders[kind]), _reference(folders[kind])
    text = json.dumps(spec)
    if kind in SENTENCEPIECE:
        assert (
            spec["model"]["byte_fallback"] is True and "\\u2581" in text and "ByteLevel" not in text
        )
        enc = ref.encode("中", add_special_tokens=False)
        assert (
            enc.tokens[-3:] == ["<0xE4>", "<0xB8>", "<0xAD>"] and enc.offsets[-3:] == [(0, 1)] * 3
        )
    else:
        assert "ByteLevel" in text and not spec["model"].get("byte_fallback")
    want_pre, want_suf = (
        (ref.token_to_id(t) for t in KINDS[kind][4][0]),
        (ref.token_to_id(t) for t in KINDS[kind][4][1]),
    )
    enc = ref.encode("a b")
    assert enc.ids == [*want_pre, *ref.encode("a b", add_special_tokens=False).ids, *want_suf]


@pytest.mark.parametrize("kind", KINDS)
def test_load_tokenizer_gives_the_ids_and_offsets_of_tokenizer_json(folders, kind):
    from align.models import ModelSpec, load_tokenizer

    folder = folders[kind]
    ref, tok = _reference(folder), load_tokenizer(ModelSpec(folder))
    for text in _texts(kind, KINDS[kind][2]):
        for special in (True, False):
            want = ref.encode(text, add_special_tokens=special)
            got = tok(text, add_special_tokens=special, return_offsets_mapping=True)
            assert got["input_ids"] == want.ids, (kind, text, special)
            assert [tuple(o) for o in got["offset_mapping"]] == want.offsets, (kind, text, special)


def _jsonl(path, texts):
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    return str(path)


@pytest.mark.parametrize("kind", KINDS)
def test_extract_stores_the_ids_and_spans_of_tokenizer_json(folders, kind, tmp_path, cli):
    """`align extract`'s stored ids and char spans, document by document, against the file's
    own encoding; the prefix and suffix it records, against the tokens the file's template
    adds; nothing counted as dropped (byte fallback and byte-level cover every character); each
    literal special-token text counted once."""
    from align.store import open_activations

    folder = folders[kind]
    texts = _texts(kind, KINDS[kind][2])
    out = tmp_path / "s.zarr"
    code, _, err = cli(
        "extract",
        folder,
        _jsonl(tmp_path / "c.jsonl", texts),
        "-o",
        out,
        "--boundaries",
        "0",
        "--max-length",
        "128",
    )  # GPT-2's tiny model has 128 positions; every text fits one window
    assert code == 0, err
    s = open_activations(str(out)).require_complete()
    ids, docs = s.tokens("token_id"), s.tokens("doc")
    spans = np.stack([s.tokens("char_start"), s.tokens("char_end")], axis=1)
    ref = _reference(folder)
    special_ids = {t["id"] for t in _saved(folder)["added_tokens"] if t["special"]}
    literal = 0
    for d, text in enumerate(texts):
        enc = ref.encode(text)
        np.testing.assert_array_equal(ids[docs == d], enc.ids, err_msg=f"{kind} doc {d}")
        want = np.array(
            [(-1, -1) if sid is None else o for sid, o in zip(enc.sequence_ids, enc.offsets)]
        )
        np.testing.assert_array_equal(spans[docs == d], want, err_msg=f"{kind} doc {d}: {text!r}")
        body = [i for i, sid in enumerate(enc.sequence_ids) if sid is not None]
        assert [enc.ids[i] for i in range(body[0])] == [
            ref.token_to_id(t) for t in KINDS[kind][4][0]
        ]
        assert [enc.ids[i] for i in range(body[-1] + 1, len(enc))] == [
            ref.token_to_id(t) for t in KINDS[kind][4][1]
        ]
        literal += sum(enc.ids[i] in special_ids for i in body)
    prefix, suffix = ([ref.token_to_id(t) for t in side] for side in KINDS[kind][4])
    prov = s.provenance
    assert prov["special_tokens"] == {"prefix": prefix, "suffix": suffix}
    assert prov["corpus"]["dropped_characters"] == 0
    assert literal >= 2 and prov["corpus"]["special_token_text"] == literal


def test_a_composed_character_is_not_counted_as_dropped():
    """Hand-worked spans as `tokenizers` gives them after NFC: the composed character's span is
    its first original character's, the combining mark (or Hangul jamo) after it is in none."""
    from align.corpus import uncovered_characters

    cafe = "cafe\u0301!"  # é composed from e + U+0301: spans c a f e | !
    assert (
        uncovered_characters(cafe, np.array([[0, 4], [5, 6]])) == 1
    )  # no normalizer: a mark no token holds
    assert uncovered_characters(cafe, np.array([[0, 4], [5, 6]]), "NFC") == 0
    gak = "\u1100\u1161\u11a8"  # 각 from three jamo: one span, the first jamo's
    assert uncovered_characters(gak, np.array([[0, 1]]), "NFKC") == 0
    assert uncovered_characters(gak, np.array([[0, 1]])) == 2
    # Not composed, so still dropped: x + U+0301 has no precomposed form, and an emoji after a letter.
    assert uncovered_characters("x\u0301", np.array([[0, 1]]), "NFC") == 1
    assert uncovered_characters("a\U0001f600b", np.array([[0, 1], [2, 3]]), "NFC") == 1
    assert (
        uncovered_characters("e\u0301\U0001f600", np.array([[0, 1]]), "NFC") == 1
    )  # the mark composes, the emoji not
