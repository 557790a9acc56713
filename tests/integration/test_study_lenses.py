"""A study's lenses (`[analyses] lens` kinds, `lens_through`): every kind is a unit with its
own result, the cross-model lens equals its maps read through the target's own head
(tests/helpers/lens_reference.py, the model's transformers modules in float64), and the
report draws them: the model page's kinds side by side, the pair page's cross-model lens,
with the numbers the results hold."""

from __future__ import annotations

import json
import os
import re

import numpy as np

from tests.helpers import lens_reference as ref


def _state(root):
    with open(os.path.join(root, "study.json"), encoding="utf-8") as f:
        return json.load(f)


def test_every_lens_kind_is_a_unit_with_its_own_result(lens_study):
    from align.store import open_result

    units = _state(lens_study)["units"]
    outputs = {}
    for name, kind in (
        ("lens a", "logit"),
        ("lens-linear a", "linear"),
        ("lens-tuned a", "tuned"),
    ):
        assert units[name]["state"] == "done", (name, units[name])
        ds = open_result(os.path.join(lens_study, units[name]["output"]), "lens")
        assert ds.attrs["kind"] == kind
        for m in ("kl", "top1", "ce"):  # each with its interval
            assert {m, f"{m}_low", f"{m}_high"} <= set(ds.data_vars), (kind, m)
        outputs[name] = units[name]["output"]
    assert len(set(outputs.values())) == 3
    assert units["lens-through a->b"]["state"] == "done"
    assert "lens b" not in units  # b names no analysis


def test_the_cross_model_lens_equals_its_maps_read_through_the_targets_head(lens_study, hf_models):
    """Per boundary b of a: x W_b + c_b with the maps the unit kept, through b's final norm and
    unembedding in float64 (the reference's own), against b's own output on the fit's held-out
    tokens: KL and cross-entropy rtol 1e-4 (align's head runs in float32), top-1 agreement
    within one token and a half."""
    from align.store import open_activations, open_alignment, open_result
    from tests.helpers.fixtures_study import B_SHAPE

    folder = os.path.join(lens_study, "results/lens-through/a--b")
    maps, res = open_alignment(f"{folder}/maps.zarr"), open_result(f"{folder}/lens.zarr", "lens")
    source = open_activations(os.path.join(lens_study, "stores/a.zarr"))
    target = open_activations(os.path.join(lens_study, "stores/b.zarr"))
    model_b, _ = hf_models("qwen2", **B_SHAPE)
    import copy

    model_b = copy.deepcopy(model_b)
    t = {k: source.tokens(k) for k in ("token_id", "doc", "seq", "pos")}
    rows = ref.scored_rows(t["doc"], t["seq"], t["pos"], maps.attrs["split"]["heldout_docs"])
    L_B = target.n_layers
    assert [int(x) for x in maps["target_boundary"].values] == [L_B]
    final = ref.logits(model_b, target.resid(L_B)[rows])
    nxt = t["token_id"][rows + 1]
    assert res.attrs["through"] and res.attrs["n_tokens"] == len(rows)
    for b in range(source.n_layers + 1):
        cell = {"source_boundary": b, "target_boundary": L_B}
        W, c = (np.asarray(maps[k].sel(cell).values, np.float64) for k in "Wc")
        lens = ref.logits(model_b, np.asarray(source.resid(b)[rows], np.float64) @ W + c)
        want = ref.scores(lens, final, nxt)
        for m in ("kl", "ce"):
            got = float(res[m].sel(weighting="token", boundary=b))
            np.testing.assert_allclose(got, want[m].mean(), rtol=1e-4, atol=1e-7)
        got = float(res["top1"].sel(weighting="token", boundary=b))
        assert abs(got - want["top1"].mean()) <= 1.5 / len(rows)


def _cells(html: str, row: str) -> list:
    """The texts of the cells of the table row whose first cell is `row`."""
    m = re.search(rf"<tr><t[hd][^>]*>{re.escape(row)}</t[hd]>(.*?)</tr>", html)
    assert m, row
    return [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", m.group(1))]


def test_the_report_draws_the_kinds_side_by_side_and_the_cross_model_lens(lens_study):
    """The model page's side-by-side section names each kind's KL, top-1 and cross-entropy
    column, each cell the result's number and interval at 4 decimals; its figure is named;
    the pair page holds a read through b's head with the lens result's numbers."""
    from align.store import open_result

    report = os.path.join(lens_study, "report")
    with open(f"{report}/models/a.html", encoding="utf-8") as f:
        page = f.read()
    assert "Lenses side by side" in page
    assert 'aria-label="lenses of a: KL and top-1 agreement per boundary"' in page
    results = [
        open_result(os.path.join(lens_study, f"results/{k}/a.zarr"), "lens")
        for k in ("lens", "lens-linear", "lens-tuned")
    ]
    side = page[page.index("Lenses side by side") :]
    cells = _cells(side, "boundary 1")
    assert len(cells) == 9
    for k, ds in enumerate(results):
        for j, m in enumerate(("kl", "top1", "ce")):
            at = {"weighting": "token", "boundary": 1}
            value, low, high = (float(ds[v].sel(at)) for v in (m, f"{m}_low", f"{m}_high"))
            assert cells[3 * k + j].startswith(f"{value:.4f} [{low:.4f}, {high:.4f}]"), (
                k,
                m,
                cells[3 * k + j],
            )
    with open(f"{report}/pairs/a--b.html", encoding="utf-8") as f:
        pair = f.read()
    assert "a read through b&#x27;s head" in pair
    through = open_result(os.path.join(lens_study, "results/lens-through/a--b/lens.zarr"))
    cells = _cells(pair[pair.index("read through") :], "boundary 0")
    kl = float(through["kl"].sel(weighting="token", boundary=0))
    assert cells[0].startswith(f"{kl:.4f} ["), cells


def test_a_pair_the_lens_cannot_read_is_written_as_its_refusal(tiny_study, tmp_path):
    """a -> c (two tokenizers, paired by character anchors): the unit fits the maps, the lens
    refuses them, and the unit writes that one line as refused.txt, which the pair page's
    section shows; no lens result is written."""
    from align.study import load_study
    from align.study.lenses import through_section
    from align.study.runners import run_unit
    from align.study.units import THROUGH, through_unit

    study_file, done, _ = tiny_study
    text = open(study_file, encoding="utf-8").read() + "[analyses]\nlens_through = true\n"
    path = tmp_path / "s.toml"
    path.write_text(text, encoding="utf-8")
    study = load_study(str(path))
    root = tmp_path / "out"
    (root / "stores").mkdir(parents=True)
    for name in ("a", "c"):  # the tiny study's stores, read only
        os.symlink(os.path.join(done, "stores", f"{name}.zarr"), root / "stores" / f"{name}.zarr")
    u = through_unit(study, "a", "c")
    lines = []
    run_unit(u, study, str(root), lines.append)
    folder = root / u.output
    refusal = (folder / "refused.txt").read_text(encoding="utf-8").strip()
    assert "\n" not in refusal
    assert "pairs two tokenizations by character anchors" in refusal, refusal
    assert str(folder / "maps.zarr") in refusal
    assert not (folder / "lens.zarr").exists()
    state = {"units": {f"{THROUGH} a->c": {"state": "done", "output": u.output}}}
    section = through_section(str(root), state, "a", "c")
    assert "Not drawn:" in section and "character anchors" in section
