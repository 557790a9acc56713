"""P1's protocol: documents packed into full windows (`--pack SEPARATOR`) and a stand-in first
token (`--stand-in-token ID`), against hand-worked references.

References: the documents are tokenized with the `tokenizers` library reading the model's
tokenizer.json (no align), joined and cut by hand below; residuals come from
tests/helpers/references.py's forward composed from the model's own submodules and from the HF
model's own hidden states (boundaries before the final norm), float32, at
test_extract.py's tolerance (rtol 1e-4, atol 1e-4: ~1000x the observed rounding of batched
against single-sequence forwards, ~1e4x below any real error such as a shifted position).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
import xarray as xr
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

from align import corpus, models
from align.errors import InputError
from align.store import open_activations
from tests.helpers.assertions import one_line_error
from tests.helpers.references import residuals

RTOL, ATOL = 1e-4, 1e-4
WINDOW = 64
BIGGER = {"num_hidden_layers": 4, "hidden_size": 96}  # a second model with the same tokenizer


def _docs(corpus_file):
    text = open(corpus_file, encoding="utf-8").read()
    return [d.rstrip("\n") for d in text.split("\n\n") if d.strip()]


def packed_reference(model_dir, docs, separator, window, prefix=()):
    """Hand-worked packing: each document and the separator tokenized alone, joined
    doc0 sep doc1 sep ..., the separator's tokens in the document before them (char span -1),
    cut into full windows of `window` tokens with `prefix` in front of each (document of the
    token after it, char span -1); the tokens after the last full window left out.
    Returns ({token_id, doc, seq, pos, char_start, char_end}, tokens left out)."""
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    ids, doc, cs, ce = [], [], [], []
    sep = tok.encode(separator, add_special_tokens=False).ids
    for d, text in enumerate(docs):
        if d:
            ids += sep
            doc += [d - 1] * len(sep)
            cs += [-1] * len(sep)
            ce += [-1] * len(sep)
        e = tok.encode(text, add_special_tokens=False)
        ids += e.ids
        doc += [d] * len(e.ids)
        cs += [a for a, _ in e.offsets]
        ce += [b for _, b in e.offsets]
    room = window - len(prefix)
    n = len(ids) // room
    out = {k: [] for k in ("token_id", "doc", "seq", "pos", "char_start", "char_end")}
    for w in range(n):
        cut = slice(w * room, (w + 1) * room)
        out["token_id"] += list(prefix) + ids[cut]
        out["doc"] += [doc[w * room]] * len(prefix) + doc[cut]
        out["seq"] += [w] * window
        out["pos"] += list(range(window))
        out["char_start"] += [-1] * len(prefix) + cs[cut]
        out["char_end"] += [-1] * len(prefix) + ce[cut]
    return {k: np.asarray(v) for k, v in out.items()}, len(ids) - n * room


def assert_table(store, want):
    for name, values in want.items():
        np.testing.assert_array_equal(store.tokens(name), values, err_msg=name)


@pytest.fixture(scope="module")
def protocol_store(extracted):
    """P1's protocol on the 2-layer qwen2 model: "\\n\\n" between documents, stand-in 0,
    windows of 64 tokens (63 real)."""
    return extracted("qwen2", max_length=WINDOW, pack="\n\n", stand_in_token=0, batch_size=4)


def test_packed_store_equals_hand_worked_windows(zoo, corpus_file, tmp_path, cli):
    """`--pack '\\n\\n'` typed with backslashes (as a shell passes it in single quotes)."""
    model = zoo("qwen2")
    out = tmp_path / "p.zarr"
    code, _, err = cli(
        "extract", model, corpus_file, "-o", out, "--max-length", WINDOW, "--pack", "\\n\\n"
    )
    assert code == 0, err
    want, tail = packed_reference(model, _docs(corpus_file), "\n\n", WINDOW)
    assert (
        len(want["token_id"]) // WINDOW >= 30 and tail > 0
    )  # many windows, documents cut across them
    s = open_activations(str(out)).require_complete()
    assert_table(s, want)
    # a document cut across two windows keeps its one id in both
    cut = [d for d in np.unique(want["doc"]) if len(np.unique(want["seq"][want["doc"] == d])) > 1]
    assert cut
    prov = s.provenance["corpus"]
    assert (
        prov["pack"] == "\n\n"
        and prov["stand_in_token"] is None
        and prov["packed_tail_tokens"] == tail
    )
    assert s.provenance["identity"]["pack"] == json.dumps("\n\n")
    assert s.provenance["counts"]["n_docs"] == len(np.unique(want["doc"]))
    code, text, _ = cli("info", out)
    assert (
        code == 0
        and 'packed with separator "\\n\\n"' in text
        and f"{tail:,} tokens after the last full window" in text
    )


@pytest.mark.parametrize(
    "family,separator", [("qwen2", "<|endoftext|>"), ("llama", "\n\n"), ("qwen2", "")]
)
def test_packed_sequences_other_separators_and_a_bos(zoo, corpus_file, family, separator):
    """A special-token separator is read as the special token; a tokenizer's BOS starts every
    window (as the stand-in does); the empty separator joins documents directly."""
    model = zoo(family)
    tok = models.load_tokenizer(models.ModelSpec(model))
    prefix = [tok.bos_token_id] if family == "llama" else []
    want, tail = packed_reference(model, _docs(corpus_file), separator, WINDOW, prefix)
    stats = corpus.TokenizeStats()
    got = list(
        corpus.sequences(
            corpus.CorpusSpec(corpus_file, max_length=WINDOW, pack=separator), tok, stats
        )
    )
    table = {
        k: np.concatenate([sq.fields()[k] for sq in got])
        for k in ("token_id", "doc", "seq", "pos", "char_start", "char_end")
    }
    for k, v in want.items():
        np.testing.assert_array_equal(table[k], v, err_msg=k)
    assert stats.packed_tail_tokens == tail
    if separator == "<|endoftext|>":
        eos = Tokenizer.from_file(os.path.join(model, "tokenizer.json")).token_to_id(
            "<|endoftext|>"
        )
        assert np.count_nonzero(table["token_id"] == eos) > 0


def test_max_tokens_keeps_whole_packed_windows(zoo, corpus_file):
    tok = models.load_tokenizer(models.ModelSpec(zoo("qwen2")))
    spec = corpus.CorpusSpec(corpus_file, max_length=WINDOW, pack="\n\n", max_tokens=3 * WINDOW - 1)
    assert [len(sq) for sq in corpus.sequences(spec, tok)] == [WINDOW, WINDOW]


def test_stand_in_at_position_zero_before_the_unpacked_ids(extracted):
    plain = open_activations(extracted("qwen2"))
    stood = open_activations(extracted("qwen2", stand_in_token=0)).require_complete()
    seq_p, seq_s = plain.tokens("seq"), stood.tokens("seq")
    assert (
        stood.n_tokens == plain.n_tokens + plain.layout.n_sequences
    )  # one more token per sequence, every document fits
    for k in range(plain.layout.n_sequences):
        p, s = np.flatnonzero(seq_p == k), np.flatnonzero(seq_s == k)
        ids = stood.tokens("token_id")[s]
        assert (
            ids[0] == 0
            and stood.tokens("pos")[s[0]] == 0
            and stood.tokens("char_start")[s[0]] == -1
        )
        np.testing.assert_array_equal(ids[1:], plain.tokens("token_id")[p])
        np.testing.assert_array_equal(stood.tokens("pos")[s], np.arange(len(s)))
        assert (stood.tokens("doc")[s] == plain.tokens("doc")[p[0]]).all()
    assert (
        stood.provenance["corpus"]["stand_in_token"] == 0
        and stood.provenance["identity"]["stand_in_token"] == 0
    )


def test_protocol_store_table_and_residuals_equal_an_independent_forward(
    zoo, corpus_file, protocol_store
):
    s = open_activations(protocol_store).require_complete()
    model_dir = zoo("qwen2")
    want, _ = packed_reference(model_dir, _docs(corpus_file), "\n\n", WINDOW, prefix=(0,))
    assert_table(s, want)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    seq = s.tokens("seq")
    L = model.config.num_hidden_layers
    for k in range(s.layout.n_sequences):
        idx = np.flatnonzero(seq == k)
        ids = s.tokens("token_id")[idx]
        ref = residuals(model, ids)["resid"]
        with (
            torch.inference_mode()
        ):  # HF's own hidden states: boundaries 0..L-1 (its last one is after the final norm)
            hf = model(
                torch.as_tensor(ids[None], dtype=torch.long), output_hidden_states=True
            ).hidden_states
        for b in s.boundaries:
            np.testing.assert_allclose(
                s.resid(b)[idx], ref[b], rtol=RTOL, atol=ATOL, err_msg=f"window {k}, boundary {b}"
            )
            if b < L:
                np.testing.assert_allclose(s.resid(b)[idx], hf[b][0].numpy(), rtol=RTOL, atol=ATOL)


def test_resume_with_other_protocol_options_is_refused(zoo, corpus_file, tmp_path, cli):
    out = tmp_path / "r.zarr"
    base = [
        "extract",
        zoo("qwen2"),
        corpus_file,
        "-o",
        out,
        "--max-length",
        "32",
        "--max-docs",
        "4",
    ]
    assert cli(*base, "--pack", "\\n\\n")[0] == 0
    before = json.dumps(open_activations(str(out)).provenance, sort_keys=True)
    code, _, err = cli(*base, "--pack", "<|endoftext|>")
    one_line_error(code, err, 'pack: store has "\\n\\n", now "<|endoftext|>"')
    code, _, err = cli(*base, "--pack", "\\n\\n", "--stand-in-token", "0")
    one_line_error(code, err, "stand_in_token: store has None, now 0")
    code, _, err = cli(*base)
    one_line_error(code, err, 'pack: store has "\\n\\n", now None')
    assert json.dumps(open_activations(str(out)).provenance, sort_keys=True) == before
    code, _, err = cli(*base, "--pack", "\\n\\n", "--batch-size", "3")
    assert code == 0 and "already complete" in err


@pytest.mark.parametrize(
    "args,needles",
    [
        (["--pack", "\\q"], ["--pack '\\\\q'", "unknown escape \\q"]),
        (["--pack", "\\n", "--overflow", "truncate"], ["--overflow truncate"]),
        (["--pack", "\\n", "--max-tokens", "10"], ["--max-tokens 10", "--max-length 32"]),
        (
            ["--pack", "\\n", "--max-docs", "1", "--max-length", "1000"],
            ["--pack", "less than one full window of 1,000"],
        ),
        (["--stand-in-token", "300"], ["--stand-in-token 300", "ids 0 to 299"]),
    ],
)
def test_bad_protocol_options_are_one_line(zoo, corpus_file, tmp_path, cli, args, needles):
    base = ["extract", zoo("qwen2"), corpus_file, "-o", tmp_path / "x.zarr", "--max-length", "32"]
    code, _, err = cli(*base, *args)
    one_line_error(code, err, *needles)
    assert not (tmp_path / "x.zarr").exists()


def test_stand_in_refused_for_a_tokenizer_with_bos_and_pack_for_task_formats(
    zoo, corpus_file, tmp_path, cli
):
    code, _, err = cli(
        "extract", zoo("llama"), corpus_file, "-o", tmp_path / "l.zarr", "--stand-in-token", "0"
    )
    one_line_error(code, err, "--stand-in-token 0", "BOS")
    j = tmp_path / "g.jsonl"
    j.write_text(json.dumps({"question": "q", "answer": "a\n#### 1"}) + "\n")
    code, _, err = cli(
        "extract", zoo("qwen2"), j, "-o", tmp_path / "g.zarr", "--format", "gsm8k", "--pack", "\\n"
    )
    one_line_error(code, err, "--pack", "--format gsm8k")
    with pytest.raises(InputError, match="must be a token id"):
        corpus.validate(corpus.CorpusSpec(corpus_file, stand_in_token=-1))


def test_fit_on_protocol_stores_scores_every_real_token(
    extracted, zoo, corpus_file, protocol_store, tmp_path, cli
):
    """Every token but the stand-ins is fitted, validated or scored: 63 of each 64."""
    target = extracted(
        "qwen2",
        model_overrides=BIGGER,
        max_length=WINDOW,
        pack="\n\n",
        stand_in_token=0,
        batch_size=4,
    )
    want, _ = packed_reference(zoo("qwen2"), _docs(corpus_file), "\n\n", WINDOW, prefix=(0,))
    n_windows = len(want["token_id"]) // WINDOW
    real = n_windows * (WINDOW - 1)
    out = tmp_path / "fit.zarr"
    code, _, err = cli(
        "fit",
        protocol_store,
        target,
        "-o",
        out,
        "--scheduler",
        "synchronous",
        "--alphas",
        "1e-3,1e-1",
    )
    assert code == 0, err
    ds = xr.open_zarr(str(out))
    counts = ds.attrs["options"]["n_tokens"]
    assert counts["fit"] + counts["validation"] + counts["heldout"] == real
    held = np.isin(want["doc"], ds["heldout_doc"].values) & (want["pos"] > 0)
    assert counts["heldout"] == int(held.sum())


def test_a_store_made_before_the_protocol_options_still_resumes(zoo, corpus_file, tmp_path, cli):
    """A store whose identity has neither key (made before they existed) is one document per
    sequence, no stand-in: the same command without them finds it complete; with them, refused."""
    import zarr

    out = tmp_path / "old.zarr"
    base = ["extract", zoo("qwen2"), corpus_file, "-o", out, "--max-docs", "3"]
    assert cli(*base)[0] == 0
    group = zarr.open_group(str(out), mode="r+")
    prov = dict(group.attrs["provenance"])
    prov["identity"] = {
        k: v for k, v in prov["identity"].items() if k not in ("pack", "stand_in_token")
    }
    prov["corpus"] = {
        k: v for k, v in prov["corpus"].items() if k not in ("pack", "stand_in_token")
    }
    group.attrs["provenance"] = prov
    code, _, err = cli(*base)
    assert code == 0 and "already complete" in err
    code, _, err = cli(*base, "--stand-in-token", "0")
    one_line_error(code, err, "stand_in_token: store has None, now 0")


def test_corpus_hash_without_the_protocol_options_is_unchanged(corpus_file):
    """The hash of a corpus read without --pack or --stand-in-token is the one stores made
    before these options recorded: sha256 of the cutting options then the file's name and bytes."""
    import hashlib

    options = {
        "dataset": None,
        "text_field": "text",
        "fmt": "plain",
        "doc_split": None,
        "max_length": 512,
        "overflow": "split",
        "max_tokens": None,
        "max_docs": None,
    }
    h = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
    h.update(os.path.basename(corpus_file).encode() + b"\0")
    h.update(open(corpus_file, "rb").read())
    assert corpus.corpus_hash(corpus.CorpusSpec(corpus_file)) == h.hexdigest()
    assert corpus.corpus_hash(corpus.CorpusSpec(corpus_file, pack="\n\n")) != h.hexdigest()
