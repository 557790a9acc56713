"""`align compare` on depth, lens and alignment results built by hand: the table holds each
result's numbers and intervals as stored; paired differences of results on the same prompts
match a plain-loop reference (documented indices, rules of docs/methods.md applied to curves
recomputed from the per-prompt sums), and known differences come out exactly; mixed kinds,
unknown files and unsafe outputs are refused in one line naming the path."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import xarray as xr

from tests.helpers.assertions import one_line_error

RULE_GRID = {
    "cosine": [-0.2, -0.15, -0.1, -0.05, 0.0, 0.05, 0.1, 0.15, 0.2],
    "kl": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    "overlap": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
}


def ref_rules(cos, kl, ov, L):
    """(cosine, kl, overlap) ED of curves over layers / boundaries 0..L−1 (docs/methods.md)."""
    c = [l for l in range(L - 1) if cos[l] < 0 <= cos[l + 1]]
    top = max(kl[:L])
    k = [l for l in range(L - 1) if kl[l] < 0.5 * top]
    o = [l for l in range(L - 1) if ov[l] > 0.3]
    return [
        float(c[-1]) if c else np.nan,
        float(k[0]) if k else np.nan,
        float(o[0]) if o else np.nan,
    ]


def per_prompt(seed, n, L):
    """Per-prompt sums of n prompts: cos_sum (n, 3, L), kl_sum, overlap_sum (n, L+1), counts."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(2, 12, n)
    cos = (np.linspace(-0.3, 0.3, L)[None, None, :] + rng.normal(0, 0.2, (n, 3, L))) * counts[
        :, None, None
    ]
    kl = np.linspace(8, 0, L + 1)[None, :] * rng.uniform(0.4, 1.6, (n, L + 1)) * counts[:, None]
    ov = (
        np.clip(np.linspace(0, 1, L + 1)[None, :] + rng.normal(0, 0.2, (n, L + 1)), 0, 1)
        * counts[:, None]
    )
    return {"cos_sum": cos, "kl_sum": kl, "overlap_sum": ov, "token_count": counts}


def curves_of(pp, ix, L):
    ix = list(ix)
    cnt = sum(pp["token_count"][p] for p in ix)
    cos = sum(pp["cos_sum"][p] for p in ix).mean(0) / cnt
    kl = sum(pp["kl_sum"][p] for p in ix) / cnt
    ov = sum(pp["overlap_sum"][p] for p in ix) / cnt
    return cos, kl, ov


def depth_result(
    path, L, pp=None, ed=None, low=None, high=None, model="m", hashes=("sha256:p", "sha256:p")
):
    """A "depth" result: with per-prompt sums `pp`, its point EDs are the reference rules on
    them; else `ed`, `low`, `high` as given."""
    from align.store import write_result

    if pp is not None:
        ed = ref_rules(*curves_of(pp, range(len(pp["token_count"])), L), L)
    ed = np.asarray(ed, float)
    data = {"effective_depth": (("rule",), ed), "ratio": (("rule",), (ed + 1) / L)}
    attrs = {"model": model, "n_layers": L, "reasons": {}}
    if low is not None:
        data["effective_depth_low"] = (("rule",), np.asarray(low, float))
        data["effective_depth_high"] = (("rule",), np.asarray(high, float))
        attrs["bootstrap"] = {"n": {"contributions": 40, "lens": 40}, "resamples": 1000, "seed": 0}
    if pp is not None:
        n = len(pp["token_count"])
        data.update(
            {
                "cos_sum": (("prompt", "part", "layer"), pp["cos_sum"]),
                "token_count": (("prompt",), pp["token_count"]),
                "kl_sum": (("lens_prompt", "boundary"), pp["kl_sum"]),
                "overlap_sum": (("lens_prompt", "boundary"), pp["overlap_sum"]),
                "lens_token_count": (("lens_prompt",), pp["token_count"]),
            }
        )
        data["effective_depth_low"] = (("rule",), ed - 1)  # stored intervals are shown as stored
        data["effective_depth_high"] = (("rule",), ed + 1)
        attrs.update(
            {
                "prompts_hash": hashes[0],
                "lens_prompts_hash": hashes[1],
                "bootstrap": {"n": {"contributions": n, "lens": n}, "resamples": 1000, "seed": 0},
            }
        )
    ds = xr.Dataset(data, coords={"rule": ["cosine", "kl", "overlap"]}, attrs=attrs)
    write_result(str(path), ds, "depth")
    return str(path)


def lens_result(path, pp, L, model="m", prompts_hash="sha256:p"):
    from align.store import write_result

    c = pp["token_count"]
    data = {"token_count": (("prompt",), c)}
    for name in ("kl", "overlap"):
        s = pp[f"{name}_sum"]
        data[name] = (
            ("weighting", "boundary"),
            np.stack([s.sum(0) / c.sum(), (s / c[:, None]).mean(0)]),
        )
        data[f"{name}_sum"] = (("prompt", "boundary"), s)
        data[f"{name}_low"] = (("weighting", "boundary"), np.stack([s.sum(0) / c.sum() - 0.1] * 2))
        data[f"{name}_high"] = (("weighting", "boundary"), np.stack([s.sum(0) / c.sum() + 0.1] * 2))
    ds = xr.Dataset(
        data,
        coords={"weighting": ["token", "prompt"], "boundary": np.arange(L + 1)},
        attrs={"model": model, "n_layers": L, "prompts_hash": prompts_hash},
    )
    write_result(str(path), ds, "lens")
    return str(path)


def read_csv(path):
    return list(csv.DictReader(io.StringIO(open(path, encoding="utf-8").read())))


def test_depth_table_shows_stored_numbers_beside_each_other(cli, tmp_path):
    """One row per result, columns per rule, "value [low, high]"; a result without intervals
    is shown without and said so; results on different prompts get no paired difference."""
    a = depth_result(
        tmp_path / "qwen14b.zarr",
        48,
        ed=[30, 40, 45],
        low=[28, 38, 44],
        high=[33, 41.5, 46],
        model="Qwen2.5-14B",
    )
    b = depth_result(tmp_path / "old.zarr", 64, ed=[46, np.nan, 59], model="Qwen2.5-32B")
    code, out, err = cli("compare", a, b, "-o", tmp_path / "t.csv")
    assert code == 0, err
    assert "30 [28, 33]" in out and "40 [38, 41.5]" in out and "undefined" in out
    assert "old: no intervals" in out and "no paired difference of old and qwen14b" in out
    rows = read_csv(tmp_path / "t.csv")
    assert [r["result"] for r in rows] == ["qwen14b", "old"]
    assert (
        float(rows[0]["kl"]) == 40
        and float(rows[0]["kl_low"]) == 38
        and float(rows[0]["kl_high"]) == 41.5
    )
    assert float(rows[0]["overlap ratio"]) == pytest.approx(46 / 48, rel=1e-12)
    assert rows[1]["kl"] == "" and rows[1]["cosine_low"] == "" and rows[1]["layers"] == "64"
    assert (tmp_path / "t.png").stat().st_size > 0
    one_line_error(
        *cli("compare", a, b, "-o", tmp_path / "t.md")[::2], "the figure", "t.png", "--overwrite"
    )
    code, out, err = cli("compare", a, b, "-o", tmp_path / "t.md", "--figure", tmp_path / "t2.png")
    assert code == 0, err
    md = (tmp_path / "t.md").read_text()
    assert (
        md.startswith("| result | model | layers | prompts | cosine | kl | overlap |")
        and "| 30 [28, 33] |" in md
    )


def test_depth_paired_difference_matches_plain_loop(cli, tmp_path):
    """A shallow and a deep model on the same prompts: deep − shallow per resample, indices
    default_rng(seed).integers(0, n, size=(B, n)) shared by both (contributions' and lens's
    prompts are the same), rtol 1e-12."""
    n, La, Lb, B, seed = 10, 6, 9, 300, 5
    pa, pb = per_prompt(1, n, La), per_prompt(2, n, Lb)
    pb["token_count"] = pa["token_count"]  # one set of prompts: the same token counts
    a = depth_result(tmp_path / "shallow", La, pa)
    b = depth_result(tmp_path / "deep", Lb, pb)
    code, out, err = cli(
        "compare", a, b, "--bootstrap", B, "--seed", seed, "-o", tmp_path / "t.csv"
    )
    assert code == 0, err
    row = read_csv(tmp_path / "t.csv")[2]
    assert row["result"] == "deep − shallow (paired)" and row["prompts"] == str(n)
    idx = np.random.default_rng(seed).integers(0, n, size=(B, n))
    ea = np.array([ref_rules(*curves_of(pa, ix, La), La) for ix in idx])
    eb = np.array([ref_rules(*curves_of(pb, ix, Lb), Lb) for ix in idx])
    point_a = ref_rules(*curves_of(pa, range(n), La), La)
    point_b = ref_rules(*curves_of(pb, range(n), Lb), Lb)
    assert np.isfinite(np.array(point_b) - np.array(point_a)).sum() >= 2  # the case tests something
    for k, rule in enumerate(("cosine", "kl", "overlap")):
        for col, d, p in (
            (rule, eb[:, k] - ea[:, k], point_b[k] - point_a[k]),
            (
                f"{rule} ratio",
                (eb[:, k] + 1) / Lb - (ea[:, k] + 1) / La,
                (point_b[k] + 1) / Lb - (point_a[k] + 1) / La,
            ),
        ):
            ok = d[np.isfinite(d)]
            if not np.isfinite(p):
                assert row[col] == ""
                continue
            assert float(row[col]) == pytest.approx(p, rel=1e-12, abs=1e-12)
            assert float(row[f"{col}_low"]) == pytest.approx(
                np.percentile(ok, 2.5), rel=1e-12, abs=1e-12
            )
            assert float(row[f"{col}_high"]) == pytest.approx(
                np.percentile(ok, 97.5), rel=1e-12, abs=1e-12
            )


def test_identical_prompts_give_a_zero_difference_exactly(cli, tmp_path):
    """Two results holding the same per-prompt sums: every resample's difference is 0, so the
    paired interval is [0, 0], though each result alone varies over resamples."""
    pp = per_prompt(3, 12, 7)
    a = depth_result(tmp_path / "a", 7, pp)
    b = depth_result(tmp_path / "b", 7, pp)
    code, out, err = cli("compare", a, b, "--bootstrap", 200, "-o", tmp_path / "t.csv")
    assert code == 0, err
    rows = read_csv(tmp_path / "t.csv")
    diff = rows[2]
    idx = np.random.default_rng(0).integers(0, 12, size=(200, 12))
    alone = np.array([ref_rules(*curves_of(pp, ix, 7), 7) for ix in idx])
    assert (
        np.nanmax(alone, 0)[np.isfinite(alone).any(0)].tolist()
        != np.nanmin(alone, 0)[np.isfinite(alone).any(0)].tolist()
    )
    assert sum(diff[r] != "" for r in ("cosine", "kl", "overlap")) >= 2
    for rule in ("cosine", "kl", "overlap"):
        if diff[rule] != "":
            assert (
                float(diff[rule]) == 0
                and float(diff[f"{rule}_low"]) == 0
                and float(diff[f"{rule}_high"]) == 0
            )


def test_lens_known_difference(cli, tmp_path):
    """B's KL is A's + 0.5 on every token: the paired difference is 0.5 [0.5, 0.5] at every
    boundary (both weightings); the overlaps are equal: 0 [0, 0]."""
    L = 4
    pa = per_prompt(4, 9, L)
    pb = {**pa, "kl_sum": pa["kl_sum"] + 0.5 * pa["token_count"][:, None]}
    a, b = lens_result(tmp_path / "a", pa, L), lens_result(tmp_path / "b", pb, L)
    for weighting in ("token", "prompt"):
        out_csv = tmp_path / f"{weighting}.csv"
        code, out, err = cli(
            "compare", a, b, "--weighting", weighting, "-o", out_csv, "--bootstrap", 100
        )
        assert code == 0, err
        rows = [r for r in read_csv(out_csv) if r["result"] == "b − a (paired)"]
        assert [int(r["boundary"]) for r in rows] == list(range(L + 1))
        for r in rows:
            for col in ("KL", "KL_low", "KL_high"):
                assert float(r[col]) == pytest.approx(0.5, abs=1e-12)
            for col in ("overlap", "overlap_low", "overlap_high"):
                assert float(r[col]) == pytest.approx(0.0, abs=1e-12)
    assert "b − a (paired)" in out and (tmp_path / "prompt.png").exists()


def test_different_prompts_or_boundaries_give_no_difference(cli, tmp_path):
    a = lens_result(tmp_path / "a", per_prompt(4, 9, 4), 4)
    b = lens_result(tmp_path / "b", per_prompt(5, 9, 4), 4, prompts_hash="sha256:other")
    c = lens_result(tmp_path / "c", per_prompt(6, 9, 6), 6)
    code, out, err = cli("compare", a, b, c)
    assert code == 0, err
    assert "no paired difference of b and a: they ran on different prompts" in out
    assert "no paired difference of c and a: their curves have 5 and 7 boundaries" in out
    assert "(paired)" not in out


def alignment_result(path, path_j, spearman, interval=None):
    from align.store import write_result

    err = np.random.default_rng(0).random((4, 5))
    summ = {
        "source_boundaries": [1, 2, 3],
        "argmin_path": path_j,
        "spearman": spearman,
        "mean_depth_gap": 0.125,
        "spearman_note": "undefined: the argmin path is constant" if spearman is None else "",
        "soft_depth": [0.2, 0.5, 0.8],
        "soft_depth_spread": 0.6,
    }
    if interval:
        summ.update({"spearman_low": interval[0], "spearman_high": interval[1]})
    ds = xr.Dataset(
        {
            "relative_error": (("source_boundary", "target_boundary"), err),
            "r2": (("source_boundary", "target_boundary"), 1 - err),
        },
        coords={"source_boundary": np.arange(4), "target_boundary": np.arange(5)},
        attrs={
            "summary": summ,
            "source_model": "/m/small",
            "target_model": "/m/big",
            "n_layers_source": 3,
            "n_layers_target": 4,
        },
    )
    write_result(str(path), ds, "alignment")
    return str(path)


def test_alignment_summary_with_intervals_where_held(cli, tmp_path):
    a = alignment_result(tmp_path / "trained", [1, 3, 4], 0.96, interval=(0.81, 1.0))
    b = alignment_result(tmp_path / "control", [2, 2, 2], None)
    code, out, err = cli("compare", a, b, "-o", tmp_path / "t.md")
    assert code == 0, err
    assert "0.96 [0.81, 1]" in out and "1 3 4" in out and "2 2 2" in out
    assert (
        "no intervals for control" in out
        and "control: Spearman undefined: the argmin path is constant" in out
    )
    md = (tmp_path / "t.md").read_text()
    assert "| trained | small | big | 3 | 4 | 1 3 4 | 0.96 [0.81, 1] | 0.125 | 0.6 |" in md
    assert (tmp_path / "t.png").stat().st_size > 0


def test_mixed_kinds_and_unknown_files_are_refused(cli, tmp_path):
    d = depth_result(tmp_path / "d", 6, ed=[1, 2, 3])
    lens = lens_result(tmp_path / "l", per_prompt(4, 5, 4), 4)
    one_line_error(*cli("compare", d, lens)[::2], str(tmp_path / "l"), "lens result", "one kind")
    text = tmp_path / "notes.txt"
    text.write_text("not a result")
    one_line_error(*cli("compare", d, text)[::2], str(text), "not a store")
    from align.store import write_result

    skip = xr.Dataset({"R": (("skipped",), np.zeros(2))})
    write_result(str(tmp_path / "s"), skip, "skipping")
    one_line_error(
        *cli("compare", tmp_path / "s")[::2],
        str(tmp_path / "s"),
        "skipping result",
        "depth, lens and alignment",
    )


def test_unsafe_outputs_are_refused_and_nothing_is_written(cli, tmp_path):
    d = depth_result(tmp_path / "d", 6, ed=[1, 2, 3])
    one_line_error(*cli("compare", d, "-o", tmp_path / "t.txt")[::2], "t.txt", ".csv or .md")
    existing = tmp_path / "mine.csv"
    existing.write_text("my own numbers\n")
    one_line_error(*cli("compare", d, "-o", existing)[::2], str(existing), "--overwrite")
    assert existing.read_text() == "my own numbers\n"
    one_line_error(*cli("compare", d, "-o", tmp_path / "d" / "t.csv")[::2], "input")
    one_line_error(
        *cli("compare", d, "-o", tmp_path / "t.csv", "--figure", tmp_path / "f.jpg")[::2],
        "f.jpg",
        ".png",
    )
    assert not (tmp_path / "t.csv").exists()
    code, _, err = cli("compare", d, "-o", existing, "--overwrite")
    assert code == 0, err and existing.read_text().startswith("result,")


def alignment_with_documents(path, ratio, n, docs):
    """An alignment result with per-document sums: ratio (K, 4, 5) Σ‖e‖/‖y‖ per held-out
    document, n (K,) its tokens; relative_error and the summary's statistics from them."""
    from align.store import write_result

    err = ratio.sum(0) / n.sum()
    src, tgt = np.arange(4), np.arange(5)
    path_j = [int(1 + np.argmin(err[i, 1:])) for i in (1, 2, 3)]
    gap = float(np.mean([abs(j / 4 - i / 3) for i, j in zip((1, 2, 3), path_j)]))
    summ = {
        "source_boundaries": [1, 2, 3],
        "argmin_path": path_j,
        "spearman": None,
        "mean_depth_gap": gap,
        "soft_depth": [],
        "soft_depth_spread": 0.0,
        "slope": float(np.polyfit([1 / 3, 2 / 3, 1], np.array(path_j) / 4, 1)[0]),
    }
    ds = xr.Dataset(
        {
            "relative_error": (("source_boundary", "target_boundary"), err),
            "doc_ratio_sum": (("heldout_doc", "source_boundary", "target_boundary"), ratio),
            "doc_n_tokens": (("heldout_doc",), n),
        },
        coords={"source_boundary": src, "target_boundary": tgt, "heldout_doc": docs},
        attrs={
            "summary": summ,
            "source_model": "/m/small",
            "target_model": "/m/big",
            "n_layers_source": 3,
            "n_layers_target": 4,
        },
    )
    write_result(str(path), ds, "alignment")
    return str(path)


def paired_alignments(tmp_path):
    """Two 4x5 alignment results on the same 12 held-out documents, b's diagonal 0.1 worse:
    (path a, path b, per-document ratio sums of a and of b, token counts, documents)."""
    rng = np.random.default_rng(11)
    K = 12
    n = rng.integers(5, 40, K).astype(float)
    base = rng.uniform(0.3, 1.0, (4, 5))
    ra = (base[None] + rng.normal(0, 0.05, (K, 4, 5))) * n[:, None, None]
    rb = (base[None] + 0.1 * np.eye(4, 5)[None] + rng.normal(0, 0.05, (K, 4, 5))) * n[:, None, None]
    docs = np.arange(100, 100 + K)
    return (
        alignment_with_documents(tmp_path / "a", ra, n, docs),
        alignment_with_documents(tmp_path / "b", rb, n, docs),
        ra,
        rb,
        n,
        docs,
    )


def test_alignment_paired_difference_matches_a_plain_loop(cli, tmp_path):
    a, b, ra, rb, n, docs = paired_alignments(tmp_path)
    K = len(docs)
    c = alignment_with_documents(
        tmp_path / "c", rb, n, docs + 1
    )  # other held-out documents: no pairing
    code, out, err = cli(
        "compare", a, b, c, "-o", tmp_path / "t.csv", "--bootstrap", "300", "--seed", "4"
    )
    assert code == 0, err
    assert (
        "no paired difference of c and a: they were scored on different held-out documents" in out
    )
    rows = {r["result"]: r for r in csv.DictReader(io.StringIO((tmp_path / "t.csv").read_text()))}
    # the reference: the documented indices, each resample's matrix from the drawn documents' sums
    idx = np.random.default_rng(4).integers(0, K, size=(300, K))

    def gap_and_slope(ratio, take):
        err = sum(ratio[k] for k in take) / sum(n[k] for k in take)
        path = np.array([1 + int(np.argmin(err[i, 1:])) for i in (1, 2, 3)])
        return np.mean(np.abs(path / 4 - np.array([1, 2, 3]) / 3)), np.polyfit(
            [1 / 3, 2 / 3, 1], path / 4, 1
        )[0]

    diffs = np.array([np.subtract(gap_and_slope(rb, t), gap_and_slope(ra, t)) for t in idx])
    row = rows["b − a (paired)"]
    for k, col in enumerate(("mean depth gap", "slope")):
        lo, hi = np.percentile(diffs[:, k], [2.5, 97.5])
        assert float(row[f"{col}_low"]) == pytest.approx(lo, abs=1e-12)
        assert float(row[f"{col}_high"]) == pytest.approx(hi, abs=1e-12)
