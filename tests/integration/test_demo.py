"""The built-in demo: the generated corpus, the char tokenizer, cached seeded training, and
the whole pipeline end to end at its tiny size (control included)."""

from __future__ import annotations

import json
import os
import random
import re

import numpy as np
import pytest
from PIL import Image


# -- an independent evaluator for the corpus check (no eval, no align) --------------------
def _evaluate(expr: str) -> int:
    """Integer arithmetic with + - * and parentheses, usual precedence, by recursive descent."""
    toks = re.findall(r"\d+|[-+*()]", expr)
    pos = 0

    def atom():
        nonlocal pos
        t = toks[pos]
        pos += 1
        if t == "(":
            v = expr_()
            pos += 1  # ")"
            return v
        return int(t)

    def term():
        nonlocal pos
        v = atom()
        while pos < len(toks) and toks[pos] == "*":
            pos += 1
            v *= atom()
        return v

    def expr_():
        nonlocal pos
        v = term()
        while pos < len(toks) and toks[pos] in "+-":
            op = toks[pos]
            pos += 1
            v = v + term() if op == "+" else v - term()
        return v

    return expr_()


def test_problems_are_correct_and_have_the_asked_number_of_operations():
    from align.demo import data

    rng = random.Random(5)
    for n_ops in (1, 2, 3, 4, 6):
        for _ in range(200):
            line = data.problem(rng, n_ops)
            expr, answer = line.split("=")
            assert int(answer) == _evaluate(expr), line
            assert sum(expr.count(c) for c in "+-*") == n_ops, (
                line
            )  # operands are non-negative: every sign is an operation
            assert set(line) <= set(data.ALPHABET)


def test_corpus_is_seeded_and_respects_the_operation_range():
    from align.demo import data

    a = data.training_text(5000, seed=3, min_ops=2, max_ops=3)
    assert a == data.training_text(5000, seed=3, min_ops=2, max_ops=3)
    assert a != data.training_text(5000, seed=4, min_ops=2, max_ops=3)
    assert len(a) >= 5000
    ops = [sum(line.split("=")[0].count(c) for c in "+-*") for line in a.splitlines()]
    assert set(ops) == {2, 3}
    docs = data.heldout_documents(10, seed=3, lines_per_doc=4, min_ops=1, max_ops=1)
    assert len(docs) == 10 and all(len(d.splitlines()) == 4 for d in docs)
    assert not set(docs) & set(
        a.splitlines()
    )  # another stream (documents of 4 lines vs single lines)


def test_bad_operation_range_is_refused():
    from align.demo import data
    from align.errors import AlignError

    with pytest.raises(AlignError) as e:
        data.training_text(100, seed=0, min_ops=3, max_ops=2)
    assert "3..2" in str(e.value) and "\n" not in str(e.value)


def test_tokenizer_is_char_level_and_loads_like_a_checkpoint(tmp_path):
    # Saved beside a Qwen2 config.json, as in a trained demo model: the layout where loading
    # through AutoTokenizer put Qwen2's byte-level pre-tokenizer in and dropped every newline.
    from align.demo import data, tokenizer
    from align.demo.train import TrainConfig, qwen2_config
    from align.models import ModelSpec, load_tokenizer

    tokenizer.save(str(tmp_path))
    qwen2_config(TrainConfig(n_layers=1, d_model=16), len(data.ALPHABET) + 1).save_pretrained(
        str(tmp_path)
    )
    tok = load_tokenizer(ModelSpec(str(tmp_path)))
    assert tok.is_fast and len(tok) == len(data.ALPHABET) + 1
    text = "12*(3-4)=-12\n7+8=15\n\n1=1"
    enc = tok(text, return_offsets_mapping=True)
    assert enc["input_ids"] == [
        data.ALPHABET.index(c) + 1 for c in text
    ]  # no BOS, one id per character, "\n" kept
    assert enc["offset_mapping"] == [(k, k + 1) for k in range(len(text))]
    assert tok.decode(enc["input_ids"]) == text
    assert tok("x")["input_ids"] == [tok.unk_token_id] == [0]


def test_training_is_seeded_cached_and_learns(tmp_path):
    import torch
    from safetensors.torch import load_file

    from align.demo.train import TrainConfig, train

    cfg = TrainConfig(
        n_layers=1, d_model=32, tokens=5120, seq_len=32, batch_size=8, warmup_steps=3, lr=1e-2
    )
    a = train(cfg, str(tmp_path / "a"), log=lambda m: None)
    train(cfg, str(tmp_path / "b"), log=lambda m: None)
    wa, wb = (
        load_file(str(tmp_path / "a" / "model.safetensors")),
        load_file(str(tmp_path / "b" / "model.safetensors")),
    )
    assert wa.keys() == wb.keys() and all(
        torch.equal(wa[k], wb[k]) for k in wa
    )  # same seed, same weights
    assert a["tokens_seen"] == 20 * 8 * 32 and a["key"] == cfg.key()
    assert (
        a["heldout_loss_trained"] < a["heldout_loss_init"] - 0.1
    )  # better than the first step by a margin
    mtime = os.path.getmtime(tmp_path / "a" / "model.safetensors")
    logs = []
    again = train(cfg, str(tmp_path / "a"), log=logs.append)
    assert again == a and os.path.getmtime(tmp_path / "a" / "model.safetensors") == mtime
    assert "reusing" in logs[0]
    other = TrainConfig(
        n_layers=1,
        d_model=32,
        tokens=3000,
        seq_len=32,
        batch_size=8,
        warmup_steps=3,
        lr=1e-2,
        seed=1,
    )
    assert other.key() != cfg.key()


def test_demo_pipeline_end_to_end(demo_run):
    import xarray as xr

    out, report = demo_run
    # Every store opens with plain xarray.open_zarr (activation stores as groups of arrays too).
    for name, path in report.results.items():
        ds = xr.open_zarr(path, consolidated=False)
        assert ds.attrs["align"]["schema"] in name or name.startswith("alignment"), name
    for name, path in report.stores.items():
        xr.open_zarr(path, consolidated=False)
    trained = xr.open_zarr(report.results["alignment"], consolidated=False)
    control = xr.open_zarr(report.results["alignment-control"], consolidated=False)
    assert list(trained.source_boundary.values) == [0, 1, 2] and list(
        trained.target_boundary.values
    ) == [0, 1, 2, 3, 4]
    assert (
        control.attrs["target"]["random_init"] is True
        and trained.attrs["target"]["random_init"] is False
    )
    assert (
        control.attrs["target_model"] == trained.attrs["target_model"]
    )  # same architecture and folder
    # The summary prints each matrix's argmin path, recomputed here from the matrix (i, j >= 1).
    for ds in (trained, control):
        err = ds["relative_error"].sel(source_boundary=[1, 2], target_boundary=[1, 2, 3, 4]).values
        path = [int(j) + 1 for j in np.argmin(err, axis=1)]
        assert f"argmin path j*(i), i = [1, 2]: {path}" in report.summary
    for name in ("shallow", "deep"):
        assert f"model {name}" in report.summary
        depth = xr.open_zarr(report.results[f"depth-{name}"], consolidated=False)
        assert list(depth.rule.values) == ["cosine", "kl", "overlap"]
    expected = {
        "alignment": (1800, 750),
        "contributions": (1200, 500),
        "lens": (1200, 500),
        "skipping": (1200, 900),
    }
    for name, png in report.figures.items():
        with Image.open(png) as im:
            assert im.size == expected[name.split("-")[0]], (
                name
            )  # the trained pair beside its control: two panels
    assert set(report.figures) >= {
        "alignment",
        "alignment-r2",
        "contributions-deep",
        "lens-deep",
        "skipping-deep",
    }
    with open(os.path.join(out, "demo.json"), encoding="utf-8") as f:
        assert json.load(f)["summary"] == report.summary


def test_the_demo_is_a_study_with_its_report(demo_run):
    """Every seed's extractions and fits (the first seed's analyses and the BPE model too) are
    the units of one study, each seed's models a replicate (NAME@K) of shallow and deep (its
    study.json records them done), the demo's stores and results are links to the study's
    outputs, and the report opens at OUT/report: each cell's hover value on its pair page is
    the result's number (read here with xarray)."""
    import xarray as xr

    out, report = demo_run
    units = {}
    for k in (1, 2):
        s, d = f"shallow@{k}", f"deep@{k}"
        units.update(
            {
                f"extract {s}": f"stores/{s}.zarr",
                f"extract {d}": f"stores/{d}.zarr",
                f"extract {d}.random": f"stores/{d}.random.zarr",
                f"fit {s}->{d}": f"results/fits/{s}--{d}.zarr",
                f"fit {s}->{d}.random": f"results/fits/{s}--{d}.random.zarr",
                f"fit {s}->deep-bpe": f"results/fits/{s}--deep-bpe.zarr",
            }
        )
    units.update(
        {
            "extract deep-bpe": "stores/deep-bpe.zarr",
            **{
                f"{kind} {name}@1": f"results/{kind}/{name}@1.zarr"
                for name in ("shallow", "deep")
                for kind in ("contrib", "lens", "skip", "depth")
            },
            "replicates": "results/replicates.json",
            "report": "report",
        }
    )
    with open(os.path.join(out, "study", "study.json"), encoding="utf-8") as f:
        state = json.load(f)["units"]
    assert {n: (u["state"], u["output"]) for n, u in state.items()} == {
        n: ("done", rel) for n, rel in units.items()
    }
    for k, x in enumerate(report.seeds, start=1):
        for name, rel in (
            ("shallow", f"stores/shallow@{k}.zarr"),
            ("control", f"stores/deep@{k}.random.zarr"),
        ):
            assert os.path.islink(x["stores"][name])
            assert os.path.samefile(x["stores"][name], os.path.join(out, "study", rel))
        for name, rel in (
            ("alignment", f"results/fits/shallow@{k}--deep@{k}.zarr"),
            ("alignment-control", f"results/fits/shallow@{k}--deep@{k}.random.zarr"),
        ):
            assert os.path.samefile(x["results"][name], os.path.join(out, "study", rel))
    assert os.path.samefile(os.path.join(out, "report"), os.path.join(out, "study", "report"))
    ds = xr.open_zarr(report.results["alignment"], consolidated=False)
    page = open(
        os.path.join(out, "report", "pairs", "shallow@1--deep@1.html"), encoding="utf-8"
    ).read()
    cells = re.findall(
        r'title="source boundary (\d+), target boundary (\d+): relative_error ([-0-9.e]+)', page
    )
    assert len(cells) == ds["relative_error"].size
    for i, j, value in cells:
        want = float(ds["relative_error"].sel(source_boundary=int(i), target_boundary=int(j)))
        assert abs(float(value) - want) <= 5e-7, (i, j, value, want)
    # Each replicate is shown by its training seed (the demo's study file labels them).
    across = open(os.path.join(out, "report", "replicates.html"), encoding="utf-8").read()
    for k, x in enumerate(report.seeds, start=1):
        s = x["seed"]
        assert f"shallow@{k} (seed {s}) → deep@{k} (seed {s})" in across, across


def _section(page: str, kind: str) -> str:
    """The part of a model page under its <h2>kind</h2>, up to the next <h2>."""
    assert f"<h2>{kind}</h2>" in page, kind
    return page.split(f"<h2>{kind}</h2>", 1)[1].split("<h2>", 1)[0]


def _column(section: str, header: str) -> dict:
    """{row label: cell text} of the column `header` of the section's first table."""
    table = section.split("<table", 1)[1].split("</table>", 1)[0]
    table = re.sub(r'<span class="note">.*?</span>', "", table)  # a degenerate interval's note
    rows = [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r) for r in table.split("<tr>")[1:]]
    k = rows[0].index(header)
    return {r[0]: r[k] for r in rows[1:]}


def test_the_demo_report_shows_each_analysed_model(demo_run):
    """The first seed's analyses are its study's units, so the report's page of each analysed
    model shows contributions, lens, skipping and depth: each a figure, and numbers that are
    the result files' (read here with xarray, formatted as the page writes them: 4 decimals).
    The demo's result paths are links to those files."""
    import xarray as xr

    out, report = demo_run
    for name in ("shallow", "deep"):
        page = open(
            os.path.join(out, "report", "models", f"{name}@1.html"), encoding="utf-8"
        ).read()
        assert "No analysis" not in page
        for kind, result in (
            ("contrib", "contributions"),
            ("lens", "lens"),
            ("skip", "skipping"),
            ("depth", "depth"),
        ):
            path = report.results[f"{result}-{name}"]
            assert os.path.islink(path)
            assert os.path.samefile(
                path, os.path.join(out, "study", "results", kind, f"{name}@1.zarr")
            )
            assert f'aria-label="{kind} of {name}@1"' in _section(page, kind)
        ds = xr.open_zarr(report.results[f"contributions-{name}"], consolidated=False)
        shown = _column(_section(page, "contrib"), "resid_cos mean [95%]")
        assert shown == {
            str(layer): "{:.4f} [{:.4f}, {:.4f}]".format(
                float(ds["resid_cos"].sel(layer=layer, agg="mean")),
                *(float(ds[f"resid_cos_{e}"].sel(layer=layer)) for e in ("low", "high")),
            )
            for layer in ds["layer"].values
        }
        ds = xr.open_zarr(report.results[f"lens-{name}"], consolidated=False)
        shown = _column(_section(page, "lens"), "kl token [95%]")
        cell = {"weighting": "token"}
        assert shown == {
            str(b): "{:.4f} [{:.4f}, {:.4f}]".format(
                *(float(ds[v].sel(boundary=b, **cell)) for v in ("kl", "kl_low", "kl_high"))
            )
            for b in ds["boundary"].values
        }
        ds = xr.open_zarr(report.results[f"skipping-{name}"], consolidated=False)
        shown = _column(_section(page, "skip"), "O current layer (max)")
        cell = {"setting": "current", "part": "layer", "agg": "max"}
        assert shown == {
            f"layer {s}": "{:.4f} [{:.4f}, {:.4f}]".format(
                *(float(ds[v].sel(skipped=s, **cell)) for v in ("O", "O_low", "O_high"))
            )
            for s in ds["skipped"].values
        }
        ds = xr.open_zarr(report.results[f"depth-{name}"], consolidated=False)
        shown = _column(_section(page, "depth"), "ratio [95%]")
        want = {}
        for rule in ds["rule"].values:
            v, lo, hi = (float(ds[x].sel(rule=rule)) for x in ("ratio", "ratio_low", "ratio_high"))
            text = f"{v:.4f}" if np.isfinite(v) else "—"
            want[str(rule)] = text + (
                f" [{lo:.4f}, {hi:.4f}]" if np.isfinite(lo) and np.isfinite(hi) else ""
            )
        assert shown == want


def test_the_demo_report_pairs_the_bpe_model_on_the_text(demo_run):
    """The char-anchor pair shallow -> deep-bpe is a pair of the first seed's study: its page
    exists, states each side's coverage as the result records it, and its cells' hover values
    are the result's relative errors; the index's grid cell states the coverage too."""
    import xarray as xr

    out, report = demo_run
    ds = xr.open_zarr(report.results["alignment-bpe"], consolidated=False)
    assert os.path.samefile(
        report.results["alignment-bpe"],
        os.path.join(out, "study", "results", "fits", "shallow@1--deep-bpe.zarr"),
    )
    p = ds.attrs["pairing"]
    coverage = (
        f"coverage source {100 * p['source']['coverage']:.1f}%, "
        f"target {100 * p['target']['coverage']:.1f}%"
    )
    page = open(
        os.path.join(out, "report", "pairs", "shallow@1--deep-bpe.html"), encoding="utf-8"
    ).read()
    assert coverage in page and p["mode"] == "char-anchors"
    cells = re.findall(
        r'title="source boundary (\d+), target boundary (\d+): relative_error ([-0-9.e]+)', page
    )
    assert len(cells) == ds["relative_error"].size
    for i, j, value in cells:
        want = float(ds["relative_error"].sel(source_boundary=int(i), target_boundary=int(j)))
        assert abs(float(value) - want) <= 5e-7, (i, j, value, want)
    index = open(os.path.join(out, "report", "index.html"), encoding="utf-8").read()
    assert 'href="pairs/shallow@1--deep-bpe.html"' in index and coverage in index


def test_trained_demo_model_loads_through_extract_like_a_checkpoint(demo_run):
    from align.store import open_activations

    _, report = demo_run
    s = open_activations(report.stores["deep"])
    assert s.provenance["model_type"] == "qwen2" and s.n_layers == 4 and s.d_model == 48
    assert s.provenance["special_tokens"]["prefix"] == []  # no BOS: position 0 is a character
    c = open_activations(report.stores["control"])
    # The control has the deep model's shape but other weights: the embeddings differ.
    assert c.n_layers == s.n_layers and c.d_model == s.d_model
    assert not np.allclose(c.resid(0, 0, 50), s.resid(0, 0, 50))


def test_demo_second_run_is_cached(demo_run, cli):
    out, report = demo_run
    paths = [report.results[n] for n in ("alignment", "alignment-bpe", "skipping-deep")]
    stamp = {p: os.path.getmtime(p) for p in paths + [report.stores["deep"]]}
    code, stdout, stderr = cli("demo", "--size", "tiny", "-o", out)
    assert code == 0, stderr
    assert report.summary.splitlines()[-1] in stdout  # same numbers
    assert (
        "train" not in stdout.splitlines()[-1] and "fit" not in stdout.splitlines()[-1]
    )  # no step took >= 1 s of those
    assert {p: os.path.getmtime(p) for p in stamp} == stamp
    assert "reusing trained model" in stderr


@pytest.mark.parametrize(
    "args,words",
    [
        (("--tokens", "5"), ["--tokens", "5"]),
        (("--size", "huge"), ["--size", "huge"]),
        (("--seeds", "0"), ["--seeds", "0"]),
        (("--seeds", "two"), ["--seeds", "two"]),
        (("--seeds", "3,3"), ["--seeds", "3,3"]),
        (("--seeds", "1,2", "--seed", "4"), ["--seed", "list"]),
    ],
)
def test_demo_bad_options(cli, tmp_path, args, words):
    code, _, stderr = cli("demo", "-o", tmp_path / "d", *args)
    assert code == 2 and stderr.count("\n") == 1 and stderr.startswith("align: error:")
    for w in words:
        assert w in stderr, stderr
    assert not (tmp_path / "d").exists()


def test_demo_stores_hold_the_training_tokenization_newlines_included(demo_run):
    """The ids in the demo's stores are those of the models' own tokenizer.json read by the
    `tokenizers` library, document by document: newlines are tokens (they were dropped when
    align loaded the tokenizer through AutoTokenizer)."""
    from tokenizers import Tokenizer

    from align.store import open_activations

    out, report = demo_run
    with open(os.path.join(out, "corpus", "heldout.txt"), encoding="utf-8") as f:
        docs = [d for d in f.read().split("\n\n") if d.strip()]
    for name in ("shallow", "deep"):
        ref = Tokenizer.from_file(os.path.join(report.models[name], "tokenizer.json"))
        s = open_activations(report.stores[name])
        ids, doc = s.tokens("token_id"), s.tokens("doc")
        assert len(set(doc.tolist())) == len(docs)
        for d, text in enumerate(docs):
            np.testing.assert_array_equal(
                ids[doc == d], ref.encode(text.strip("\n")).ids, err_msg=f"{name} doc {d}"
            )
        assert (
            (ids == ref.token_to_id("\n")).sum() == sum(t.strip("\n").count("\n") for t in docs) > 0
        )


# -- several seeds --------------------------------------------------------------------------
def _path_stats(ds):
    """(argmin path, slope, mean gap, soft-depth spread) of an alignment result recomputed with
    numpy from its relative_error over boundaries >= 1: j*(i) the argmin, depths i/L_S and
    j/L_T, the least-squares slope of j*/L_T on i/L_S, mean |j*/L_T - i/L_S|, and the soft
    depths sum_j w_ij j/L_T with w ∝ exp(-(err - row min)/tau), tau = (row max - row min)/10."""
    src = ds.source_boundary.values[ds.source_boundary.values >= 1]
    tgt = ds.target_boundary.values[ds.target_boundary.values >= 1]
    err = ds["relative_error"].sel(source_boundary=src, target_boundary=tgt).values
    Ls, Lt = int(ds.source_boundary.values.max()), int(ds.target_boundary.values.max())
    path = tgt[np.argmin(err, axis=1)]
    x, y = src / Ls, path / Lt
    slope = np.polyfit(x, y, 1)[0] if len(x) > 1 else float("nan")
    tau = (err.max(axis=1, keepdims=True) - err.min(axis=1, keepdims=True)) / 10
    w = np.where(
        tau > 0, np.exp(-(err - err.min(axis=1, keepdims=True)) / np.where(tau > 0, tau, 1)), 1.0
    )
    soft = (w / w.sum(axis=1, keepdims=True)) @ (tgt / Lt)
    return (
        [int(j) for j in path],
        float(slope),
        float(np.mean(np.abs(y - x))),
        float(soft.max() - soft.min()),
    )


def test_every_seed_trains_its_own_pair_on_the_same_heldout_documents(demo_run):
    import xarray as xr
    from safetensors.numpy import load_file

    out, report = demo_run
    assert [x["seed"] for x in report.seeds] == [0, 1]
    first, second = report.seeds
    # the first seed's stores and models are the demo's (beside them the third model's, trained once)
    assert {k: v for k, v in report.stores.items() if k != "deep-bpe"} == first["stores"]
    assert {k: v for k, v in report.models.items() if k != "deep-bpe"} == first["models"]
    for name in ("shallow", "deep"):
        assert first["models"][name] != second["models"][name]
        assert second["training"][name]["config"]["seed"] == 1
        a = load_file(os.path.join(first["models"][name], "model.safetensors"))
        b = load_file(os.path.join(second["models"][name], "model.safetensors"))
        assert not np.allclose(a["model.embed_tokens.weight"], b["model.embed_tokens.weight"])
    for path in second["stores"].values():
        assert path.startswith(os.path.join(out, "seeds", "seed-1", "stores"))
    docs = [
        xr.open_zarr(x["results"]["alignment"], consolidated=False).heldout_doc.values.tolist()
        for x in report.seeds
    ]
    assert docs[0] == docs[1]  # the same held-out documents score every seed


def test_across_seed_statistics_match_the_result_stores(demo_run):
    """The per-seed values, mean, sample sd, min and max in the report and in demo.json, against
    the statistics recomputed here from each seed's result stores opened with xarray."""
    import xarray as xr

    out, report = demo_run
    with open(os.path.join(out, "demo.json"), encoding="utf-8") as f:
        saved = json.load(f)
    for st in (report.across, saved["across_seeds"]):
        assert st["seeds"] == [0, 1]
        for pair, result in (("trained", "alignment"), ("control", "alignment-control")):
            mine = [
                _path_stats(xr.open_zarr(x["results"][result], consolidated=False))
                for x in report.seeds
            ]
            assert st[pair]["paths"] == [m[0] for m in mine]
            assert st[pair]["distinct_paths"] == len({tuple(m[0]) for m in mine})
            for k, key in ((1, "slope"), (2, "mean_depth_gap"), (3, "soft_depth_spread")):
                want = np.array([m[k] for m in mine])
                got = st[pair][key]
                np.testing.assert_allclose(got["values"], want, atol=1e-9, err_msg=f"{pair} {key}")
                np.testing.assert_allclose(
                    [got["mean"], got["min"], got["max"], got["sd"]],
                    [want.mean(), want.min(), want.max(), want.std(ddof=1)],
                    atol=1e-9,
                )
            for row, m in zip(st["per_seed"], mine):
                assert row[pair]["argmin_path"] == m[0]
    for line in report.across["sentences"]:
        assert line in report.summary
    assert "Across seeds [0, 1]" in report.summary


def test_the_verdicts_across_seeds_are_the_studys(demo_run):
    """The demo's across-seed record is the study's (results/replicates.json, the pair shallow
    -> deep against its random-init control) with its replicates named by their seeds: the same
    per-seed values and separation sides, and each of the demo's verdicts on a separating
    statistic the study's verdict (its first word) on the same numbers."""
    out, report = demo_run
    with open(os.path.join(out, "study", "results", "replicates.json"), encoding="utf-8") as f:
        record = json.load(f)
    (pair,) = [p for p in record["pairs"] if (p["source"], p["target"]) == ("shallow", "deep")]
    st = pair["against"]["random_init"]
    assert report.across["seeds"] == [0, 1] and st["replicates"] == [1, 2]
    assert report.across["separation"] == st["separation"]
    for key in ("slope", "mean_depth_gap", "soft_depth_spread"):
        for side in ("trained", "control"):
            assert report.across[side][key]["values"] == st[side][key]["values"]
    demo_said = report.across["sentences"][:3]
    study_said = st["sentences"][:3]
    for mine, theirs in zip(demo_said, study_said):
        assert mine.split(":")[0] == theirs.split(":")[0]
        assert mine.replace("seed", "replicate") == theirs


def _summary(slope, gap, spread, path):
    return {
        "slope": slope,
        "mean_depth_gap": gap,
        "soft_depth_spread": spread,
        "spearman": None,
        "argmin_path": path,
        "slope_low": slope,
        "slope_high": slope,
    }


def test_the_robustness_sentences_follow_the_separation_rule():
    """A hand-worked case of three seeds. Slope: trained 0.70..0.90, control 0.10..0.20: every
    trained value above the control's range, separated. Gap: trained 0.08..0.12, control
    0.10..0.50: 0.10 and 0.12 fall in the control's range, not separated. Spread: trained
    0.50..0.60 against control 0.08..0.10: separated. Trained paths: two distinct; control: one."""
    from align.stats import replicates as seeds

    per_seed = [
        {"seed": s, "trained": _summary(*t), "control": _summary(*c)}
        for s, t, c in (
            (0, (0.8, 0.08, 0.5, [2, 4, 6]), (0.1, 0.44, 0.09, [1, 1, 2])),
            (1, (0.7, 0.12, 0.6, [2, 5, 6]), (0.2, 0.10, 0.10, [1, 1, 2])),
            (2, (0.9, 0.10, 0.55, [2, 4, 6]), (0.15, 0.50, 0.08, [1, 1, 2])),
        )
    ]
    st = seeds.statistics(per_seed)
    assert st["separation"] == {
        "slope": "above",
        "mean_depth_gap": None,
        "soft_depth_spread": "above",
    }
    assert st["trained"]["slope"]["mean"] == pytest.approx(0.8) and st["trained"]["slope"][
        "sd"
    ] == pytest.approx(0.1)
    assert (st["control"]["mean_depth_gap"]["min"], st["control"]["mean_depth_gap"]["max"]) == (
        0.10,
        0.50,
    )
    said = st["sentences"]
    assert said[0] == (
        "Robust: the slope separates the trained pair from the control in all 3 seeds "
        "(trained 0.70–0.90, control 0.10–0.20: every trained value lies above the control's range)."
    )
    assert (
        said[1].startswith("Not robust: the mean depth gap does not separate")
        and "trained 0.080–0.120, control 0.100–0.500" in said[1]
    )
    assert said[2].startswith("Robust: the soft-depth spread separates")
    assert said[3] == (
        "Not robust: the trained pair's exact argmin path differs across the seeds "
        "(2 distinct paths in 3 seeds: [2, 4, 6], [2, 5, 6], [2, 4, 6])."
    )
    assert said[4] == "Robust: the control's exact argmin path is [1, 1, 2] in all 3 seeds."
    # Touching ranges do not separate; the gap lying below the control's range does; an undefined
    # slope in one seed leaves the slope undecided.
    per_seed[1]["trained"]["slope"] = 0.2
    per_seed[1]["control"]["mean_depth_gap"] = 0.3
    per_seed[0]["control"]["slope"] = None
    st = seeds.statistics(per_seed)
    assert st["separation"] == {
        "slope": None,
        "mean_depth_gap": "below",
        "soft_depth_spread": "above",
    }
    assert st["sentences"][0].startswith("Not established: the slope is undefined in some seed")
    per_seed[0]["control"]["slope"] = 0.1
    assert (
        seeds.statistics(per_seed)["separation"]["slope"] is None
    )  # trained 0.2 touches the control's 0.2


# -- the third model: another tokenizer -----------------------------------------------------


def test_the_bpe_model_is_paired_with_the_shallow_one_on_the_text(demo_run):
    """The demo's BPE model reads the same held-out documents in other tokens; its result's
    anchored pairs are those a plain loop finds from both models' tokenizer.json read by the
    `tokenizers` library: every BPE token ends where a character does (all of them anchors),
    and the character model's anchors are the characters where a BPE token ends."""
    import xarray as xr
    from tokenizers import Tokenizer

    out, report = demo_run
    with open(os.path.join(out, "corpus", "heldout.txt"), encoding="utf-8") as f:
        docs = [d.strip("\n") for d in f.read().split("\n\n") if d.strip()]
    ends = {}
    for name in ("shallow", "deep-bpe"):
        tok = Tokenizer.from_file(os.path.join(report.models[name], "tokenizer.json"))
        ends[name] = [[e for (_, e) in tok.encode(text).offsets] for text in docs]
    assert sum(map(len, ends["deep-bpe"])) < 0.9 * sum(
        map(len, ends["shallow"])
    )  # the BPE cuts coarser
    pairs = sum(len(set(a) & set(b)) for a, b in zip(ends["shallow"], ends["deep-bpe"]))
    ds = xr.open_zarr(report.results["alignment-bpe"], consolidated=False)
    p = ds.attrs["pairing"]
    assert p["mode"] == "char-anchors" and ds.attrs["options"]["pairing"] == "char-anchors"
    assert p["pairs"] == pairs == sum(map(len, ends["deep-bpe"]))
    assert p["source"]["coverage"] == pairs / sum(map(len, ends["shallow"]))
    assert p["target"]["coverage"] == 1.0
    # the matrix is printed and drawn beside the same-tokenizer pair
    err = ds["relative_error"].sel(source_boundary=[1, 2], target_boundary=[1, 2, 3, 4]).values
    path = [int(j) + 1 for j in np.argmin(err, axis=1)]
    line = report.summary.split("with a BPE tokenizer")[1]
    assert f"argmin path j*(i), i = [1, 2]: {path}" in line.split("\n")[1]
    assert "alignment-tokenizers" in report.figures
