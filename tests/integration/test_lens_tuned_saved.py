"""`align lens --kind tuned --save-maps`: the trained translators kept as a translators result,
which, applied by the paper's lens written out in float64 (tests/helpers/lens_reference.py,
the model's own transformers modules), give the lens result's held-out numbers; an existing
path is refused before any training."""

import copy

import numpy as np
import pytest


def _run(output, **kw):
    from align.analyses.analysis_options import LensOptions
    from align.analyses.run import run_lens
    from align.store import open_result

    store = kw.pop("store")
    run_lens(str(output), store=store, options=LensOptions(**kw), log=lambda m: None)
    return open_result(str(output), "lens")


def test_the_saved_translators_give_the_lens_results_numbers(extracted, hf_models, tmp_path):
    """Per boundary b < L: KL and cross-entropy of ref.tuned_lens_logits(A_b, c_b) against the
    model's output on the held-out tokens of the result's split, rtol 1e-4 (align's head runs
    in float32); the training loss kept equals the lens result's."""
    from align.store import open_activations, open_result
    from tests.helpers import lens_reference as ref

    path = extracted("llama")
    saved = tmp_path / "translators.zarr"
    res = _run(tmp_path / "lens.zarr", store=path, kind="tuned", steps=20, save_maps=str(saved))
    tr = open_result(str(saved), "translators")
    s = open_activations(path)
    model = copy.deepcopy(hf_models("llama")[0])
    L = s.n_layers
    assert [int(b) for b in tr["boundary"].values] == list(range(L))
    assert res.attrs["maps"] == str(saved) and tr.attrs["kind"] == "tuned"
    t = {k: s.tokens(k) for k in ("token_id", "doc", "seq", "pos")}
    rows = ref.scored_rows(t["doc"], t["seq"], t["pos"], res.attrs["split"]["heldout_docs"])
    final = ref.logits(model, s.resid(L)[rows])
    nxt = t["token_id"][rows + 1]
    for b in range(L):
        A, c = tr["A"].sel(boundary=b).values, tr["c"].sel(boundary=b).values
        assert np.abs(A).max() > 0  # trained, not the identity
        want = ref.scores(ref.tuned_lens_logits(model, s.resid(b)[rows], A, c), final, nxt)
        for m in ("kl", "ce"):
            got = float(res[m].sel(weighting="token", boundary=b))
            np.testing.assert_allclose(got, want[m].mean(), rtol=1e-4)
    np.testing.assert_array_equal(
        tr["train_loss"].values, res["train_loss"].sel(boundary=range(L)).values
    )


def test_an_existing_path_is_refused_before_training(extracted, tmp_path):
    from align.errors import OutputRefused

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(OutputRefused) as e:
        _run(tmp_path / "lens.zarr", store=extracted("llama"), kind="tuned", save_maps=str(taken))
    assert str(taken) in str(e.value) and "\n" not in str(e.value)
    assert (taken / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert not (tmp_path / "lens.zarr").exists()
