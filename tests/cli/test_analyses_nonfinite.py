"""Non-finite values in the analyses (issue 9, item 4): a checkpoint with a NaN weight makes
`align contrib`, `lens` and `skip` fail in one line naming the array (boundary or layer and
part), the prompt and position and the count, and write nothing; `align depth` names the
result file, the variable and the index of a NaN where it needs a number (and keeps "not
measured" apart from "computed NaN"); an alignment plot withholds its summary over NaN.

Expected locations and counts come from the `tokenizers` library reading the model's own
tokenizer.json and from a direct HF forward pass, never from align."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import torch

from tests.helpers.assertions import one_line_error

# One line each, no newline inside a document (so any tokenizer class reading tokenizer.json
# cuts them the same), separated by blank lines; every one longer than 13 tokens, so the
# future setting of `align skip` has split points.
DOCS = [
    "the model reads every layer of the residual stream and a deeper network spreads the same computation.",
    "so we fit linear maps from each layer to each layer and look at the errors while the shallow one finishes early.",
    "a deeper network spreads the same computation over more layers while the shallow one finishes early in its depth.",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    p = tmp_path_factory.mktemp("nonfinite") / "docs.txt"
    p.write_text("\n\n".join(DOCS) + "\n", encoding="utf-8")
    return str(p)


def _poisoned(zoo, dst, family, edit):
    """A copy of zoo(family) (tokenizer files included) whose weights `edit` changed in place,
    saved with save_pretrained."""
    from transformers import AutoModelForCausalLM

    src = zoo(family)
    shutil.copytree(src, dst)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    with torch.no_grad():
        edit(model)
    model.save_pretrained(dst)
    return str(dst)


@pytest.fixture(scope="module")
def nan_mlp(zoo, tmp_path_factory):
    """qwen2 (2 layers) with row 5 of layer 1's MLP down_proj NaN: the MLP output of layer 1
    is NaN in dimension 5 at every token, and so is everything after it."""

    def edit(m):
        m.model.layers[1].mlp.down_proj.weight[5, :] = float("nan")

    return _poisoned(zoo, tmp_path_factory.mktemp("nan") / "qwen2-nan-mlp", "qwen2", edit)


def _token_ids(model_dir):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    return [tok.encode(d).ids for d in DOCS]


def test_fixture_really_holds_nan(nan_mlp):
    """The reference: a plain HF forward of the poisoned model gives NaN in exactly one
    dimension of the MLP output of layer 1, at every token, and finite values before it."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(nan_mlp, dtype=torch.float32).eval()
    ids = _token_ids(nan_mlp)[0]
    seen = {}
    model.model.layers[1].mlp.register_forward_hook(lambda m, a, o: seen.__setitem__("mlp1", o))
    model.model.layers[1].register_forward_pre_hook(
        lambda m, a, k: seen.__setitem__("h1", (a[0] if a else k["hidden_states"])),
        with_kwargs=True,
    )
    with torch.no_grad():
        model(input_ids=torch.tensor([ids]))
    assert torch.isfinite(seen["h1"]).all()
    bad = ~torch.isfinite(seen["mlp1"][0])
    assert bad.sum() == len(ids) and bad[:, 5].all()


@pytest.mark.parametrize(
    "command,array,extra",
    [
        (
            "contrib",
            "the MLP output of layer 1",
            "and 1 later array too (up to the residual at boundary 2)",
        ),
        ("lens", "the residual at boundary 2", "and 1 later array too (up to the output logits)"),
        ("skip", "the residual at boundary 2", "3 prompts in the clean run (first"),
    ],
)
def test_nan_weight_is_refused_in_one_line(cli, nan_mlp, corpus, tmp_path, command, array, extra):
    """All three prompts in one batch: each of their N tokens has one NaN value (dimension 5),
    so the first array holding them has N NaN values at N tokens; the first is prompt 0,
    position 0. Nothing is written at -o."""
    n = sum(len(ids) for ids in _token_ids(nan_mlp))
    out = tmp_path / "r.zarr"
    code, _, err = cli(command, nan_mlp, corpus, "-o", out, "--batch-size", "8")
    line = one_line_error(
        code,
        err,
        "non-finite",
        array,
        f"holds {n:,} NaN values at {n:,} tokens",
        "of a batch of 3 prompts",
        "(first: prompt 0, position 0)",
        extra,
        "--dtype float32",
    )
    assert "nothing was written" in line
    assert not out.exists()
    assert not [
        p for p in os.listdir(tmp_path) if p.startswith(".r.zarr")
    ]  # no temporary left either


def test_nan_embedding_row_names_the_first_prompt_and_position(cli, zoo, corpus, tmp_path):
    """llama (untied embeddings, a BOS token): the embedding row of one token id set to NaN.
    Boundary 0 then holds d_model NaN at each occurrence of that token; the first occurrence
    and the count come from the tokenizer file (with its BOS), not from align."""
    from tokenizers import Tokenizer

    tok_dir = zoo("llama")
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    ids = [tok.encode(d).ids for d in DOCS]
    # a token of prompt 1 that prompt 0 lacks, so the first occurrence is not (0, 0)
    target = next(t for t in ids[1][1:] if t not in ids[0])
    hits = [(p, t) for p, row in enumerate(ids) for t, x in enumerate(row) if x == target]

    def edit(m):
        m.model.embed_tokens.weight[target, :] = float("nan")

    model = _poisoned(zoo, tmp_path / "llama-nan-embed", "llama", edit)
    out = tmp_path / "c.zarr"
    code, _, err = cli("contrib", model, corpus, "-o", out, "--batch-size", "3")
    d = 64  # the zoo's d_model
    one_line_error(
        code,
        err,
        f"the residual at boundary 0 holds {d * len(hits):,} NaN values at {len(hits):,} tokens",
        f"(first: prompt {hits[0][0]}, position {hits[0][1]})",
    )
    assert not out.exists()


def test_check_ignores_padding_but_not_real_tokens():
    """The batch check reads real tokens only: NaN in a padding slot (mask 0) is not an
    error, the same NaN at a real token is, named by the row's prompt index and position."""
    from align.analyses.forward import check_batch
    from align.errors import NonFiniteError

    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    h = torch.zeros(2, 4, 3)
    h[1, 3, 0] = float("nan")  # padding of row 1
    out = {"resid": {0: h.clone()}, "attn": {}, "mlp": {}, "logits": None}
    check_batch(out, mask, prompts=[7, 9])
    h[1, 1, 2] = float("inf")
    out["resid"][0] = h
    with pytest.raises(NonFiniteError) as e:
        check_batch(out, mask, prompts=[7, 9])
    assert "holds 1 ±inf value at 1 token of" in str(
        e.value
    ) and "(first: prompt 9, position 1)" in str(e.value)


def test_contributions_from_arrays_refuse_nan():
    """The accumulator itself refuses a NaN input (the store route and any caller share it):
    before the fix the result was NaN."""
    from align.analyses import contributions
    from align.errors import NonFiniteError

    rng = np.random.default_rng(0)
    resid, attn, mlp = (
        rng.normal(size=(3, 5, 4)),
        rng.normal(size=(2, 5, 4)),
        rng.normal(size=(2, 5, 4)),
    )
    attn[1, 3, 2] = np.nan
    with pytest.raises(NonFiniteError) as e:
        contributions(resid, attn, mlp)
    msg = str(e.value)
    assert (
        "part attn at layer 1" in msg
        and "(first: token 3)" in msg
        and "1 NaN value at 1 token" in msg
    )


def test_lens_head_with_nan_weight_is_refused(zoo, tmp_path):
    """The lens over a store reads only the checkpoint's final norm and unembedding: a NaN in
    the final norm's weight is refused naming the tensor, before any lens value."""
    from align.analyses import read_head
    from align.errors import NonFiniteError

    def edit(m):
        m.model.norm.weight[3] = float("nan")

    model = _poisoned(zoo, tmp_path / "qwen2-nan-norm", "qwen2", edit)
    with pytest.raises(NonFiniteError) as e:
        read_head(model)
    assert "'model.norm.weight'" in str(e.value) and "1 NaN/inf values" in str(e.value)


@pytest.fixture(scope="module")
def good_results(zoo, corpus_file, tmp_path_factory):
    """Real contributions and lens results of a 4-layer qwen2 (through the CLI)."""
    from tests.conftest import run_cli

    root = tmp_path_factory.mktemp("depth")
    m = zoo("qwen2", num_hidden_layers=4)
    for cmd, name in (("contrib", "c.zarr"), ("lens", "l.zarr")):
        code, _, _ = run_cli([cmd, m, corpus_file, "-o", str(root / name), "--max-docs", "4"])
        assert code == 0
    return root


def _inject(result, var, index, value):
    """Write `value` into one cell of a stored result array, through zarr (as damage would)."""
    import zarr

    arr = zarr.open_array(os.path.join(result, var), mode="r+")
    arr[index] = value


@pytest.mark.parametrize(
    "which,var,index,cell",
    [
        (
            "c.zarr",
            "cos",
            (1, 2, 0),
            "cos[part=mlp, layer=2, agg=mean] is NaN",
        ),  # dims part, layer, agg
        (
            "l.zarr",
            "kl",
            (0, 1),
            "kl[boundary=1, weighting=token] is NaN",
        ),  # dims weighting, boundary
        ("l.zarr", "overlap", (0, 3), "overlap[boundary=3, weighting=token] is inf"),
    ],
)
def test_depth_names_file_variable_and_index(cli, good_results, tmp_path, which, var, index, cell):
    """A NaN (or inf) in a real result where depth needs a number: one line naming that
    result's path, the variable and the index; not "the lens lacks boundaries"."""
    work = tmp_path / "r"
    shutil.copytree(good_results, work)
    value = np.inf if "inf" in cell else np.nan
    _inject(str(work / which), var, index, value)
    out = tmp_path / "d.zarr"
    code, _, err = cli("depth", "--contrib", work / "c.zarr", "--lens", work / "l.zarr", "-o", out)
    line = one_line_error(code, err, str(work / which), cell, "1 of")
    assert "lacks" not in line and "did not measure" not in line
    assert not out.exists()


def test_depth_tells_unmeasured_boundary_from_nan(cli, zoo, extracted, corpus_file, tmp_path):
    """A lens over a store without boundary 1 stores NaN there with a reason (not measured):
    depth says the boundary was not measured and names it, and does not call it non-finite."""
    store = extracted("qwen2", boundaries="0,2")
    model = zoo("qwen2")
    code, _, err = cli("contrib", model, corpus_file, "-o", tmp_path / "c.zarr")
    assert code == 0, err
    code, _, err = cli("lens", "--store", store, "-o", tmp_path / "l.zarr")
    assert code == 0, err
    code, _, err = cli(
        "depth",
        "--contrib",
        tmp_path / "c.zarr",
        "--lens",
        tmp_path / "l.zarr",
        "-o",
        tmp_path / "d.zarr",
    )
    line = one_line_error(code, err, "did not measure boundaries [1]")
    assert "non-finite" not in line


def test_alignment_plot_withholds_summary_over_nan():
    """An alignment result with a NaN row (source boundary 2) and a summary computed around it
    (as a fit over NaN would): the caption names the NaN cells and gives no argmin path, no
    Spearman; no argmin path is drawn. Choice: the figure is still drawn (the finite cells are
    real numbers worth seeing); only the summary, which would be wrong, is withheld."""
    from align import plotting
    from tests.helpers.fixtures_demo import alignment_ds

    ds = alignment_ds()
    err = ds["relative_error"].values.copy()
    err[2, :] = np.nan
    ds["relative_error"] = (("source_boundary", "target_boundary"), err)
    text = plotting.summary_text(ds)
    assert "argmin path" not in text and "Spearman" not in text and "no summary" in text
    assert (
        "relative_error is NaN/inf at 7 of 28 cells (first: source boundary 2, target boundary 0)"
        in text
    )
    fig = plotting.plot_alignment(ds)
    ax = fig.axes[0]
    assert "argmin_path" not in [ln.get_gid() for ln in ax.get_lines()]
    (caption,) = [t.get_text() for t in ax.texts if t.get_gid() == "caption"]
    assert "no summary" in caption and "Spearman" not in caption
    # the same result without the NaN still gets its summary
    assert "argmin path" in plotting.summary_text(alignment_ds())
