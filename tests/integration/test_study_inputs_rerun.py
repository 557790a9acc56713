"""A study rerun after its inputs' files were rewritten in place: a model's tokenizer.json
(reformatted: the same tokenizer) reruns that model's extraction and what reads it, naming the
file; a corpus with one more document reruns every extraction, and the new stores hold the
documents the file now has (counted here from the file). Before, the rerun said "0 unit(s)
run" and kept the old stores, fits and report."""

from __future__ import annotations

import json
import shutil

from tests.helpers.fixtures_study import B_SHAPE, study_text


def ran(lines) -> list:
    return [
        line.removeprefix("align study: run ")
        for line in lines
        if line.startswith("align study: run ")
    ]


def test_rewritten_inputs_rerun_what_reads_them(zoo, corpus_file, tmp_path):
    from align.store import open_activations
    from align.study import load_study, run_study

    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(zoo("qwen2"), a)
    shutil.copytree(zoo("qwen2", **B_SHAPE), b)
    docs = tmp_path / "docs.txt"
    shutil.copyfile(corpus_file, docs)
    text = study_text(zoo, str(docs), models=("a", "b"))
    text = text.replace(zoo("qwen2", **B_SHAPE), str(b)).replace(zoo("qwen2"), str(a))
    path = tmp_path / "s.toml"
    path.write_text(text, encoding="utf-8")
    root = str(tmp_path / "out")

    def run():
        lines = []
        run_study(load_study(str(path)), root, log=lines.append)
        return ran(lines)

    assert run() == ["extract a (new)", "extract b (new)", "fit a->b (new)", "report (new)"]
    tokenizer = b / "tokenizer.json"
    tokenizer.write_text(json.dumps(json.loads(tokenizer.read_text("utf-8")), indent=2), "utf-8")
    assert run() == [
        "extract b (changed: tokenizer.json of model b)",
        "fit a->b (an input changed: extract b)",
        "report (an input changed: extract b, fit a->b)",
    ]
    assert run() == []

    with open(docs, "a", encoding="utf-8") as f:
        f.write("\n\nA thirteenth document, added after the study ran.\n")
    n_docs = len([d for d in docs.read_text("utf-8").split("\n\n") if d.strip()])
    assert n_docs == 13
    assert run() == [
        f"extract a (changed: corpus file {docs})",
        f"extract b (changed: corpus file {docs})",
        "fit a->b (an input changed: extract a, extract b)",
        "report (an input changed: extract a, extract b, fit a->b)",
    ]
    for name in "ab":
        store = open_activations(f"{root}/stores/{name}.zarr")
        assert store.complete and store.provenance["counts"]["n_docs"] == n_docs
