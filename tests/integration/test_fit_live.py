"""`align fit --live` gives the store route's result: `align extract` × 2 + `align fit` on the
same models, corpus and options, compared score by score.

Both routes sum the same float64 rows in another order (and about other shifts), so the
scores agree to rounding: rtol 1e-10, with atol 1e-11 on top. relative_error and norm_error
are already ratios to ‖y‖: a difference of 1e-11 there is a prediction that moved by 1e-11 of
the target's norm. The absolute floor matters only for an almost perfect map (boundary 0 to
boundary 0: both are functions of the token alone, error ~3e-4 of ‖y‖), whose error, a
difference of two nearly equal numbers, moved by up to 3e-12 of ‖y‖ (1e-8 of itself) when
the sums were added in another order; every other pair agrees within 1e-10 relative. α_rel
is identical; the absolute α (α_rel · trace/d) agrees to 1e-13.

Every family (qwen2, llama, qwen3, olmo2) runs float32 and bf16 compute; across the cases
each of them fits with and without --include-first-token and with a pair grid that must be
blocked (a plan budget that holds two of the five target boundaries per pass)."""

from __future__ import annotations

import numpy as np
import pytest

from align.fitting import Execution, FitSpec
from align.fitting.fit_options import FitHooks

BIG = {"num_hidden_layers": 4, "hidden_size": 96}
CORPUS = dict(max_length=64, batch_size=4)
CASES = [  # family, compute dtype, include the first token, blocked
    ("qwen2", "float32", False, False),
    ("qwen2", "bfloat16", True, True),
    ("llama", "float32", True, False),
    ("llama", "bfloat16", False, True),
    ("qwen3", "float32", False, True),
    ("qwen3", "bfloat16", True, False),
    ("olmo2", "float32", True, True),
    ("olmo2", "bfloat16", False, False),
]
RTOL, ATOL = 1e-10, 1e-11
SYNC = Execution(scheduler="synchronous")


def store_fit(S, T, run=SYNC, **spec):
    """The store route's result in this process, with the FitSpec of `spec`'s fields."""
    import align

    return align.fit(S, T, None, FitSpec(**spec), run, log=lambda m: None).dataset


def live_job(zoo, corpus_file, family, dtype):
    """This module's LiveJob: `family`'s zoo model against its BIG twin, in `dtype`."""
    from align import corpus, models
    from align.fitting.live_route import pipeline as live

    return live.LiveJob(
        models.ModelSpec(zoo(family), dtype=dtype),
        models.ModelSpec(zoo(family, **BIG), dtype=dtype),
        corpus.CorpusSpec(corpus_file, max_length=CORPUS["max_length"]),
        CORPUS["batch_size"],
    )


def live_stores(extracted):
    """(S, T): the stores `align extract` makes of the qwen2 pair of `live_job`, float32."""
    return extracted("qwen2", dtype="float32", **CORPUS), extracted(
        "qwen2", model_overrides=BIG, **CORPUS
    )


def live_fit(zoo, corpus_file, family, dtype, out=None, budget=None, run=None, **spec):
    """The live route's result of `family`'s pair in `dtype`, with the FitSpec of `spec`'s
    fields, `run` (an Execution, or None for its defaults) and `budget` as FitHooks'
    worker_budget."""
    from align.fitting.live_route import pipeline as live

    job = live_job(zoo, corpus_file, family, dtype)
    hooks = FitHooks(worker_budget=budget)
    return live.fit_live(job, out, FitSpec(**spec), run, hooks=hooks, log=lambda m: None)


def two_of_five_budget(zoo, corpus_file, family, dtype):
    """`budget_of_two_of_five` for this module's job of `family` in `dtype`."""
    return budget_of_two_of_five(live_job(zoo, corpus_file, family, dtype))


def budget_of_two_of_five(job, **spec):
    """A plan budget that holds two target boundaries per pass, not three (held-out rows not
    kept), beside the document bootstrap's weights: the bytes the plan counts, from its own
    arithmetic (the input of this case), for `job` fitted with the FitSpec of `spec`'s fields."""
    from align.fitting.fit_options import request
    from align.fitting.live_route import pipeline as live
    from align.fitting.planning import budget

    opts = request(FitSpec(**spec))
    p = live.prepare(job, opts)
    shape = live.shape_of(p)
    # on the CPU the document bootstrap's weights share the budget with the passes
    boot = budget.bootstrap_bytes(
        opts.spec.bootstrap,
        len(p.split.test_docs),
        len(p.source_boundaries),
        len(p.target_boundaries),
        p.configs[1].hidden_size,
    )["passes"]
    return shape.model_bytes + sum(budget.pass_bytes(shape, 2, False).values()) + boot


def assert_same_result(a, b):
    """Two alignment Datasets hold the same result (see the module docstring for tolerances)."""
    assert set(a.data_vars) == set(b.data_vars) and set(a.coords) == set(b.coords)
    for name in ("relative_error", "norm_error", "r2"):
        np.testing.assert_allclose(
            b[name].values, a[name].values, rtol=RTOL, atol=ATOL, err_msg=name
        )
    np.testing.assert_array_equal(b["alpha_rel"].values, a["alpha_rel"].values)
    np.testing.assert_allclose(b["alpha"].values, a["alpha"].values, rtol=1e-13)
    for c in a.coords:
        np.testing.assert_array_equal(b[c].values, a[c].values)
    np.testing.assert_array_equal(b["heldout_doc"].values, a["heldout_doc"].values)
    assert b.attrs["split"] == a.attrs["split"]
    sa, sb = a.attrs["summary"], b.attrs["summary"]
    assert sb["argmin_path"] == sa["argmin_path"] and sb["spearman_note"] == sa["spearman_note"]
    for k in ("mean_depth_gap", "soft_depth_spread", "spearman"):
        if sa[k] is None:
            assert sb[k] is None
        else:
            np.testing.assert_allclose(sb[k], sa[k], rtol=RTOL, atol=ATOL, err_msg=k)
    np.testing.assert_allclose(sb["soft_depth"], sa["soft_depth"], rtol=RTOL, atol=ATOL)
    assert set(b.attrs) - {"align"} == set(a.attrs) - {
        "align"
    }  # the same schema (the marker is the writer's)
    for k in ("n_layers_source", "n_layers_target", "source_model", "target_model"):
        assert b.attrs[k] == a.attrs[k], k


@pytest.mark.parametrize("family,dtype,first,blocked", CASES)
def test_live_equals_extract_extract_fit(
    zoo, extracted, corpus_file, family, dtype, first, blocked
):
    S = extracted(family, dtype=dtype, **CORPUS)
    T = extracted(family, model_overrides=BIG, dtype=dtype, **CORPUS)
    a = store_fit(S, T, include_first_token=first)
    budget = two_of_five_budget(zoo, corpus_file, family, dtype) if blocked else None
    rep = live_fit(zoo, corpus_file, family, dtype, budget=budget, include_first_token=first)
    assert rep.plan["passes"] == (3 if blocked else 1), rep.plan["blocks"]
    assert rep.dataset.attrs["route"] == "live"
    assert rep.dataset.attrs["source"]["source"] == "model"  # the models' provenance, not a store's
    assert rep.dataset.attrs["target"]["weights"]["id"].startswith("sha256 ")
    assert_same_result(a, rep.dataset)
