"""`align fit --control shuffle`: each source token paired with the target's token at the
same position of another document. The pairing's properties are checked on a table built by
hand; the fit's scores on that pairing against scikit-learn on rows read with zarr; on the
demo's trained models the shuffled matrix has no diagonal where the real one has."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from align.fitting import Execution, FitSpec
from tests.helpers.fixtures_fit import token_table
from tests.helpers.references import heldout_scores, sklearn_ridge


def test_partners_sit_at_the_same_position_of_another_document():
    from align.fitting.planning.split import shuffle_partners

    t = token_table(n_docs=9, doc_len=150, seq_len=64)
    keep = np.ones(len(t["doc"]), bool)
    keep[np.flatnonzero(t["doc"] == 4)[100:]] = (
        False  # one document shorter: its last window ends early
    )
    doc, seq, pos = t["doc"][keep], t["seq"][keep], t["pos"][keep]
    p = shuffle_partners(doc, seq, pos, seed=5)
    ok = p >= 0
    assert ok.mean() > 0.5
    np.testing.assert_array_equal(pos[p[ok]], pos[ok])  # the same position
    assert np.all(doc[p[ok]] != doc[ok])  # of another document
    for s in np.unique(seq):  # a sequence's tokens go to one other sequence, as far as it reaches
        mine = seq == s
        targets = np.unique(seq[p[mine & ok]])
        assert len(targets) <= 1
        if len(targets):
            length = int((seq == targets[0]).sum())
            np.testing.assert_array_equal(ok[mine], pos[mine] < length)
    np.testing.assert_array_equal(shuffle_partners(doc, seq, pos, seed=5), p)  # seeded
    assert not np.array_equal(shuffle_partners(doc, seq, pos, seed=6), p)


def test_one_document_has_no_partner():
    from align.errors import InputError
    from align.fitting.planning.split import shuffle_partners

    t = token_table(n_docs=1, doc_len=200, seq_len=64)
    with pytest.raises(InputError, match="one document"):
        shuffle_partners(t["doc"], t["seq"], t["pos"], 0)


def _read(path):
    g = zarr.open_group(path, mode="r")
    bounds = [int(b) for b in g["boundary"][:]]
    return (
        {b: np.asarray(g["resid"][k], dtype=np.float64) for k, b in enumerate(bounds)},
        g["doc"][:],
        g["seq"][:],
        g["pos"][:],
    )


def test_shuffled_scores_equal_sklearn_on_the_paired_rows(fit_pair):
    import align
    from align.fitting.planning.split import shuffle_partners

    S, T = fit_pair
    ds = align.fit(
        S,
        T,
        None,
        FitSpec(
            control="shuffle", alphas=(1e-2, 1.0), source_boundaries="1,2", target_boundaries="2"
        ),
        Execution(scheduler="synchronous", task_tokens=300),
        log=lambda m: None,
    ).dataset
    assert ds.attrs["options"]["control"] == "shuffle"
    X, doc, seq, pos = _read(S)
    Y, *_ = _read(T)
    p = shuffle_partners(doc, seq, pos, ds.attrs["options"]["seed"])
    split = ds.attrs["split"]
    use = (pos != 0) & (p >= 0)
    fit_r, val_r, test_r = (
        np.isin(doc, split[k]) & use for k in ("fit_docs", "validation_docs", "heldout_docs")
    )
    for i in (1, 2):
        cell = ds.sel(source_boundary=i, target_boundary=2)
        train = fit_r | val_r
        r = sklearn_ridge(X[i][train], Y[2][p[train]], float(cell.alpha))
        want = heldout_scores(r.predict(X[i][test_r]), Y[2][p[test_r]])["relative_error"]
        np.testing.assert_allclose(float(cell.relative_error), want, rtol=1e-6, atol=1e-9)


def test_shuffle_has_no_diagonal_on_the_demo_models(demo_run):
    import align

    out, report = demo_run
    S, T = report.stores["shallow"], report.stores["deep"]
    real = align.fit(S, T, None, FitSpec(bootstrap=200), log=lambda m: None).dataset
    shuf = align.fit(
        S, T, None, FitSpec(bootstrap=200, control="shuffle"), log=lambda m: None
    ).dataset
    inner = dict(source_boundary=slice(1, None), target_boundary=slice(1, None))
    assert np.all(shuf.relative_error.sel(**inner).values > real.relative_error.sel(**inner).values)
    s = shuf.attrs["summary"]
    # a meaningless pairing leaves every row nearly flat and the path without a slope
    assert s["soft_depth_spread"] < 0.1
    assert s["slope_low"] <= 0.05 and abs(s["slope"]) <= 0.25


def test_every_measure_on_the_shuffled_pairing_equals_the_references(fit_pair):
    """`--control shuffle` with `--measures`: each streamed measure on the held-out rows paired
    by the shuffle (tests/helpers/measures_reference.py, within 1e-8 relative), and RSA on
    the sampled rows, the documented draw among the held-out rows that have a partner
    (scipy's correlation distance and Spearman's correlation, 1e-10), with its calibration."""
    from scipy.spatial.distance import pdist
    from scipy.stats import spearmanr

    import align
    from align.fitting.planning.split import shuffle_partners
    from tests.helpers.measures_reference import MEASURES

    S, T = fit_pair
    streamed = ("cka", "cka-debiased", "procrustes", "cca", "svcca")
    ds = align.fit(
        S,
        T,
        None,
        FitSpec(
            control="shuffle",
            measures=",".join(streamed + ("rsa",)),
            sample_rows=120,
            permutations=9,
            bootstrap=0,
            alphas=(1e-2,),
            source_boundaries="1,2",
            target_boundaries="2,4",
        ),
        Execution(scheduler="synchronous"),
        log=lambda m: None,
    ).dataset
    X, doc, seq, pos = _read(S)
    Y, *_ = _read(T)
    p = shuffle_partners(doc, seq, pos, ds.attrs["options"]["seed"])
    held = np.flatnonzero(np.isin(doc, ds.attrs["split"]["heldout_docs"]) & (pos != 0) & (p >= 0))
    drawn = held[np.sort(np.random.default_rng(0).choice(len(held), 120, replace=False))]
    for i in (1, 2):
        for j in (2, 4):
            cell = ds.sel(source_boundary=i, target_boundary=j)
            for name in streamed:
                want = MEASURES[name](X[i][held], Y[j][p[held]])
                got = float(cell[name.replace("-", "_")])
                np.testing.assert_allclose(got, want, rtol=1e-8, err_msg=f"{name} {i}->{j}")
            x, y = X[i][drawn], Y[j][p[drawn]]
            want = spearmanr(pdist(x, "correlation"), pdist(y, "correlation"))[0]
            np.testing.assert_allclose(float(cell.rsa), want, rtol=1e-10, err_msg=f"rsa {i}->{j}")
            assert 0 < float(cell.rsa_p) <= 1 and np.isfinite(float(cell.rsa_calibrated))
