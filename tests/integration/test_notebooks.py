"""The notebooks run top to bottom (nbclient, a fresh kernel) against small results made by a
fixture, and are committed without outputs."""

from __future__ import annotations

import glob
import os
import shutil

import pytest

from align.fitting import Execution, FitSpec

NOTEBOOKS = sorted(
    glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "notebooks", "*.ipynb"))
)


def test_there_are_notebooks_and_they_are_committed_without_outputs():
    import nbformat

    names = {os.path.basename(p) for p in NOTEBOOKS}
    assert {"alignment.ipynb", "analyses.ipynb"} <= names
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path
                assert "def " not in cell.source, f"{path} defines a helper"
            # no page that does not exist, no path that assumes the source checkout
            assert "METHODS.md" not in cell.source and "../" not in cell.source, path


@pytest.fixture(scope="module")
def results_folder(result_stores, fit_pair, tmp_path_factory):
    """The fixture results laid out as the demo lays them out, and beside them two stores of
    tiny models as the demo names its stores (the notebook fits its measure from them: the
    fixture's alignment result holds none)."""
    root = tmp_path_factory.mktemp("nb") / "results"
    root.mkdir()
    (root / "stores").mkdir()
    for name, store in zip(("shallow", "deep"), fit_pair):
        shutil.copytree(store, root / "stores" / f"{name}.zarr")
    shutil.copytree(result_stores["alignment"], root / "alignment.zarr")
    shutil.copytree(result_stores["control"], root / "alignment-control.zarr")
    for kind in ("contributions", "skipping", "lens", "depth"):
        shutil.copytree(result_stores[kind], root / f"{kind}-deep.zarr")
    return root


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_executes(path, results_folder, monkeypatch, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("ALIGN_ALIGNMENT", str(results_folder / "alignment.zarr"))
    monkeypatch.setenv("ALIGN_CONTROL", str(results_folder / "alignment-control.zarr"))
    monkeypatch.setenv("ALIGN_RESULTS", str(results_folder))
    monkeypatch.setenv("ALIGN_NAME", "deep")
    monkeypatch.setenv("ALIGN_STORES", str(results_folder / "stores"))
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # Figures were drawn (inline PNGs), not just returned as text, and each exactly once: one
    # image per cell that calls a plotting function, none elsewhere.
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        images = sum("image/png" in o.get("data", {}) for o in cell.outputs)
        assert images == ("plotting.plot_" in cell.source), (images, cell.source)
    if os.path.basename(path) == "alignment.ipynb":
        # The notebook's own reading of the path matches the fixture's summary.
        from tests.helpers.fixtures_demo import alignment_ds

        text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
        expected = alignment_ds().attrs["summary"]["argmin_path"]
        for i, j in zip([1, 2, 3], expected):
            assert f"source boundary  {i} (depth {i / 3:.2f}) -> target boundary  {j} " in text
        results = [o["data"]["text/plain"] for o in outputs if o.output_type == "execute_result"]
        assert str(expected) in results, results
        # Its CKA matrix (shown to 3 decimals) and path (each row's argmax) against a reference
        # that reads the stores with zarr and never imports align, on the documents held out.
        import numpy as np

        ref = _cka_matrix(results_folder / "stores", _heldout_docs(results_folder / "stores"))
        np.testing.assert_allclose(_shown_matrix(results), ref, atol=5e-4 + 1e-9)
        want = ref.argmax(1).tolist()
        assert f"cka is a similarity: path {want} for source boundaries [0, 1, 2]" in text
        assert str(want) in results, results


def _heldout_docs(stores) -> list:
    """The documents the notebook's fit held out: the fit's split of the same stores with
    the same (default) options."""
    import align

    ds = align.fit(
        str(stores / "shallow.zarr"),
        str(stores / "deep.zarr"),
        None,
        FitSpec(alphas=[1.0]),
        Execution(scheduler="synchronous"),
        log=lambda m: None,
    ).dataset
    return ds.attrs["split"]["heldout_docs"]


def _cka_matrix(stores, heldout):
    """Linear CKA of every source boundary (rows) with every target boundary (columns) on
    the held-out rows (position 0 left out, as the fit scores), read with zarr."""
    import numpy as np
    import zarr

    from tests.helpers.measures_reference import cka_features

    def rows(path):
        g = zarr.open_group(str(path), mode="r")
        keep = np.isin(g["doc"][:], heldout) & (g["pos"][:] != 0)
        bounds = [int(b) for b in g["boundary"][:]]
        return {b: np.asarray(g["resid"][k], np.float64)[keep] for k, b in enumerate(bounds)}

    X, Y = rows(stores / "shallow.zarr"), rows(stores / "deep.zarr")
    return np.array([[cka_features(X[i], Y[j]) for j in sorted(Y)] for i in sorted(X)])


def _shown_matrix(results: list):
    """The matrix the last cell that displayed one showed as a DataFrame indexed by source
    boundary, columns target boundaries (pandas' text form; the error matrix comes first)."""
    import numpy as np

    table = [r for r in results if r.startswith("target_boundary")][-1]
    lines = table.splitlines()
    cols = [int(c) for c in lines[0].split()[1:]]
    body = [line.split() for line in lines[2:]]
    assert [int(r[0]) for r in body] == list(range(len(body))) and cols == list(range(len(cols)))
    return np.array([[float(v) for v in r[1:]] for r in body])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs_where_it_sits(path, results_folder, monkeypatch, tmp_path):
    """With no ALIGN_* variable, a notebook run in a checkout's notebooks/ folder reads the
    checkout's demo-output/ (one folder up), as `jupyter execute notebooks/X.ipynb` after
    `make demo` does; the same run where no folder above holds demo-output/ stops on one line
    that says to run `align demo` or set the paths."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    for name in ("ALIGN_ALIGNMENT", "ALIGN_CONTROL", "ALIGN_RESULTS", "ALIGN_NAME", "ALIGN_STORES"):
        monkeypatch.delenv(name, raising=False)
    checkout = tmp_path / "checkout"
    (checkout / "notebooks").mkdir(parents=True)
    demo = checkout / "demo-output"
    (demo / "results").mkdir(parents=True)
    for entry in results_folder.iterdir():
        if entry.name != "stores":
            os.symlink(entry, demo / "results" / entry.name)
    os.symlink(results_folder / "stores", demo / "stores")
    nb = nbformat.read(path, as_version=4)
    where = {"metadata": {"path": str(checkout / "notebooks")}}
    NotebookClient(nb, timeout=120, kernel_name="python3", resources=where).execute()
    assert not [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    nb = nbformat.read(path, as_version=4)
    with pytest.raises(CellExecutionError) as e:
        NotebookClient(
            nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(elsewhere)}}
        ).execute()
    assert f"no demo-output/ in {elsewhere} or any folder above it: run `align demo` there" in str(
        e.value
    )
