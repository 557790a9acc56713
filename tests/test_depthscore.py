"""`align depthscore`: the depth score of hand-built R and O with hand-worked centres of mass,
levels from --levels or from the skip result's corpus, and one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from assertions import one_line_error

L = 4
# R[s, l] (skipped s, later l). Diagonal and lower entries are not "later" layers and must not
# count; row s = L-1 has no later layer and is left out.
R_A = np.array([[50., 3., 3., 3.],
                [9., 50., 0., 2.],
                [9., 9., 50., 2.],
                [9., 9., 9., 50.]])
# m = (3, 1, 2): DS = (0*3 + 1*1 + 2*2) / (3 + 1 + 2) = 5/6
O_A = np.array([0., 1., 0., 3.])  # DS = (1*1 + 3*3) / (1 + 3) = 2.5
R_B = np.array([[0., 0., 0., 0.],
                [0., 0., 4., 4.],
                [0., 0., 0., 1.],
                [0., 0., 0., 0.]])
# m = (0, 4, 1): DS = (1*4 + 2*1) / 5 = 1.2
O_B = np.array([2., 2., 0., 0.])  # DS = (0 + 2) / 4 = 0.5


def _skip_result(path, R, O, corpus=None, model="m"):
    """A "skipping" result holding R and O for one setting, part and agg (others zero)."""
    from align.analyses.skip import to_dataset
    from align.store import write_result

    Rs = np.zeros((1, 2, 2, L, L))
    Os = np.zeros((1, 2, 2, L))
    Rs[0, 0, 0], Os[0, 0, 0] = R, O
    res = {"R": Rs, "O": Os, "settings": ["current"], "parts": ["layer", "attn"],
           "n_prompts": {"current": 5}, "n_prompts_too_short": {}}
    attrs = {"model": model, "config_hash": "h", "corpus": corpus or {"source": "x.txt", "fmt": "plain"}}
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

    gen = _skip_result(tmp_path / "gen", R_A, O_A, corpus={"source": "generated addition:4", "fmt": "addition:4"})
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
    from test_outputs_property import one_line_refusal, snapshot

    a = _skip_result(tmp_path / "a", R_A, O_A)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("my notes\n")
    (tmp_path / "file.txt").write_text("a file\n")
    monkeypatch.chdir(tmp_path)
    out = {"non-empty folder": str(tmp_path / "notes"), "current folder": ".", "file": str(tmp_path / "file.txt"),
           "input": a}[target]
    before = snapshot(tmp_path)
    code, _, err = cli("depthscore", a, "--levels", "1", "-o", out, *(["--overwrite"] if overwrite else []))
    one_line_refusal(code, err, out)
    assert snapshot(tmp_path) == before


def test_end_to_end_from_math_prompts(cli, zoo, tmp_path):
    """Two `align skip` runs on MATH-format files of levels 1 and 2; depthscore reads the
    levels from their corpora and its DS equals the centre of mass computed here from R and O."""
    from align.store import open_result

    model = zoo("qwen2")
    outs = []
    for level in (2, 1):
        f = tmp_path / f"math{level}.jsonl"
        f.write_text("".join(json.dumps({"problem": f"What is {k} plus {level}?", "level": f"Level {level}",
                                         "solution": f"It is {k + level}."}) + "\n" for k in range(3)))
        out = tmp_path / f"skip{level}"
        code, _, err = cli("skip", model, f, "--format", "math", "--settings", "current", "--parts", "layer", "-o", out)
        assert code == 0, err
        outs.append(str(out))
    code, _, err = cli("depthscore", *outs, "-o", tmp_path / "ds")
    assert code == 0, err
    ds = open_result(str(tmp_path / "ds"), "depthscore")
    assert list(ds["level"].values) == [1, 2]
    for level, path in zip((2, 1), outs):
        skip = open_result(path, "skipping")
        R = skip["R"].sel(setting="current", part="layer", agg="max").values.astype(float)
        O = skip["O"].sel(setting="current", part="layer", agg="max").values.astype(float)
        n = R.shape[0]
        m = np.array([R[s, s + 1:].mean() for s in range(n - 1)])
        want_layer = sum(s * m[s] for s in range(n - 1)) / m.sum()
        want_output = sum(s * O[s] for s in range(n)) / O.sum()
        got = ds["DS"].sel(level=level, setting="current", part="layer", agg="max")
        np.testing.assert_allclose(float(got.sel(effect="layer").values), want_layer, rtol=1e-12)
        np.testing.assert_allclose(float(got.sel(effect="output").values), want_output, rtol=1e-12)
