"""The Python API page's runnable example (docs/api.md, "Your own activations") runs as
written, and what it wrote is what it was given: the stores hold its arrays (read with zarr),
and the map it applies is x W + c of the result's own arrays."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import zarr

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _example(name: str) -> str:
    page = (ROOT / "docs" / "api.md").read_text()
    found = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", page, re.S)
    assert found, f"docs/api.md has no example {name!r}"
    return found.group(1)


def test_own_activations_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(_example("own-activations"), "docs/api.md", "exec"), scope)
    for path, arrays in (("small.zarr", scope["small"]), ("large.zarr", scope["large"])):
        g = zarr.open_group(str(tmp_path / path), mode="r")
        np.testing.assert_array_equal(g["resid"][:], arrays.astype(np.float32))
        np.testing.assert_array_equal(g["doc"][:], scope["tokens"]["doc"])
        np.testing.assert_array_equal(g["pos"][:], scope["tokens"]["pos"])
    r = zarr.open_group(str(tmp_path / "small-large.zarr"), mode="r")
    assert r["relative_error"].shape == (3, 3)
    W, c = np.asarray(r["W"][2, 2], np.float64), np.asarray(r["c"][2, 2], np.float64)
    want = scope["small"][2, :5].astype(np.float64) @ W + c
    np.testing.assert_allclose(scope["predicted"], want, rtol=1e-12)
    # the large model's boundary b is a linear map of the small one's b plus noise of 0.1: the
    # diagonal is the least error of each row (independent of how the fit computed it)
    err = np.asarray(r["relative_error"][:])
    assert (err.argmin(axis=1) == np.arange(3)).all(), err
