"""The options of a fit, grouped as `ModelSpec` and `CorpusSpec` group a model's and a corpus's:
what it computes (`FitSpec`, recorded in the result), where it runs (`Execution`), the test
hooks (`FitHooks`), checked together as a `FitRequest`; the live route's models and corpus as
`LiveJob`; and the one check of a `--device` (`check_device`: where a fit computes, and where
`align extract` runs a model)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from align import corpus, models, ridge, seeding
from align.declarations import not_an_option, option, refuse_fields
from align.devices import check_device
from align.errors import InputError
from align.fitting.pairing.anchors import MIN_COVERAGE, PAIRINGS, check_min_coverage, check_pairing
from align.fitting.planning.sample_budget import neighbours_refusal
from align.fitting.planning.split import check_fractions, check_seed
from align.measures import PERMUTATIONS, ROW_ONLY, SAMPLE_ROWS, STREAMED, parse_measures
from align.measures.calibration import check_permutations
from align.measures.rows import INTERVALS, JACKKNIFE, K_NEIGHBOURS
from align.stats.bootstrap import (
    RESAMPLES,
    Resampling,
    check_resamples,
)

CONTROLS = (None, "shuffle")  # --control: none, or other documents' tokens at the same positions


@dataclass(frozen=True)
class FitSpec:
    """What a fit computes: the options its result records (`recorded`) and its numbers follow;
    each field's option is declared on it, its meaning under it."""

    test_fraction: float = field(
        default=0.2, metadata=option("--test-fraction", metavar="F", type="finite")
    )
    """Fraction of the documents held out for scoring (the split is by document, seeded)."""
    val_fraction: float = field(
        default=0.2, metadata=option("--val-fraction", metavar="F", type="finite")
    )
    """Fraction of the remaining documents that chooses α."""
    seed: int = field(default=0, metadata=option("--seed", metavar="N", type="seed"))
    """Seed of the document split."""
    alphas: tuple = field(
        default=ridge.DEFAULT_ALPHAS,
        metadata=option("--alphas", metavar="auto|A,B,...", default="auto", parse="alphas"),
    )
    """Relative ridge penalties α_rel, in units of the mean eigenvalue trace(XcᵀXc)/d_S, kept
    sorted. `auto`: 1e-6 … 1e1 by decades, extended by decades (within 1e-12 … 1e6) where a
    pair's choice sits at an end; a list is used as given, and the pairs choosing its ends are
    counted."""
    include_first_token: bool = field(
        default=False, metadata=option("--include-first-token", is_flag=True)
    )
    """Also fit and score position 0 of each sequence."""
    source_boundaries: str | None = field(
        default=None,
        metadata=option("--source-boundaries", metavar="SPEC", shown_default="all stored"),
    )
    """The source boundaries to map from, as a boundary spec (`0,4,8`, `::2`, `1:`)."""
    target_boundaries: str | None = field(
        default=None,
        metadata=option("--target-boundaries", metavar="SPEC", shown_default="all stored"),
    )
    """The target boundaries to map to, as a boundary spec."""
    save_maps: bool = field(default=False, metadata=option("--save-maps", is_flag=True))
    """Also store every map's W (`source_boundary`, `target_boundary`, `d_source`, `d_target`)
    and c, in float64 (the size is printed first)."""
    extend_alphas: bool | None = field(
        default=None, metadata=not_an_option("`--alphas auto` sets it (the default grid, extended)")
    )
    """`--alphas auto`: a grid end chosen by some pair gains decades there
    (`ridge.solve_block`); None: extend the default grid, not one given in `alphas`."""
    bootstrap: int = field(
        default=RESAMPLES,
        metadata=option("--bootstrap", metavar="N", type="int", parse="resamples_or_none"),
    )
    """Resamples of the held-out documents for `p_best` and every 95% interval: 100 to
    1,000,000, or 0 for none (the measures' intervals, on when N > 0, are a jackknife over 10
    groups of held-out documents whatever N, but under `--measure-interval bootstrap`)."""
    bootstrap_seed: int = field(
        default=0, metadata=option("--bootstrap-seed", metavar="N", type="seed")
    )
    """Seed of the document bootstrap."""
    measure_interval: str = field(
        default=JACKKNIFE, metadata=option("--measure-interval", choices=INTERVALS)
    )
    """The interval of `mknn`, `cknna` and `rsa`, on when `--bootstrap` N > 0: `jackknife`, the
    delete-a-group jackknife over 10 groups of held-out documents that every other measure
    gets (10 recomputations; `align compare --measure` pairs it exactly), or `bootstrap`, the
    percentile document bootstrap over N resamples on the sampled rows. The streamed measures
    keep their jackknife either way."""
    convergence: bool = field(default=False, metadata=option("--convergence", is_flag=True))
    """Also fit ¼ and ½ of the training documents (`split.FRACTIONS`) and score them
    (`relative_error_by_fraction`): would more tokens change the matrix? Three times the
    statistics' memory."""
    control: str | None = field(
        default=None,
        metadata=option("--control", choices=tuple(c for c in CONTROLS if c is not None)),
    )
    """`shuffle`: pair each source token with the target's token at the same position of
    another document (`split.shuffle_partners`), the matrix a meaningless pairing gives."""
    pairing: str = field(default="auto", metadata=option("--pairing", choices=PAIRINGS))
    """Which tokens make a row: `tokens` (one token stream, token for token), `char-anchors`
    (the tokens of two tokenizations that end at the same character of a document; two stores
    only), `auto` (tokens when the tokenizers behave identically, else char-anchors)."""
    min_coverage: float = field(
        default=MIN_COVERAGE,
        metadata=option("--min-coverage", metavar="F", type="fraction"),
    )
    """char-anchors: the fraction of each model's text, in the contexts both read, that must
    lie before an anchor the two share (`anchors.text_coverage`); below it the fit is refused
    (0: no floor). Token coverage is reported, not refused."""
    measures: tuple = field(
        default=("ridge",),
        metadata=option("--measures", metavar="LIST", default="ridge"),
    )
    """Similarity measures beside ridge's held-out error, comma-separated, or `all`: `cka`,
    `cka-debiased`, `procrustes`, `procrustes-heldout` (the rotation fitted on the training
    documents, the error on the held-out ones), `cca`, `svcca` (on all the held-out rows, with a
    95% delete-a-group jackknife interval under `--bootstrap`) and `mknn`, `cknna`, `rsa` (on the
    sampled rows), each calibrated against a permutation null on the sampled rows with
    `--permutations` (`mknn`, `cknna` and `rsa` always); `ridge` is always computed."""
    sample_rows: int | None = field(
        default=None,
        metadata=option(
            "--sample-rows",
            metavar="M",
            type="whole",
            least=1,
            shown_default="1,024, or every held-out row when fewer",
        ),
    )
    """With `--measures`: held-out rows drawn (by `--seed`) for `mknn`, `cknna`, `rsa` and every
    measure's calibration; more than the held-out rows is refused."""
    permutations: int | None = field(
        default=None,
        metadata=option(
            "--permutations",
            metavar="K",
            type="whole",
            least=0,
            shown_default="99 for mknn, cknna and rsa alone",
        ),
    )
    """With `--measures`: null draws of the calibration on the sampled rows (the target's
    documents re-paired; 99 gives p-values down to 0.01), of every measure asked where given
    (`procrustes-heldout` with each pair's training rotation), of `mknn`, `cknna` and `rsa`
    alone where not; 0: none, where no row measure is asked."""
    neighbours: int = field(
        default=K_NEIGHBOURS,
        metadata=option("--neighbours", metavar="k", type="whole", least=1),
    )
    """With `--measures`: k of `mknn` and `cknna`, 1 to M − 1 for M sampled rows (a row is not
    its own neighbour; `cknna` 2 or more)."""

    def checked(self) -> "FitSpec":
        """This spec with α sorted and extend_alphas decided, or the one-line InputError of
        the first bad value (α, seed, control, bootstrap, bootstrap seed, measure interval)."""
        alphas = tuple(
            sorted(
                float(a) for a in (self.alphas if self.alphas is not None else ridge.DEFAULT_ALPHAS)
            )
        )
        if not alphas or any(not (a > 0 and math.isfinite(a)) for a in alphas):
            raise InputError(
                f"`alphas` {','.join(map(str, alphas)) or '(empty)'}: every α_rel must be a positive finite number"
            )
        check_seed(self.seed)
        check_fractions(self.test_fraction, self.val_fraction, len(alphas) > 1)
        check_pairing(self.pairing)
        check_min_coverage(self.min_coverage)
        if self.control not in CONTROLS:
            raise InputError(
                f"`control` {self.control!r}: the controls are shuffle (other documents' tokens at the same "
                "positions); the untrained control is a `random_init` store, the self-map `align fit S S`"
            )
        if (
            isinstance(self.bootstrap, bool)
            or not isinstance(self.bootstrap, int)
            or self.bootstrap < 0
        ):
            raise InputError(
                f"`bootstrap` {self.bootstrap}: give the number of document resamples, 0 or more (0: none)"
            )
        if self.bootstrap:
            check_resamples(self.bootstrap)
        seeding.check(self.bootstrap_seed, "bootstrap_seed")
        if self.measure_interval not in INTERVALS:
            raise InputError(
                f"`measure_interval` {self.measure_interval!r}: give {' or '.join(INTERVALS)} "
                "(the row measures' interval)"
            )
        extend = (
            self.extend_alphas
            if self.extend_alphas is not None
            else alphas == tuple(ridge.DEFAULT_ALPHAS)
        )
        spec = replace(
            self,
            alphas=alphas,
            extend_alphas=bool(extend),
            measures=parse_measures(self.measures),
            permutations=self._checked_permutations(),
        )
        # k against M before any memory arithmetic (the sample is at most SAMPLE_ROWS rows
        # without `sample_rows`; `sampled.draw` checks the rows actually drawn)
        m = self.sample_rows if self.sample_rows is not None else SAMPLE_ROWS
        said = None if self.sample_rows is not None else f"`sample_rows` {m:,} (the most drawn)"
        why = neighbours_refusal(self.neighbours, m, spec.sampled, said)
        if why:
            raise InputError(why)
        return spec

    def _checked_permutations(self) -> int | None:
        """`permutations` (0: no calibration; None, the default, stays None: `draws`), or the
        one-line InputError of a negative count or of row measures asked with 0."""
        if isinstance(self.permutations, int) and self.permutations < 0:
            raise InputError(
                f"`permutations` {self.permutations}: give 0 (no calibration) or a whole number of "
                f"null permutations ({PERMUTATIONS} gives p-values down to 0.01)"
            )
        rows_only = [m for m in parse_measures(self.measures) if m in ROW_ONLY]
        if self.permutations is None:
            return None
        if self.permutations == 0:
            if rows_only:
                raise InputError(
                    f"`measures` {','.join(rows_only)} come with their calibration: give "
                    f"`permutations` 1 or more ({PERMUTATIONS} gives p-values down to 0.01), "
                    "or leave it out for its default"
                )
            return 0
        return check_permutations(self.permutations)

    @property
    def resampling(self):
        """The document bootstrap's `Resampling`, or None with bootstrap=0."""
        return Resampling(self.bootstrap, self.bootstrap_seed) if self.bootstrap else None

    @property
    def streamed(self) -> tuple:
        """The measures computed from the held-out sums (`align.measures.STREAMED`)."""
        return tuple(m for m in self.measures if m in STREAMED)

    @property
    def draws(self) -> int:
        """The calibration's null draws: `permutations` where given, else PERMUTATIONS where
        mknn, cknna or rsa is asked (they are reported only with their calibration), else 0."""
        if self.permutations is not None:
            return self.permutations
        return PERMUTATIONS if self.calibrated else 0  # the row measures asked, by default

    @property
    def calibrated(self) -> tuple:
        """The measures calibrated against the null: with `permutations` given (1 or more),
        every one asked but ridge; by default mknn, cknna and rsa alone, so a streamed
        measure's cost does not depend on which other measures are asked (its calibration,
        on a CPU about 99 products of the sampled rows a cell, is asked for by giving
        `permutations`); with 0, none."""
        names = parse_measures(self.measures)
        if self.permutations is None:
            return tuple(m for m in names if m in ROW_ONLY)
        return tuple(m for m in names if m != "ridge") if self.permutations else ()

    @property
    def sampled(self) -> tuple:
        """The measures computed on the sampled rows: the calibrated ones (`calibrated`) but
        procrustes-heldout, each with its calibration (procrustes-heldout's, which needs each
        pair's training rotation, is computed block by block while the rotations are in hand:
        `heldout_calibrated`)."""
        return tuple(m for m in self.calibrated if m != "procrustes-heldout")

    @property
    def heldout_calibrated(self) -> bool:
        """Whether procrustes-heldout is calibrated on the sampled rows (`calibrated`): its
        value and null per pair while the block's rotations are in hand
        (`fitting.measuring.sampled.heldout_null`)."""
        return "procrustes-heldout" in self.calibrated

    @property
    def need_validation(self) -> bool:
        """A validation part is split off only to choose among several α."""
        return len(self.alphas) > 1

    def recorded(self, device: str, **extra) -> dict:
        """The options the result records (what decides its numbers; `device`: where the
        products and solves ran), plus `extra` (task_tokens, n_tokens per part, ...)."""
        d = asdict(self)
        d["alphas"] = list(self.alphas)
        d["permutations"] = self.draws
        d["calibrated"] = list(self.calibrated)
        head = (
            "test_fraction",
            "val_fraction",
            "seed",
            "alphas",
            "include_first_token",
            "source_boundaries",
            "target_boundaries",
        )
        return {**{k: d.pop(k) for k in head}, "device": device, **d, **extra}


@dataclass(frozen=True)
class Execution:
    """Where and how a fit runs; none of it changes a number of the result (but `device`,
    recorded beside the `FitSpec`)."""

    device: str = field(default="cpu", metadata=option("--device", metavar="DEVICE"))
    """Where the products and the solves (eigendecompositions included) run: `cpu`, or a CUDA
    device (`cuda`, `cuda:N`) through torch, in float64. With `--live`: where both models run
    and the statistics accumulate (`cpu`, `cuda`, or `auto`: accelerate's `device_map`)."""
    scheduler: str | None = field(
        default=None,
        metadata=option(
            "--scheduler",
            metavar="ADDRESS",
            shown_default="threads of this process, one per CPU core",
        ),
    )
    """A Dask scheduler address (`tcp://host:8786`), or `synchronous` (this process, one
    thread)."""
    n_workers: int | None = field(
        default=None,
        metadata=option(
            "--workers", metavar="N", type="whole", least=1, shown_default="no cluster"
        ),
    )
    """Start a local Dask cluster of N worker processes instead of threads: at most one per CPU
    core this process may run on (more are capped, with a log line), fewer when
    `--memory-limit` cannot hold them. Two stores only."""
    memory_limit: int | str | None = field(
        default=None,
        metadata=option(
            "--memory-limit",
            metavar="BYTES",
            parse="size",
            shown_default="60% of the available memory",
        ),
    )
    """Budget of the whole fit, e.g. `8GB`: this process and every worker it starts, their
    idle footprint included (per worker with `--scheduler`)."""
    task_tokens: int | None = field(
        default=None,
        metadata=option(
            "--task-tokens",
            metavar="N",
            type="whole",
            least=1,
            shown_default="the store's chunk; 65,536 or more on a GPU",
        ),
    )
    """Tokens each statistics task reads. Two stores only."""
    blas_threads: int | None = field(
        default=1, metadata=not_an_option("fixed, so that sums do not depend on where they ran")
    )
    """BLAS threads per task (fixed, so that sums do not depend on where they ran)."""
    storage_options: dict | None = field(
        default=None, hash=False, metadata=not_an_option("fsspec's options, from the Python API")
    )
    """fsspec options of remote stores."""
    overwrite: bool = field(default=False, metadata=option("--overwrite", is_flag=True))
    """Replace RESULT if it is an alignment result (never a store, an input, or a folder
    holding anything else)."""

    def checked(self) -> "Execution":
        """These settings with `memory_limit` in bytes, or the one-line InputError of the
        first bad value (device, task tokens, memory limit)."""
        check_device(self.device)
        if self.task_tokens is not None and self.task_tokens < 1:
            raise InputError(f"`task_tokens` {self.task_tokens} must be at least 1")
        return replace(self, memory_limit=parse_memory(self.memory_limit))


@dataclass(frozen=True)
class FitHooks:
    """What tests reach into (not options of a fit): worker_budget, bytes per worker
    replacing the measured figure; keep_statistics: return the reduced statistics in the report."""

    worker_budget: int | None = None
    keep_statistics: bool = False


@dataclass(frozen=True)
class FitRequest:
    """A checked fit: what it computes, where it runs, the test hooks (`request` builds it)."""

    spec: FitSpec
    run: Execution
    hooks: FitHooks = FitHooks()

    def recorded(self, **extra) -> dict:
        """The result's `options` attribute: `FitSpec.recorded` on this run's device."""
        return self.spec.recorded(**{"device": self.run.device, **extra})


def request(
    spec: FitSpec | None = None, run: Execution | None = None, hooks: FitHooks | None = None
) -> FitRequest:
    """Check `align.fit`'s records into one FitRequest.

    Parameters
    ----------
    spec : FitSpec or None
        What the fit computes (None: FitSpec's defaults).
    run : Execution or None
        Where and how it runs (None: Execution's defaults).
    hooks : FitHooks or None
        What tests reach into (None: none).

    Returns
    -------
    FitRequest
        The spec (α sorted, the grid's extension decided), the run (memory in bytes) and the
        test hooks, each checked.

    Raises
    ------
    TypeError
        A record of another type than its parameter's, naming both.
    InputError
        The first bad value, in one line.
    """
    given = []
    for name, cls, record in (
        ("spec", FitSpec, spec),
        ("run", Execution, run),
        ("hooks", FitHooks, hooks),
    ):
        if record is None:
            record = cls()
        elif not isinstance(record, cls):
            raise TypeError(f"`{name}` must be a {cls.__name__}, not {type(record).__name__}")
        given.append(record)
    spec, run, hooks = given
    return FitRequest(spec.checked(), run.checked(), hooks)


def entry_request(caller: str, keywords: dict, spec, run, hooks) -> FitRequest:
    """An entry point's `request`, after refusing a record's field given to it as a keyword.

    Parameters
    ----------
    caller : str
        The entry point as the refusal names it (`align.fit`, `fit_live`).
    keywords : dict
        The keywords it was given beyond its signature (`refuse_fields`).
    spec, run, hooks : FitSpec, Execution, FitHooks or None
        As `request` takes them.

    Returns
    -------
    FitRequest
        `request`'s.
    """
    refuse_fields(caller, keywords, (FitSpec, Execution, FitHooks))
    return request(spec, run, hooks)


@dataclass(frozen=True)
class LiveJob:
    """What the live route runs: both models, the corpus, how sequences are batched."""

    source: models.ModelSpec = field(
        metadata=not_an_option("SOURCE and the per-side model options (`ModelSpec`'s sides)")
    )
    """The source model."""
    target: models.ModelSpec = field(
        metadata=not_an_option("TARGET and the per-side model options (`ModelSpec`'s sides)")
    )
    """The target model."""
    corpus: corpus.CorpusSpec = field(
        metadata=not_an_option("CORPUS and the corpus options (`CorpusSpec`)")
    )
    """The corpus both models read."""
    batch_size: int = field(
        default=8, metadata=option("--batch-size", metavar="N", type="whole", least=1)
    )
    """`--live`: sequences per forward pass of both models, batched as `align extract` batches
    them (the same batches, the same numbers)."""
    allow_long: bool = field(default=False, metadata=option("--allow-long", is_flag=True))
    """`--live`: keep a `--max-length` above a model's position limit (capped at it
    otherwise)."""


MAX_BYTES = 2**63 - 1  # the largest size a byte count in torch, numpy or psutil holds


def parse_memory(limit, option: str = "`memory_limit`") -> int | None:
    """`option`'s budget (--memory-limit, --device-memory) as bytes: None (the default) and a
    positive int pass, "8GB" / "512MiB" are parsed (dask's units). Anything else is a
    one-line InputError naming the value: a size of 0 or less too (0 used to mean the
    default, a negative size failed later as "too small")."""
    if limit is None:
        return None
    if isinstance(limit, str):
        from dask.utils import parse_bytes

        try:
            size = parse_bytes(limit)
        except (ValueError, TypeError, OverflowError):  # 1e400 is float inf, which int() refuses
            raise InputError(
                f"{option} {limit!r} is not a size: write e.g. 8GB or 512MiB"
            ) from None
    elif isinstance(limit, int) and not isinstance(limit, bool):
        size = limit
    else:
        raise InputError(
            f"{option} {limit!r} is not a size: write e.g. 8GB or 512MiB (or a number of bytes)"
        )
    if size <= 0:
        raise InputError(
            f"{option} {limit}: a budget must be more than 0 bytes; write e.g. 8GB or 512MiB, "
            "or leave the option out for its default"
        )
    if size > MAX_BYTES:
        raise InputError(
            f"{option} {limit}: {size:.3g} bytes is beyond any machine's memory (at most "
            f"2**63 - 1 bytes); write e.g. 8GB or 512MiB, or leave the option out for its default"
        )
    return size


def backend(device: str) -> ridge.Backend:
    """Where the products and solves of a fit on `device` run: numpy on cpu, torch on CUDA."""
    return ridge.Backend(device)
