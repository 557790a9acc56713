"""`align depthscore`: the depth score of hand-built R and O with hand-worked centres of mass,
levels from --levels or from the skip result's corpus, and one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.assertions import one_line_error

L = 4
# R[s, l] (skipped s, later l) of the current setting (align's extension). Diagonal and lower
# entries are not "later" layers and must not count; row s = L-1 has no later layer and is
# left out.
R_A = np.array(
    [[50.0, 3.0, 3.0, 3.0], [9.0, 50.0, 0.0, 2.0], [9.0, 9.0, 50.0, 2.0], [9.0, 9.0, 9.0, 50.0]]
)
# m = (3, 1, 2): DS = (0*3 + 1*1 + 2*2) / (3 + 1 + 2) = 5/6
O_A = np.array([0.0, 1.0, 0.0, 3.0])  # DS = (1*1 + 3*3) / (1 + 3) = 2.5
R_B = np.array(
    [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 4.0, 4.0], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]]
)
# m = (0, 4, 1): DS = (1*4 + 2*1) / 5 = 1.2
O_B = np.array([2.0, 2.0, 0.0, 0.0])  # DS = (0 + 2) / 4 = 0.5
# The future setting: layers l <= s are unchanged at the measured positions (R[s, l<=s] = 0).
# P1's m_s = sum_l R[s, l] / max(L-1-s, 1) over s = 0..L-1.
R_F = np.array(
    [[0.0, 3.0, 3.0, 3.0], [0.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 5.0], [0.0, 0.0, 0.0, 0.0]]
)
# m = (9/3, 2/2, 5/1, 0/1) = (3, 1, 5, 0): DS = (0*3 + 1*1 + 2*5 + 3*0) / 9 = 11/9
O_F = np.array([0.0, 2.0, 0.0, 2.0])  # DS = (1*2 + 3*2) / 4 = 2
R_G = np.array(
    [[0.0, 6.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
)
# m = (6/3, 2/2, 0, 0) = (2, 1, 0, 0): DS = 1/3
O_G = np.array([1.0, 0.0, 0.0, 0.0])  # DS = 0


def _skip_result(path, R, O, corpus=None, model="m", future=None, options=None):
    """A "skipping" result holding R and O for the current setting, part layer and agg max
    (others zero); with `future` = (R, O), also the future setting's."""
    from align.analyses.skip import to_dataset
    from align.store import write_result

    settings = ["current"] + (["future"] if future is not None else [])
    Rs = np.zeros((len(settings), 2, 2, L, L))
    Os = np.zeros((len(settings), 2, 2, L))
    Rs[0, 0, 0], Os[0, 0, 0] = R, O
    if future is not None:
        Rs[1, 0, 0], Os[1, 0, 0] = future
    res = {
        "R": Rs,
        "O": Os,
        "settings": settings,
        "parts": ["layer", "attn"],
        "n_prompts": {s: 5 for s in settings},
        "n_prompts_too_short": {},
    }
    attrs = {
        "model": model,
        "config_hash": "h",
        "corpus": corpus or {"source": "x.txt", "fmt": "plain"},
    }
    if options is not None:
        attrs["options"] = options
    write_result(str(path), to_dataset(res, attrs, seed=0), "skipping")
    return str(path)


def test_depth_score_hand_worked(cli, tmp_path):
    from align.store import open_result

    a = _skip_result(tmp_path / "a", R_A, O_A)
    b = _skip_result(tmp_path / "b", R_B, O_B)
    code, _, err = cli("depthscore", a, b, "--levels", "3,2", "-o", tmp_path / "ds")
    assert code == 0, err
    ds = open_result(str(tmp_path / "ds"), "depthscore")
    assert list(ds["level"].values) == [2, 3]
    cell = ds["DS"].sel(setting="current", part="layer", agg="max")
    np.testing.assert_allclose(cell.sel(effect="layer").values, [1.2, 5 / 6], rtol=1e-12)
    np.testing.assert_allclose(cell.sel(effect="output").values, [0.5, 2.5], rtol=1e-12)
    # the all-zero cells: skipping changed nothing there, DS undefined and said so
    assert np.isnan(ds["DS"].sel(part="attn").values).all()
    assert any("level 2 current attn max layer effect" in u for u in ds.attrs["undefined"])
    assert "per prompt" in ds.attrs["intervals"]
    assert ds.attrs["n_layers"] == L and list(ds["n_prompts"].values) == [5, 5]


def test_headline_is_p1_future_score(cli, tmp_path):
    """With both settings, P1's future-setting layer-effect DS (hand-worked with P1's m_s) is
    the headline: first in the log line, named in attrs; the current setting's follows it,
    named align's extension; the plot draws the future line first under P1's name."""
    from align.plotting import plot_result
    from align.store import open_result

    a = _skip_result(tmp_path / "a", R_A, O_A, future=(R_F, O_F))
    b = _skip_result(tmp_path / "b", R_B, O_B, future=(R_G, O_G))
    code, _, err = cli("depthscore", a, b, "--levels", "2,3", "-o", tmp_path / "ds")
    assert code == 0, err
    ds = open_result(str(tmp_path / "ds"), "depthscore")
    fut = ds["DS"].sel(setting="future", part="layer", agg="max")
    np.testing.assert_allclose(fut.sel(effect="layer").values, [11 / 9, 1 / 3], rtol=1e-12)
    np.testing.assert_allclose(fut.sel(effect="output").values, [2.0, 0.0], rtol=1e-12)
    cur = ds["DS"].sel(setting="current", part="layer", agg="max", effect="layer")
    np.testing.assert_allclose(cur.values, [5 / 6, 1.2], rtol=1e-12)
    assert ds.attrs["headline"] == {
        "setting": "future",
        "part": "layer",
        "agg": "max",
        "effect": "layer",
        "name": "P1's depth score",
    }
    assert (
        "P1" in ds.attrs["scores"]["future"]
        and "align's extension" in ds.attrs["scores"]["current"]
    )
    line = next(ln for ln in err.splitlines() if ln.startswith("align depthscore: wrote"))
    head, _, rest = line.partition("; align's current-setting extension by level ")
    assert (
        "P1's depth score (future setting; layer effect, part layer, max) by level 2: 1.22, 3: 0.33"
        in head
    )
    assert rest.startswith("2: 0.83, 3: 1.20")
    fig = plot_result(ds, part="layer", agg="max")
    panel = fig.axes[0]
    assert panel.get_lines()[0].get_gid() == "DS/layer/future"
    assert panel.get_legend().get_texts()[0].get_text() == "future (P1)"
    assert fig._suptitle.get_text().startswith("P1's depth score (future setting)")


def test_results_of_different_splits_are_refused(cli, tmp_path):
    """Levels measured at different future split points do not compare: one line naming both."""
    a = _skip_result(
        tmp_path / "a", R_A, O_A, future=(R_F, O_F), options={"split": "answer-points"}
    )
    b = _skip_result(tmp_path / "b", R_B, O_B, future=(R_G, O_G), options={"split": "random"})
    code, _, err = cli("depthscore", a, b, "--levels", "2,3", "-o", tmp_path / "ds")
    one_line_error(code, err, str(tmp_path / "b"), "with split random", "with split answer-points")
    assert not (tmp_path / "ds").exists()


def test_plot_depthscore(cli, tmp_path):
    from align.plotting import plot_result
    from align.store import open_result

    a = _skip_result(tmp_path / "a", R_A, O_A)
    b = _skip_result(tmp_path / "b", R_B, O_B)
    assert cli("depthscore", a, b, "--levels", "2,3", "-o", tmp_path / "ds")[0] == 0
    fig = plot_result(open_result(str(tmp_path / "ds")), part="layer", agg="max")
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.get_lines()}
    np.testing.assert_allclose(lines["DS/layer/current"].get_ydata(), [5 / 6, 1.2])
    np.testing.assert_allclose(lines["DS/output/current"].get_ydata(), [2.5, 0.5])
    code, _, err = cli("plot", tmp_path / "ds", "-o", tmp_path / "ds.png")
    assert code == 0, err
    assert (tmp_path / "ds.png").stat().st_size > 0


def test_levels_from_provenance(cli, tmp_path):
    from align.corpus import CorpusSpec, corpus_hash
    from align.store import open_result

    gen = _skip_result(
        tmp_path / "gen", R_A, O_A, corpus={"source": "generated addition:4", "fmt": "addition:4"}
    )
    math = tmp_path / "math2.jsonl"
    math.write_text(json.dumps({"problem": "p", "solution": "s", "level": "Level 2"}) + "\n")
    spec = CorpusSpec(str(math), fmt="math")
    prov = {"source": str(math), "hash": corpus_hash(spec), **spec.options()}
    m2 = _skip_result(tmp_path / "m2", R_B, O_B, corpus=prov)
    code, _, err = cli("depthscore", gen, m2, "-o", tmp_path / "ds")
    assert code == 0, err
    assert list(open_result(str(tmp_path / "ds"))["level"].values) == [2, 4]
    # the corpus changed since: its levels cannot be trusted, so --levels is needed
    math.write_text(json.dumps({"problem": "p", "solution": "s", "level": "Level 5"}) + "\n")
    code, _, err = cli("depthscore", gen, m2, "-o", tmp_path / "ds2")
    one_line_error(code, err, str(tmp_path / "m2"), "--levels")


def test_errors(cli, tmp_path):
    a = _skip_result(tmp_path / "a", R_A, O_A)
    b = _skip_result(tmp_path / "b", R_B, O_B)
    code, _, err = cli("depthscore", a, b, "-o", tmp_path / "o1")
    one_line_error(code, err, str(tmp_path / "a"), "no level", "--levels")
    code, _, err = cli("depthscore", a, b, "--levels", "2", "-o", tmp_path / "o2")
    one_line_error(code, err, "--levels '2'", "1 levels for 2 skip results")
    code, _, err = cli("depthscore", a, b, "--levels", "2,x", "-o", tmp_path / "o3")
    one_line_error(code, err, "--levels '2,x'")
    code, _, err = cli("depthscore", a, b, "--levels", "3,3", "-o", tmp_path / "o4")
    one_line_error(code, err, "level 3")
    other = _skip_result(tmp_path / "c", R_B, O_B, model="other")
    code, _, err = cli("depthscore", a, other, "--levels", "1,2", "-o", tmp_path / "o5")
    one_line_error(code, err, "different models")
    bad = _skip_result(tmp_path / "nan", np.where(R_A > 49, np.nan, R_A), O_A)
    code, _, err = cli("depthscore", bad, "--levels", "1", "-o", tmp_path / "o6")
    one_line_error(code, err, str(tmp_path / "nan"), "non-finite")
    code, _, err = cli("depthscore", a, "--levels", "1", "-o", a)
    one_line_error(code, err, str(tmp_path / "a"))
    for k in range(1, 7):
        assert not (tmp_path / f"o{k}").exists()


@pytest.mark.parametrize("target", ["non-empty folder", "current folder", "file", "input"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_output_never_harms_anything(cli, tmp_path, monkeypatch, target, overwrite):
    from tests.cli.test_outputs_property import snapshot

    a = _skip_result(tmp_path / "a", R_A, O_A)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("my notes\n")
    (tmp_path / "file.txt").write_text("a file\n")
    monkeypatch.chdir(tmp_path)
    out = {
        "non-empty folder": str(tmp_path / "notes"),
        "current folder": ".",
        "file": str(tmp_path / "file.txt"),
        "input": a,
    }[target]
    before = snapshot(tmp_path)
    code, _, err = cli(
        "depthscore", a, "--levels", "1", "-o", out, *(["--overwrite"] if overwrite else [])
    )
    one_line_error(code, err, out)
    assert snapshot(tmp_path) == before


def _p1_depth_score(R):
    """P1's depth score of a future-setting R[skipped, later] (L, L), as its code computes it
    (skip_max_depth.py: `main` reduces max_dall.sum(-1) / torch.arange(L-1, -1, -1).clamp(min=1),
    `effect_layer_score` takes (arange(L) * m).sum() / m.sum()), written as loops."""
    L = R.shape[0]
    m = [sum(R[s, l] for l in range(L)) / max(L - 1 - s, 1) for s in range(L)]
    return sum(s * m[s] for s in range(L)) / sum(m)


def test_end_to_end_from_math_prompts(cli, zoo, tmp_path):
    """Two `align skip --split answer-points` runs (P1's MATH protocol) on MATH-format files of
    levels 1 and 2; depthscore reads the levels from their corpora; its headline, the future
    setting's layer-effect DS, equals P1's depth score computed here from the stored R as P1's
    code computes it, the current setting's and the output effect's the centres of mass of
    align's definitions, and the log line quotes the headline first."""
    from align.store import open_result

    model = zoo(
        "qwen2", num_hidden_layers=4
    )  # with 2 layers every layer-effect DS is 0: only s = 0 has a later layer
    outs = []
    for level in (2, 1):
        f = tmp_path / f"math{level}.jsonl"
        f.write_text(
            "".join(
                json.dumps(
                    {
                        "problem": f"What is {k} plus {level}?",
                        "level": f"Level {level}",
                        "solution": f"It is {k + level}, since {k} plus {level} makes {k + level}.",
                    }
                )
                + "\n"
                for k in range(3)
            )
        )
        out = tmp_path / f"skip{level}"
        code, _, err = cli(
            "skip",
            model,
            f,
            "--format",
            "math",
            "--settings",
            "current,future",
            "--parts",
            "layer",
            "--split",
            "answer-points",
            "-o",
            out,
        )
        assert code == 0, err
        outs.append(str(out))
    code, _, err = cli("depthscore", *outs, "--bootstrap", 100, "-o", tmp_path / "ds")
    assert code == 0, err
    ds = open_result(str(tmp_path / "ds"), "depthscore")
    assert list(ds["level"].values) == [1, 2]
    assert ds.attrs["splits"] == ["answer-points", "answer-points"]
    heads = {}
    for level, path in zip((2, 1), outs):
        skip = open_result(path, "skipping")
        assert all(
            len(p) >= 2 for p in skip.attrs["split_points"]
        )  # answers long enough for several points
        got = ds["DS"].sel(level=level, part="layer", agg="max")
        Rf = skip["R"].sel(setting="future", part="layer", agg="max").values.astype(float)
        heads[level] = _p1_depth_score(Rf)
        assert 0.1 < heads[level] < 2.9  # not an end of the layer range by construction
        np.testing.assert_allclose(
            float(got.sel(setting="future", effect="layer")), heads[level], rtol=1e-12
        )
        R = skip["R"].sel(setting="current", part="layer", agg="max").values.astype(float)
        n = R.shape[0]
        m = np.array([R[s, s + 1 :].mean() for s in range(n - 1)])
        want_layer = sum(s * m[s] for s in range(n - 1)) / m.sum()
        np.testing.assert_allclose(
            float(got.sel(setting="current", effect="layer")), want_layer, rtol=1e-12
        )
        for setting in ("current", "future"):
            O = skip["O"].sel(setting=setting, part="layer", agg="max").values.astype(float)
            want_output = sum(s * O[s] for s in range(n)) / O.sum()
            np.testing.assert_allclose(
                float(got.sel(setting=setting, effect="output")), want_output, rtol=1e-12
            )
    line = next(ln for ln in err.splitlines() if ln.startswith("align depthscore: wrote"))
    assert (
        f"P1's depth score (future setting, split answer-points; layer effect, part layer, max) by level "
        f"1: {heads[1]:.2f} ["
    ) in line
    assert line.index("P1's depth score") < line.index("align's current-setting extension")
