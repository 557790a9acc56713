"""An independent reference for `align fit --pairing char-anchors`. Nothing here imports align.

- `documents()`: a small corpus with multi-byte characters (é, ü, 中文, 😀), runs of spaces
  and tabs inside a line, and the literal text `<|endoftext|>` inside documents; one line per
  document, so that a .txt file joins them with blank lines.
- `byte_level_bpe(texts)` and `metaspace_byte_fallback(texts)`: two tokenizers of different
  kinds, trained on those texts with `tokenizers` (a GPT-2-style byte-level BPE, and a
  SentencePiece-style BPE over Metaspace words whose unknown characters fall back to the 256
  `<0xNN>` byte tokens, as Llama's).
- `trailing_space_bpe(texts)`: a third kind, whose words carry the whitespace after them ("the▁"
  where the other two write "▁the"), with byte fallback.
- `window_contexts(cols)`, `windowed_pairs(cols_s, cols_t)`: the windows rule over two stores'
  token columns, by plain loops: anchors at one character pair only where both windows start
  their context at one character; the others are counted per document.
- `save_checkpoint(folder, tok, family, ...)`: the tokenizer through
  `PreTrainedTokenizerFast.save_pretrained` next to a tiny seeded random Qwen2 or Llama.
- `tokenize(folder, docs)`: per document (ids, offsets) from the folder's tokenizer.json read by
  `tokenizers.Tokenizer.from_file`, without special tokens.
- `anchors(offsets)`: the anchor rule, a plain loop over one document's offsets.
- `anchored_pairs(src, tgt)`: the rows of the fit, document by document.
- `model_boundaries(folder, ids)`: every boundary's residual of one document, from a plain
  forward of the model (batch of one, no padding).
- `reference_cells(...)`: the fit and scores per (source boundary, target boundary) with
  scikit-learn, as tests/integration/test_fit.py does it.
"""

from __future__ import annotations

import json
import os

import numpy as np

from tests.helpers.references import (
    alpha_scale,
    chosen_alpha,
    heldout_scores,
    residuals,
    ridge_val_sse,
    sklearn_ridge,
)

EOT = "<|endoftext|>"

# Hand-written documents, each one line of 40..150 characters: every case the rule has to meet.
FIXED = [
    "Le café était très bon, et le thé aussi: naïve résumé.",
    "Über den Wolken müssen die Freiheit grenzenlos sein, sagt er.",
    "中文字符 in a sentence: 中文 and 字符 again, then 中文字符.",
    "Smile 😀 twice 😀😀 and once more 😀, the end of the emoji line.",
    "two  spaces, three   spaces, and four    spaces in one line.",
    "tabs\tbetween\twords,\t\ttwo tabs, and \t a mixed run \t here.",
    f"the model reads {EOT} as text here, not as the end of a document.",
    f"{EOT} opens this one, and it closes with the same marker {EOT}",
    "mixed: café 中文 😀 über\tnaïve   résumé, all of it in one go.",
    "Numbers 3.14 and 42 and 2718, with punctuation!? Yes; (maybe).",
    # an `a` before many accents teaches the byte-level BPE the token `a` + a lead byte, and `és`
    # the token continuation byte + `s`: a token that ends at a character it has not read whole
    "Raés, paés, maés, taés: an a, an accent, then an s; raés paés maés taés again.",
    "saü, naï, maè, laö, baä, kaå: the lead byte after an a, and raés paés once more.",
]
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "model",
    "token",
    "reads",
    "the",
    "text",
    "of",
    "a",
    "document",
    "café",
    "naïve",
    "über",
    "müde",
    "中文",
    "字符",
    "😀",
    "42",
    "3.14",
    "end.",
    "ok,",
    "raés",
    "paés",
    "naï",
    "saü",
    EOT,
]
SEPARATORS = [" "] * 12 + ["  ", "   ", "\t", " \t "]


def documents(n: int = 36, seed: int = 0) -> list[str]:
    """`FIXED` then generated documents up to `n`, each 40..150 characters, one line, no
    leading or trailing whitespace (a blank line separates documents in the corpus file)."""
    rng = np.random.default_rng(seed)
    docs = list(FIXED)
    while len(docs) < n:
        text = WORDS[
            int(rng.integers(len(WORDS) - 1))
        ]  # never open with the marker: FIXED has that case
        target = int(rng.integers(40, 140))
        while len(text) < target:
            text += (
                SEPARATORS[int(rng.integers(len(SEPARATORS)))]
                + WORDS[int(rng.integers(len(WORDS)))]
            )
        if 40 <= len(text) <= 150:
            docs.append(text)
    assert all("\n" not in d and d == d.strip() and 40 <= len(d) <= 150 for d in docs)
    return docs


def corpus_text(docs) -> str:
    return "\n\n".join(docs) + "\n"


def byte_level_bpe(texts, vocab_size: int = 300):
    """A GPT-2-style byte-level BPE (no prefix space, no post-processor)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=[EOT],
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    return tok


def metaspace_byte_fallback(texts, trained: int = 144, alphabet: int = 30):
    """A SentencePiece-style BPE: Metaspace words ('▁' for a space, one prepended), an alphabet
    of the `alphabet` most frequent characters, and the 256 tokens <0x00>..<0xFF> that any
    other character falls back to as its UTF-8 bytes (as Llama's); trained + 256 tokens.
    Learned from the ASCII characters of `texts` only, so that every other character (é, ü,
    中, 😀) is byte pieces, as rare characters are in Llama's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(
        ["".join(c for c in t if ord(c) < 128) for t in texts],
        trainers.BpeTrainer(
            vocab_size=trained, special_tokens=[EOT], limit_alphabet=alphabet, show_progress=False
        ),
    )
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    assert sorted(vocab.values()) == list(range(len(vocab)))
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    spec["model"]["unk_token"] = None
    spec["decoder"] = {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, spec["decoder"]]}
    return Tokenizer.from_str(json.dumps(spec))


def trailing_space_bpe(texts, trained: int = 160, alphabet: int = 30):
    """A BPE over words that keep the whitespace after them (pre-tokenized by the regex
    `\\S+\\s*|\\s+`, so "the cat" is "the " + "cat": the "the▁" convention), an alphabet of the
    `alphabet` most frequent ASCII characters and the 256 byte tokens any other character
    falls back to."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"\S+\s*|\s+"), behavior="isolated")
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    tok.train_from_iterator(
        ["".join(c for c in t if ord(c) < 128) for t in texts],
        trainers.BpeTrainer(
            vocab_size=trained, special_tokens=[EOT], limit_alphabet=alphabet, show_progress=False
        ),
    )
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    spec["model"]["unk_token"] = None
    return Tokenizer.from_str(json.dumps(spec))


def save_checkpoint(
    folder, tok, family: str, layers: int = 2, width: int = 32, seed: int = 0
) -> str:
    """`tok` saved by PreTrainedTokenizerFast (eos <|endoftext|>, nothing added around the text)
    and a random `family` ("qwen2" or "llama") model seeded with `seed`, in `folder`."""
    import torch
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    os.makedirs(folder, exist_ok=True)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOT).save_pretrained(folder)
    eos = tok.token_to_id(EOT)
    Config, Model = {
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
        "llama": (LlamaConfig, LlamaForCausalLM),
    }[family]
    config = Config(
        vocab_size=tok.get_vocab_size(),
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=eos,
        eos_token_id=eos,
    )
    torch.manual_seed(seed)
    Model(config).save_pretrained(folder)
    return str(folder)


def tokenize(folder, docs) -> list:
    """Per document (ids, offsets) from `folder`/tokenizer.json, read by `tokenizers` itself."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(str(folder), "tokenizer.json"))
    return [
        (list(e.ids), [tuple(o) for o in e.offsets])
        for e in (tok.encode(d, add_special_tokens=False) for d in docs)
    ]


def anchors(offsets) -> dict:
    """{c: i} of one document's tokenization: token i, of span (s, e), is an anchor at c = e
    when e > s and the next token, if any, starts at or after e."""
    out = {}
    for i, (s, e) in enumerate(offsets):
        if e > s and (i + 1 == len(offsets) or offsets[i + 1][0] >= e):
            out[e] = i
    return out


def anchored_pairs(src, tgt) -> dict:
    """The rows of a char-anchors fit of two tokenizations of one corpus (lists of (ids,
    offsets) per document): "doc", "source", "target" (the pair's token positions in their
    documents; one window per document, so also in their sequences), for every pair of anchors
    at the same character, first tokens included; and per side the count of tokens with a
    non-empty span ("spanned")."""
    rows = {"doc": [], "source": [], "target": []}
    spanned = {"source": 0, "target": 0}
    for d, ((_, so), (_, to)) in enumerate(zip(src, tgt)):
        a, b = anchors(so), anchors(to)
        for c in sorted(a):
            if c in b:
                rows["doc"].append(d)
                rows["source"].append(a[c])
                rows["target"].append(b[c])
        spanned["source"] += sum(1 for s, e in so if e > s)
        spanned["target"] += sum(1 for s, e in to if e > s)
    out = {k: np.array(v, dtype=np.int64) for k, v in rows.items()}
    out["spanned"] = spanned
    return out


def offsets_per_doc(cols) -> dict:
    """{document: ([(start, end), ...], [store index, ...])} of a store's tokens with a span."""
    out = {}
    for k in range(len(cols["doc"])):
        if cols["char_start"][k] >= 0:
            d = int(cols["doc"][k])
            out.setdefault(d, ([], []))
            out[d][0].append((int(cols["char_start"][k]), int(cols["char_end"][k])))
            out[d][1].append(k)
    return out


def window_contexts(cols) -> dict:
    """{store index: the character its context starts at, or None} for a store's tokens with a
    span: 0 in its document's first window (sequence); in a later one, the start of the
    window's first token with a span when the previous window's last one ends there (and it
    is not 0); None otherwise (a window that begins inside a character or after a gap)."""
    out, prev, ctx = {}, None, None
    for k in range(len(cols["doc"])):
        if cols["char_start"][k] < 0:
            continue
        d, q = int(cols["doc"][k]), int(cols["seq"][k])
        s, e = int(cols["char_start"][k]), int(cols["char_end"][k])
        if prev is None or prev[0] != d:
            ctx = 0
        elif prev[1] != q:
            ctx = s if prev[2] == s and s > 0 else None
        out[k] = ctx
        prev = (d, q, e)
    return out


def windowed_pairs(cs, ct) -> tuple:
    """({source index: target index}, {document: anchors left out}) for two stores' token
    columns (doc, seq, char_start, char_end): the anchors (`anchors`, over each document's
    spans) at one character of a document pair when their two contexts start at one
    character (`window_contexts`); every other anchor at a character both sides have is
    left out and counted. First tokens included."""
    ctx_s, ctx_t = window_contexts(cs), window_contexts(ct)
    os_, ot = offsets_per_doc(cs), offsets_per_doc(ct)
    pairs, left = {}, {}
    for d in sorted(set(os_) & set(ot)):
        a, b = anchors(os_[d][0]), anchors(ot[d][0])
        for c in sorted(set(a) & set(b)):
            s, t = os_[d][1][a[c]], ot[d][1][b[c]]
            if ctx_s[s] is not None and ctx_s[s] == ctx_t[t]:
                pairs[s] = t
            else:
                left[d] = left.get(d, 0) + 1
    return pairs, left


def model_boundaries(folder, ids_per_doc) -> list:
    """Per document (L+1, T, d) float64: the residual at every boundary 0..L from a plain
    forward of one document (batch of one, no padding). Boundaries 0..L−1 are transformers'
    `output_hidden_states`; its last hidden state has the final norm applied, so boundary L,
    the raw last residual, comes from tests/helpers/references.py's `residuals`, which composes
    the stream from the model's own submodules (and must equal the hidden states below L and
    give the last one through the final norm: checked here)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    out = []
    with torch.inference_mode():
        for ids in ids_per_doc:
            hs = model(torch.tensor([ids]), output_hidden_states=True).hidden_states
            hs = np.stack([h[0].numpy() for h in hs])
            r = residuals(model, ids)
            np.testing.assert_allclose(r["resid"][:-1], hs[:-1], rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(r["final"], hs[-1], rtol=1e-5, atol=1e-5)
            out.append(np.concatenate([hs[:-1], r["resid"][-1:]]).astype(np.float64))
    return out


def stack_rows(per_doc, docs, positions) -> np.ndarray:
    """(n_bounds, n_rows, d): the residual of document docs[k] at position positions[k]."""
    return np.stack([per_doc[d][:, p] for d, p in zip(docs, positions)], axis=1)


def reference_cells(X, Y, doc, split, alphas) -> dict:
    """{(i, j): {"alpha_rel", "alpha", "val_sse", "relative_error", "norm_error", "r2"}} for
    X: (n_source_bounds, n_rows, d_S), Y: (n_target_bounds, n_rows, d_T), rows of documents
    `doc`; split: the result's recorded "fit_docs", "validation_docs", "heldout_docs". α is
    chosen on validation (fit on the fit documents' rows), the map refitted on fit + validation
    rows with α_rel times alpha_scale of those rows, and scored on the held-out rows."""
    fit_r, val_r, test_r = (
        np.isin(doc, split[k]) for k in ("fit_docs", "validation_docs", "heldout_docs")
    )
    assert fit_r.any() and val_r.any() and test_r.any()
    train_r = fit_r | val_r
    out = {}
    for i in range(len(X)):
        for j in range(len(Y)):
            x, y = X[i], Y[j]
            sse = ridge_val_sse(x[fit_r], y[fit_r], x[val_r], y[val_r], alphas)
            k = chosen_alpha(sse, y[fit_r], y[val_r])
            alpha = alphas[k] * alpha_scale(x[train_r])
            scores = heldout_scores(
                sklearn_ridge(x[train_r], y[train_r], alpha).predict(x[test_r]), y[test_r]
            )
            out[(i, j)] = {"alpha_rel": alphas[k], "alpha": alpha, "val_sse": sse, **scores}
    return out
