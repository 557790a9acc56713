"""The device-to-store pipeline: chunk writes in several threads, commits only after every
chunk below them, a bounded queue, a gather without host syncs.

References are independent of align: numpy arrays written by hand and read back with zarr,
a direct HF forward pass over the same padded batch, and the single-threaded writer's store
(the path every earlier test pinned)."""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest
import torch
import zarr
from transformers import AutoModelForCausalLM

import align
from align.extraction import ExtractOptions
from align.extraction import pipeline as ex
from align.store import writer as act
from align.store.arrays import StoreFormat, write_activations
from align.store.reader import open_activations
from tests.helpers.faults import killed_run


def _tokens(n: int, per_seq: int) -> dict:
    seq = np.arange(n) // per_seq
    return {
        "token_id": np.zeros(n, np.int32),
        "doc": seq,
        "seq": seq,
        "pos": np.arange(n) % per_seq,
    }


def _planned(path: str, n: int, nb: int, d: int, C: int):
    """A planned bfloat16 store with nothing written (as extract leaves it before the forward)."""
    write_activations(
        path,
        np.zeros((nb, n, d), np.float32),
        _tokens(n, 10),
        {"tokenizer_hash": "t"},
        fmt=StoreFormat("bfloat16", "crc32c", C),
        complete=False,
    )
    return open_activations(path, mode="r+")


@pytest.mark.parametrize("threads", [1, 4])
def test_writer_commits_only_written_chunks(tmp_path, monkeypatch, threads):
    """Appends of irregular sizes (inside a chunk, exactly one, several at once), chunk writes
    slowed at random: each time progress is rewritten, every token below the committed point
    is already in the store with its final value (read with zarr, not through align)."""
    n, nb, d, C = 1000, 3, 8, 64
    rng = np.random.default_rng(0)
    data = rng.integers(0, 1 << 16, size=(nb, n, d), dtype=np.uint16)
    path = str(tmp_path / "w.zarr")
    store = _planned(path, n, nb, d, C)
    real_write = act._write_rows

    def slow_write(*a):
        time.sleep(rng.uniform(0, 0.01))
        real_write(*a)

    monkeypatch.setattr(act, "_write_rows", slow_write)
    checked = []
    real_progress = act.ActivationWriter._progress

    def progress(self, committed, complete):
        got = zarr.open_array(os.path.join(path, "resid"), mode="r")[:, : committed[0]]
        assert np.array_equal(got, data[:, : committed[0]]), committed
        checked.append(committed)
        real_progress(self, committed, complete)

    monkeypatch.setattr(act.ActivationWriter, "_progress", progress)
    w = act.ActivationWriter(store, threads=threads)
    cuts = [0, 5, 64, 70, 300, 301, 512, 520, 1000]  # 300: several chunks in one append
    for a, b in zip(cuts, cuts[1:]):
        w.append({"resid": data[:, a:b]}, b)
    w.finish()
    assert checked[-1] == (n, n) and len(checked) >= 5
    assert all(c[0] in cuts for c in checked)  # commits only at batch ends
    assert np.array_equal(zarr.open_array(os.path.join(path, "resid"), mode="r")[:], data)
    assert open_activations(path).complete


def test_writer_resumes_from_a_partly_written_chunk(tmp_path):
    """A writer opened at a committed point inside a chunk re-reads that chunk's head and
    writes the rest: the store equals the data written in one go."""
    n, nb, d, C = 300, 2, 4, 64
    data = np.random.default_rng(1).integers(0, 1 << 16, size=(nb, n, d), dtype=np.uint16)
    path = str(tmp_path / "r.zarr")
    w = act.ActivationWriter(_planned(path, n, nb, d, C), threads=4)
    w.append({"resid": data[:, :70]}, 7)
    w.append({"resid": data[:, 70:150]}, 15)  # flush of chunks 1 (64..128): commit at 70
    w.close()  # as a killed run leaves it, minus the buffered tail
    assert open_activations(path).progress["committed_tokens"] == 70
    w = act.ActivationWriter(open_activations(path, mode="r+"), threads=4)
    w.append({"resid": data[:, 70:300]}, 30)
    w.finish()
    assert np.array_equal(zarr.open_array(os.path.join(path, "resid"), mode="r")[:], data)


def _arrays(path):
    g = zarr.open_group(path, mode="r")
    return {k: a[:] for k, a in g.arrays()}


def test_writer_threads_1_and_4_give_identical_stores(zoo, corpus_file, tmp_path, monkeypatch):
    stores = {}
    for threads in (1, 4):
        monkeypatch.setattr(ex, "WRITER_THREADS", threads)
        out = str(tmp_path / f"t{threads}.zarr")
        report = align.extract(
            zoo("qwen2"),
            corpus_file,
            out,
            ExtractOptions(batch_size=3, chunk_tokens=16, sublayers=True, store_dtype="bfloat16"),
            log=lambda m: None,
        )
        assert report.stats["writer_threads"] == threads
        stores[threads] = _arrays(out)
    assert sorted(stores[1]) == sorted(stores[4])
    for k in stores[1]:
        assert np.array_equal(stores[1][k], stores[4][k]), k


def test_kill_mid_chunk_write_with_4_threads_resumes_bit_identical(
    zoo, corpus_file, tmp_path, monkeypatch, cli
):
    monkeypatch.setattr(ex, "WRITER_THREADS", 1)
    base = str(tmp_path / "base.zarr")
    opts = ["--batch-size", "3", "--chunk-tokens", "16", "--sublayers", "--store-dtype", "bfloat16"]
    align.extract(
        zoo("qwen2"),
        corpus_file,
        base,
        ExtractOptions(batch_size=3, chunk_tokens=16, sublayers=True, store_dtype="bfloat16"),
        log=lambda m: None,
    )
    assert (
        ex.WRITER_THREADS == 1 and open(ex.__file__).read().count("\nWRITER_THREADS = 4\n") == 1
    )  # the CLI's 4
    out = str(tmp_path / "s.zarr")
    log = tmp_path / "fault.log"
    cmd = [
        sys.executable,
        "-m",
        "align.cli.main",
        "extract",
        zoo("qwen2"),
        corpus_file,
        "-o",
        out,
        *opts,
    ]
    killed_run(cmd, log, "mid_chunk_write:5")
    killed = open_activations(out)
    assert not killed.complete and 0 < killed.progress["committed_tokens"] < killed.n_tokens
    # The rerun in this process, with the CLI's 4 writer threads back (only the kill needs a
    # process of its own).
    monkeypatch.undo()
    assert ex.WRITER_THREADS == 4
    code, _, err = cli(*cmd[3:])
    assert code == 0 and "resuming" in err, err
    a, b = _arrays(out), _arrays(base)
    assert sorted(a) == sorted(b)
    for k in a:
        assert np.array_equal(a[k], b[k]), k


def test_back_pressure_bounds_the_queue(zoo, corpus_file, tmp_path, monkeypatch):
    """With a writer slower than the forward, the forward waits for room: the queue holds at
    most QUEUE_DEPTH items, and reaches it."""
    real_append = act.ActivationWriter.append
    depth_seen = []

    def slow_append(self, arrays, seq_end):
        time.sleep(0.2)
        real_append(self, arrays, seq_end)

    monkeypatch.setattr(act.ActivationWriter, "append", slow_append)
    real_put = ex._BackgroundWriter.put

    def put(self, appends, events=()):
        real_put(self, appends, events)
        depth_seen.append(self.q.qsize())

    monkeypatch.setattr(ex._BackgroundWriter, "put", put)
    report = align.extract(
        zoo("qwen2"),
        corpus_file,
        str(tmp_path / "bp.zarr"),
        ExtractOptions(batch_size=1, chunk_tokens=16),
        log=lambda m: None,
    )
    assert max(depth_seen) <= ex.QUEUE_DEPTH
    assert report.stats["queue_max_depth"] == ex.QUEUE_DEPTH
    assert report.stats["queue_blocked_s"] > 0.2


def test_forward_batch_gather_equals_hf_hidden_states(zoo):
    """The padded batch's real tokens, gathered by host-made indices, are the model's own
    hidden states for that batch (HF output_hidden_states over the same padded input), bit
    for bit, in sequence order; float32 storage."""
    path = zoo("qwen2")
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    rng = np.random.default_rng(2)
    seqs = [rng.integers(5, 200, size=k).astype(np.int32) for k in (7, 3, 11)]
    L = model.config.num_hidden_layers
    got = ex.forward_batch(model, seqs, list(range(L)), [], "float32")
    T = max(len(s) for s in seqs)
    ids = torch.zeros((3, T), dtype=torch.long)
    mask = torch.zeros((3, T), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.from_numpy(s.astype(np.int64))
        mask[i, : len(s)] = 1
    with torch.no_grad():
        hs = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    for b in range(L):
        want = np.concatenate([hs[b][i, : len(s)].numpy() for i, s in enumerate(seqs)])
        assert got["resid"][b].dtype == np.float32
        np.testing.assert_array_equal(got["resid"][b], want)
