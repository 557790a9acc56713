"""The memory planner's count of the sampled rows on both routes: the bytes it prints equal
M·(n_S·d_S + n_T·d_T)·itemsize from the stores' and the models' shapes (read with zarr and
json, not align), and a budget that cannot hold them is refused in one line naming the bytes
and `sample_rows`, before any work."""

import json
import os

import pytest
import zarr

from align.fitting import Execution, FitSpec
from tests.integration.test_fit_live import live_fit

M = 60  # sampled rows


def _shape(path):
    g = zarr.open_group(path, mode="r")
    return len(g["boundary"][:]), int(g["resid"].shape[-1])


def _kib(n):
    return f"{n / 1024:.1f} KiB"


def test_store_route_prints_the_rows_bytes_and_refuses_a_small_budget(fit_pair):
    import align
    from align.errors import InputError

    S, T = fit_pair
    (nS, dS), (nT, dT) = _shape(S), _shape(T)
    rows = 4 * M * (nS * dS + nT * dT)  # float32 as read from the stores
    lines = []
    opts = dict(measures="cka,rsa", permutations=2, sample_rows=M, bootstrap=0, alphas=[1e-2])
    align.fit(S, T, None, FitSpec(**opts), Execution(scheduler="synchronous"), log=lines.append)
    line = next(x for x in lines if "sampled rows:" in x)
    assert f"{M:,} held-out rows of {nS}+{nT} boundaries, {_kib(rows)} (float32)" in line, line
    with pytest.raises(InputError) as e:
        sync = Execution(scheduler="synchronous", memory_limit=rows)
        align.fit(S, T, None, FitSpec(**opts), sync, log=None)
    text = str(e.value)
    assert "\n" not in text and f"need {_kib(rows)} of rows" in text, text
    assert "`sample_rows`" in text and "`memory_limit`" in text, text


def test_live_route_counts_the_rows_in_the_plan_and_refuses_a_small_budget(zoo, corpus_file):
    from align.errors import InputError

    widths = []
    for folder in (zoo("qwen2"), zoo("qwen2", num_hidden_layers=4, hidden_size=96)):
        with open(os.path.join(folder, "config.json")) as f:
            c = json.load(f)
        widths.append((c["num_hidden_layers"] + 1, c["hidden_size"]))
    (nS, dS), (nT, dT) = widths
    rows = 8 * M * (nS * dS + nT * dT)  # float64 on the host
    opts = dict(measures="cka,mknn", permutations=2, sample_rows=M, bootstrap=0, alphas=[1e-2])
    report = live_fit(zoo, corpus_file, "qwen2", "float32", budget=2**30, **opts)
    assert report.plan["bytes"]["sampled rows"] == rows
    with pytest.raises(InputError) as e:
        live_fit(zoo, corpus_file, "qwen2", "float32", budget=2**20, **opts)
    text = str(e.value)
    assert "\n" not in text and f"need {_kib(rows)} of rows" in text, text
    assert "`sample_rows`" in text and "`memory_limit`" in text, text
