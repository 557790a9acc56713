"""The measures' registry (align.measures.registry): the rows form of every measure that has
both forms equals its sums form computed from the same rows; the tables callers read are
views of the records; a measure added as one record is computed by both forms' drivers."""

from __future__ import annotations

import numpy as np
import pytest

TOL = 1e-10  # float64: the two forms differ only in rounding


def _rows(seed, m=300, widths=(7, 5), shift=(3.0, -2.0)):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(m, widths[0])) @ rng.normal(size=(widths[0], widths[0])) + shift[0]
    y = x @ rng.normal(size=(widths[0], widths[1])) + 0.7 * rng.normal(size=(m, widths[1]))
    return x, y + shift[1]


def _sums_form(x, y, names):
    """Every measure of `names` from the sums of rows x, y (one group, no shift)."""
    from align.measures import pairs, streamed

    shifts = ({0: np.zeros(x.shape[1])}, {0: np.zeros(y.shape[1])})
    sums = streamed.row_sums({0: x}, {0: y}, shifts, np.zeros(len(x), np.int64), 1)
    sx, sy = (streamed.Side(s.weighted()) for s in (sums.source[0], sums.target[0]))
    return pairs.pair_measures(sx, sy, sums.pair[(0, 0)].weighted(), names, (0, 0))


@pytest.mark.parametrize("widths", [(7, 5), (5, 7), (6, 6)])
def test_rows_form_equals_sums_form_of_the_same_rows(widths):
    """Every measure with a sums and a rows form (CKA, debiased CKA, Procrustes, CCA,
    SVCCA): `rows.observed_values` of the rows against `pairs.pair_measures` of their sums
    (`streamed.row_sums`), within 1e-10 relative; the rows shifted far from 0 (each form
    centres in its own way)."""
    from align.measures import rows
    from align.measures.registry import REGISTRY

    both = tuple(n for n, m in REGISTRY.items() if m.sums and m.rows)
    assert both == ("cka", "cka-debiased", "procrustes", "cca", "svcca")
    x, y = _rows(1, widths=widths)
    from_rows = rows.observed_values({0: x}, {0: y}, both)
    from_sums = _sums_form(x, y, both)
    for n in both:
        np.testing.assert_allclose(from_rows[n][0, 0], from_sums[n], rtol=TOL, err_msg=n)


def test_a_resample_is_the_same_in_both_forms():
    """A resample by multiplicities w (row r drawn w_r times, some not at all): the rows form
    of the drawn rows x[origin] (`rows.observed_values`, the spectral bootstrap's way)
    against the sums form of the rows' sums weighted by w (each row a group of its own,
    `pairs.resampled`'s way), within 1e-10."""
    from align.measures import pairs, rows, streamed

    both = ("cka", "cka-debiased", "procrustes", "cca", "svcca")
    x, y = _rows(5, m=120)
    w = np.random.default_rng(0).multinomial(len(x), np.full(len(x), 1.0 / len(x)))
    origin = np.repeat(np.arange(len(x)), w)
    from_rows = rows.observed_values({0: x[origin]}, {0: y[origin]}, both)
    shifts = ({0: x.mean(0)}, {0: y.mean(0)})
    sums = streamed.row_sums({0: x}, {0: y}, shifts, np.arange(len(x)), len(x))
    from_sums = pairs.resampled(sums, both, w[None].astype(np.float64))[(0, 0)]
    for n in both:
        np.testing.assert_allclose(from_rows[n][0, 0], from_sums[n][0], rtol=TOL, err_msg=n)


def test_procrustes_of_a_rotated_copy_is_zero_in_both_forms():
    """Known answer, both forms: y a rotation of x scores procrustes 0 (to the arccos's
    half of the digits) and CKA 1."""
    from align.measures import rows

    rng = np.random.default_rng(4)
    x = rng.normal(size=(200, 6))
    Q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    got_rows = rows.observed_values({0: x}, {0: x @ Q}, ("cka", "procrustes"))
    got_sums = _sums_form(x, x @ Q, ("cka", "procrustes"))
    for got in ({n: v[0, 0] for n, v in got_rows.items()}, got_sums):
        np.testing.assert_allclose(got["cka"], 1.0, rtol=1e-12)
        assert got["procrustes"] < 1e-6


def test_tables_are_views_of_the_records():
    """MEASURES (name -> direction), STREAMED, ROW_ONLY and rows.ROW_MEASURES list exactly
    the records with the forms they name, in the registry's order (ROW_MEASURES: the rows-only
    measures first), with each record's direction and ideal."""
    from align.measures import MEASURES, ROW_ONLY, STREAMED
    from align.measures.registry import REGISTRY
    from align.measures.rows import ROW_MEASURES

    assert list(MEASURES) == list(REGISTRY)
    assert MEASURES == {
        "ridge": "distance",
        "cka": "similarity",
        "cka-debiased": "similarity",
        "procrustes": "distance",
        "procrustes-heldout": "distance",
        "cca": "similarity",
        "svcca": "similarity",
        "mknn": "similarity",
        "cknna": "similarity",
        "rsa": "similarity",
    }
    assert STREAMED == ("cka", "cka-debiased", "procrustes", "procrustes-heldout", "cca", "svcca")
    assert ROW_ONLY == ("mknn", "cknna", "rsa")
    assert list(ROW_MEASURES) == [*ROW_ONLY, "cka", "cka-debiased", "procrustes", "cca", "svcca"]
    for n, (direction, ideal) in ROW_MEASURES.items():
        assert (direction, ideal) == (REGISTRY[n].direction, REGISTRY[n].ideal)
        assert ideal == (1.0 if direction == "similarity" else 0.0)
    for m in REGISTRY.values():
        low, high = m.range
        assert low <= m.ideal <= high, m.name
        assert m.peer, m.name


def test_a_measure_added_as_one_record_is_computed_by_both_forms(monkeypatch):
    """A made-up measure, the source's total variance over the target's (tr C_xx / tr C_yy),
    added as one record to REGISTRY (and to the row measures' view the refusals read) is
    computed by the streamed driver (`pairs.pair_measures`) and the rows driver
    (`rows.observed_values`), against numpy's variances of the rows (1e-10)."""
    from align.measures import registry, rows

    toy = registry.Measure(
        "variance-ratio",
        registry.SIMILARITY,
        1.0,
        (0.0, np.inf),
        "numpy.var",
        sums=lambda pair: pair.x.trace / pair.y.trace,
        rows=lambda px, py, k: float(px.a.sum() / py.a.sum()),
        reads=("trace",),
        prepares=("svd",),
    )
    monkeypatch.setitem(registry.REGISTRY, toy.name, toy)
    monkeypatch.setitem(rows.ROW_MEASURES, toy.name, (toy.direction, toy.ideal))
    x, y = _rows(2)
    want = x.var(axis=0).sum() / y.var(axis=0).sum()
    names = ("cka", toy.name)
    got_sums = _sums_form(x, y, names)
    got_rows = rows.observed_values({0: x}, {0: y}, names)
    np.testing.assert_allclose(got_sums[toy.name], want, rtol=TOL)
    np.testing.assert_allclose(got_rows[toy.name][0, 0], want, rtol=TOL)


def test_the_records_rules_refuse_in_one_line():
    """The refusals `rows` reads from the records: fewer rows than a measure's `min_rows`
    (3 rows, the unbiased HSIC's 4) names the rows, the measures and the count; a k below
    cknna's `neighbours` (2) names k and the range; a zero row refused for a measure reading
    the neighbour orders, a constant row for one reading RSA's ranks, each naming the row."""
    from align.errors import InputError
    from align.measures import rows

    def one_line(call, *needles):
        with pytest.raises(InputError) as e:
            call()
        text = str(e.value)
        assert "\n" not in text, text
        for needle in needles:
            assert needle in text, (needle, text)

    x, y = _rows(3, m=3)
    one_line(lambda: rows.cka_debiased(x, y), "3 sampled rows", "cka-debiased", "at least 4")
    assert np.isfinite(rows.cka(x, y))  # CKA needs no fourth row
    x, y = _rows(3, m=12)
    one_line(lambda: rows.cknna(x, y, 1), "`k` 1", "give 2 to 11")
    assert np.isfinite(rows.mknn(x, y, 1))  # mknn takes k = 1
    zero = x.copy()
    zero[5] = 0.0
    one_line(lambda: rows.mknn(zero, y, 3), "source boundary 0", "row 5", "no cosine")
    assert np.isfinite(rows.cka(zero, y))  # a zero row is a row like another for CKA
    flat = x.copy()
    flat[7] = 2.0
    one_line(lambda: rows.rsa(flat, y), "source boundary 0", "row 7", "correlation distance")
