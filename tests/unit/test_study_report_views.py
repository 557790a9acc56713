"""The report's measures-side-by-side table gives a measure's mean on the path the interval
`align compare --measure` gives it: the delete-a-group jackknife of that mean from the
result's `<measure>_left_out` recomputations, checked here against the formula worked with
numpy and scipy on a made-up result; a measure without recomputations (and ridge) says
"no interval"."""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy import stats

SRC, TGT, GROUPS = [0, 1, 2, 3], [0, 1, 2, 3, 4, 5], 5


def made_up_result(rng) -> xr.Dataset:
    """An alignment result of L_S = 3 against L_T = 5: ridge's error with its summary, cka
    with its recomputations without each of 5 groups, procrustes without any."""
    dims = ("source_boundary", "target_boundary")
    cka = rng.uniform(0.2, 0.9, (len(SRC), len(TGT)))
    left = cka[..., None] + rng.normal(0, 0.02, (len(SRC), len(TGT), GROUPS))
    error = rng.uniform(0.1, 0.9, (len(SRC), len(TGT)))
    path = [int(TGT[1:][k]) for k in error[1:, 1:].argmin(axis=1)]
    summary = {
        "source_boundaries": SRC[1:],
        "argmin_path": path,
        "slope": 0.5,
        "measures": {
            "cka": {"array": "cka", "direction": "similarity"},
            "procrustes": {"array": "procrustes", "direction": "distance"},
        },
    }
    return xr.Dataset(
        {
            "relative_error": (dims, error),
            "cka": (dims, cka),
            "cka_left_out": (dims + ("measure_group",), left),
            "procrustes": (dims, rng.uniform(0.1, 1.2, (len(SRC), len(TGT)))),
        },
        coords={"source_boundary": SRC, "target_boundary": TGT},
        attrs={"n_layers_source": 3, "n_layers_target": 5, "summary": summary},
    )


def test_the_mean_on_the_path_has_compares_jackknife_interval():
    from align.study import views

    ds = made_up_result(np.random.default_rng(7))
    got = {v.name: v.stats["on path"] for v in views.views(ds)}
    cka = ds["cka"].values
    cols = cka.argmax(axis=1)  # a similarity's path: each row's argmax
    rows = np.arange(len(SRC))
    value = cka[rows, cols].mean()
    theta_g = ds["cka_left_out"].values[rows, cols].mean(axis=0)  # (G,)
    se = np.sqrt((GROUPS - 1) / GROUPS * np.sum((theta_g - theta_g.mean()) ** 2))
    half = stats.t.ppf(0.975, GROUPS - 1) * se
    low, high = np.clip([value - half, value + half], 0.0, 1.0)  # cka lies in [0, 1]
    assert half > 0
    np.testing.assert_allclose(got["cka"], (value, low, high), rtol=1e-12)
    assert got["procrustes"][1:] == (None, None) and got["ridge"][1:] == (None, None)
    table = views.measures_table(views.views(ds))
    assert table.count("no interval") == 2  # ridge and procrustes
    assert f"{value:.3f} [{low:.3f}, {high:.3f}]" in table


def _unit(path, revision=None, random_init=False) -> dict:
    model = {"name": path, "revision": revision, "random_init": random_init}
    return {"definition": {"model": model}, "kind": "extract"}


def test_a_replicate_is_labelled_by_what_the_study_file_named_it():
    """Replicates keep their position as their id (NAME@K, the units' and outputs' names) and
    the pages add the revision a `revisions` entry named, or the last parts of the path that
    tell a `paths` entry's checkpoints apart (worked by hand); a model of one checkpoint and a
    random-init twin get no label."""
    from align.study import labels

    state = {
        "units": {
            "extract s@1": _unit("/runs/seed0/final"),
            "extract s@2": _unit("/runs/seed1/final"),
            "extract s@1.random": _unit("/runs/seed0/final", random_init=True),
            "extract d@1": _unit("org/deep", "step1000"),
            "extract d@2": _unit("org/deep", "step2000"),
            "contrib d@1": _unit("org/deep", "step1000"),
            "extract e": _unit("/elsewhere/e"),
            "fit s@1->d@1": {"definition": {"source": "s@1", "target": "d@1"}, "kind": "fit"},
        }
    }
    named = labels.labels(state)
    assert named == {
        "s@1": "seed0/final",
        "s@2": "seed1/final",
        "d@1": "step1000",
        "d@2": "step2000",
    }
    assert labels.shown("s@2", named) == "s@2 (seed1/final)"
    assert labels.shown("e", named) == "e" and labels.shown("s@1.random", named) == "s@1.random"
    # The study file's own labels, which the report unit's definition carries, come first.
    state["units"]["report"] = {"definition": {"name": "x", "labels": {"s@2": "seed 1"}}}
    assert labels.labels(state) == {**named, "s@2": "seed 1"}
