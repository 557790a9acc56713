"""`align extract` never mixes weights, never writes NaN, never leaves a store behind a failed
model load, records each run, and says what tokenizing dropped (issue 9, items 1, 2, 4, 12,
14, 15).

References never import align: token ids come from the `tokenizers` library reading the
checkpoint's tokenizer.json, file hashes from hashlib, counts are worked by hand.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest
import zarr

from align.store import open_activations, read_attrs
from tests.helpers.assertions import one_line_error
from tests.helpers.faults import killed_run

D_MODEL = 64  # the zoo's width


def _snapshot(root) -> dict:
    """path -> (sha256, size, mtime_ns) for every file under root."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            st = os.stat(p)
            out[os.path.relpath(p, root)] = (
                hashlib.sha256(open(p, "rb").read()).hexdigest(),
                st.st_size,
                st.st_mtime_ns,
            )
    return out


def _extract_cmd(model, corpus, out, *extra):
    return [
        sys.executable,
        "-m",
        "align.cli.main",
        "extract",
        str(model),
        str(corpus),
        "-o",
        str(out),
        *extra,
    ]


def _killed_run(cmd, tmp_path, point):
    killed_run(cmd, tmp_path / "fault.log", point)


def _reference_ids(model_dir, text):
    from tokenizers import Tokenizer

    return (
        Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        .encode(text, add_special_tokens=False)
        .ids
    )


def _resave(model_dir, seed=None, edit=None):
    """Save into `model_dir` a model of its own config: seeded random weights (seed), or its
    own weights changed by `edit(model)`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if seed is not None:
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir))
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir)
    if edit is not None:
        with torch.no_grad():
            edit(model)
    model.save_pretrained(model_dir)


# ----------------------------------------------------------------------------- item 2


def test_resume_against_other_weights_is_refused(zoo, corpus_file, tmp_path, cli):
    model = tmp_path / "model"
    shutil.copytree(zoo("qwen2"), model)
    original = (model / "model.safetensors").read_bytes()
    out = tmp_path / "s.zarr"
    cmd = _extract_cmd(model, corpus_file, out, "--batch-size", "2", "--chunk-tokens", "64")
    _killed_run(cmd, tmp_path, "between_batches:2")
    recorded = read_attrs(str(out))["provenance"]["weights"]
    assert recorded["files"]["model.safetensors"]["sha256"] == hashlib.sha256(original).hexdigest()

    _resave(str(model), seed=1)  # same config, other weights
    config_before = json.loads((model / "config.json").read_text())
    assert (model / "model.safetensors").read_bytes() != original
    before = _snapshot(out)
    code, _, err = cli(*cmd[3:])  # only the kill needs a process of its own
    line = one_line_error(
        code,
        err,
        "weights: store has sha256 ",
        ", now sha256 ",
        progress=("align extract: ",),
    )
    assert "config_hash" not in line  # only the weights changed
    old_hex, new_hex = (
        part.split("sha256 ")[1][:12] for part in line.split("weights: ")[1].split(", now ")
    )
    assert old_hex != new_hex
    assert _snapshot(out) == before  # untouched, stale lock included
    assert not open_activations(str(out)).complete
    assert (
        json.loads((model / "config.json").read_text())["num_hidden_layers"]
        == config_before["num_hidden_layers"]
    )

    # The original weights back: the same command resumes and completes.
    (model / "model.safetensors").write_bytes(original)
    code, _, err = cli(*cmd[3:])
    assert code == 0 and "resuming" in err, err
    assert open_activations(str(out)).complete


def test_sharded_and_pickle_weights_are_fingerprinted(zoo, tmp_path):
    """Every shard an index names is hashed (a change in any one changes the identity), and
    pickle weights are hashed as bytes (never unpickled) when allowed."""
    import torch
    from transformers import AutoModelForCausalLM

    from align.errors import ModelError
    from align.models import ModelSpec, load_config
    from align.provenance import weight_files, weights_identity

    sharded = tmp_path / "sharded"
    shutil.copytree(zoo("qwen2"), sharded)
    os.remove(sharded / "model.safetensors")
    AutoModelForCausalLM.from_pretrained(zoo("qwen2")).save_pretrained(
        sharded, max_shard_size="100KB"
    )
    shards = sorted(f for f in os.listdir(sharded) if f.endswith(".safetensors"))
    assert len(shards) > 2
    spec = ModelSpec(str(sharded))
    ident = weights_identity(spec, load_config(spec))
    assert sorted(ident["files"]) == sorted(shards + ["model.safetensors.index.json"])
    for f in shards:
        assert ident["files"][f]["sha256"] == hashlib.sha256((sharded / f).read_bytes()).hexdigest()
    last = sharded / shards[-1]
    data = bytearray(last.read_bytes())
    data[-1] ^= 1  # one bit of one weight
    last.write_bytes(bytes(data))
    assert weights_identity(spec, load_config(spec))["id"] != ident["id"]
    os.remove(sharded / shards[0])
    with pytest.raises(ModelError, match=shards[0]):
        weight_files(str(sharded), allow_pickle=False)

    pickled = tmp_path / "pickled"
    shutil.copytree(zoo("qwen2"), pickled)
    torch.save(
        AutoModelForCausalLM.from_pretrained(zoo("qwen2")).state_dict(),
        pickled / "pytorch_model.bin",
    )
    os.remove(pickled / "model.safetensors")
    spec = ModelSpec(str(pickled), allow_pickle_weights=True)
    ident = weights_identity(spec, load_config(spec))
    assert ident["files"] == {
        "pytorch_model.bin": {
            "bytes": os.path.getsize(pickled / "pytorch_model.bin"),
            "sha256": hashlib.sha256((pickled / "pytorch_model.bin").read_bytes()).hexdigest(),
        }
    }


# ---------------------------------------------------------------------------- item 12


@pytest.fixture
def pickle_only(zoo, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    folder = tmp_path / "pickle-only"
    shutil.copytree(zoo("qwen2"), folder)
    torch.save(
        AutoModelForCausalLM.from_pretrained(zoo("qwen2")).state_dict(),
        folder / "pytorch_model.bin",
    )
    os.remove(folder / "model.safetensors")
    return folder


def test_cuda_without_cuda_creates_no_store(cli, zoo, corpus_file, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: the refusal needs one without")
    out = tmp_path / "o.zarr"
    code, _, err = cli("extract", zoo("qwen2"), corpus_file, "-o", out, "--device", "cuda")
    one_line_error(code, err, "--device cuda", "no CUDA", progress=("align extract: ",))
    assert not os.path.lexists(out)


def test_pickle_only_checkpoint_creates_no_store(cli, pickle_only, corpus_file, tmp_path):
    out = tmp_path / "o.zarr"
    code, _, err = cli("extract", pickle_only, corpus_file, "-o", out)
    one_line_error(
        code,
        err,
        "only pickle weights",
        "pytorch_model.bin",
        "--allow-pickle-weights",
        progress=("align extract: ",),
    )
    assert not os.path.lexists(out)
    # Allowed, it loads and completes.
    code, _, err = cli(
        "extract", pickle_only, corpus_file, "-o", out, "--allow-pickle-weights", "--max-docs", "2"
    )
    assert code == 0, err
    assert open_activations(str(out)).complete


# ---------------------------------------------------------------------------- item 14


def test_each_run_segment_is_recorded(zoo, corpus_file, tmp_path, cli):
    out = tmp_path / "s.zarr"
    base = _extract_cmd(zoo("qwen2"), corpus_file, out, "--chunk-tokens", "64")
    _killed_run(base + ["--batch-size", "2"], tmp_path, "mid_chunk_write:3")
    killed = open_activations(str(out))
    stopped = killed.progress["committed_tokens"]
    assert 0 < stopped < killed.n_tokens  # the first run committed some tokens, not all
    code, _, err = cli(*base[3:], "--batch-size", "3")  # the rerun needs no process of its own
    assert code == 0, err
    s = open_activations(str(out))
    runs = s.provenance["runs"]
    assert [r["tokens"] for r in runs] == [[0, stopped], [stopped, s.n_tokens]]
    assert [r["batch_size"] for r in runs] == [2, 3]
    for r in runs:
        assert (
            r["device"] == "cpu" and r["dtype"] == "float32" and r["host"] == socket.gethostname()
        )
        assert r["align_version"] and r["started"].endswith("+00:00")
    assert runs[0]["started"] <= runs[1]["started"]
    code, text, _ = cli("info", out)
    assert (
        code == 0
        and f"tokens 0..{stopped:,}, batch size 2, cpu" in text
        and f"tokens {stopped:,}..{s.n_tokens:,}, batch size 3" in text
    )


# ---------------------------------------------------------------------------- item 15


@pytest.fixture
def narrow_tokenizer_model(zoo, tmp_path):
    """A zoo model whose tokenizer knows only the corpus's characters: no byte fallback, no
    unknown token, so anything else (emoji) is dropped by the tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from tests.helpers.zoo import CORPUS_TEXT

    folder = tmp_path / "narrow"
    shutil.copytree(zoo("qwen2"), folder)
    for f in os.listdir(folder):
        if f.startswith(("tokenizer", "special_tokens", "vocab", "merges")):
            os.remove(folder / f)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        [CORPUS_TEXT],
        trainers.BpeTrainer(vocab_size=150, special_tokens=["<|endoftext|>"], show_progress=False),
    )
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(folder)
    return folder


def test_dropped_characters_are_counted_and_reported(
    cli, narrow_tokenizer_model, corpus_file, tmp_path
):
    plain = open(corpus_file, encoding="utf-8").read().split("\n\n")[0]
    corpus = tmp_path / "emoji.txt"
    # document 1: 300 emoji, document 2: two emoji amid known words. Hand count: 302 in 2 docs.
    corpus.write_text(
        plain + "\n\n" + "\U0001f600" * 300 + "\n\nthe model \U0001f600\U0001f680 reads\n",
        encoding="utf-8",
    )
    out = tmp_path / "s.zarr"
    code, _, err = cli("extract", narrow_tokenizer_model, corpus, "-o", out)
    assert code == 0, err
    last = err.strip().splitlines()[-1]
    assert "302 characters outside the tokenizer's vocabulary dropped from 2 documents" in last, (
        last
    )
    c = open_activations(str(out)).provenance["corpus"]
    assert c["dropped_characters"] == 302 and c["documents_with_dropped_characters"] == 2
    assert c["first_dropped"] == [[1, 300], [2, 2]]


def test_byte_level_tokenizer_drops_nothing(cli, zoo, tmp_path):
    corpus = tmp_path / "emoji.txt"
    corpus.write_text("the model \U0001f600 reads\n\n" + "\U0001f680" * 30 + "\n", encoding="utf-8")
    out = tmp_path / "s.zarr"
    code, _, err = cli("extract", zoo("qwen2"), corpus, "-o", out)
    assert code == 0, err
    assert err.strip().splitlines()[-1].endswith("no character dropped by the tokenizer")
    assert open_activations(str(out)).provenance["corpus"]["dropped_characters"] == 0


def test_uncovered_characters_hand_worked():
    from align.corpus import uncovered_characters

    text = "ab  c\U0001f600\nd"
    # tokens "ab" and "c"; the spaces and the newline are whitespace (not counted), the emoji
    # and "d" are covered by no token: 2.
    assert uncovered_characters(text, np.array([[0, 2], [4, 5]])) == 2
    assert uncovered_characters(text, np.array([[0, 8]])) == 0
    assert uncovered_characters(text, np.zeros((0, 2), np.int64)) == 5  # a b c emoji d
    assert uncovered_characters("", np.zeros((0, 2), np.int64)) == 0


def test_special_token_text_is_warned_once(cli, zoo, tmp_path):
    model = zoo("qwen2")
    docs = ["the model reads every layer", "the model <|endoftext|> reads <|endoftext|> the layer"]
    corpus = tmp_path / "special.txt"
    corpus.write_text("\n\n".join(docs) + "\n")
    out = tmp_path / "s.zarr"
    code, _, err = cli("extract", model, corpus, "-o", out)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1, err
    assert (
        "'<|endoftext|>'" in warnings[0]
        and "document 1" in warnings[0]
        and "2 literal" in warnings[0]
    )
    s = open_activations(str(out))
    assert s.provenance["corpus"]["special_token_text"] == 2
    # The stored ids are the tokenizer's own (the special token, as it parses it).
    doc = s.tokens("doc")
    np.testing.assert_array_equal(s.tokens("token_id")[doc == 1], _reference_ids(model, docs[1]))
    eos = json.loads(open(os.path.join(model, "tokenizer.json")).read())["added_tokens"]
    eos_id = next(t["id"] for t in eos if t["content"] == "<|endoftext|>")
    assert (s.tokens("token_id")[doc == 1] == eos_id).sum() == 2


def test_max_length_beyond_position_limit_is_capped(cli, zoo, corpus_file, tmp_path):
    """A --max-length above max_position_embeddings runs at the model's positions, said in one
    line; --allow-long keeps it. Read back with zarr: the windows and the recorded length."""
    model = zoo("qwen2", max_position_embeddings=64)
    out = tmp_path / "o.zarr"
    code, _, err = cli("extract", model, corpus_file, "-o", out, "--max-length", 100)
    assert code == 0, err
    capped = [line for line in err.splitlines() if "max_position_embeddings 64" in line]
    assert len(capped) == 1 and "--max-length 100" in capped[0], err
    assert "windows of 64 tokens" in capped[0] and "--allow-long" in capped[0], capped
    g = zarr.open_group(str(out), mode="r")
    assert g.attrs["provenance"]["identity"]["max_length"] == 64
    # the corpus's longest document (200 tokens) is cut into windows of 64 positions
    assert int(g["pos"][:].max()) == 63
    # the same command again finds the store complete (the capped length is its identity)
    code, _, err = cli("extract", model, corpus_file, "-o", out, "--max-length", 100)
    assert code == 0 and "already complete" in err, err
    out2 = tmp_path / "long.zarr"
    code, _, err = cli(
        "extract", model, corpus_file, "-o", out2, "--max-length", 100, "--allow-long"
    )
    assert code == 0 and "max_position_embeddings" not in err, err
    long = zarr.open_group(str(out2), mode="r")
    assert long.attrs["provenance"]["identity"]["max_length"] == 100
    assert int(long["pos"][:].max()) == 99


def test_overwrite_replaces_only_an_activation_store(cli, zoo, corpus_file, tmp_path):
    """--overwrite: a store made from other inputs (refused without it) is replaced by a new
    extraction equal to one made from nothing; another kind of store or a folder of other files
    is never removed."""
    model = zoo("qwen2")
    out, fresh = tmp_path / "o.zarr", tmp_path / "fresh.zarr"
    assert cli("extract", model, corpus_file, "-o", out, "--max-length", 32)[0] == 0
    code, _, err = cli("extract", model, corpus_file, "-o", out, "--max-length", 48)
    one_line_error(
        code, err, str(out), "max_length: store has 32, now 48", progress=("align extract: ",)
    )
    code, _, err = cli("extract", model, corpus_file, "-o", out, "--max-length", 48, "--overwrite")
    assert code == 0 and f"replaced the activation store at {out}" in err, err
    assert cli("extract", model, corpus_file, "-o", fresh, "--max-length", 48)[0] == 0
    a, b = zarr.open_group(str(out), mode="r"), zarr.open_group(str(fresh), mode="r")
    assert a.attrs["provenance"]["identity"]["max_length"] == 48
    assert sorted(a.keys()) == sorted(b.keys())
    for name in b.keys():
        np.testing.assert_array_equal(a[name][:], b[name][:], err_msg=name)
    assert sorted(os.listdir(out)) == sorted(os.listdir(fresh))
    # not an activation store: a folder of other files, and a result of another kind
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    code, _, err = cli("extract", model, corpus_file, "-o", other, "--overwrite")
    one_line_error(code, err, str(other), "not an align store", progress=("align extract: ",))
    assert (other / "keep.txt").read_text() == "mine"
    result = tmp_path / "fit.zarr"
    assert (
        cli(
            "fit",
            out,
            fresh,
            "-o",
            result,
            "--alphas",
            "1",
            "--source-boundaries",
            "1",
            "--target-boundaries",
            "1",
        )[0]
        == 0
    )
    before = sorted(os.listdir(result))
    code, _, err = cli("extract", model, corpus_file, "-o", result, "--overwrite")
    one_line_error(code, err, str(result), "schema 'alignment'", progress=("align extract: ",))
    assert sorted(os.listdir(result)) == before


# ----------------------------------------------------------------------------- item 4


def _nan_model(zoo, tmp_path, edit, name="nan"):
    folder = tmp_path / name
    shutil.copytree(zoo("qwen2"), folder)
    _resave(str(folder), edit=edit)
    return folder


def _assert_nothing_non_finite_written(out, committed_at_most=None):
    g = zarr.open_group(str(out), mode="r")
    progress = g.attrs["progress"]
    assert not progress["complete"]
    for name in ("resid", "attn", "mlp"):
        if name in g:
            assert np.isfinite(g[name][...]).all(), name
    if committed_at_most is not None:
        assert progress["committed_tokens"] <= committed_at_most


@pytest.mark.parametrize(
    "sublayers,where", [(False, "at boundary 2:"), (True, "at the MLP output of layer 1:")]
)
def test_nan_weight_is_refused_naming_boundary_token_and_count(
    cli, zoo, corpus_file, tmp_path, sublayers, where
):
    model = _nan_model(
        zoo, tmp_path, lambda m: m.model.layers[1].mlp.down_proj.weight.fill_(float("nan"))
    )
    first_doc = open(corpus_file, encoding="utf-8").read().split("\n\n")[0]
    n = len(_reference_ids(str(model), first_doc))  # the first batch is document 0 alone
    out = tmp_path / "s.zarr"
    code, _, err = cli(
        "extract",
        model,
        corpus_file,
        "-o",
        out,
        "--batch-size",
        "1",
        *(["--sublayers"] if sublayers else []),
    )
    one_line_error(
        code,
        err,
        where,
        f"{n * D_MODEL:,} NaN/inf values in {n:,} tokens",
        "document 0, position 0 (token 0)",
        progress=("align extract: ",),
    )
    _assert_nothing_non_finite_written(out, committed_at_most=0)


def test_nan_embedding_row_is_named_at_its_first_token(cli, zoo, corpus_file, tmp_path):
    """One token id's embedding row is NaN: boundary 0 is non-finite exactly where that id
    sits. The refusal names the first such token's document and position; the batches before
    it are written, finite, and the store stays resumable."""
    docs = open(corpus_file, encoding="utf-8").read().split("\n\n")
    ids = [_reference_ids(zoo("qwen2"), d.rstrip("\n")) for d in docs]
    seen = set(ids[0]) | set(ids[1]) | set(ids[2])
    d, tid = next((d, t) for d in range(3, len(ids)) for t in ids[d] if t not in seen)
    pos = ids[d].index(tid)
    token = sum(len(x) for x in ids[:d]) + pos
    model = _nan_model(
        zoo, tmp_path, lambda m: m.model.embed_tokens.weight[tid].fill_(float("nan"))
    )
    out = tmp_path / "s.zarr"
    code, _, err = cli(
        "extract", model, corpus_file, "-o", out, "--batch-size", "1", "--chunk-tokens", "16"
    )
    k = ids[d].count(tid)
    one_line_error(
        code,
        err,
        "at boundary 0:",
        f"{k * D_MODEL:,} NaN/inf values in {k:,} token{'s' if k != 1 else ''} ",
        f"document {d}, position {pos} (token {token:,})",
        progress=("align extract: ",),
    )
    _assert_nothing_non_finite_written(out, committed_at_most=token)
    assert open_activations(str(out)).progress["committed_tokens"] > 0  # earlier batches were kept


def test_finite_check_ignores_padding_and_finite_overflow_but_not_real_tokens():
    """Hand-made captures: NaN in padding only, and finite values whose sum overflows float32,
    pass; one NaN and one inf in real tokens are refused with the count, the token count and
    the first real token (index among real tokens, sequence order)."""
    import torch

    from align.errors import NonFiniteError
    from align.hooks.capture import check_finite

    keep = torch.tensor([[True, True, False], [True, True, True]])  # 5 real tokens
    resid = torch.zeros(2, 3, 4)
    resid[0, 2] = float("nan")  # padding
    check_finite({"resid": {0: resid}, "attn": {}, "mlp": {}}, keep)
    big = torch.full((2, 3, 4), 3e38)  # finite; the sum is inf
    check_finite({"resid": {0: big}, "attn": {}, "mlp": {}}, keep)
    later = torch.zeros(2, 3, 4)
    later[1, 1, 0] = float("nan")  # real token 3 (0, 1 | 2, 3, 4)
    later[1, 2, 3] = float("-inf")  # real token 4
    mlp = torch.zeros(2, 3, 4)
    mlp[1, 2, :] = float("nan")  # arises before boundary 1 in the forward, at real token 4
    out = {"resid": {0: resid, 1: later}, "attn": {}, "mlp": {0: mlp}}
    with pytest.raises(
        NonFiniteError,
        match=r"at the MLP output of layer 0: 4 NaN/inf values in 1 token of this batch, first at token 4 ",
    ):
        check_finite(out, keep)
    del out["mlp"][0]
    with pytest.raises(
        NonFiniteError,
        match=r"at boundary 1: 2 NaN/inf values in 2 tokens of this batch, first at token 3 ",
    ):
        check_finite(out, keep)


# ----------------------------------------------------------------------------- item 1


@pytest.mark.parametrize(
    "target",
    ["file", "corpus file", "corpus folder", "model folder", "folder with notes", "under a file"],
)
def test_output_that_is_not_a_store_is_refused_and_untouched(cli, zoo, tmp_path, target):
    world = tmp_path / "world"
    world.mkdir()
    model = world / "model"
    shutil.copytree(zoo("qwen2"), model)
    corpus_dir = world / "docs"
    corpus_dir.mkdir()
    (corpus_dir / "a.txt").write_text("the model reads every layer\n")
    (world / "file.zarr").write_text("not a store\n")
    (world / "notes").mkdir()
    (world / "notes" / "notes.txt").write_text("keep me\n")
    corpus = corpus_dir if target == "corpus folder" else corpus_dir / "a.txt"
    out = {
        "file": world / "file.zarr",
        "corpus file": corpus_dir / "a.txt",
        "corpus folder": corpus_dir,
        "model folder": model,
        "folder with notes": world / "notes",
        "under a file": world / "file.zarr" / "s.zarr",
    }[target]
    before = _snapshot(world)
    code, _, err = cli("extract", model, corpus, "-o", out)
    one_line_error(code, err, out, progress=("align extract: ",))
    assert _snapshot(world) == before


def _fake_hub_cache(root, repo, commits: dict) -> str:
    """A hub cache (HF_HUB_CACHE layout) holding `repo` at each commit -> model folder, with
    refs/main at the first commit. Returns the cache folder."""
    base = root / "hub" / ("models--" + repo.replace("/", "--"))
    for commit, folder in commits.items():
        shutil.copytree(folder, base / "snapshots" / commit)
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(next(iter(commits)))
    return str(root / "hub")


def test_hub_resume_after_the_branch_moved_is_refused(zoo, corpus_file, tmp_path):
    """A hub id's weights are identified by the commit its revision resolved to: when main
    moves to a commit with other weights between a killed run and its resume, the resume is
    refused naming both commits, and the store is untouched."""
    other = tmp_path / "other"
    shutil.copytree(zoo("qwen2"), other)
    _resave(str(other), seed=1)
    a, b = "a" * 40, "b" * 40
    cache = _fake_hub_cache(tmp_path, "org/tiny", {a: zoo("qwen2"), b: str(other)})
    env = dict(os.environ, HF_HUB_CACHE=cache, HF_HUB_OFFLINE="1")
    out = tmp_path / "s.zarr"
    cmd = _extract_cmd("org/tiny", corpus_file, out, "--batch-size", "2", "--chunk-tokens", "64")
    log = tmp_path / "fault.log"
    killed_run(cmd, log, "between_batches:2", env=env)
    assert read_attrs(str(out))["provenance"]["weights"]["commit"] == a
    (tmp_path / "hub" / "models--org--tiny" / "refs" / "main").write_text(b)
    before = _snapshot(out)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    one_line_error(
        p.returncode,
        p.stderr,
        f"weights: store has hub commit {a[:12]}…, now hub commit {b[:12]}…",
        progress=("align extract: ",),
    )
    assert _snapshot(out) == before
    # Pinned to the first commit, the same store resumes and completes.
    p = subprocess.run(
        cmd + ["--revision", a], env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0 and "resuming" in p.stderr, p.stderr
    assert open_activations(str(out)).complete


def test_live_fit_caps_max_length_as_extract_does(cli, zoo, corpus_file, tmp_path):
    """`align fit --live --max-length` above a model's positions runs at them (one log line),
    and gives the result of asking for those positions: the same windows, the same numbers."""
    source = zoo("qwen2", max_position_embeddings=64)
    target = zoo("qwen2", max_position_embeddings=64, num_hidden_layers=3)
    fit = ("fit", "--live", source, target, corpus_file, "--alphas", "1")
    code, _, err = cli(*fit, "-o", tmp_path / "capped.zarr", "--max-length", 100)
    assert code == 0, err
    capped = [line for line in err.splitlines() if "max_position_embeddings 64" in line]
    assert len(capped) == 1 and "windows of 64 tokens" in capped[0], err
    code, _, err = cli(*fit, "-o", tmp_path / "asked.zarr", "--max-length", 64)
    assert code == 0 and "max_position_embeddings" not in err, err
    a = zarr.open_group(str(tmp_path / "capped.zarr"), mode="r")
    b = zarr.open_group(str(tmp_path / "asked.zarr"), mode="r")
    np.testing.assert_array_equal(a["relative_error"][:], b["relative_error"][:])
    assert a.attrs["source"]["corpus"]["max_length"] == 64
