"""`align study` end to end on three tiny models (two tokenizers): every unit's output equals
what the single command gives with the same options, bit for bit; a second run runs nothing;
an edit reruns only the units it changes, saying why; a second study on the same DIR is
refused in one line; `align info DIR` shows every unit's state."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

from align.corpus import CorpusSpec
from align.fitting import FitSpec
from align.models import ModelSpec
from tests.helpers.fixtures_study import B_SHAPE, study_text

UNITS = [
    "extract a",
    "extract b",
    "extract c",
    "fit a->b",
    "fit a->b shuffle",
    "fit a->c",
    "fit a->c shuffle",
    "contrib a",
    "lens a",
    "depth a",
    "report",
]


def same_dataset(x, y):
    """Every variable, coordinate and the summary equal, bit for bit (NaN where NaN)."""
    assert sorted(x.data_vars) == sorted(y.data_vars)
    for name in list(x.data_vars) + list(x.coords):
        np.testing.assert_array_equal(x[name].values, y[name].values, err_msg=name)
    assert x.attrs.get("summary") == y.attrs.get("summary")


def test_every_unit_ran_once_in_order(tiny_study):
    _, root, lines = tiny_study
    ran = [
        line.split(" (")[0].removeprefix("align study: run ")
        for line in lines
        if line.startswith("align study: run ")
    ]
    assert ran == UNITS
    assert all(line.endswith("(new)") for line in lines if line.startswith("align study: run "))


def test_results_equal_the_single_commands(tiny_study, extracted, zoo, corpus_file):
    """The stores against `extracted` (align.extract with its defaults, the study's), the fits
    against align.fit on those stores, the analyses against align.analyses.run's functions."""
    import align
    from align.analyses import run as analyses
    from align.stats.bootstrap import Resampling
    from align.store import open_activations, open_result

    _, root, _ = tiny_study
    stores = {"a": extracted("qwen2"), "b": extracted("qwen2", model_overrides=B_SHAPE)}
    stores["c"] = extracted("llama")
    for name, single in stores.items():
        mine, theirs = open_activations(f"{root}/stores/{name}.zarr"), open_activations(single)
        assert mine.boundaries == theirs.boundaries and mine.n_tokens == theirs.n_tokens
        for b in mine.boundaries:
            np.testing.assert_array_equal(mine.resid(b), theirs.resid(b))
        for t in ("token_id", "doc", "pos"):
            np.testing.assert_array_equal(mine.tokens(t), theirs.tokens(t))
    for target, control in (("b", None), ("b", "shuffle"), ("c", None)):
        report = align.fit(
            stores["a"],
            stores[target],
            None,
            FitSpec(bootstrap=200, control=control),
            log=lambda m: None,
        )
        stem = f"a--{target}" + (f".{control}" if control else "")
        same_dataset(open_result(f"{root}/results/fits/{stem}.zarr"), report.dataset)
    out = os.path.join(os.path.dirname(root), "single-contrib.zarr")
    analyses.run_contrib(
        out,
        spec=ModelSpec(zoo("qwen2")),
        cspec=CorpusSpec(corpus_file),
        resampling=Resampling(200),
        log=lambda m: None,
    )
    same_dataset(open_result(f"{root}/results/contrib/a.zarr"), open_result(out))


def test_a_second_run_runs_nothing(tiny_study):
    from align.study import load_study, run_study

    path, root, _ = tiny_study
    lines = []
    report = run_study(load_study(path), root, log=lines.append)
    assert report.ran == [] and report.skipped == UNITS and lines == []


def test_an_edit_reruns_only_its_units_and_says_why(tiny_study, zoo, corpus_file, tmp_path):
    from align.store import open_result
    from align.study import load_study, run_study

    _, root, _ = tiny_study
    copy = str(tmp_path / "out")
    shutil.copytree(root, copy)
    path = tmp_path / "edited.toml"
    path.write_text(study_text(zoo, corpus_file, "[fit]\nseed = 1\n"), encoding="utf-8")
    lines = []
    report = run_study(load_study(str(path)), copy, log=lines.append)
    fits = [u for u in UNITS if u.startswith("fit ")]
    assert report.ran == fits + ["report"]
    for u in fits:
        assert f"align study: run {u} (options changed: spec.seed)" in lines
    assert open_result(f"{copy}/results/fits/a--b.zarr").attrs["options"]["seed"] == 1


def test_a_second_study_on_one_dir_is_refused_in_one_line(tiny_study, cli):
    path, root, _ = tiny_study
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom align.store import write_lock\n"
            f"with write_lock({root!r}):\n    print('held', flush=True)\n    time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        t = time.time()
        code, out, err = cli("study", path, "-o", root)
        assert time.time() - t < 30
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"align: error: study {root} is being written by another process (")
    assert f"pid {holder.pid}" in err


def test_info_shows_every_unit(tiny_study, cli):
    _, root, _ = tiny_study
    code, out, _ = cli("info", root)
    assert code == 0
    rows = out.splitlines()[1:]
    assert all(r.startswith("  done     ") for r in rows), out
    assert [re.sub(r" [0-9.]+ s$", "", r[11:]) for r in rows] == UNITS


def test_dry_run_lists_every_unit_and_refuses_a_full_disk(
    cli, monkeypatch, zoo, corpus_file, tmp_path
):
    two = tmp_path / "two.toml"
    two.write_text(study_text(zoo, corpus_file, models=("a", "b")), encoding="utf-8")
    code, out, _ = cli("study", two, "-o", tmp_path / "plan", "--dry-run")
    assert code == 0
    rows = out.splitlines()[2:-1]
    assert [r[2:36].strip() for r in rows] == ["extract a", "extract b", "fit a->b", "report"]
    assert "MiB" in rows[0] and out.splitlines()[-1].startswith("  total: disk ")
    assert not (tmp_path / "plan").exists()
    monkeypatch.setenv("ALIGN_FREE_DISK_BYTES", "1000")
    code, _, err = cli("study", two, "-o", tmp_path / "plan", "--dry-run")
    assert code == 2 and err.count("\n") == 1
    assert "needs ~" in err and "on disk and 1000 B is free" in err


def test_report_elsewhere_never_replaces_other_files(tiny_study, cli, tmp_path):
    _, root, _ = tiny_study
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    code, _, err = cli("report", root, "-o", tmp_path)
    assert code == 2 and err == (
        f"align: error: -o {tmp_path} exists and is not a report (no .align-report): give a new or "
        "empty folder\n"
    )
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"
    # A report is replaced: the study's own report, copied here with a page taken out, is
    # written again whole (a new folder's report is the study's own run; an empty study's
    # report, new and replaced, tests/cli/test_study_harm.py).
    shutil.copytree(os.path.join(root, "report"), tmp_path / "r")
    os.remove(tmp_path / "r" / "pairs" / "a--c.html")
    code, _, _ = cli("report", root, "-o", tmp_path / "r")
    assert code == 0 and (tmp_path / "r" / "pairs" / "a--c.html").is_file()


def test_a_live_study_equals_align_fit_live(zoo, corpus_file, tmp_path):
    """`[route] kind = "live"`: no store; the pair's result, and its shuffle control's, equal
    `fit_live`'s bit for bit."""
    from align.fitting.fit_options import LiveJob
    from align.fitting.live_route.pipeline import fit_live
    from align.store import open_result
    from align.study import load_study, run_study

    path = tmp_path / "live.toml"
    text = study_text(zoo, corpus_file, "[route]\nkind = 'live'\n", models=("a", "b"))
    path.write_text(text.replace("shuffle = false", "shuffle = true"), encoding="utf-8")
    root = str(tmp_path / "out")
    report = run_study(load_study(str(path)), root, log=lambda m: None)
    assert report.ran == ["fit a->b", "fit a->b shuffle", "report"]
    assert not os.path.exists(f"{root}/stores")
    job = LiveJob(
        ModelSpec(zoo("qwen2")), ModelSpec(zoo("qwen2", **B_SHAPE)), CorpusSpec(corpus_file)
    )
    for stem, control in (("a--b", None), ("a--b.shuffle", "shuffle")):
        spec = FitSpec(bootstrap=200, control=control)
        expected = fit_live(job, None, spec, log=lambda m: None).dataset
        same_dataset(open_result(f"{root}/results/fits/{stem}.zarr"), expected)


def test_dry_run_of_a_done_study_marks_every_unit_skipped(tiny_study, cli):
    path, root, _ = tiny_study
    code, out, _ = cli("study", path, "-o", root, "--dry-run")
    assert code == 0
    rows = out.splitlines()[2:-1]
    assert [r[2:36].strip() for r in rows] == UNITS
    assert all(r.endswith("(done: skipped)") and " 0 B " in r for r in rows), out
    assert out.splitlines()[-1].startswith("  total: disk 0 B of ")


def test_contrib_and_lens_read_the_stores_and_skip_reads_skip_docs(zoo, corpus_file, tmp_path, cli):
    """With `[extraction] sublayers = true` contrib and lens read each model's store (no
    second forward): their results equal those of `run_contrib`/`run_lens` on the model over
    the same corpus, every variable within rtol 1e-5, atol 1e-6 (float32 sums in another
    order: the store is read in chunks, the model runs in batches), the lens's top-5 overlap
    within 1e-3 (a rare tie may flip). `[analyses] skip_docs = 3` reaches the skip result:
    3 prompts, the corpus's first 3 documents of its 12 (counted here from the file). The plan
    says what each such unit reads."""
    from align.analyses import run as analyses
    from align.analyses.analysis_options import LensOptions
    from align.corpus import CorpusSpec
    from align.models import ModelSpec
    from align.stats.bootstrap import Resampling
    from align.store import open_result
    from align.study import load_study, run_study

    text = study_text(zoo, corpus_file, models=("a", "b")).replace(
        "analyses = []", 'analyses = ["contrib", "lens", "skip"]'
    )
    path = tmp_path / "stored.toml"
    path.write_text(text + "[extraction]\nsublayers = true\n[analyses]\nskip_docs = 3\n", "utf-8")
    root = str(tmp_path / "out")
    report = run_study(load_study(str(path)), root, log=lambda m: None)
    assert report.ran[:4] == ["extract a", "extract b", "fit a->b", "contrib a"]
    spec, cspec, resampling = ModelSpec(zoo("qwen2")), CorpusSpec(corpus_file), Resampling(200)
    quiet = dict(spec=spec, cspec=cspec, resampling=resampling, log=lambda m: None)
    live = {
        "contrib": analyses.run_contrib(str(tmp_path / "contrib.zarr"), **quiet),
        "lens": analyses.run_lens(str(tmp_path / "lens.zarr"), options=LensOptions(), **quiet),
    }
    for kind, reference in live.items():
        mine, theirs = open_result(f"{root}/results/{kind}/a.zarr"), open_result(reference)
        assert mine.attrs["source"] == "store" and theirs.attrs.get("source") != "store"
        assert os.path.samefile(mine.attrs["store"], f"{root}/stores/a.zarr")
        assert mine.attrs["prompts_hash"] == theirs.attrs["prompts_hash"]  # the same prompts
        assert sorted(mine.data_vars) == sorted(theirs.data_vars)
        for name in mine.data_vars:
            atol = 1e-3 if name.startswith("overlap") else 1e-6
            np.testing.assert_allclose(
                mine[name].values, theirs[name].values, rtol=1e-5, atol=atol, err_msg=name
            )
    code, out, _ = cli("study", path, "-o", tmp_path / "plan", "--dry-run")
    rows = {r[2:36].strip(): r for r in out.splitlines()[2:-1]}
    assert code == 0 and rows["contrib a"].endswith(
        "(reads stores/a.zarr, no forward: as long as the extraction's encoding and writes)"
    )
    assert rows["skip a"].endswith("(not estimated; the first 3 documents)")
    with open(corpus_file, encoding="utf-8") as f:
        documents = [d for d in f.read().split("\n\n") if d.strip()]
    assert len(documents) == 12
    skipped = open_result(f"{root}/results/skip/a.zarr")
    assert skipped.sizes["prompt"] == 3
    assert skipped.attrs["n_prompts_by_setting"]["current"] == 3
