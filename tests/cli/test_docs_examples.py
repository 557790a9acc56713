"""Every command line of docs/commands/*.md that reads the demo's output runs against the
demo's layout (models as the demo names them: a cached folder per seed and the links
`align.demo.pipeline.link_models` makes, the corpus, the stores and results): with the shell's
own glob expansion, each parses with no unexpected argument and names only paths the demo
writes; the commands that run a model take `--dry-run` and run it."""

from __future__ import annotations

import glob
import os
import re
import shlex
from pathlib import Path

import click
import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "commands"
# The demo's corpus: documents of a few sums a line, blank lines between them
CORPUS = "\n".join("".join(f"{a} + {b} = {a + b}\n" for b in range(2, 5)) for a in range(3, 13))
# What the demo writes besides its models (align/demo/pipeline.py, docs/commands/demo.md)
STORES = ("shallow", "deep", "control", "deep-bpe")
RESULTS = ["alignment", "alignment-control", "alignment-bpe"] + [
    f"{kind}-{name}"
    for kind in ("contributions", "lens", "skipping", "depth")
    for name in ("shallow", "deep")
]
PLANNED = {"extract", "skip", "lens", "contrib"}  # commands with a --dry-run that runs the model


def documented_commands() -> list[str]:
    """The `align ...` lines of the command pages' code blocks that read demo-output/, with
    continuation lines joined, a shell loop's variable set to 1, a pipe's tail cut."""
    out = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8").replace("\\\n", " ")
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("align ") and "demo-output/" in line:
                line = line.split(" | ")[0].split("  #")[0].replace("$n", "1")
                out.append(f"{page.name}: {line}")
    return out


@pytest.fixture(scope="module")
def demo_output(zoo, tmp_path_factory):
    """A folder holding demo-output/ as the demo lays it out: two seeds' cached models (the
    zoo's, one tokenizer; the deep model with 3 layers) and the BPE model, linked by the demo's
    own link_models; the corpus; empty stores and results (only parsed)."""
    from align.demo.pipeline import link_models

    root = tmp_path_factory.mktemp("docs-examples")
    out = root / "demo-output"
    (out / "models").mkdir(parents=True)
    shallow, deep = zoo("qwen2"), zoo("qwen2", num_hidden_layers=3)
    first = {}
    for seed, key in enumerate(("4f2a9c01b3de", "0123456789ab")):
        for name, folder in (("shallow", shallow), ("deep", deep)):
            path = out / "models" / f"{name}-{key}{seed}"
            os.symlink(folder, path)
            first.setdefault(name, str(path))
    bpe = out / "models" / "deep-bpe-aaaaaaaaaaaa"
    os.symlink(zoo("llama"), bpe)
    link_models(str(out), {**first, "deep-bpe": str(bpe)})
    (out / "corpus").mkdir()
    (out / "corpus" / "heldout.txt").write_text(CORPUS, encoding="utf-8")
    for name in STORES:
        (out / "stores" / f"{name}.zarr").mkdir(parents=True)
    for name in RESULTS:
        (out / "results" / f"{name}.zarr").mkdir(parents=True)
    (out / "report").mkdir()
    (out / "report" / "index.html").write_text("", encoding="utf-8")
    return root


def test_the_demo_links_name_one_model_each(demo_output):
    models = demo_output / "demo-output" / "models"
    assert len(glob.glob(str(models / "deep-*"))) == 4  # two seeds, the BPE model and its link
    assert os.readlink(models / "deep") == "deep-4f2a9c01b3de0"  # the first seed's
    assert os.readlink(models / "shallow") == "shallow-4f2a9c01b3de0"


def test_a_run_with_other_models_moves_the_links(tmp_path):
    from align.demo.pipeline import link_models

    (tmp_path / "models" / "deep-a").mkdir(parents=True)
    (tmp_path / "models" / "deep-b").mkdir()
    link_models(str(tmp_path), {"deep": str(tmp_path / "models" / "deep-a")})
    link_models(str(tmp_path), {"deep": str(tmp_path / "models" / "deep-b")})
    assert os.readlink(tmp_path / "models" / "deep") == "deep-b"
    assert sorted(os.listdir(tmp_path / "models")) == ["deep", "deep-a", "deep-b"]


def test_the_pages_have_examples():
    pages = {line.split(":")[0] for line in documented_commands()}
    assert {"skip.md", "lens.md", "contrib.md", "fit.md", "erase.md", "igrad.md"} <= pages


def _parse(args: list[str]) -> None:
    """The command's own click parsing (no run): a UsageError for an unexpected argument."""
    from align.cli.main import cli

    name = args[0]
    command = cli.get_command(None, name)
    # under align's own context, as `align NAME ...` parses: a command's first context fixes
    # its help option (click caches it), and a parentless one would drop the group's -h
    parent = click.Context(cli, info_name="align", **cli.context_settings)
    command.make_context(name, args[1:], parent=parent)


@pytest.mark.parametrize("example", documented_commands())
def test_documented_command_runs_on_the_demo_output(example, demo_output, cli, monkeypatch):
    monkeypatch.chdir(demo_output)
    args = []
    for word in shlex.split(example.split(": ", 1)[1])[1:]:
        found = sorted(glob.glob(word)) if glob.has_magic(word) else [word]
        args += found or [word]  # as the shell does: no match keeps the word
    for word in args:
        if word.startswith("demo-output/"):
            assert os.path.exists(word), f"{example}: {word} is not in the demo's output"
    try:
        _parse(args)
    except click.UsageError as e:
        pytest.fail(f"{example}: {e.format_message()}")
    live = args[0] in PLANNED and "--store" not in args
    live = live or (args[0] == "fit" and "--live" in args)
    if not live:
        return
    if "--dry-run" not in args:
        args.append("--dry-run")
    args = [re.sub(r"^(results|acts)/", "out/", a) for a in args]
    code, _, err = cli(*args)
    assert code == 0, f"{example}\n{err}"
    assert "--dry-run" in err and not os.path.exists("out"), err


def test_readme_paths_are_the_demo_s(demo_output):
    """The README's Python examples read the demo's output: every demo-output/ path they name
    is one the demo writes."""
    readme = (DOCS.parents[1] / "README.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"demo-output/[\w./-]+", readme))
    assert paths, "the README names no demo output"
    missing = [p for p in sorted(paths) if not (demo_output / p.rstrip("/.")).exists()]
    assert not missing, missing
