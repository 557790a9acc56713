"""`align extract` against an independent forward pass (tests/helpers/references.py, no align import).

Tolerances: float32 compute, stored float32. Batched, padded runs and the reference's single
sequences differ by kernel rounding only; weights are O(0.1) and activations O(1-10), so
rtol 1e-4 with atol 1e-4 is ~1000x the observed rounding and ~1e4x below any real error
(a missing norm, a shifted position, a wrong sublayer all give O(1) differences).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import zarr
from transformers import AutoModelForCausalLM

import align
from align.corpus import CorpusSpec
from align.extraction import ExtractOptions
from align.models import ModelSpec
from align.store import open_activations
from tests.helpers.assertions import one_line_error
from tests.helpers.references import bf16_bits_to_float, residuals
from tests.helpers.zoo import reference_tokenizer

RTOL, ATOL = 1e-4, 1e-4
# float32's own error grows with an array's largest value: at Qwen2.5-14B's widths a random
# one-layer model has values up to ~250 at boundary 1, where a float32 forward is 9e-4 away
# from a float64 one (3.5e-6 of the largest value), and any other batch shape may land
# anywhere within that. So the absolute tolerance is also 1e-5 of each array's largest value.
SCALE_ATOL = 1e-5


def assert_close(got, ref):
    np.testing.assert_allclose(
        got, ref, rtol=RTOL, atol=max(ATOL, SCALE_ATOL * float(np.abs(ref).max()))
    )


FAMILIES = [
    ("qwen2", {}),
    ("llama", {}),
    ("qwen3", {}),
    ("olmo2", {}),
    # Qwen2.5-1.5B's widths, one layer.
    (
        "qwen2",
        dict(
            hidden_size=1536,
            num_attention_heads=12,
            num_key_value_heads=2,
            intermediate_size=8960,
            num_hidden_layers=1,
        ),
    ),
    # Qwen2.5-14B's widths, untied embeddings, one layer.
    (
        "qwen2",
        dict(
            hidden_size=5120,
            num_attention_heads=40,
            num_key_value_heads=8,
            intermediate_size=13824,
            num_hidden_layers=1,
            tie_word_embeddings=False,
        ),
    ),
]


def _docs(corpus_file):
    text = open(corpus_file, encoding="utf-8").read()
    return [d.rstrip("\n") for d in text.split("\n\n") if d.strip()]


def _short_pair(corpus_file, tmp_path) -> str:
    """A corpus of the shared one's first two short documents (20 and 47 tokens), for the
    models of a real checkpoint's widths, where every token's forward is costly (the first
    two documents, 150 and 420 tokens, took the 14B-width test to 30 s). One batch of both
    still pads the shorter, so padding, positions and the per-document cuts are checked at
    those widths; long documents are checked on the small models (every document of the
    corpus). The widths' own risks (head_dim 128, 40 query heads over 8 key-value heads,
    float32's error at values near 250) do not depend on a document's length."""
    short = [d for d in _docs(corpus_file) if len(d.split()) <= 20][:2]
    path = tmp_path / "short.txt"
    path.write_text("\n\n".join(short) + "\n", encoding="utf-8")
    return str(path)


def _sequences(store):
    seq = store.tokens("seq")
    cuts = np.flatnonzero(np.diff(seq)) + 1
    return np.split(np.arange(store.n_tokens), cuts)


@pytest.mark.parametrize(
    "family,overrides",
    FAMILIES,
    ids=["qwen2", "llama", "qwen3", "olmo2", "qwen2-1.5B-widths", "qwen2-14B-widths"],
)
def test_residuals_equal_independent_forward(zoo, corpus_file, tmp_path, family, overrides):
    path = zoo(family, **overrides)
    if overrides:  # a real checkpoint's widths: two short documents of different lengths
        corpus_file = _short_pair(corpus_file, tmp_path)
    out = str(tmp_path / "s.zarr")
    align.extract(
        path,
        CorpusSpec(corpus_file),
        out,
        ExtractOptions(sublayers=True, batch_size=4),
        log=lambda m: None,
    )
    s = open_activations(out).require_complete()

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    tok = reference_tokenizer(path)
    L = model.config.num_hidden_layers
    assert s.boundaries == tuple(range(L + 1)) and s.layers == tuple(range(L))
    docs = _docs(corpus_file)
    seqs = _sequences(s)
    assert len(seqs) == len(docs)  # every document fits one sequence of 512 here
    for d, idx in enumerate(seqs):
        ids = tok(docs[d])["input_ids"]
        np.testing.assert_array_equal(s.tokens("token_id")[idx], ids)
        assert (s.tokens("doc")[idx] == d).all() and (
            s.tokens("pos")[idx] == np.arange(len(idx))
        ).all()
        ref = residuals(model, ids)
        a, b = idx[0], idx[-1] + 1
        got = np.stack([s.resid(bd, a, b) for bd in range(L + 1)])
        assert_close(got, ref["resid"])
        assert_close(np.stack([s.attn(l, a, b) for l in range(L)]), ref["attn"])
        assert_close(np.stack([s.mlp(l, a, b) for l in range(L)]), ref["mlp"])
        # Residual identity h_{l+1} = h_l + a_l + m_l, to the rounding of two float32 adds.
        for l in range(L):
            np.testing.assert_allclose(
                got[l + 1], got[l] + s.attn(l, a, b) + s.mlp(l, a, b), rtol=1e-5, atol=1e-5
            )
        # The last boundary is the RAW block output: final_norm of it is transformers' last hidden state.
        with torch.inference_mode():
            hf = model(torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0].numpy()
            normed = model.model.norm(torch.from_numpy(got[L])).numpy()
        assert_close(normed, hf)
        assert np.abs(got[L] - hf).max() > 1e-2  # and it is not already normed
        # Special tokens: Llama/OLMo2 tokenizers here prepend BOS, which has no character span.
        cs = s.tokens("char_start")[idx]
        text = docs[d]
        for t, (c0, c1) in enumerate(zip(cs, s.tokens("char_end")[idx])):
            if c0 >= 0:
                assert tok.decode([ids[t]]) == text[c0:c1]
    prov = s.provenance
    assert prov["model_type"] == family and prov["n_layers"] == L
    assert prov["special_tokens"]["prefix"] == (
        [tok.bos_token_id] if family in ("llama", "olmo2") else []
    )


def test_mixed_lengths_batched_equal_single(extracted):
    one = open_activations(extracted("llama", batch_size=1))
    many = open_activations(extracted("llama", batch_size=6))
    lengths = [len(x) for x in _sequences(one)]
    assert max(lengths[:6]) >= 2 * min(
        lengths[:6]
    )  # the first batch mixes lengths 2x apart or more
    for b in one.boundaries:
        np.testing.assert_allclose(many.resid(b), one.resid(b), rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(many.tokens("token_id"), one.tokens("token_id"))


def test_device_auto_equals_cpu(extracted):
    cpu = open_activations(extracted("qwen2", batch_size=4))
    auto = open_activations(extracted("qwen2", batch_size=4, device="auto"))
    assert auto.provenance["options"]["device"] == "auto"
    for b in cpu.boundaries:
        np.testing.assert_allclose(auto.resid(b), cpu.resid(b), rtol=1e-6, atol=1e-6)


def test_bfloat16_compute_and_lossless_storage(zoo, corpus_file, extracted):
    """bf16 compute stores bf16 bits (uint16, logical dtype recorded); decoding is exact; the
    values match a bf16 reference forward to bf16 precision."""
    path = extracted("qwen2", dtype="bfloat16", batch_size=1, max_docs=4)
    s = open_activations(path)
    assert s.layout.store_dtype == "bfloat16"
    g = zarr.open_group(path, mode="r")
    assert g["resid"].dtype == np.uint16 and g["resid"].attrs["logical_dtype"] == "bfloat16"
    raw = s.raw("resid", 1)
    dec = s.resid(1)
    # Decoding is exact: torch's own bf16 view of the decoded float32 gives back the bits.
    np.testing.assert_array_equal(
        torch.from_numpy(dec).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16), raw
    )
    np.testing.assert_array_equal(bf16_bits_to_float(raw), dec)
    model = AutoModelForCausalLM.from_pretrained(zoo("qwen2"), dtype=torch.bfloat16)
    idx = _sequences(s)[0]
    ref = residuals(model, s.tokens("token_id")[idx])
    got = np.stack([s.resid(b, idx[0], idx[-1] + 1) for b in s.boundaries])
    scale = np.abs(ref["resid"]).max()
    np.testing.assert_allclose(got, ref["resid"], atol=0.05 * scale)  # bf16 has 8 bits of mantissa


def test_bfloat16_storage_of_float32_rounds_like_torch(extracted):
    f32 = open_activations(extracted("qwen2", batch_size=4))
    b16 = open_activations(extracted("qwen2", batch_size=4, store_dtype="bfloat16"))
    for b in f32.boundaries:
        want = (
            torch.from_numpy(f32.resid(b))
            .to(torch.bfloat16)
            .view(torch.int16)
            .numpy()
            .view(np.uint16)
        )
        np.testing.assert_array_equal(b16.raw("resid", b), want)


def test_float16_overflow_is_refused(zoo, corpus_file, tmp_path, cli):
    src = zoo("qwen2")
    model = AutoModelForCausalLM.from_pretrained(src)
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(1e6)  # "massive activations" beyond float16's 65504
    big = tmp_path / "big"
    model.save_pretrained(big)
    reference_tokenizer(src).save_pretrained(big)
    expected = float(model.model.embed_tokens.weight.detach().abs().max())
    out = tmp_path / "s16.zarr"
    code, _, err = cli(
        "extract", big, corpus_file, "-o", out, "--store-dtype", "float16", "--max-docs", "2"
    )
    line = one_line_error(code, err, "boundary 0", "float16")
    magnitude = float(line.split("magnitude ")[1].split(",")[0])
    assert magnitude <= expected * 1.001 and magnitude > 65504
    assert not open_activations(str(out)).complete


def test_random_init_equals_seeded_from_config(zoo, corpus_file, tmp_path):
    path = zoo("qwen2")
    out = str(tmp_path / "r.zarr")
    align.extract(
        ModelSpec(path, random_init=True, seed=7),
        CorpusSpec(corpus_file, max_docs=2),
        out,
        log=lambda m: None,
    )
    s = open_activations(out)
    from transformers import AutoConfig

    torch.manual_seed(7)
    ref_model = AutoModelForCausalLM.from_config(
        AutoConfig.from_pretrained(path), dtype=torch.float32
    ).eval()
    trained = AutoModelForCausalLM.from_pretrained(path)
    idx = _sequences(s)[0]
    ids = s.tokens("token_id")[idx]
    ref = residuals(ref_model, ids)
    got = np.stack([s.resid(b, idx[0], idx[-1] + 1) for b in s.boundaries])
    np.testing.assert_allclose(got, ref["resid"], rtol=RTOL, atol=ATOL)
    assert np.abs(got - residuals(trained, ids)["resid"]).max() > 0.1
    assert s.provenance["random_init"] and s.provenance["seed"] == 7


def test_boundaries_subset_and_sublayer_rule(extracted):
    s = open_activations(
        extracted(
            "qwen2", model_overrides={"num_hidden_layers": 4}, boundaries="0,1,2,4", sublayers=True
        )
    )
    full = open_activations(extracted("qwen2", model_overrides={"num_hidden_layers": 4}))
    assert s.boundaries == (0, 1, 2, 4) and s.layers == (0, 1)  # block 3 needs boundaries 3 and 4
    for b in s.boundaries:
        np.testing.assert_allclose(s.resid(b), full.resid(b), rtol=1e-6, atol=1e-6)
    import xarray as xr

    ds = xr.open_zarr(s.path)
    assert list(ds["boundary"].values) == [0, 1, 2, 4]
    assert ds["resid"].dims == ("boundary", "token", "d_model") and ds["attn"].dims == (
        "layer",
        "token",
        "d_model",
    )
    assert ds["token_id"].dims == ("token",)


def test_dask_access_equals_numpy(extracted):
    s = open_activations(extracted("qwen2", batch_size=4))
    for b in s.boundaries:
        np.testing.assert_array_equal(s.dask("resid", b).compute(), s.resid(b))


def test_dry_run_reports_sizes_and_writes_nothing(zoo, corpus_file, tmp_path, cli):
    out = tmp_path / "dry.zarr"
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out, "--dry-run", "--sublayers")
    assert code == 0 and not out.exists()
    tok = reference_tokenizer(zoo("qwen2"))
    n = sum(len(tok(d)["input_ids"]) for d in _docs(corpus_file))
    assert f"{n:,} tokens" in err
    mib = lambda b: f"{b / 2**20:.1f} MiB"  # noqa: E731
    assert f"resid      {mib(3 * n * 64 * 4)}" in err and f"attn       {mib(2 * n * 64 * 4)}" in err
    assert "free" in err and "tok/s" in err
    for phase in ("forward", "copy", "encode", "write"):
        assert f"    {phase} " in err  # one batch timed end to end, every phase
    assert "  bound by   " in err and "padding " in err
    assert (
        sorted(p.name for p in tmp_path.iterdir()) == []
    )  # the timed write's scratch store is gone too


def test_complete_store_rerun_and_mismatch(zoo, corpus_file, tmp_path, cli):
    out = tmp_path / "s.zarr"
    args = ["extract", zoo("qwen2"), corpus_file, "-o", out, "--max-docs", "3"]
    assert cli(*args)[0] == 0
    code, _, err = cli(*args, "--batch-size", "2")  # batch size may change
    assert code == 0 and "already complete" in err
    code, _, err = cli(*args, "--boundaries", "0,2")
    one_line_error(code, err, "boundaries: store has [0, 1, 2], now [0, 2]")
    code, _, err = cli("extract", zoo("llama"), corpus_file, "-o", out, "--max-docs", "3")
    one_line_error(code, err, "model")


def test_info_describes_store(extracted, cli):
    path = extracted("qwen2", batch_size=4)
    code, out, _ = cli("info", path)
    assert code == 0
    s = open_activations(path)
    assert (
        "complete" in out and f"{s.n_tokens:,}" in out and "[0, 1, 2]" in out and "float32" in out
    )
    code, out, _ = cli("info", path, "--json")
    assert json.loads(out)["layout"]["n_tokens"] == s.n_tokens


def test_grouped_options_give_the_independent_forward_and_record_the_model_folder(
    zoo, corpus_file, tmp_path, monkeypatch
):
    """`align.extraction.extract(ModelSpec, CorpusSpec, output, ExtractOptions)`: the kept
    boundaries equal the reference forward (tolerances above); a model folder given relative
    to the working folder is recorded as its absolute path (os.path.abspath), so the record
    finds it from anywhere."""
    import os

    from align.corpus import CorpusSpec
    from align.extraction import ExtractOptions, extract
    from align.models import ModelSpec

    path = zoo("qwen2")
    monkeypatch.chdir(os.path.dirname(path))
    out = str(tmp_path / "s.zarr")
    extract(
        ModelSpec(os.path.basename(path)),
        CorpusSpec(corpus_file, max_docs=2),
        out,
        ExtractOptions(batch_size=2, boundaries="0,2"),
        log=lambda m: None,
    )
    s = open_activations(out).require_complete()
    assert s.boundaries == (0, 2)
    assert s.provenance["model"] == os.path.abspath(os.path.basename(path)) == path
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    tok = reference_tokenizer(path)
    for d, idx in enumerate(_sequences(s)):
        ref = residuals(model, tok(_docs(corpus_file)[d])["input_ids"])
        a, b = idx[0], idx[-1] + 1
        assert_close(np.stack([s.resid(0, a, b), s.resid(2, a, b)]), ref["resid"][[0, 2]])


def test_keywords_are_refused_before_anything_is_read(zoo, corpus_file, tmp_path):
    """A misspelt keyword, or a field given as a keyword beside its record, is a TypeError
    naming it, raised before anything is read or written."""
    from align.extraction import ExtractOptions, extract

    out = tmp_path / "s.zarr"
    with pytest.raises(
        TypeError, match=r"^align\.extract\(\) got an unexpected keyword argument 'batchsize'$"
    ):
        extract(zoo("qwen2"), corpus_file, str(out), batchsize=2)
    with pytest.raises(
        TypeError,
        match=r"^align\.extract\(\) got batch_size=2: pass it in ExtractOptions\(batch_size=2\)$",
    ):
        extract(zoo("qwen2"), corpus_file, str(out), ExtractOptions(), batch_size=2)
    assert not out.exists()
