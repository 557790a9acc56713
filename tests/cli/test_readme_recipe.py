"""The README's real-model recipe ("The study on real models (GPU)") runs as written, end to
end, with tiny stand-ins: each hub id is a tiny model of the same family saved here (the 14B's
stand-in deeper and wider than the 1.5B's), `corpus.jsonl` a small JSON-lines corpus, and
`--device cuda` the CPU (this machine has no GPU; `--device auto` stays as written). The 14B
stores keep every other boundary (`--boundaries ::2`), so the fits' default boundaries must be
the ones the stores hold; what the fits wrote is checked with zarr against the stores'
own boundary lists, and the live fit against the store fit on the boundaries both cover."""

from __future__ import annotations

import json
import pathlib
import re
import shlex

import numpy as np
import pytest
import zarr

ROOT = pathlib.Path(__file__).resolve().parents[2]
STAND_INS = {"Qwen/Qwen2.5-1.5B": "small", "Qwen/Qwen2.5-14B": "large"}


def recipe() -> list[list[str]]:
    """The `align ...` lines of the README's real-model section, as argument lists."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## The study on real models (GPU)", 1)[1].split("\n## ", 1)[0]
    lines = [ln.strip() for ln in section.splitlines() if ln.strip().startswith("align ")]
    return [shlex.split(ln)[1:] for ln in lines]


def test_the_recipe_is_the_readme_s(tmp_path):
    commands = recipe()
    assert [c[0] for c in commands] == ["extract"] * 3 + ["fit"] * 2 + ["plot", "fit"]
    assert any("::2" in c for c in commands)  # the subsampled deep model the fit must follow


@pytest.fixture(scope="module")
def models(zoo):
    return {
        "small": zoo("qwen2"),
        "large": zoo("qwen2", num_hidden_layers=4, hidden_size=96, intermediate_size=192),
    }


def test_readme_recipe_runs_as_written(models, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    docs = [
        f"{a} plus {b} makes {a + b}, said the {k}th line." for k in range(24) for a, b in [(k, 7)]
    ]
    with open("corpus.jsonl", "w", encoding="utf-8") as f:
        for text in docs:
            f.write(json.dumps({"text": text}) + "\n")
    for args in recipe():
        args = [models[STAND_INS[a]] if a in STAND_INS else a for a in args]
        args = ["cpu" if a == "cuda" else a for a in args]
        if "--live" in args:  # the same matrix without the stores, beside the store route's
            args[args.index("-o") + 1] = "results/live.zarr"
        code, out, err = cli(*args)
        assert code == 0, f"align {' '.join(args)}\n{err}"
    small = zarr.open_group("acts/1.5b.zarr", mode="r")
    large = zarr.open_group("acts/14b.zarr", mode="r")
    held_s = [int(b) for b in small["boundary"][:]]
    held_t = [int(b) for b in large["boundary"][:]]
    assert held_t == [0, 2, 4], held_t  # 4 layers, every other boundary
    for name in ("1.5b-14b", "1.5b-random"):
        r = zarr.open_group(f"results/{name}.zarr", mode="r")
        assert [int(b) for b in r["source_boundary"][:]] == held_s
        assert [int(b) for b in r["target_boundary"][:]] == held_t
        assert np.isfinite(r["relative_error"][:]).all()
    assert pathlib.Path("figures/1.5b-14b.png").stat().st_size > 0
    live = zarr.open_group("results/live.zarr", mode="r")
    cols = [int(b) for b in live["target_boundary"][:]]
    assert cols == [0, 1, 2, 3, 4]  # a live fit reads the model itself: every boundary
    stored = zarr.open_group("results/1.5b-14b.zarr", mode="r")["relative_error"][:]
    both = np.asarray(live["relative_error"][:])[:, [cols.index(b) for b in held_t]]
    np.testing.assert_allclose(both, stored, rtol=1e-4, atol=1e-6)


def test_template_boundaries_line_fits(zoo, extracted, tmp_path):
    """A store of every other boundary (as the study template's commented `boundaries = "::2"`
    extracts) fits through the API with every default, on the boundaries it holds."""
    import align

    src = extracted("qwen2")
    tgt = extracted(
        "qwen2",
        {"num_hidden_layers": 4, "hidden_size": 96, "intermediate_size": 192},
        boundaries="::2",
    )
    ds = align.fit(src, tgt, str(tmp_path / "r.zarr")).dataset
    assert [int(b) for b in ds.target_boundary.values] == [0, 2, 4]
    assert re.search(r'boundaries = "::2"', (ROOT / "align" / "study" / "template.py").read_text())
