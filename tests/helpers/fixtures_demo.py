"""Small result stores of every schema, built by hand (seeded random numbers with the dims,
coordinates and attributes each schema fixes), for the plotting and notebook tests."""

from __future__ import annotations

import numpy as np
import pytest


def alignment_ds(
    source_boundaries=(0, 1, 2, 3),
    target_boundaries=tuple(range(7)),
    seed=0,
    name_s="shallow",
    name_t="deep",
):
    import xarray as xr

    rng = np.random.default_rng(seed)
    src, tgt = np.array(source_boundaries), np.array(target_boundaries)
    Ls, Lt = int(src.max()), int(tgt.max())
    err = rng.uniform(0.2, 0.9, (len(src), len(tgt)))
    r2 = 1 - err**2
    rows = [k for k, i in enumerate(src) if i >= 1]
    cols = [k for k, j in enumerate(tgt) if j >= 1]
    path = [int(tgt[cols][np.argmin(err[k, cols])]) for k in rows]
    ds = xr.Dataset(
        {
            "relative_error": (("source_boundary", "target_boundary"), err),
            "norm_error": (("source_boundary", "target_boundary"), err * 0.9),
            "r2": (("source_boundary", "target_boundary"), r2),
            "alpha": (("source_boundary", "target_boundary"), np.full(err.shape, 0.5)),
            "alpha_rel": (("source_boundary", "target_boundary"), np.full(err.shape, 1e-3)),
            "heldout_doc": (("heldout_doc",), np.array([3, 7, 11])),
        },
        coords={
            "source_boundary": src,
            "target_boundary": tgt,
            "source_depth": ("source_boundary", src / Ls),
            "target_depth": ("target_boundary", tgt / Lt),
        },
        attrs={
            "summary": {
                "argmin_path": path,
                "spearman": 0.8,
                "spearman_note": "",
                "mean_depth_gap": 0.125,
                "soft_depth": [0.2] * len(rows),
                "soft_depth_spread": 0.41,
                "source_boundaries": [int(src[k]) for k in rows],
                "target_boundaries": [int(tgt[k]) for k in cols],
            },
            "source_model": f"/models/{name_s}",
            "target_model": f"/models/{name_t}",
            "n_layers_source": Ls,
            "n_layers_target": Lt,
            "source": {},
            "target": {},
            "options": {},
        },
    )
    return ds


def contributions_ds(L=5, seed=1):
    import xarray as xr

    rng = np.random.default_rng(seed)
    return xr.Dataset(
        {
            "rel_norm": (("part", "layer", "agg"), rng.uniform(0, 2, (3, L, 2))),
            "cos": (("part", "layer", "agg"), rng.uniform(-1, 1, (3, L, 2))),
            "resid_cos": (("layer", "agg"), rng.uniform(0, 1, (L, 2))),
        },
        coords={"part": ["attn", "mlp", "layer"], "layer": np.arange(L), "agg": ["mean", "max"]},
        attrs={"model": "/models/deep"},
    )


def skipping_ds(L=5, seed=2):
    import xarray as xr

    rng = np.random.default_rng(seed)
    R = rng.uniform(0, 3, (2, 3, 2, L, L)) * np.triu(np.ones((L, L)), 1)
    return xr.Dataset(
        {
            "R": (("setting", "part", "agg", "skipped", "later"), R),
            "O": (("setting", "part", "agg", "skipped"), rng.uniform(0, 1, (2, 3, 2, L))),
        },
        coords={
            "setting": ["current", "future"],
            "part": ["layer", "attn", "mlp"],
            "agg": ["max", "mean_over_prompts"],
            "skipped": np.arange(L),
            "later": np.arange(L),
        },
        attrs={"model": "/models/deep"},
    )


def lens_ds(L=5, seed=3):
    import xarray as xr

    rng = np.random.default_rng(seed)
    kl = np.sort(rng.uniform(0, 4, (2, L + 1)), axis=1)[:, ::-1].copy()
    kl[:, -1] = 0.0
    ov = np.sort(rng.uniform(0, 1, (2, L + 1)), axis=1)
    ov[:, -1] = 1.0
    return xr.Dataset(
        {"kl": (("weighting", "boundary"), kl), "overlap": (("weighting", "boundary"), ov)},
        coords={"weighting": ["token", "prompt"], "boundary": np.arange(L + 1)},
        attrs={"model": "/models/deep"},
    )


def depth_ds(L=5, eds=(2.0, 1.0, float("nan"))):
    import xarray as xr

    ed = np.array(eds, dtype=float)
    return xr.Dataset(
        {"effective_depth": (("rule",), ed), "ratio": (("rule",), (ed + 1) / L)},
        coords={"rule": ["cosine", "kl", "overlap"]},
        attrs={
            "reasons": {"overlap": "overlap never exceeds 0.3 before the last layer"},
            "model": "/models/deep",
        },
    )


BUILDERS = {
    "alignment": alignment_ds,
    "contributions": contributions_ds,
    "skipping": skipping_ds,
    "lens": lens_ds,
    "depth": depth_ds,
}


@pytest.fixture(scope="session")
def result_stores(tmp_path_factory):
    """schema -> path of a small result store of that schema (written with write_result),
    plus "control": a second alignment result (another seed)."""
    from align.store import write_result

    root = tmp_path_factory.mktemp("results")
    paths = {}
    for schema, build in BUILDERS.items():
        paths[schema] = write_result(str(root / f"{schema}.zarr"), build(), schema)
    paths["control"] = write_result(
        str(root / "control.zarr"), alignment_ds(seed=9, name_t="deep-random-init"), "alignment"
    )
    return paths


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """The demo pipeline at its tiny size, run once: (output folder, DemoReport)."""
    from align.demo import pipeline

    out = str(tmp_path_factory.mktemp("demo") / "demo-output")
    report = pipeline.run(out, pipeline.tiny_config(), log=lambda m: None)
    return out, report
