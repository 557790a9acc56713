"""Every measure `align fit --measures` accepts, one record each (`Measure`): its name, its
direction, its ideal, its range, its sums form (from the held-out sums, `streamed`), its rows
form (from the sampled rows' prepared records, `cells`) and the peer's code it matches.
Adding a measure is adding one record to `REGISTRY`; the tables callers read
(`align.measures.MEASURES`, `STREAMED`, `ROW_ONLY`, `rows.ROW_MEASURES`) are views of it.

A "similarity" is closer when larger (a row's path is its argmax), a "distance" when smaller
(its argmin). The ideal is what a model compared with itself scores (the calibration's
s_max). The range is where the measure's values lie, and where its jackknife interval is
clipped: CKA, R²_CCA and SVCCA's mean canonical correlation lie in [0, 1]; the debiased CKA
in [−1, 1] (the unbiased HSIC is an inner product of U-centred kernels, so Cauchy–Schwarz
bounds the ratio); Procrustes' arccos of a similarity in [0, 1] in [0, π/2]; the held-out
Procrustes error of unit-norm sides in [0, 2]; mknn, a share of neighbours, in [0, 1]; RSA,
a correlation, in [−1, 1]; CKNNA, whose numerator's masks are not its denominators', is not
bounded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from align.measures import cells, streamed

SIMILARITY, DISTANCE = "similarity", "distance"


@dataclass(frozen=True)
class Measure:
    """One measure."""

    name: str  # as `--measures` takes it
    direction: str  # SIMILARITY or DISTANCE
    ideal: float  # what a model compared with itself scores
    range: tuple  # (low, high): where its values lie
    peer: str  # the code or paper whose numbers it matches (tests/helpers/measures_reference.py)
    sums: Callable | None = None  # f(streamed.Pair) -> float, from the held-out sums
    rows: Callable | None = None  # f(px, py, k) -> float, from two `prepared.Prepared`
    reads: tuple = ()  # what its sums form reads of a `streamed.Side`, made once per side
    prepares: tuple = ()  # the parts of a `prepared.Prepared` its rows form reads (PARTS)
    neighbours: int = 0  # the fewest nearest neighbours k its rows form takes (0: no k)
    min_rows: int = 1  # the fewest rows it is defined on (the unbiased HSIC's m(m − 3): 4)
    # how a recomputation under row weights (an interval's) reads its prepared records:
    # cells.BY_NEIGHBOURS, cells.BY_RANKS, or None (recomputed on the rows: `cells.weighted_grid`)
    reweighted: str | None = None


_ALL = (
    Measure("ridge", DISTANCE, 0.0, (0.0, np.inf), peer="the fit's held-out relative error"),
    Measure(
        "cka",
        SIMILARITY,
        1.0,
        (0.0, 1.0),
        peer="Kornblith et al. (2019), linear CKA",
        sums=streamed.cka,
        rows=cells.cka,
        reads=("norm",),
        prepares=("svd",),
    ),
    Measure(
        "cka-debiased",
        SIMILARITY,
        1.0,
        (-1.0, 1.0),
        peer="platonic-rep, metrics.py unbiased_cka",
        sums=streamed.cka_debiased,
        rows=cells.cka_debiased,
        reads=("hsic_self",),
        prepares=("svd", "hsic_self"),
        min_rows=4,
    ),
    Measure(
        "procrustes",
        DISTANCE,
        0.0,
        (0.0, np.pi / 2),
        peer="netrep, LinearMetric(alpha=1, score_method='angular')",
        sums=streamed.procrustes,
        rows=cells.procrustes,
        reads=("trace",),
        prepares=("svd",),
    ),
    Measure(
        "procrustes-heldout",
        DISTANCE,
        0.0,
        (0.0, 2.0),
        peer="scipy.linalg.orthogonal_procrustes fitted on the training rows",
        sums=streamed.procrustes_heldout,
        # no rows form: its null re-pairs the sampled rows under the training rotation
        # (`align.fitting.sampled`)
        reads=("trace",),
    ),
    Measure(
        "cca",
        SIMILARITY,
        1.0,
        (0.0, 1.0),
        peer="Kornblith et al. (2019), R²_CCA",
        sums=streamed.cca,
        rows=cells.cca,
        reads=("spectrum",),
        prepares=("svd",),
    ),
    Measure(
        "svcca",
        SIMILARITY,
        1.0,
        (0.0, 1.0),
        peer="Raghu et al. (2017), SVCCA",
        sums=streamed.svcca,
        rows=cells.svcca,
        reads=("spectrum",),
        prepares=("svd",),
    ),
    Measure(
        "mknn",
        SIMILARITY,
        1.0,
        (0.0, 1.0),
        peer="platonic-rep, mutual_knn",
        rows=cells.mknn,
        prepares=("order",),
        neighbours=1,
        reweighted=cells.BY_NEIGHBOURS,
    ),
    Measure(
        "cknna",
        SIMILARITY,
        1.0,
        (-np.inf, np.inf),
        peer="platonic-rep, cknna",
        rows=cells.cknna,
        prepares=("order", "knn_self"),
        neighbours=2,
        min_rows=4,
        reweighted=cells.BY_NEIGHBOURS,
    ),
    Measure(
        "rsa",
        SIMILARITY,
        1.0,
        (-1.0, 1.0),
        peer="rsatoolbox, calc_rdm(method='correlation') compared by Spearman",
        rows=cells.rsa,
        prepares=("ranks",),
        reweighted=cells.BY_RANKS,
    ),
)
REGISTRY = {m.name: m for m in _ALL}  # in the order results and tables list them


def parts_of(names) -> frozenset:
    """The parts of a `prepared.Prepared` the rows forms of `names` read (`prepared.PARTS`)."""
    return frozenset(p for n in names for p in REGISTRY[n].prepares)


def reading(part: str) -> tuple:
    """The measures whose rows form reads `part` of the prepared records."""
    return tuple(n for n, m in REGISTRY.items() if part in m.prepares)


NEIGHBOURS = reading("order")  # mknn, cknna: each row's nearest rows by cosine
SPECTRAL = reading("svd")  # from the centred rows' SVD; a bootstrap resample decomposes anew


def reweighted(names) -> dict:
    """{name: how its recomputation under weights reads the records} of the measures of
    `names` that are read so (`Measure.reweighted`; `cells.weighted_grid`), in their order."""
    return {n: REGISTRY[n].reweighted for n in names if REGISTRY[n].reweighted}


def rows_forms(names) -> dict:
    """{name: its rows form} of the measures `names`, in their order (`cells.grid`)."""
    return {n: REGISTRY[n].rows for n in names}
