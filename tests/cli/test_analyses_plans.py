"""`align skip`, `align lens`, `align contrib` off a terminal: a progress line at the end of
their forwards, and `--dry-run`'s plan (prompts, tokens, batches, forwards, padded positions)
against a count made from the tokenizer by hand; the dry run writes nothing. With --store,
contrib's and lens's plans say what the store holds and what they will read (counted with
zarr), after the checks of a run."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.helpers.assertions import one_line_error
from tests.helpers.fixtures_analyses import hf_prompts
from tests.helpers.zoo import CORPUS_TEXT

DOCS, BATCH, LAYERS, PARTS = 4, 2, 2, 3  # the zoo's models have 2 layers
# The shared corpus's documents, each on one line and without its sums (words only), so the
# tokenizer's reading by transformers and by align's corpus reader are the same ids.
TEXT = CORPUS_TEXT.replace(" 12 + 7 = 19.", ".").strip()
TEXT = "\n\n".join(" ".join(d.split("\n")) for d in TEXT.split("\n\n")) + "\n"


@pytest.fixture(scope="module")
def words_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("plans") / "docs.txt"
    path.write_text(TEXT, encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def lengths(zoo):
    """Token counts of the first DOCS documents, tokenized by transformers directly."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(zoo("qwen2"))
    return [len(p) for p in hf_prompts(tok, TEXT, DOCS, 512)]


def _args(zoo, words_file, out, *more):
    return (zoo("qwen2"), words_file, "--max-docs", DOCS, "--batch-size", BATCH, "-o", out, *more)


def test_skip_shows_progress_off_a_terminal(zoo, words_file, cli, tmp_path):
    out = tmp_path / "s.zarr"
    code, _, err = cli("skip", *_args(zoo, words_file, out, "--settings", "current"))
    assert code == 0, err
    # DOCS prompts in batches of BATCH rows, each batch 1 clean + PARTS x LAYERS forwards
    n = -(-DOCS // BATCH) * (1 + PARTS * LAYERS)
    assert n == 14
    last = [line for line in err.splitlines() if line.startswith("align skip: current setting")]
    assert last and re.fullmatch(
        rf"align skip: current setting, forward {n}/{n}, [\d,]+ tok/s, ETA 0 s", last[-1]
    ), err
    from align.store import open_result

    assert open_result(str(out), "skipping").attrs["timing"]["n_forwards"] == n


@pytest.mark.parametrize("command", ["contrib", "lens"])
def test_contrib_and_lens_show_progress_off_a_terminal(command, zoo, words_file, cli, tmp_path):
    code, _, err = cli(command, *_args(zoo, words_file, tmp_path / "r.zarr"))
    assert code == 0, err
    assert re.search(
        rf"^align {command}: {DOCS} prompts, batch 2/2, [\d,]+ tok/s, ETA 0 s$", err, re.M
    ), err


def _plan_line(err, key):
    found = [line.strip() for line in err.splitlines() if line.strip().startswith(key)]
    assert len(found) == 1, err
    return found[0]


def test_skip_dry_run_counts_rows_forwards_and_positions(zoo, words_file, cli, tmp_path, lengths):
    out = tmp_path / "s.zarr"
    code, _, err = cli("skip", *_args(zoo, words_file, out, "--settings", "current", "--dry-run"))
    assert code == 0, err
    assert not out.exists()
    # rows sorted by length, BATCH a batch: positions = rows x the batch's longest row
    s = sorted(lengths)
    padded = sum(len(s[k : k + BATCH]) * max(s[k : k + BATCH]) for k in range(0, DOCS, BATCH))
    per = 1 + PARTS * LAYERS
    assert _plan_line(err, "corpus").endswith(
        f"{DOCS} prompts, {sum(lengths):,} tokens (longest {max(lengths)})"
    )
    assert _plan_line(err, "forwards") == (
        f"forwards   current {DOCS} rows in 2 batches; {per} forwards a batch (1 clean + {PARTS} "
        f"parts × {LAYERS} layers): {2 * per} forwards over {padded * per:,} padded positions"
    )
    assert re.fullmatch(
        r"time +~[\d.,e+]+ s at [\d,]+ tok/s .*nothing was written", _plan_line(err, "time")
    )
    assert "weights" in _plan_line(err, "memory")


@pytest.mark.parametrize("command", ["contrib", "lens"])
def test_contrib_and_lens_dry_run(command, zoo, words_file, cli, tmp_path, lengths):
    out = tmp_path / "r.zarr"
    code, _, err = cli(command, *_args(zoo, words_file, out, "--dry-run"))
    assert code == 0, err
    assert not out.exists()
    # batches in corpus order
    padded = sum(
        len(lengths[k : k + BATCH]) * max(lengths[k : k + BATCH]) for k in range(0, DOCS, BATCH)
    )
    assert _plan_line(err, "forwards") == (
        f"forwards   2 batches, one forward each: 2 forwards over {padded:,} padded positions"
    )


def _store_counts(path):
    """(tokens, sequences, d_model, boundaries, blocks with sublayers, bytes a value), read
    from the store's arrays with zarr directly."""
    import zarr

    g = zarr.open_group(path, mode="r")
    n, d = g["resid"].shape[1:]
    layers = list(g["layer"][:]) if "layer" in g else []
    seqs = len(np.unique(g["seq"][:]))
    return n, seqs, d, list(g["boundary"][:]), layers, g["resid"].dtype.itemsize


@pytest.mark.parametrize("command", ["contrib", "lens"])
def test_dry_run_with_a_store_says_what_it_holds_and_reads(command, extracted, cli, tmp_path):
    store = extracted("qwen2", sublayers=True)
    out = tmp_path / "r.zarr"
    code, _, err = cli(command, "--store", store, "-o", out, "--dry-run")
    assert code == 0, err
    assert not out.exists()
    n, seqs, d, boundaries, layers, size = _store_counts(store)
    assert boundaries == list(range(LAYERS + 1)) and layers == list(range(LAYERS))
    assert _plan_line(err, "store").startswith(f"store      {n:,} tokens in {seqs} sequences of ")
    assert _plan_line(err, "store").endswith(
        f", {LAYERS} layers, d_model {d}, float32; boundaries 0..{LAYERS}, sublayers of blocks "
        f"0..{LAYERS - 1}"
    )
    reads = _plan_line(err, "reads")
    if command == "contrib":  # every boundary and both sublayers of every block
        want = n * d * size * (len(boundaries) + 2 * len(layers))
        assert "of every boundary's residual and every block's attention and MLP output" in reads
    else:  # the residual at every boundary the store holds
        want = n * d * size * len(boundaries)
        assert (
            f"the residual at each of its {len(boundaries)} boundaries ({n:,} tokens each)" in reads
        )
    from align.messages import human_bytes

    assert f", {human_bytes(want)}" in reads
    assert _plan_line(err, "time").endswith("nothing was written")


def test_dry_run_with_a_store_makes_the_runs_checks(extracted, cli, tmp_path):
    store = extracted("qwen2", boundaries="0,1")  # no boundary L, no sublayers
    for command, needle in (("contrib", "no sublayer outputs"), ("lens", "lacks boundary 2")):
        code, _, err = cli(command, "--store", store, "-o", tmp_path / "r.zarr", "--dry-run")
        one_line_error(code, err, store, needle)


@pytest.mark.parametrize("command,unit", [("contrib", "chunk"), ("lens", "step")])
def test_store_routes_show_progress(command, unit, extracted, cli, tmp_path):
    store = extracted("qwen2", sublayers=True)
    code, _, err = cli(command, "--store", store, "-o", tmp_path / "r.zarr")
    assert code == 0, err
    # the last step's line: every token read, k of k steps
    assert re.search(
        rf"^align {command}: [\d,]+ tokens, {unit} (\d+)/\1, [\d,]+ tok/s, ETA 0 s$", err, re.M
    ), err
