"""The row-sampled measures (align.measures.rows) against references that never import
align: platonic-rep's neighbour path written in torch (normalise, fill the diagonal with
-1e8, argsort descending), Song et al.'s unbiased HSIC on full kernel matrices, scipy's
orthogonal Procrustes, QR-based canonical correlations, scipy's correlation distances and
Spearman (and rsatoolbox itself where it is installed); the known answers of a rotated copy;
the document bootstrap against a plain loop; and the one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

TOL = 1e-10  # float64 throughout: the routes differ only in rounding (≤ ~1e-13 at these sizes)


def rows(seed, m=40, widths=(7, 5)):
    """Two related arrays of rows: y shares a random projection of x plus noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(m, widths[0])) + 0.5
    y = x @ rng.normal(size=(widths[0], widths[1])) + rng.normal(size=(m, widths[1]))
    return x, y


# ---- references (no align) -------------------------------------------------------------


def cosines(x, origin=None):
    """Cosines of the rows x[origin]: of the distinct unit rows, then copied, so that copies
    of one row (and rows of one direction) tie exactly (the rule under test; a product over
    copies may differ in its last bit)."""
    t = torch.nn.functional.normalize(torch.as_tensor(x, dtype=torch.float64), dim=-1)
    distinct, copy = torch.unique(t, dim=0, return_inverse=True)
    s = (distinct @ distinct.T)[copy][:, copy]
    return s if origin is None else s[torch.as_tensor(origin)][:, torch.as_tensor(origin)]


def ref_neighbours(x, k, origin=None):
    """platonic-rep's compute_nearest_neighbors on unit rows (diagonal -1e8, argsort
    descending), ties by lower index (stable); copies of a row count as the row itself."""
    s = cosines(x, origin).clone()
    s.fill_diagonal_(-1e8)
    if origin is not None:
        o = torch.as_tensor(origin)
        s[o[:, None] == o[None, :]] = -1e8
    return s.argsort(dim=1, descending=True, stable=True)[:, :k].numpy()


def ref_mknn(x, y, k, origin=None):
    a, b = ref_neighbours(x, k, origin), ref_neighbours(y, k, origin)
    n = len(a)
    ma, mb = np.zeros((n, n)), np.zeros((n, n))
    ma[np.arange(n)[:, None], a] = 1.0
    mb[np.arange(n)[:, None], b] = 1.0
    return float(((ma * mb).sum(axis=1) / k).mean())


def ref_hsic(K, L):
    """Song et al. (2012), eq. 5: the unbiased HSIC (L̃ transposed, as platonic-rep writes it)."""
    m = len(K)
    Kt, Lt = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    t = (Kt * Lt.T).sum() + Kt.sum() * Lt.sum() / ((m - 1) * (m - 2))
    t -= 2 * (Kt @ Lt).sum() / (m - 2)
    return t / (m * (m - 3))


def ref_cknna(x, y, k, origin=None):
    """platonic-rep's cknna(unbiased=True) without its 1e-6, neighbours as ref_neighbours."""
    K, L = cosines(x, origin).numpy(), cosines(y, origin).numpy()
    n = len(K)
    mk, ml = np.zeros((n, n)), np.zeros((n, n))
    mk[np.arange(n)[:, None], ref_neighbours(x, k, origin)] = 1.0
    ml[np.arange(n)[:, None], ref_neighbours(y, k, origin)] = 1.0
    m = mk * ml
    return ref_hsic(m * K, m * L) / np.sqrt(ref_hsic(mk * K, mk * K) * ref_hsic(ml * L, ml * L))


def ref_cka(x, y):
    xc, yc = x - x.mean(0), y - y.mean(0)
    return np.linalg.norm(xc.T @ yc) ** 2 / (np.linalg.norm(xc.T @ xc) * np.linalg.norm(yc.T @ yc))


def ref_cka_debiased(x, y):
    """On the uncentred rows' kernels: the estimator is shift-invariant, align centres."""
    K, L = x @ x.T, y @ y.T
    return ref_hsic(K, L) / np.sqrt(ref_hsic(K, K) * ref_hsic(L, L))


def ref_procrustes(x, y):
    from scipy.linalg import orthogonal_procrustes

    a, b = x - x.mean(0), y - y.mean(0)
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    d = max(a.shape[1], b.shape[1])
    a = np.pad(a, ((0, 0), (0, d - a.shape[1])))
    b = np.pad(b, ((0, 0), (0, d - b.shape[1])))
    r, _ = orthogonal_procrustes(a, b)
    return float(np.arccos(np.clip(np.sum((a @ r) * b), -1, 1)))


def ref_inverse_sqrt(c, ridge=1e-6):
    lam, q = np.linalg.eigh(c + ridge * np.trace(c) / len(c) * np.eye(len(c)))
    return (q / np.sqrt(lam)) @ q.T


def ref_cca(x, y):
    """R²_CCA with the covariances' relative ridge 1e-6·tr(C)/d (align's documented rule)."""
    xc, yc = x - x.mean(0), y - y.mean(0)
    t = ref_inverse_sqrt(xc.T @ xc) @ (xc.T @ yc) @ ref_inverse_sqrt(yc.T @ yc)
    return float(np.sum(t * t) / min(x.shape[1], y.shape[1]))


def ref_svcca(x, y):
    """Each side projected on its covariance's top eigenvectors holding 99% of the trace,
    then canonical correlations by QR (Björck and Golub) and their mean."""

    def reduce(a):
        ac = a - a.mean(0)
        lam, q = np.linalg.eigh(ac.T @ ac)
        lam, q = lam[::-1], q[:, ::-1]
        k = int(np.searchsorted(np.cumsum(lam), 0.99 * lam.sum())) + 1
        return ac @ q[:, :k]

    qa, qb = np.linalg.qr(reduce(x))[0], np.linalg.qr(reduce(y))[0]
    return float(np.linalg.svd(qa.T @ qb, compute_uv=False).mean())


def ref_rsa(x, y, origin=None):
    """rsatoolbox's Spearman of correlation RDMs (scipy's pdist and spearmanr), the copies'
    rule written in: two equal rows are at distance 0 (scipy's rounding can leave 1e-16)."""
    from scipy.spatial.distance import pdist, squareform
    from scipy.stats import spearmanr

    o = np.arange(len(x)) if origin is None else origin

    def rdm(a):
        d = squareform(pdist(a, "correlation"))
        c = a - a.mean(1, keepdims=True)
        c = c / np.linalg.norm(c, axis=1, keepdims=True)
        d[(c[:, None, :] == c[None, :, :]).all(-1)] = 0.0
        return d[np.ix_(o, o)]

    dx, dy = rdm(x), rdm(y)
    a, b = np.triu_indices(len(o), 1)
    keep = o[a] != o[b]
    return float(spearmanr(dx[a, b][keep], dy[a, b][keep])[0])


REFERENCES = {
    "mknn": lambda x, y, o: ref_mknn(x, y, 4, o),
    "cknna": lambda x, y, o: ref_cknna(x, y, 4, o),
    "rsa": ref_rsa,
    "cka": lambda x, y, o: ref_cka(x, y),
    "cka-debiased": lambda x, y, o: ref_cka_debiased(x, y),
    "procrustes": lambda x, y, o: ref_procrustes(x, y),
    "cca": lambda x, y, o: ref_cca(x, y),
    "svcca": lambda x, y, o: ref_svcca(x, y),
}


# ---- each measure against its reference -------------------------------------------------


@pytest.mark.parametrize("name", list(REFERENCES))
def test_each_measure_equals_its_reference(name):
    from align.measures import rows as measures

    fn = getattr(measures, name.replace("-", "_"))
    for seed in range(3):
        x, y = rows(seed)
        kw = {"k": 4} if name in ("mknn", "cknna") else {}
        got = fn(x, y, **kw)
        want = REFERENCES[name](x, y, None)
        assert abs(got - want) <= TOL * max(1.0, abs(want)), (name, seed, got, want)


def test_neighbour_sets_are_platonic_reps_exactly_with_ties():
    """Duplicated rows tie in cosine: the lists (in order) equal the stable descending
    argsort of platonic-rep's path, and so does mknn's value."""
    from align.measures.rows import mknn, neighbours

    x, y = rows(5, m=30)
    x[7], x[12], x[20] = x[3], x[3], 2 * x[3]  # same direction: cosine ties
    y[9] = y[4]
    for k in (1, 3, 10, 29):
        np.testing.assert_array_equal(neighbours(x, k), ref_neighbours(x, k))
        np.testing.assert_array_equal(neighbours(y, k), ref_neighbours(y, k))
        assert abs(mknn(x, y, k) - ref_mknn(x, y, k)) <= TOL


def test_rsa_equals_rsatoolbox():
    rsatoolbox = pytest.importorskip("rsatoolbox")  # installed for this reference only
    from align.measures.rows import rsa

    for seed in range(2):
        x, y = rows(seed, m=25)
        rdms = [
            rsatoolbox.rdm.calc_rdm(rsatoolbox.data.Dataset(a), method="correlation")
            for a in (x, y)
        ]
        want = float(rsatoolbox.rdm.compare(rdms[0], rdms[1], method="spearman")[0, 0])
        assert abs(rsa(x, y) - want) <= TOL


def mean_keeping_rotation(d, seed):
    """A random orthogonal Q with Q·1 = 1: it keeps every row's mean over its features, so
    correlation distances (RSA) are kept too, not only cosines and the centred geometry."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(np.c_[np.ones(d), rng.normal(size=(d, d - 1))])[0][:, 1:]
    o = np.linalg.qr(rng.normal(size=(d - 1, d - 1)))[0]
    return np.ones((d, d)) / d + basis @ o @ basis.T


def test_a_rotated_copy_scores_the_ideal_on_every_measure():
    """Y = X·Q: CKA 1, debiased CKA 1, Procrustes distance 0 (to 1e-6: arccos near 1 turns
    1e-16 into 1e-8), mknn 1, CKNNA 1, RSA 1, SVCCA 1, CCA 1 to 1e-5 (its 1e-6 ridge)."""
    from align.measures import rows as r

    x, _ = rows(3, m=50, widths=(6, 6))
    q = mean_keeping_rotation(6, 4)
    np.testing.assert_allclose(q @ q.T, np.eye(6), atol=1e-12)
    y = x @ q
    assert abs(r.cka(x, y) - 1) <= TOL and abs(r.cka_debiased(x, y) - 1) <= TOL
    assert r.procrustes(x, y) <= 1e-6
    assert r.mknn(x, y, 5) == 1.0 and abs(r.cknna(x, y, 5) - 1) <= TOL
    assert abs(r.rsa(x, y) - 1) <= TOL and abs(r.svcca(x, y) - 1) <= TOL
    assert abs(r.cca(x, y) - 1) <= 1e-5


def test_row_measures_of_a_model_against_itself_and_its_rotation():
    """The grid's diagonal (a boundary against itself, and a rotated one) scores each
    measure's ideal; off the diagonal it does not; each is calibrated to 1 at p = 1/(K+1)."""
    from align.measures.rows import ROW_MEASURES, Draws, row_measures
    from align.stats.bootstrap import Resampling

    rng = np.random.default_rng(0)
    xs = {0: rng.normal(size=(48, 6)), 1: rng.normal(size=(48, 5))}
    ys = {0: xs[0] @ mean_keeping_rotation(6, 1), 1: xs[1].copy()}
    docs = np.repeat(np.arange(12), 4)
    out = row_measures(
        xs,
        ys,
        docs,
        tuple(ROW_MEASURES),
        k=4,
        draws=Draws(19, 2, Resampling(100, 1)),
    )
    for name, (direction, ideal) in ROW_MEASURES.items():
        res = out[name]
        assert res.direction == direction and res.null_scheme == "documents"
        tol = 1e-5 if name in ("cca", "procrustes") else TOL
        np.testing.assert_allclose(np.diag(res.value), ideal, atol=tol, err_msg=name)
        off = res.value[[0, 1], [1, 0]]
        assert np.all(np.abs(off - ideal) > 0.05), (name, off)
        np.testing.assert_allclose(np.diag(res.p), 1 / 20, err_msg=name)
        np.testing.assert_allclose(np.diag(res.calibrated), 1.0, atol=tol, err_msg=name)


# ---- the document bootstrap against a plain loop ----------------------------------------


def test_bootstrap_interval_equals_a_plain_loop_over_resampled_documents():
    """Resample b takes documents default_rng(seed).integers(0, n_docs, (B, n_docs))[b]
    (in increasing id), their rows document by document; each measure recomputed by its
    reference on those rows (copies of a row are not its neighbours, their pair is out of
    RSA); the interval is numpy's 2.5 and 97.5 percentiles. 1e-10."""
    from align.measures.rows import ROW_MEASURES, Draws, row_measures
    from align.stats.bootstrap import Resampling

    rng = np.random.default_rng(4)
    docs = np.repeat([3, 5, 8, 9, 11, 20], 5)
    perm = rng.permutation(len(docs))  # rows of a document need not be adjacent
    docs = docs[perm]
    x, y = rows(8, m=len(docs), widths=(5, 4))
    out = row_measures(
        {0: x},
        {0: y},
        docs,
        tuple(ROW_MEASURES),
        k=4,
        draws=Draws(5, 0, Resampling(100, 7), "bootstrap"),
    )
    ids = np.unique(docs)
    idx = np.random.default_rng(7).integers(0, len(ids), size=(100, len(ids)))
    for j, target in enumerate((y,)):
        loop = {n: [] for n in ROW_MEASURES}
        for drawn in idx:
            origin = np.concatenate([np.flatnonzero(docs == ids[d]) for d in drawn])
            for n, ref in REFERENCES.items():
                if n in ("mknn", "cknna", "rsa"):  # the rows and which row each copies
                    loop[n].append(ref(x, target, origin))
                else:
                    loop[n].append(ref(x[origin], target[origin], None))
        for n in ROW_MEASURES:
            low, high = np.percentile(loop[n], [2.5, 97.5])
            assert abs(out[n].low[0, j] - low) <= TOL, (n, j)
            assert abs(out[n].high[0, j] - high) <= TOL, (n, j)


# ---- sampling and refusals ----------------------------------------------------------------


def test_sample_rows_is_the_documented_draw():
    from align.measures.rows import sample_rows

    doc = np.repeat(np.arange(10), 7)
    got = sample_rows(doc, 20, 5)
    want = np.sort(np.random.default_rng(5).choice(70, 20, replace=False))
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) == 20


def one_line(exc, *needles):
    text = str(exc.value)
    assert "\n" not in text
    for n in needles:
        assert n in text, (n, text)


def test_refusals_are_one_line_and_name_the_value():
    from align.errors import AlignError
    from align.measures import rows as r
    from align.stats.bootstrap import Resampling

    with pytest.raises(AlignError) as e:
        r.sample_rows(np.zeros(300, int), 4096, 0)
    one_line(e, "4,096", "300")
    x, y = rows(0, m=12)
    with pytest.raises(AlignError) as e:
        r.mknn(x, y, 12)
    one_line(e, "`k` 12", "12 sampled rows", "1 to 11")
    with pytest.raises(AlignError) as e:
        r.row_measures(
            {0: x},
            {0: y},
            np.zeros(12),
            ("cka", "mutual_knn"),
            draws=r.Draws(3, 0, Resampling()),
        )
    one_line(e, "mutual_knn", "mknn, cknna, rsa, cka, cka-debiased, procrustes, cca, svcca")
    flat = np.tile(y[:1], (12, 1))
    with pytest.raises(AlignError) as e:
        r.row_measures(
            {4: x},
            {0: y, 7: flat},
            np.arange(12),
            ("cka",),
            draws=r.Draws(3, 0, Resampling()),
        )
    one_line(e, "target boundary 7", "no variance", "12 sampled rows")
    with pytest.raises(AlignError) as e:
        r.cka(x, np.where(np.arange(12)[:, None] == 3, np.nan, y))
    one_line(e, "target boundary 0", "non-finite", "row 3")


def test_a_resample_of_too_few_distinct_rows_leaves_the_unbiased_hsic_undefined_not_a_crash():
    """A document of one row and one of five: a resample that draws the first twice holds 2
    rows, where the unbiased HSIC ((m − 2) and m(m − 3) in its denominators) is undefined: NaN
    there, a number in every other resample (the documented draw: default_rng(seed).integers)."""
    from align.measures import rows
    from align.stats.bootstrap import Resampling

    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(6, 5)), rng.normal(size=(6, 4))
    docs = np.array([0, 1, 1, 1, 1, 1])
    resampling = Resampling(resamples=100, seed=7)
    values = rows.bootstrap_values({0: x}, {0: y}, docs, ("cka-debiased",), 2, resampling)
    drawn = np.random.default_rng(7).integers(0, 2, size=(100, 2))
    one_document = (drawn == 0).all(axis=1)
    assert one_document.any() and (~one_document).any()
    v = values["cka-debiased"][:, 0, 0]
    assert np.isnan(v[one_document]).all()
    assert np.isfinite(v[~one_document]).all()


# ---- prepared once: every replicate and every null draw against the duplicated rows ------


def tied_rows(seed, m=48, widths=(6, 5)):
    """Rows with exact copies (as a repeated token's embedding at boundary 0): cosines and
    correlation distances tie, so the tie rules decide the measures."""
    x, y = rows(seed, m, widths)
    x[[7, 12, 30]] = x[3]
    x[20] = 2 * x[5]  # same direction: a cosine tie, not a copy
    y[[9, 40]] = y[4]
    y[[12, 30]] = y[3]
    return x, y


def documented_multiplicities(docs, resamples, seed):
    """(B, M): how often resample b draws row r's document (the documents in increasing id,
    default_rng(seed).integers(0, n, (B, n))), written without align."""
    ids = sorted(set(np.asarray(docs).tolist()))
    idx = np.random.default_rng(seed).integers(0, len(ids), size=(resamples, len(ids)))
    counts = np.array([[np.sum(d == i) for i in range(len(ids))] for d in idx])
    return counts[:, [ids.index(d) for d in np.asarray(docs).tolist()]]


NEAR_TOL = 1e-8  # every replicate and null draw against its reference on the rows themselves


def test_every_replicate_equals_the_measure_recomputed_on_the_duplicated_rows():
    """Resample b lists the sampled rows in their order, row r w_r times; mknn, cknna and
    rsa read from the once-prepared records under the weights equal the references on
    x[origin], y[origin] (origin = each row's index repeated w_r times; copies are not each
    other's neighbours and their pair is out of RSA; ties to the lower index of the resampled
    rows), within 1e-8, with rows that copy each other; NaN exactly where a drawn row has fewer
    than k other rows' copies. The spectral measures against their references on x[origin]."""
    from align.measures.rows import bootstrap_values
    from align.stats.bootstrap import Resampling

    x, y = tied_rows(11)
    docs = np.repeat([2, 3, 5, 7, 8, 13, 21, 34, 40, 41, 50, 60], 4)
    docs = docs[np.random.default_rng(1).permutation(len(docs))]
    names = ("mknn", "cknna", "rsa", "cka", "procrustes")
    got = bootstrap_values({0: x}, {0: y}, docs, names, 4, Resampling(100, 9))
    weights = documented_multiplicities(docs, 100, 9)
    for b, w in enumerate(weights):
        origin = np.repeat(np.arange(len(x)), w)
        undefined = w.sum() - w.max() < 4
        for n in names:
            v = got[n][b, 0, 0]
            if undefined and n in ("mknn", "cknna"):
                assert np.isnan(v), (n, b)
                continue
            want = REFERENCES[n](x, y, origin) if n in ("mknn", "cknna", "rsa") else None
            if want is None:
                want = REFERENCES[n](x[origin], y[origin], None)
            assert abs(v - want) <= NEAR_TOL * max(1.0, abs(want)), (n, b, v, want)


def test_a_resample_that_leaves_a_rows_nearest_out_reads_its_whole_order():
    """Multiplicities that leave out most rows (so a drawn row's k drawn neighbours lie beyond
    the 4k + 8 nearest kept): mknn and cknna still equal the references on the duplicated
    rows, within 1e-8."""
    from align.measures import cells
    from align.measures import prepared as P

    x, y = tied_rows(12, m=80)
    k = 3
    rng = np.random.default_rng(2)
    reached = 0
    for trial in range(6):
        w = rng.integers(1, 4, size=len(x)) * (rng.random(len(x)) < 0.12)
        order = ref_neighbours(x, len(x) - 1)  # every row's whole order, by the reference
        deep = [r for r in np.flatnonzero(w) if (w[order[r, : 4 * k + 8]] > 0).sum() < k]
        parts = ("order", "knn_self")
        px, py = P.prepare(x, parts, k), P.prepare(y, parts, k)
        forms = dict.fromkeys(("mknn", "cknna"), cells.BY_NEIGHBOURS)
        scratch = cells.Scratch.of(len(x), forms)
        got = cells.weighted_grid({0: px}, {0: py}, forms, k, w, scratch)
        origin = np.repeat(np.arange(len(x)), w)
        assert abs(got["mknn"][0, 0] - ref_mknn(x, y, k, origin)) <= NEAR_TOL, trial
        assert abs(got["cknna"][0, 0] - ref_cknna(x, y, k, origin)) <= NEAR_TOL, trial
        reached += len(deep)
        assert not scratch.slot.any()  # the scratch comes back zeroed
    assert reached, "the cases must reach beyond the kept order"


def test_every_null_draw_equals_the_measure_on_the_permuted_rows():
    """Null draw q re-pairs row r of the source with row perm_q[r] of the target: every
    measure read from the prepared records (indices permuted, ties put back in the permuted
    rows' order) equals its reference on (x, y[perm_q]) within 1e-8, with tied rows, and with
    a k whose tie runs past the kept order (a row with more copies than 4k + 8)."""
    from align.measures.calibration import draw_permutations
    from align.measures.rows import null_values

    x, y = tied_rows(13, m=60)
    y[20:36] = y[4]  # 18 copies of one row: ties beyond 4k + 8 = 16 kept at k = 2
    docs = np.repeat(np.arange(10), 6)
    perms, _ = draw_permutations(docs, 12, 5)
    names = ("mknn", "cknna", "rsa", "cka-debiased", "cca", "svcca")
    for k in (2, 4):
        got = null_values({0: x}, {0: y}, perms, names, k)
        refs = {"mknn": lambda a, b: ref_mknn(a, b, k), "cknna": lambda a, b: ref_cknna(a, b, k)}
        for q, perm in enumerate(perms):
            for n in names:
                ref = refs.get(n) or (lambda a, b, n=n: REFERENCES[n](a, b, None))
                want = ref(x, y[perm])
                assert abs(got[n][q, 0, 0] - want) <= NEAR_TOL * max(1.0, abs(want)), (n, k, q)


def device_backend():
    """torch as a fit's GPU runs it (`on_cpu` False), on the CPU."""
    from align.ridge.backend import Backend

    class Device(Backend):
        on_cpu = False

    return Device("cpu", use_torch=True)


def test_row_measures_on_torch_as_a_gpu_runs_them_equal_numpy():
    """The cosines, their sort, the distances, their sort, RSA's null and resamples and the
    spectral measures' null on torch (a backend whose on_cpu is False) give every field numpy
    gives, within 1e-12, ties included."""
    from align.measures.rows import Draws, row_measures
    from align.stats.bootstrap import Resampling

    x, y = tied_rows(14, m=44)
    other = rows(17, m=44)[0]
    other[[5, 9]] = other[1]
    xs, ys = {0: x, 2: other}, {1: y, 3: np.abs(y)}
    docs = np.repeat(np.arange(11), 4)
    names = ("mknn", "cknna", "rsa", "cka", "cka-debiased", "procrustes", "cca", "svcca")
    for interval in ("jackknife", "bootstrap"):
        kw = dict(k=3, draws=Draws(9, 1, Resampling(100, 2), interval))
        cpu = row_measures(xs, ys, docs, names, **kw)
        dev = row_measures(xs, ys, docs, names, **kw, backend=device_backend())
        for n in names:
            for f in ("value", "low", "high", "null_mean", "null_std", "p", "p_family"):
                got, want = getattr(dev[n], f), getattr(cpu[n], f)
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=n + f)


def test_duplicated_rows_counts_rows_with_an_exact_copy_on_either_side():
    """The per-cell fraction of sampled rows equal to another sampled row at the source or the
    target boundary, against a count by hand; a boundary without copies gives 0, and a
    direction tie (2·x) is not a copy."""
    from align.measures.rows import duplicated_rows

    x, y = tied_rows(15, m=48)
    plain = rows(16, m=48)[0]
    got = duplicated_rows({0: x, 1: plain}, {0: y, 1: plain[:, :3]})
    copies_x = {3, 7, 12, 30}  # x[20] = 2·x[5] is a direction, not a copy
    copies_y = {4, 9, 40, 3, 12, 30}
    want = [[len(copies_x | copies_y) / 48, len(copies_x) / 48], [len(copies_y) / 48, 0.0]]
    np.testing.assert_allclose(got, want, rtol=0, atol=0)
