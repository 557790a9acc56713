"""The resampling options travel as an argument from the command line to the result: what
--bootstrap, --bootstrap-seed and --equal-n name is what a result records and what its intervals
are drawn with, run after run in one process (no state carried from one run to the next), and
`align depth`'s log line states the stored depths and intervals. Intervals are checked against
plain loops over the resampled prompts (the references of test_analyses_depth_intervals),
rtol 1e-12; log numbers against the stored ones within their printed rounding (0.05)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.unit.test_analyses_depth_intervals import (
    curves,
    make_tokens,
    ref_cosine,
    ref_kl,
    ref_overlap,
    results,
)

RULES = ("cosine", "kl", "overlap")


@pytest.fixture
def depth_inputs(tmp_path):
    """(prompts, contributions path, lens path): hand-built results on the same 6 prompts."""
    from align.store import write_result

    prompts = make_tokens(3, 6)
    contrib, lens = results(prompts)
    write_result(str(tmp_path / "c"), contrib, "contributions")
    write_result(str(tmp_path / "l"), lens, "lens")
    return prompts, tmp_path / "c", tmp_path / "l"


def reference_intervals(prompts, resamples, seed):
    """(low, high) per rule: percentiles of the rules applied to plain-loop curves of each
    resample, idx = default_rng(seed).integers(0, n, size=(resamples, n)), NaN resamples left out."""
    idx = np.random.default_rng(seed).integers(0, len(prompts), size=(resamples, len(prompts)))
    eds = []
    for ic in idx:
        cos, kl, ov = curves(prompts, prompts, ic, ic)
        eds.append([ref_cosine(cos), ref_kl(kl), ref_overlap(ov)])
    eds = np.array(eds)
    out = []
    for k in range(3):
        ok = eds[~np.isnan(eds[:, k]), k]
        out.append(
            (np.percentile(ok, 2.5), np.percentile(ok, 97.5)) if len(ok) else (np.nan, np.nan)
        )
    return np.array(out)


def test_cli_options_reach_the_result_run_after_run(cli, depth_inputs, tmp_path):
    """Three `align depth` runs in one process: seed 1 (60 resamples), seed 2 (90), then no
    option (1,000 from seed 0); each result records and uses its own options, and a library
    call afterwards gets the defaults."""
    from align.analyses.depth import depth_from_results
    from align.store import open_result

    prompts, c, l = depth_inputs
    runs = [
        (["--bootstrap", 160, "--bootstrap-seed", 1], 160, 1),
        (["--bootstrap", 190, "--bootstrap-seed", 2], 190, 2),
        ([], 1000, 0),
    ]
    for k, (options, resamples, seed) in enumerate(runs):
        out = tmp_path / f"d{k}"
        code, _, err = cli("depth", "--contrib", c, "--lens", l, "-o", out, *options)
        assert code == 0, err
        ds = open_result(str(out), "depth")
        assert (ds.attrs["bootstrap"]["resamples"], ds.attrs["bootstrap"]["seed"]) == (
            resamples,
            seed,
        )
        want = reference_intervals(prompts, resamples, seed)
        got = np.stack([ds["effective_depth_low"].values, ds["effective_depth_high"].values], 1)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    res = depth_from_results(open_result(str(c), "contributions"), open_result(str(l), "lens"))
    assert (res["bootstrap"]["resamples"], res["bootstrap"]["seed"]) == (1000, 0)


def test_skip_cli_equal_n_reaches_the_result_and_is_not_kept(cli, zoo, corpus_file, tmp_path):
    """--equal-n and the bootstrap options reach a skip result; the next run without them
    records the defaults (no equal-n mode, 1,000 resamples, seed 0)."""
    from align.store import open_result

    base = [
        "skip",
        zoo("qwen2"),
        corpus_file,
        "--settings",
        "current",
        "--parts",
        "layer",
        "--max-docs",
        3,
        "--max-length",
        16,
    ]
    code, _, err = cli(
        *base, "-o", tmp_path / "a", "--bootstrap", 130, "--bootstrap-seed", 5, "--equal-n", 2
    )
    assert code == 0, err
    a = open_result(str(tmp_path / "a"), "skipping")
    assert (
        a.attrs["bootstrap"]["resamples"],
        a.attrs["bootstrap"]["seed"],
        a.attrs["bootstrap"]["equal_n"],
    ) == (130, 5, 2)
    assert "R_equal_n" in a
    assert "(seed 5, equal-n 2)" in err
    code, _, err = cli(*base, "-o", tmp_path / "b")
    assert code == 0, err
    b = open_result(str(tmp_path / "b"), "skipping")
    assert (
        b.attrs["bootstrap"]["resamples"],
        b.attrs["bootstrap"]["seed"],
        b.attrs["bootstrap"]["equal_n"],
    ) == (1000, 0, None)
    assert "R_equal_n" not in b


def parse_depth_line(err: str) -> dict:
    """{rule: (depth or None, low or None, high or None)} from `align depth`'s log line."""
    line = next(s for s in err.splitlines() if s.startswith("align depth: wrote"))
    out = {}
    for rule in RULES:
        m = re.search(
            rf"\b{rule} (undefined \([^)]*\)|-?[\d.]+)(?: \[(-?[\d.]+), (-?[\d.]+)\])?", line
        )
        assert m, (rule, line)
        point = None if m.group(1).startswith("undefined") else float(m.group(1))
        out[rule] = (point, *(None if g is None else float(g) for g in m.group(2, 3)))
    return out


def test_depth_log_line_states_the_stored_intervals(cli, depth_inputs, tmp_path):
    """ "kl 3 [2, 4] (ratio 0.67)": each rule's stored depth and interval, to one decimal; the
    line names how the intervals were drawn."""
    from align.store import open_result

    _, c, l = depth_inputs
    code, _, err = cli(
        "depth",
        "--contrib",
        c,
        "--lens",
        l,
        "-o",
        tmp_path / "d",
        "--bootstrap",
        200,
        "--bootstrap-seed",
        3,
    )
    assert code == 0, err
    assert "95% intervals over 200 prompt resamples (seed 3)" in err
    ds = open_result(str(tmp_path / "d"), "depth")
    logged = parse_depth_line(err)
    seen_interval = False
    for rule, (point, low, high) in logged.items():
        stored = ds.sel(rule=rule)
        ed, lo, hi = (
            float(stored[v])
            for v in ("effective_depth", "effective_depth_low", "effective_depth_high")
        )
        assert (point is None) == np.isnan(ed), (rule, err)
        if point is not None:
            assert abs(point - ed) <= 0.05 + 1e-9
        assert (low is None) == np.isnan(lo), (rule, err)
        if low is not None:
            seen_interval = True
            assert abs(low - lo) <= 0.05 + 1e-9 and abs(high - hi) <= 0.05 + 1e-9, (
                rule,
                lo,
                hi,
                err,
            )
    assert seen_interval
    assert re.search(r"\b(cosine|kl|overlap) [\d.]+ \[[\d.]+, [\d.]+\] \(ratio [\d.]+", err)


def test_depth_log_line_without_per_prompt_sums(cli, depth_inputs, tmp_path):
    from align.store import open_result, write_result

    _, c, l = depth_inputs
    write_result(
        str(tmp_path / "c_old"),
        open_result(str(c), "contributions").drop_vars(["cos_sum", "token_count"]),
        "contributions",
    )
    code, _, err = cli("depth", "--contrib", tmp_path / "c_old", "--lens", l, "-o", tmp_path / "d")
    assert code == 0, err
    assert "no intervals" in err
    assert all(low is None and high is None for _, low, high in parse_depth_line(err).values()), err


def test_depth_summary_hand_worked():
    """Each form of a rule in the log line, written out by hand: a depth with its interval; an
    interval end between two depths (one decimal); a rule defined in only some resamples; an
    undefined point estimate with no interval."""
    from align.analyses.run import depth_summary

    nan = float("nan")
    res = {
        "effective_depth": np.array([40.0, 12.0, nan]),
        "ratio": np.array([41 / 64, 13 / 64, nan]),
        "reasons": {"cosine": "", "kl": "", "overlap": "no boundary above 0.3"},
        "effective_depth_low": np.array([38.0, 10.975, nan]),
        "effective_depth_high": np.array([42.0, 13.5, nan]),
        "defined_fraction": np.array([1.0, 0.93, 0.0]),
    }
    assert depth_summary(res, 0, "cosine") == "cosine 40 [38, 42] (ratio 0.64)"
    assert (
        depth_summary(res, 1, "kl") == "kl 12 [11, 13.5] (ratio 0.20; defined in 93% of resamples)"
    )
    assert (
        depth_summary(res, 2, "overlap")
        == "overlap undefined (no boundary above 0.3) (defined in 0% of resamples)"
    )
    del res["effective_depth_low"]
    assert depth_summary(res, 0, "cosine") == "cosine 40 (ratio 0.64)"
