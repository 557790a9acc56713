"""`align contrib`, `lens` and `depth` through the command line: the depth result follows the
rules of docs/methods.md applied by hand to the two results' own curves."""

from __future__ import annotations

import numpy as np


def test_cli_depth_end_to_end(cli, zoo, corpus_file, tmp_path):
    """contrib + lens + depth through the CLI; the depth result follows the rules applied to
    the two results' own curves (checked here by hand, without align)."""
    from align.store import open_result

    m = zoo("qwen2", num_hidden_layers=4)
    for cmd, out in (("contrib", "c.zarr"), ("lens", "l.zarr")):
        code, _, err = cli(cmd, m, corpus_file, "-o", tmp_path / out, "--max-docs", "4")
        assert code == 0, err
    code, _, err = cli(
        "depth",
        "--contrib",
        tmp_path / "c.zarr",
        "--lens",
        tmp_path / "l.zarr",
        "-o",
        tmp_path / "d.zarr",
    )
    assert code == 0, err
    d = open_result(tmp_path / "d.zarr", "depth")
    c, l = (
        open_result(tmp_path / "c.zarr", "contributions"),
        open_result(tmp_path / "l.zarr", "lens"),
    )
    cbar = c["cos"].sel(agg="mean").values.mean(0)
    kl = l["kl"].sel(weighting="token").values[:4]
    ov = l["overlap"].sel(weighting="token").values[:4]
    want_cos = [x for x in range(3) if cbar[x] < 0 <= cbar[x + 1]]
    want_kl = [x for x in range(3) if kl[x] < 0.5 * kl.max()]
    want_ov = [x for x in range(3) if ov[x] > 0.3]
    want = [
        want_cos[-1] if want_cos else np.nan,
        want_kl[0] if want_kl else np.nan,
        want_ov[0] if want_ov else np.nan,
    ]
    np.testing.assert_array_equal(d["effective_depth"].values, want)
    np.testing.assert_allclose(d["ratio"].values, (np.array(want) + 1) / 4)
    assert list(d["rule"].values) == ["cosine", "kl", "overlap"] and d.attrs["n_layers"] == 4
    assert set(d.attrs["reasons"]) == {"cosine", "kl", "overlap"}
    for rule, v in zip(("cosine", "kl", "overlap"), want):
        assert (d.attrs["reasons"][rule] == "") == (not np.isnan(v))
