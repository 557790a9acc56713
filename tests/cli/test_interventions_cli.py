"""`align erase` and `align igrad` from the command line: results against plain references,
one-line errors for bad prompts and options, -o safety, and the plots."""

import json

import numpy as np
import pytest
import torch

from tests.helpers.assertions import one_line_error
from tests.helpers.zoo import reference_tokenizer
from tests.integration.test_interventions_erase import _docs, ref_mean

PROMPTS = [
    {"text": "the model reads every layer =", "answer": " 12 + 7 = 19"},
    {"text": "so we fit linear maps", "answer": " from each layer"},
]


@pytest.fixture
def prompts_file(tmp_path):
    p = tmp_path / "prompts.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in PROMPTS), encoding="utf-8")
    return str(p)


def _hf(path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    model.requires_grad_(False)
    return model


def _answer(path, item):
    tok = reference_tokenizer(path)
    full, head = tok(item["text"] + item["answer"])["input_ids"], tok(item["text"])["input_ids"]
    return full, len(head)


def test_erase_cli_writes_the_erasure_of_a_replaced_embedding(
    cli, zoo, prompts_file, corpus_file, tmp_path
):
    """The result's E[0, t] equals the change when the token's embedding is replaced by the
    mean residual at boundary 0 over the first 3 reference documents (computed here)."""
    from align.store import open_result

    path = zoo("llama")
    out = tmp_path / "e.zarr"
    code, _, err = cli(
        "erase",
        path,
        prompts_file,
        "--reference",
        corpus_file,
        "--reference-docs",
        3,
        "--max-length",
        64,
        "--batch-size",
        4,
        "-o",
        out,
    )
    assert code == 0, err
    assert "batched forward passes (a one-position-at-a-time loop makes" in err
    ds = open_result(str(out), "erasure")
    model = _hf(path)
    mean0 = ref_mean(model, path, _docs(3))[0]
    np.testing.assert_allclose(ds["reference_mean"].values[0], mean0, rtol=1e-5, atol=1e-6)
    assert ds.attrs["reference"]["n_prompts"] == 3 and ds.attrs["timing"]["n_forwards"] > 0
    for i, item in enumerate(PROMPTS):
        ids, n_head = _answer(path, item)
        assert int(ds["n_tokens"][i]) == len(ids)
        assert list(ds["token_id"].values[i, : len(ids)]) == ids
        assert np.flatnonzero(ds["predicts_answer"].values[i]).tolist() == list(
            range(n_head - 1, len(ids) - 1)
        )
        assert (
            "".join(ds["token"].values[i, 1 : len(ids)]) == item["text"] + item["answer"]
        )  # position 0 is BOS
        with torch.no_grad():
            emb = model.get_input_embeddings()(torch.tensor([ids]))
            p = torch.softmax(model(inputs_embeds=emb).logits[0].double(), -1)
            for t in (1, n_head - 1):
                e2 = emb.clone()
                e2[0, t] = torch.as_tensor(mean0, dtype=torch.float32)
                p2 = torch.softmax(model(inputs_embeds=e2).logits[0].double(), -1)
                want = max(
                    float((p2[tau] - p[tau]).norm()) for tau in range(n_head - 1, len(ids) - 1)
                )
                np.testing.assert_allclose(
                    float(ds["effect"].sel(prompt=i, boundary=0, position=t)),
                    want,
                    rtol=1e-4,
                    atol=1e-6,
                )
    assert list(ds["boundary"].values) == [0, 1, 2] and ds["reference_mean"].shape == (
        3,
        model.config.hidden_size,
    )
    assert "boundaries 0..2;" in err
    code, out_, err = cli("plot", out)
    assert code == 0, err
    from PIL import Image

    assert Image.open(str(tmp_path / "e.png")).size == (1200, 840)
    from align import plotting

    ax = plotting.plot_erasure(ds).axes[0]
    (mesh,) = [c for c in ax.collections if c.get_gid() == "effect/0"]
    assert mesh.get_array().shape[0] == 3 and "b = 0..2;" in ax.get_title()  # L + 1 rows


def test_igrad_cli_completeness_and_targets(cli, zoo, prompts_file, tmp_path):
    """--protocol align with --steps 4: f(x) is the plain model's answer log-probability, and the
    stored gap is Σ_t A − (f − f(0)); the variant in attrs is the align preset's but for --steps."""
    from align.store import open_result

    path = zoo("qwen2")
    out = tmp_path / "g.zarr"
    code, _, err = cli(
        "igrad",
        path,
        prompts_file,
        "--parts",
        "attn,mlp",
        "--protocol",
        "align",
        "--steps",
        4,
        "--batch-size",
        3,
        "-o",
        out,
    )
    assert code == 0, err
    assert "batched forward and backward passes (a one-point-at-a-time loop makes" in err
    ds = open_result(str(out), "igrad")
    assert (
        list(ds["part"].values) == ["attn", "mlp"]
        and ds.attrs["steps"] == 4
        and ds.attrs["compute_dtype"] == "float32"
    )
    assert (
        ds.attrs["variant"]
        == {
            "protocol": "custom",
            "object": "delta",
            "baseline": "zero",
            "target": "logprob",
            "rule": "midpoint",
            "steps": 4,
        }
        and ds.attrs["rule"] == "midpoint"
    )
    model = _hf(path)
    for i, item in enumerate(PROMPTS):
        ids, n_head = _answer(path, item)
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
        f = float(sum(logp[t - 1, ids[t]] for t in range(n_head, len(ids))))
        np.testing.assert_allclose(float(ds["f"][i]), f, rtol=1e-5)
        A = ds["attribution"].values[i]
        gap = np.nansum(A, -1) - (float(ds["f"][i]) - ds["f_baseline"].values[i])
        np.testing.assert_allclose(ds["completeness_gap"].values[i], gap, atol=1e-6)
        assert (A[:, :, len(ids) - 1] == 0).all()  # the last token predicts nothing: no attribution
    code, _, err = cli("plot", out, "-o", tmp_path / "g.png", "--prompts", "1")
    assert code == 0, err
    code, _, err = cli("plot", out, "-o", tmp_path / "h.png", "--prompts", "7")
    one_line_error(code, err, "prompt 7", "0..1")
    assert not (tmp_path / "h.png").exists()


def test_gsm8k_format_uses_the_final_answer_marker(zoo, tmp_path):
    from align import corpus, models
    from align.analyses.answers import load_answer_prompts

    p = tmp_path / "gsm.jsonl"
    p.write_text(
        json.dumps({"question": "How many?", "answer": "It is 3 + 4 = 7.\n#### 7"}) + "\n",
        encoding="utf-8",
    )
    tok = models.load_tokenizer(models.ModelSpec(zoo("qwen2")))
    (prompt,) = load_answer_prompts(corpus.CorpusSpec(str(p), fmt="gsm8k", max_length=256), tok)
    assert prompt.answer == "7"
    last = np.flatnonzero(prompt.predicts_answer)
    assert last.tolist() == [len(prompt) - 2] and prompt.tokens[-1].strip() == "7"


@pytest.mark.parametrize(
    "case",
    [
        "no_answer_field",
        "no_marker",
        "too_few_reference",
        "txt_without_marker",
        "too_long",
        "empty_answer",
        "bad_parts",
    ],
)
def test_one_line_errors(case, cli, zoo, corpus_file, tmp_path):
    path = zoo("qwen2")
    out = tmp_path / "r.zarr"
    jl = tmp_path / "p.jsonl"
    jl.write_text(json.dumps({"text": "a b c"}) + "\n", encoding="utf-8")
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(PROMPTS[0]) + "\n", encoding="utf-8")
    dot = tmp_path / "dot.txt"
    dot.write_text("the answer is.\n", encoding="utf-8")
    erase = ("erase", path)
    ref = ("--reference", corpus_file)
    args, needles = {
        "no_answer_field": (
            erase + (jl,) + ref,
            [f"{jl} line 1", "no answer field 'answer'", "--answer-marker"],
        ),
        "no_marker": (
            erase + (corpus_file,) + ref + ("--answer-marker", "####"),
            [corpus_file, "document 0", "'####'"],
        ),
        "too_few_reference": (
            erase + (good,) + ref + ("--reference-docs", 50),
            [corpus_file, "12 documents", "--reference-docs 50"],
        ),
        "txt_without_marker": (
            erase + (corpus_file,) + ref,
            [corpus_file, "not a .jsonl file", "--answer-marker"],
        ),
        "too_long": (
            ("igrad", path, good, "--max-length", 5),
            ["has ", "more than --max-length 5"],
        ),
        "empty_answer": (
            ("igrad", path, dot, "--answer-marker", "."),
            [f"{dot} document 0", "empty answer"],
        ),
        "bad_parts": (("igrad", path, good, "--parts", "layer,heads"), ["--parts", "heads"]),
    }[case]
    code, _, err = cli(*args, "-o", out)
    one_line_error(code, err, *needles)
    assert not out.exists()


def test_output_safety(cli, zoo, corpus_file, prompts_file, tmp_path):
    """-o naming the prompts file, or a folder holding other files, is refused and left as it was."""
    path = zoo("qwen2")
    before = open(prompts_file, "rb").read()
    code, _, err = cli("igrad", path, prompts_file, "--steps", 2, "-o", prompts_file)
    one_line_error(code, err, prompts_file)
    assert open(prompts_file, "rb").read() == before
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep", encoding="utf-8")
    code, _, err = cli("erase", path, prompts_file, "--reference", corpus_file, "-o", other)
    one_line_error(code, err, str(other))
    assert (other / "notes.txt").read_text(encoding="utf-8") == "keep" and len(
        list(other.iterdir())
    ) == 1


def test_marker_prompts_skip_blank_documents(zoo, tmp_path):
    """One prompt per non-blank line (blank lines are no prompts); the answer is the text after
    the last marker without its leading space: its tokens are those after the marker's that are
    not whitespace alone, each predicted from the position before it."""
    from align import corpus, models
    from align.analyses.answers import load_answer_prompts

    p = tmp_path / "lines.txt"
    p.write_text("12 + 7 = 19\n\n1 = 2 = 3\n", encoding="utf-8")
    path = zoo("qwen2")
    tok = models.load_tokenizer(models.ModelSpec(path))
    prompts = load_answer_prompts(
        corpus.CorpusSpec(str(p), doc_split="line"), tok, answer_marker="="
    )
    assert [q.answer for q in prompts] == ["19", "3"]
    ref = reference_tokenizer(path)
    for q, (head, text) in zip(prompts, [("12 + 7 =", "12 + 7 = 19"), ("1 = 2 =", "1 = 2 = 3")]):
        n_head, full = len(ref(head)["input_ids"]), ref(text)["input_ids"]
        assert list(q.token_id) == full
        answer = [t for t in range(n_head, len(full)) if ref.decode([full[t]]).strip()]
        assert np.flatnonzero(q.predicts_answer).tolist() == [t - 1 for t in answer] and answer


@pytest.fixture(scope="module")
def nan_model(zoo, tmp_path_factory):
    """A copy of the qwen2 zoo model with row 5 of layer 1's MLP down_proj NaN: the last
    residual (boundary 2) is NaN in dimension 5 at every token; boundaries 0 and 1 are finite."""
    import shutil

    from transformers import AutoModelForCausalLM

    src = zoo("qwen2")
    dst = tmp_path_factory.mktemp("nan") / "qwen2-nan"
    shutil.copytree(src, dst)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight[5, :] = float("nan")
    model.save_pretrained(dst)
    return str(dst)


@pytest.mark.parametrize(
    "command,run,first",
    [
        ("erase", "in the reference run", "prompt 0, position 0"),  # μ_L reads h_L first
        ("igrad", "in the run scaling layer 0", "prompt 0, position 0"),
    ],
)
def test_nan_weight_is_refused_in_one_line(
    command, run, first, cli, nan_model, prompts_file, corpus_file, tmp_path
):
    """The forward check names the array (the last residual), the prompt and position, and
    which run; nothing is written."""
    out = tmp_path / "r.zarr"
    extra = (
        ("--reference", corpus_file, "--reference-docs", 2)
        if command == "erase"
        else ("--steps", 2)
    )
    code, _, err = cli(command, nan_model, prompts_file, *extra, "-o", out)
    one_line_error(
        code, err, "non-finite", "the residual at boundary 2", first, run, "nothing was written"
    )
    assert not out.exists()


def _old_results(L=2, T=5):
    """An erasure and an igrad result as align wrote them before boundary L was erased and the
    variant recorded: effect over boundaries 0..L−1, attrs n_layers L; no attrs["variant"]."""
    import xarray as xr

    tokens = {
        "token": (("prompt", "position"), np.array([["a", "b", "c", "d", "e"]])),
        "token_id": (("prompt", "position"), np.arange(T)[None]),
        "predicts_answer": (("prompt", "position"), np.array([[False, False, True, True, False]])),
        "n_tokens": (("prompt",), np.array([T])),
        "answer": (("prompt",), np.array(["de"])),
    }
    effect = np.linspace(0, 1, L * T).reshape(1, L, T)
    erasure = xr.Dataset(
        tokens | {"effect": (("prompt", "boundary", "position"), effect)},
        coords={"prompt": [0], "boundary": np.arange(L), "position": np.arange(T)},
        attrs={"model": "old", "n_layers": L, "n_prompts": 1},
    )
    A = np.linspace(-1, 1, 1 * L * T).reshape(1, 1, L, T)
    igrad = xr.Dataset(
        tokens
        | {
            "attribution": (("prompt", "part", "layer", "position"), A),
            "f": (("prompt",), [0.0]),
            "f_baseline": (("prompt", "part", "layer"), np.zeros((1, 1, L))),
            "completeness_gap": (("prompt", "part", "layer"), np.zeros((1, 1, L))),
        },
        coords={"prompt": [0], "part": ["layer"], "layer": np.arange(L), "position": np.arange(T)},
        attrs={"model": "old", "n_layers": L, "n_prompts": 1, "steps": 64, "rule": "midpoint"},
    )
    return erasure, igrad


def test_results_written_before_still_plot_and_say_what_they_are(cli, tmp_path):
    """An erasure result over boundaries 0..L−1 draws L rows titled "no boundary L"; an igrad
    result without attrs["variant"] is labelled as the align variant it is (log p, midpoint).
    Both through `align plot` from stores too."""
    from align import plotting
    from align.store import write_result

    erasure, igrad = _old_results()
    fig = plotting.plot_erasure(erasure)
    ax = fig.axes[0]
    assert "b = 0..1, no boundary L (an older result)" in ax.get_title()
    (mesh,) = [c for c in ax.collections if c.get_gid() == "effect/0"]
    assert mesh.get_array().shape == (2, 5)
    fig = plotting.plot_igrad(igrad)
    assert "align, midpoint rule, 64 steps" in fig.get_suptitle()
    assert fig.axes[-1].get_ylabel() == "attribution to log p(answer)"
    for name, ds in (("erasure", erasure), ("igrad", igrad)):
        path = str(tmp_path / f"{name}.zarr")
        write_result(path, ds, name)
        code, _, err = cli("plot", path, "-o", tmp_path / f"{name}.png")
        assert code == 0, err
        assert (tmp_path / f"{name}.png").stat().st_size > 0


def test_igrad_help_states_its_float32_default(cli):
    """igrad computes in float32 on every device unless --dtype says otherwise
    (interventions_run.run_igrad); its help says so, and not the other commands' bfloat16 on
    CUDA, which `align erase --help` keeps."""
    code, out, _ = cli("igrad", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert (
        "Compute dtype: only this command needs gradients, so it stays in float32 unless told "
        "otherwise. [default: float32, on a GPU too]"
    ) in text
    assert "bfloat16 on CUDA" not in text
    code, out, _ = cli("erase", "--help")
    assert code == 0 and "float32 on CPU, bfloat16 on CUDA" in " ".join(out.split())
