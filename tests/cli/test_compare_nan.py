"""`align compare` reads only numbers: a result with a NaN/inf cell where compare reads a number
(an alignment result's relative_error or per-document sums, a depth result's per-prompt sums,
a lens result's curves where it measured), edited into the stored zarr array as damage would,
is refused in one line naming the result, the array and the cell, before anything is printed
or written. NaN where a result says what it means (an undefined depth rule, a boundary the
lens did not measure) still compares. Intervals from fewer than 100 resamples are not shown,
and a paired difference's statistic defined in fewer than 100 resamples gets no interval (its
count is checked against a plain loop over the documented indices)."""

from __future__ import annotations

import csv
import io
import os

import numpy as np
import pytest
import xarray as xr
import zarr

from tests.cli.test_compare import (
    alignment_with_documents,
    depth_result,
    paired_alignments,
    per_prompt,
)
from tests.helpers.assertions import one_line_error


def _inject(result, var, index, value):
    """Write `value` into one cell of a stored result array, through zarr (as damage would)."""
    arr = zarr.open_array(os.path.join(str(result), var), mode="r+")
    arr[index] = value


def _alignment_pair(tmp_path):
    return paired_alignments(tmp_path)[:2]


@pytest.mark.parametrize(
    "var, index, value, cell",
    [
        (
            "relative_error",
            (2, 3),
            np.nan,
            "relative_error is NaN at source boundary 2, target boundary 3 (1 of 20",
        ),
        (
            "doc_ratio_sum",
            (4, 1, 2),
            np.inf,
            "doc_ratio_sum is inf at held-out document 104, source boundary 1, "
            "target boundary 2 (1 of 240",
        ),
        ("doc_n_tokens", (7,), np.nan, "doc_n_tokens is NaN at held-out document 107 (1 of 12"),
    ],
)
def test_alignment_result_with_a_nan_cell_is_refused(cli, tmp_path, var, index, value, cell):
    a, b = _alignment_pair(tmp_path)
    code, out, err = cli("compare", a, b)
    assert code == 0 and "b − a (paired)" in out, err  # undamaged, the two compare
    _inject(b, var, index, value)
    table = tmp_path / "t.csv"
    code, out, err = cli("compare", a, b, "-o", table)
    one_line_error(code, err, b, cell, "align fit")
    assert out == "" and not table.exists() and not (tmp_path / "t.png").exists()


def test_depth_result_with_a_nan_sum_is_refused_and_an_undefined_rule_compares(cli, tmp_path):
    L, n = 6, 10
    pp = per_prompt(1, n, L)
    a = depth_result(tmp_path / "a", L, pp)
    b = depth_result(tmp_path / "b", L, {**pp, "kl_sum": pp["kl_sum"] * 1.1})
    c = depth_result(
        tmp_path / "c", L, ed=[np.nan, 2.0, 3.0]
    )  # the cosine rule undefined: NaN with a meaning
    code, out, err = cli("compare", a, b, c)
    assert code == 0 and "undefined" in out, err
    _inject(b, "kl_sum", (3, 2), np.nan)
    code, out, err = cli("compare", a, b, c, "-o", tmp_path / "t.csv")
    one_line_error(code, err, b, "kl_sum is NaN at lens prompt 3, boundary 2 (1 of")
    assert out == "" and not (tmp_path / "t.csv").exists()
    _inject(c, "effective_depth", (1,), np.inf)
    one_line_error(*cli("compare", c)[::2], c, "effective_depth is inf at rule kl")


def _lens(path, pp, L, measured):
    """A lens result that lists the boundaries it measured (as `align lens` writes them)."""
    from align.store import write_result

    c = pp["token_count"]
    data = {"token_count": (("prompt",), c)}
    for name in ("kl", "overlap"):
        s = pp[f"{name}_sum"].copy()
        s[:, [b for b in range(L + 1) if b not in measured]] = np.nan
        data[name] = (
            ("weighting", "boundary"),
            np.stack([s.sum(0) / c.sum(), (s / c[:, None]).mean(0)]),
        )
        data[f"{name}_sum"] = (("prompt", "boundary"), s)
    ds = xr.Dataset(
        data,
        coords={"weighting": ["token", "prompt"], "boundary": np.arange(L + 1)},
        attrs={
            "model": "m",
            "n_layers": L,
            "prompts_hash": "sha256:p",
            "boundaries_measured": list(measured),
        },
    )
    write_result(str(path), ds, "lens")
    return str(path)


def test_lens_nan_where_measured_is_refused_where_not_measured_it_compares(cli, tmp_path):
    L = 4
    pp = per_prompt(4, 9, L)
    a = _lens(tmp_path / "a", pp, L, measured=[0, 1, 2, 3])  # boundary 4 not measured: NaN there
    code, out, err = cli("compare", a)
    assert code == 0 and "not measured" in out, err
    _inject(a, "kl", (0, 2), np.nan)
    code, out, err = cli("compare", a)
    one_line_error(code, err, a, "kl is NaN at weighting token, boundary 2 (1 of 10", "align lens")
    assert out == ""


def test_stored_intervals_from_too_few_resamples_are_not_shown(cli, tmp_path):
    """An alignment result fitted with --bootstrap 1 (before the floor): its "95%" interval
    [0.8564, 0.8564] excluded its own point estimate 0.8612; compare shows the estimate alone
    and says why."""
    from align.store import write_result

    err = np.random.default_rng(0).random((4, 5))
    summ = {
        "source_boundaries": [1, 2, 3],
        "argmin_path": [1, 3, 4],
        "spearman": 0.8612,
        "spearman_low": 0.8564,
        "spearman_high": 0.8564,
        "mean_depth_gap": 0.125,
        "soft_depth_spread": 0.6,
        "bootstrap": {
            "unit": "held-out document",
            "resamples": 1,
            "seed": 0,
            "resamples_defined": 1,
        },
    }
    ds = xr.Dataset(
        {"relative_error": (("source_boundary", "target_boundary"), err)},
        coords={"source_boundary": np.arange(4), "target_boundary": np.arange(5)},
        attrs={"summary": summ, "n_layers_source": 3, "n_layers_target": 4},
    )
    write_result(str(tmp_path / "one"), ds, "alignment")
    code, out, err_ = cli("compare", tmp_path / "one", "-o", tmp_path / "t.csv")
    assert code == 0, err_
    assert "0.8612" in out and "0.8564" not in out
    assert "one: its intervals are not shown: they come from 1 resamples, fewer than the 100" in out
    row = next(csv.DictReader(io.StringIO((tmp_path / "t.csv").read_text())))
    assert (
        float(row["Spearman"]) == 0.8612
        and row["Spearman_low"] == ""
        and row["Spearman_high"] == ""
    )


def test_paired_statistic_defined_in_too_few_resamples_gets_no_interval(cli, tmp_path):
    """Rows 1..3 choose column 2 unless document 0 (15 tokens, the others 10) is drawn 3 times
    or more, when row 3 moves to column 4: Spearman is defined in ~8% of 1,000 resamples (the
    count from a loop over the documented indices), so its paired difference has no interval
    and a note gives the count; the mean depth gap, defined in all, keeps its interval. The
    point values are the stored summaries' (Spearman 0.5 and 0.7, as given)."""
    from align.store import write_result

    K, B = 12, 1000
    n = np.full(K, 10.0)
    n[0] = 15.0
    per = np.tile([0.9, 0.5, 0.4, 0.6, 0.7], (K, 4, 1))
    per[0, 3] = [0.9, 0.9, 0.9, 0.9, 0.1]
    ratio = per * n[:, None, None]
    docs = np.arange(K)
    paths = []
    for name, rho in (("a", 0.5), ("b", 0.7)):
        p = alignment_with_documents(tmp_path / name, ratio, n, docs)
        ds = xr.open_zarr(p).load()
        ds.attrs["summary"] = {**ds.attrs["summary"], "spearman": rho}
        write_result(p, ds, "alignment", overwrite=True)
        paths.append(p)
    idx = np.random.default_rng(0).integers(0, K, size=(B, K))
    defined = 0
    for take in idx:
        err = sum(ratio[k] for k in take) / sum(n[k] for k in take)
        path = [1 + int(np.argmin(err[i, 1:])) for i in (1, 2, 3)]
        defined += len(set(path)) > 1
    assert 1 <= defined < 100  # the case tests something
    code, out, err = cli("compare", *paths, "-o", tmp_path / "t.csv", "--bootstrap", B)
    assert code == 0, err
    rows = {r["result"]: r for r in csv.DictReader(io.StringIO((tmp_path / "t.csv").read_text()))}
    diff = rows["b − a (paired)"]
    assert float(diff["Spearman"]) == pytest.approx(0.2)
    assert diff["Spearman_low"] == "" and diff["Spearman_high"] == ""
    assert diff["mean depth gap_low"] != ""
    assert (
        f"b − a: no interval for Spearman: defined in {defined} of 1,000 resamples, fewer than the 100 an interval "
        "needs"
    ) in out
