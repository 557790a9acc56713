"""k of mknn and cknna against the M sampled rows: each row's k nearest rows are drawn from
the other M − 1 (a row is not its own neighbour), so k ≥ M is refused in one line that says
the numbers and what to do, before any memory arithmetic (a budget too small for the rows
would otherwise take the blame), on the store route, the live route and the library's
`FitSpec` (which every route, the study's included, checks)."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from tests.helpers.assertions import one_line_error

WANT = (
    "--neighbours 1,000,000 with --sample-rows 64: mknn and cknna take each sampled row's k "
    "nearest among the other 63 sampled rows (a row is not its own neighbour), so k is at "
    "most 63: give --neighbours 63 or fewer, or --sample-rows 1,000,001 or more"
)
ASK = ["--measures", "mknn,cknna", "--permutations", "1", "--bootstrap", "0"]
# a budget no sample fits: were memory checked first, it would be blamed
TINY = ["--memory-limit", "1MB"]


@pytest.mark.parametrize("route", ["stores", "live"])
def test_k_of_a_million_on_64_rows_is_refused_for_k_not_memory(
    route, fit_pair, zoo, corpus_file, tmp_path, cli
):
    out = tmp_path / "r.zarr"
    models = [*fit_pair] if route == "stores" else ["--live", zoo("qwen2"), zoo("qwen2")]
    corpus = [] if route == "stores" else [corpus_file]
    args = ["--neighbours", "1000000", "--sample-rows", "64"]
    code, _, err = cli("fit", *models, *corpus, "-o", out, *ASK, *args, *TINY)
    one_line_error(code, err, WANT, progress=("align fit",), absent=("GiB", "MiB", "memory"))
    assert not out.exists()


def test_k_equal_to_the_rows_is_refused_and_one_less_runs_with_mknn_one(fit_pair, tmp_path, cli):
    """k = M is refused naming M − 1; k = M − 1 runs, and then every row's neighbours are all
    the other rows on both sides, so mknn = (1/M) Σ |N_x ∩ N_y| / k = 1 exactly for every
    pair (the hand-worked value)."""
    S, T = fit_pair
    out = tmp_path / "r.zarr"
    ask = ["--measures", "mknn", "--permutations", "1", "--sample-rows", "40"]
    code, _, err = cli("fit", S, T, "-o", out, *ask, "--neighbours", "40")
    one_line_error(
        code,
        err,
        "--neighbours 40 with --sample-rows 40: mknn takes each sampled row's k nearest "
        "among the other 39 sampled rows",
        "give --neighbours 39 or fewer, or --sample-rows 41 or more",
        progress=("align fit",),
    )
    code, _, err = cli("fit", S, T, "-o", out, *ask, "--neighbours", "39")
    assert code == 0, err
    value = zarr.open_group(str(out), mode="r")["mknn"][:]
    np.testing.assert_array_equal(value, np.ones_like(value))


def test_every_held_out_row_sampled_is_the_limit_without_sample_rows(fit_pair, tmp_path, cli):
    """Without --sample-rows, M is every held-out row (fewer than 1,024 here): k above it is
    refused naming that count, counted from the stores' documents by the split, and what to
    do (more held-out rows; a --sample-rows above them would be refused)."""
    S, T = fit_pair
    out = tmp_path / "r.zarr"
    code, _, err = cli("fit", S, T, "-o", out, *ASK, "--neighbours", "1000", *TINY)
    line = one_line_error(
        code, err, "held-out rows sampled: mknn and cknna take", progress=("align fit",)
    )
    held = int(line.split("with all ")[1].split(" held-out")[0].replace(",", ""))
    assert 10 < held < 1024, line
    assert f"so k is at most {held - 1:,}: give --neighbours {held - 1:,} or fewer" in line
    assert "or more held-out rows (a larger --test-fraction or corpus)" in line
    assert not out.exists()


@pytest.mark.parametrize(
    "options,needle",
    [
        (
            dict(measures="mknn", sample_rows=64, neighbours=64),
            "`neighbours` 64 with `sample_rows` 64: mknn takes each sampled row's k nearest "
            "among the other 63 sampled rows",
        ),
        (
            dict(measures="rsa,cknna", neighbours=5000),
            "`neighbours` 5,000 with `sample_rows` 1,024 (the most drawn): cknna takes",
        ),
        (
            dict(measures="cknna", sample_rows=64, neighbours=1),
            "`neighbours` 1: cknna needs 2 or more nearest neighbours; give `neighbours` 2",
        ),
    ],
)
def test_the_library_refuses_it_in_fit_spec(options, needle):
    from align.errors import InputError
    from align.fitting import FitSpec

    with pytest.raises(InputError) as e:
        FitSpec(permutations=1, **options).checked()
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_no_neighbour_measure_no_limit():
    """k is not checked where no measure uses it (rsa, cka: no neighbours)."""
    from align.fitting import FitSpec

    spec = FitSpec(measures="rsa,cka", permutations=1, sample_rows=8, neighbours=100).checked()
    assert spec.neighbours == 100
