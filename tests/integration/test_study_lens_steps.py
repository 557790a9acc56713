"""`[analyses] lens_steps` reaches the tuned lens unit: a study that asks for 3 steps trains
each translator 3 steps, as its result records (the options and one training loss a step),
and the unit's definition in the study's plan holds the same count."""

from __future__ import annotations

import os

from tests.helpers.study_files import write_study

LENS = """[fit]
bootstrap = 200
[analyses]
lens = ["tuned"]
lens_steps = 3
"""


def test_a_study_with_lens_steps_3_trains_3_steps(zoo, corpus_file, extracted, tmp_path):
    """The tuned unit of a, run on a's store (the study's own extraction stood in by the same
    model's store over the same corpus): its result records steps 3 and holds 3 training losses
    per trained boundary (0 .. L-1), finite, none at boundary L (no translator there)."""
    import numpy as np

    from align.store import open_activations, open_result
    from align.study import load_study
    from align.study.runners import run_unit
    from align.study.units import plan

    models = {"a": str(zoo("qwen2")), "b": str(zoo("qwen2", num_hidden_layers=3))}
    path = write_study(
        tmp_path / "s.toml",
        models=models,
        corpus=str(corpus_file),
        analyses={"a": ["lens"]},
        extra=LENS,
    )
    study = load_study(str(path))
    unit = next(u for u in plan(study) if u.name == "lens-tuned a")
    assert unit.definition["steps"] == 3
    root = tmp_path / "out"
    (root / "stores").mkdir(parents=True)
    store = extracted("qwen2")
    os.symlink(store, root / "stores" / "a.zarr")
    run_unit(unit, study, str(root), lambda line: None)
    ds = open_result(str(root / unit.output), "lens")
    assert ds.attrs["kind"] == "tuned"
    assert ds.attrs["options"]["steps"] == 3
    L = open_activations(store).n_layers
    loss = ds["train_loss"].transpose("boundary", "step").values
    assert loss.shape == (L + 1, 3)
    assert np.isfinite(loss[:L]).all() and np.isnan(loss[L]).all()
