"""`align compare --measure` on the neighbour measures (mknn, cknna) read on samples of another
size M or another k: refused in one line naming both results and both values, since the share
of k neighbours among M rows is another quantity at another M or k; rsa estimates one number at
any M and compares (docs/methods.md, Why 1,024 sampled rows)."""

import numpy as np
import pytest
import xarray as xr

from align.compare.measures import check_measure
from align.errors import InputError


def result(name: str, rows: int, k: int) -> xr.Dataset:
    """A minimal alignment result holding measure `name` on `rows` sampled rows with k."""
    ds = xr.Dataset({name: (("source_boundary", "target_boundary"), np.zeros((2, 2)))})
    ds.attrs["summary"] = {"measures": {name: {"array": name}}}
    ds.attrs["options"] = {"sampled_rows": {"rows": rows, "neighbours": k, "permutations": 9}}
    return ds


@pytest.mark.parametrize("name", ["mknn", "cknna"])
def test_neighbour_measures_on_samples_of_another_size_are_refused(name):
    items = [("a", "A.zarr", result(name, 1024, 10)), ("b", "B.zarr", result(name, 4096, 10))]
    with pytest.raises(InputError) as e:
        check_measure(name, "alignment", items)
    text = str(e.value)
    assert "\n" not in text
    assert text == (
        f"B.zarr holds {name} of 4,096 sampled rows and A.zarr of 1,024: {name} depends on "
        "them; fit both with the same `align fit --sample-rows`"
    )


@pytest.mark.parametrize("name", ["mknn", "cknna"])
def test_neighbour_measures_with_another_k_are_refused_and_rsa_is_not(name):
    items = [("a", "A.zarr", result(name, 1024, 10)), ("b", "B.zarr", result(name, 1024, 5))]
    with pytest.raises(InputError, match=r"B.zarr holds .* of 5 neighbours and A.zarr of 10"):
        check_measure(name, "alignment", items)
    other = [("a", "A.zarr", result("rsa", 1024, 10)), ("b", "B.zarr", result("rsa", 4096, 5))]
    check_measure("rsa", "alignment", other)  # one correlation at any M, and no k: compared
    alike = [("a", "A.zarr", result(name, 1024, 10)), ("b", "B.zarr", result(name, 1024, 10))]
    check_measure(name, "alignment", alike)
