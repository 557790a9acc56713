"""A model whose model_type is not in align's family table: its parts are discovered and proved
by one probe forward before anything is written, or it is refused in one line naming the check
that failed and by how much. `--family NAME` asserts a known family for a model_type. The
table is hidden from align by removing entries, so these run on real transformers families
whose ground truth transformers' own forward gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from align.corpus import CorpusSpec
from align.extraction import ExtractOptions
from tests.helpers.assertions import one_line_error
from tests.helpers.zoo import tiny


@pytest.fixture
def hidden(monkeypatch):
    """hidden(*model_types): align's family table without those model_types."""
    from align.models import families

    def hide(*types):
        monkeypatch.setattr(
            families, "BY_TYPE", {t: f for t, f in families.BY_TYPE.items() if t not in types}
        )

    return hide


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("discovery")
    return {t: tiny(t, str(root / t)) for t in ("gpt_neox", "olmo2", "gemma2", "opt", "llama")}


@pytest.mark.parametrize("model_type", ["gpt_neox", "olmo2"])
def test_a_hidden_family_is_discovered_and_extracts_as_transformers_computes(
    model_type, models_dir, hidden, corpus_file, tmp_path
):
    """GPT-NeoX (parallel residual) and OLMo 2 (post-sublayer norms, found among the candidates
    by the probe) with their table entries hidden: the store records `discovered` with the parts found, h_b equal
    output_hidden_states bit for bit (b < L), and the sublayers found add up to each block."""
    from transformers import AutoModelForCausalLM

    import align
    from align.store import open_activations

    hidden(model_type)
    out = str(tmp_path / "s.zarr")
    align.extract(
        models_dir[model_type],
        CorpusSpec(corpus_file, max_length=48, max_docs=3),
        out,
        ExtractOptions(sublayers=True, batch_size=1),
        log=lambda m: None,
    )
    s = open_activations(out).require_complete()
    fam = s.provenance["family"]
    assert fam["found"] == "discovered" and fam["name"] == f"discovered:{model_type}"
    want = {
        "gpt_neox": ("gpt_neox.layers", "gpt_neox.final_layer_norm", "attention", "mlp"),
        "olmo2": (
            "model.layers",
            "model.norm",
            "post_attention_layernorm",
            "post_feedforward_layernorm",
        ),
    }
    assert (fam["blocks"], fam["final_norm"]) == want[model_type][:2]
    # the sublayers the probe chose are the ones transformers adds (OLMo 2: its post-norms)
    from align import models
    from align.models import families

    model, _ = models.load_model(models.ModelSpec(models_dir[model_type]))
    assert (families.of(model).attn_out, families.of(model).mlp_out) == want[model_type][2:]
    model = AutoModelForCausalLM.from_pretrained(models_dir[model_type], dtype=torch.float32).eval()
    L = model.config.num_hidden_layers
    seq = s.tokens("seq")
    for k in range(int(seq.max()) + 1):
        idx = np.flatnonzero(seq == k)
        a, b = idx[0], idx[-1] + 1
        with torch.no_grad():
            hs = model(
                input_ids=torch.tensor(s.tokens("token_id")[idx])[None], output_hidden_states=True
            ).hidden_states
        for bd in range(L):
            np.testing.assert_array_equal(s.resid(bd, a, b), hs[bd][0].numpy())
        for l in range(L):
            np.testing.assert_allclose(
                s.resid(l, a, b) + s.attn(l, a, b) + s.mlp(l, a, b),
                s.resid(l + 1, a, b),
                rtol=1e-5,
                atol=1e-5,
            )


@pytest.mark.parametrize(
    "model_type, check",
    [
        (
            "opt",
            "head input at h_L = last hidden state",
        ),  # the projection after OPT's final norm is not found
        ("gemma2", "head(h_L) = logits"),  # Gemma 2's soft cap on the logits is not found
    ],
)
def test_a_discovered_model_whose_probe_fails_is_refused_naming_the_check(
    model_type, check, models_dir, hidden, corpus_file, cli, tmp_path
):
    """With its table entry hidden, discovery finds the blocks and the final norm but not what
    the model does after them: the run stops in one line naming the failed check and by how
    much, and -o is never created."""
    hidden(model_type)
    out = tmp_path / "o.zarr"
    code, _, err = cli(
        "extract", models_dir[model_type], corpus_file, "--max-length", 48, "-o", out
    )
    line = one_line_error(code, err, f"{check!r} failed by", "--family")
    assert float(line.split("failed by ")[1].split()[0].rstrip(",")) > 1e-3
    assert not out.exists()


def test_family_option_asserts_a_family_and_is_recorded(
    models_dir, hidden, corpus_file, cli, tmp_path
):
    """`--family llama` for a model_type the table does not list: read as Llama, proved by the
    probe, recorded as asserted; a name align does not know is a one-line click refusal."""
    from align.store import open_activations

    hidden("llama")
    out = tmp_path / "a.zarr"
    code, _, err = cli(
        "extract",
        models_dir["llama"],
        corpus_file,
        "--family",
        "llama",
        "--max-length",
        48,
        "--max-docs",
        2,
        "-o",
        out,
    )
    assert code == 0, err
    fam = open_activations(str(out)).provenance["family"]
    assert fam["name"] == "llama" and fam["found"] == "asserted"
    code, _, err = cli(
        "extract", models_dir["llama"], corpus_file, "--family", "llamas", "-o", tmp_path / "b.zarr"
    )
    one_line_error(code, err, "--family", "llamas")


def test_sublayers_of_a_post_norm_opt_are_refused_before_anything_is_written(
    tmp_path, corpus_file, cli
):
    """OPT-350m's post-norm blocks (do_layer_norm_before=False) normalise after the add: the
    residual is no sum of sublayer outputs, so --sublayers is refused naming the family."""
    path = tiny("opt", str(tmp_path / "opt-post"), do_layer_norm_before=False)
    out = tmp_path / "p.zarr"
    code, _, err = cli("extract", path, corpus_file, "--sublayers", "--max-length", 48, "-o", out)
    one_line_error(code, err, "--sublayers", "opt (opt)", "do_layer_norm_before=False")
    assert not out.exists()
    code, _, err = cli("extract", path, corpus_file, "--max-length", 48, "--max-docs", 2, "-o", out)
    assert code == 0, err  # the residual stream itself is read as ever


def test_a_state_space_model_is_read_without_sublayers(tmp_path, corpus_file, cli):
    """Mamba (no attention, no MLP) is not in the table: discovered, its residual stream proved
    by the probe against transformers' hidden states (Mamba lists the block outputs h_1..h_L
    there, and feeds block 0 its input embeddings) and stored exactly so; --sublayers is refused
    in one line naming the family."""
    from transformers import AutoModelForCausalLM

    from align.store import open_activations

    path = tiny("mamba", str(tmp_path / "mamba"), state_size=4, conv_kernel=2, time_step_rank=4)
    out = tmp_path / "m.zarr"
    code, _, err = cli(
        "extract",
        path,
        corpus_file,
        "--max-length",
        32,
        "--max-docs",
        3,
        "--batch-size",
        1,
        "-o",
        out,
    )
    assert code == 0, err
    s = open_activations(str(out)).require_complete()
    assert (
        s.provenance["family"]["found"] == "discovered"
        and s.provenance["family"]["attn_out"] is None
    )
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    L = model.config.num_hidden_layers
    seq = s.tokens("seq")
    for k in range(int(seq.max()) + 1):
        idx = np.flatnonzero(seq == k)
        a, b = idx[0], idx[-1] + 1
        ids = torch.tensor(s.tokens("token_id")[idx])[None]
        with torch.no_grad():
            hs = model(input_ids=ids, output_hidden_states=True).hidden_states
            np.testing.assert_array_equal(
                s.resid(0, a, b), model.get_input_embeddings()(ids)[0].numpy()
            )
        for bd in range(1, L + 1):
            np.testing.assert_array_equal(s.resid(bd, a, b), hs[bd - 1][0].numpy())
    code, _, err = cli(
        "extract", path, corpus_file, "--sublayers", "--max-length", 32, "-o", tmp_path / "n.zarr"
    )
    one_line_error(
        code,
        err,
        "--sublayers",
        "discovered:mamba (mamba) blocks have no attention and MLP sublayers",
    )
    assert not (tmp_path / "n.zarr").exists()


def test_live_fit_takes_a_family_per_model(models_dir, hidden, corpus_file, cli, tmp_path):
    """`align fit --live --source-family llama --target-family llama` on models whose family the
    table does not list: both read as asserted Llama; the option on two stores is refused."""
    import xarray as xr

    hidden("llama")
    path = models_dir["llama"]
    out = tmp_path / "l.zarr"
    code, _, err = cli(
        "fit",
        "--live",
        path,
        path,
        corpus_file,
        "--source-family",
        "llama",
        "--target-family",
        "llama",
        "--max-length",
        48,
        "--bootstrap",
        0,
        "-o",
        out,
    )
    assert code == 0, err
    attrs = xr.open_zarr(out).attrs
    assert attrs["source"]["family"]["found"] == attrs["target"]["family"]["found"] == "asserted"
    code, _, err = cli(
        "fit", "a.zarr", "b.zarr", "--source-family", "llama", "-o", tmp_path / "m.zarr"
    )
    one_line_error(code, err, "--source-family", "--live")
