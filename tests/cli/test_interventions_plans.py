"""`align erase` and `align igrad` off a terminal: a progress line at the end of their forwards
(passes), and `--dry-run`'s plan (prompts, tokens, rows, batches, forwards, padded positions)
against counts made from the tokenizer by hand; the dry run writes nothing."""

from __future__ import annotations

import json
import re

import pytest

from tests.cli.test_interventions_cli import PROMPTS, _answer
from tests.integration.test_interventions_erase import _docs

LAYERS = 2  # the zoo's models
BATCH, REF_DOCS, MAX_LENGTH = 3, 3, 64


@pytest.fixture
def prompts_file(tmp_path):
    p = tmp_path / "prompts.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in PROMPTS), encoding="utf-8")
    return str(p)


def _plan_line(err, key):
    found = [line.strip() for line in err.splitlines() if line.strip().startswith(key)]
    assert len(found) == 1, err
    return found[0]


def _padded(lengths, size):
    """Σ over batches of `size` consecutive lengths of rows × the batch's longest row."""
    return sum(
        len(lengths[k : k + size]) * max(lengths[k : k + size])
        for k in range(0, len(lengths), size)
    )


@pytest.fixture
def erase_counts(zoo):
    """(rows, batches, padded positions) of the erased rows, and (batches, padded positions,
    tokens) of the reference, from transformers' tokenizer: a prompt of T tokens whose answer
    is predicted up to position T − 2 has T − 1 rows, each T long; rows sorted by length."""
    from tests.helpers.zoo import reference_tokenizer

    path = zoo("llama")
    lengths = sorted(
        len(ids)
        for ids, _ in (_answer(path, item) for item in PROMPTS)
        for _ in range(len(ids) - 1)
    )
    tok = reference_tokenizer(path)
    ref = [len(tok(d)["input_ids"][:MAX_LENGTH]) for d in _docs(REF_DOCS)]
    rows = (len(lengths), -(-len(lengths) // BATCH), _padded(lengths, BATCH))
    return rows, (-(-REF_DOCS // BATCH), _padded(ref, BATCH), sum(ref))


def _erase(zoo, prompts, corpus, out, *more):
    return (
        "erase",
        zoo("llama"),
        prompts,
        "--reference",
        corpus,
        "--reference-docs",
        REF_DOCS,
        "--max-length",
        MAX_LENGTH,
        "--batch-size",
        BATCH,
        "-o",
        out,
        *more,
    )


def test_erase_dry_run_counts_rows_forwards_and_positions(
    cli, zoo, prompts_file, corpus_file, tmp_path, erase_counts
):
    (n_rows, n_batches, padded), (n_ref, ref_padded, ref_tokens) = erase_counts
    out = tmp_path / "e.zarr"
    code, _, err = cli(*_erase(zoo, prompts_file, corpus_file, out, "--dry-run"))
    assert code == 0, err
    assert not out.exists()
    per = 1 + LAYERS  # a clean forward and one per boundary 0..L-1
    assert _plan_line(err, "forwards") == (
        f"forwards   {n_rows} rows (a prompt and one erased position) in {n_batches} batches; "
        f"{per} forwards a batch (1 clean + {LAYERS} boundaries erased; boundary {LAYERS} reuses "
        f"the clean run), and {n_ref} for the reference mean: {n_batches * per + n_ref} forwards "
        f"over {padded * per + ref_padded:,} padded positions"
    )
    assert _plan_line(err, "reference").endswith(f": {REF_DOCS} prompts, {ref_tokens} tokens")
    tokens = [len(_answer(zoo("llama"), item)[0]) for item in PROMPTS]
    assert _plan_line(err, "corpus").endswith(
        f"{len(PROMPTS)} prompts, {sum(tokens)} tokens (longest {max(tokens)})"
    )
    assert re.fullmatch(
        r"time +~[\d.,e+]+ s at [\d,]+ tok/s \(model loading not counted\); nothing was written",
        _plan_line(err, "time"),
    )
    assert err.splitlines()[0].startswith(f"align erase --dry-run: {out} (an erasure result)")


def test_erase_shows_progress_off_a_terminal(
    cli, zoo, prompts_file, corpus_file, tmp_path, erase_counts
):
    (n_rows, n_batches, _), (n_ref, _, _) = erase_counts
    code, _, err = cli(*_erase(zoo, prompts_file, corpus_file, tmp_path / "e.zarr"))
    assert code == 0, err
    n = n_ref + n_batches * (1 + LAYERS)  # every forward: the reference mean's, then the rows'
    last = [line for line in err.splitlines() if line.startswith("align erase: ") and "ETA" in line]
    assert last and re.fullmatch(
        rf"align erase: {n_rows} of {n_rows} rows, forward {n}/{n}, [\d,]+ tok/s, ETA 0 s",
        last[-1],
    ), err


STEPS, IG_BATCH, PARTS = 3, 2, ("attn", "mlp")


def _igrad(zoo, prompts, out, *more):
    return (
        "igrad",
        zoo("qwen2"),
        prompts,
        "--parts",
        ",".join(PARTS),
        "--steps",
        STEPS,
        "--batch-size",
        IG_BATCH,
        "-o",
        out,
        *more,
    )


def test_igrad_dry_run_counts_passes_and_positions(cli, zoo, prompts_file, tmp_path):
    out = tmp_path / "g.zarr"
    code, _, err = cli(*_igrad(zoo, prompts_file, out, "--dry-run"))
    assert code == 0, err
    assert not out.exists()
    tokens = [len(_answer(zoo("qwen2"), item)[0]) for item in PROMPTS]
    # per prompt, part and layer: x, the baseline and STEPS points, IG_BATCH a pass, each row
    # as long as its prompt
    chunks = -(-(STEPS + 2) // IG_BATCH)
    passes = len(PROMPTS) * len(PARTS) * LAYERS * chunks
    positions = len(PARTS) * LAYERS * (STEPS + 2) * sum(tokens)
    assert _plan_line(err, "forwards") == (
        f"forwards   {len(PROMPTS)} prompts × {len(PARTS)} parts × {LAYERS} layers × {chunks} "
        f"passes ({STEPS} points + x and the baseline, {IG_BATCH} a pass): {passes} forward and "
        f"backward passes over {positions:,} padded positions"
    )
    assert _plan_line(err, "corpus").endswith(
        f"{len(PROMPTS)} prompts, {sum(tokens)} tokens (longest {max(tokens)})"
    )
    # the timed pass: the longest prompt's, IG_BATCH points
    assert _plan_line(err, "one batch").startswith(
        f"one batch  {IG_BATCH} rows ({IG_BATCH * max(tokens)} positions, the largest)"
    )


def test_igrad_shows_progress_off_a_terminal(cli, zoo, prompts_file, tmp_path):
    code, _, err = cli(*_igrad(zoo, prompts_file, tmp_path / "g.zarr"))
    assert code == 0, err
    n = len(PROMPTS) * len(PARTS) * LAYERS * -(-(STEPS + 2) // IG_BATCH)
    last = [line for line in err.splitlines() if line.startswith("align igrad: prompt")]
    assert last and re.fullmatch(
        rf"align igrad: prompt {len(PROMPTS)} of {len(PROMPTS)}, {PARTS[-1]} layer {LAYERS - 1}, "
        rf"pass {n}/{n}, [\d,]+ tok/s, ETA 0 s",
        last[-1],
    ), err
