"""The demo's third model: the deep model's shape trained on the same arithmetic text read by
another tokenizer (a BPE learnt on the training text, `tokenizer.build_bpe`), extracted and
fitted from the shallow model of the first seed. `align fit` pairs the two models' tokens on
the text (`--pairing auto` → char-anchors): every BPE token ends at a character where the
character model ends one, so all of its tokens are anchors, and the character model's anchors
are the characters where a BPE token ends.

It trains once (the first seed), on half the deep model's tokens: a BPE token holds about two
characters, so it reads about as much text."""

from __future__ import annotations

import dataclasses
import os

import align
from align.corpus import CorpusSpec
from align.demo import train
from align.demo.seeds import STATS
from align.demo.steps import done, quiet, step
from align.extraction import ExtractOptions
from align.fitting import Execution, FitSpec
from align.store import open_result

NAME = "deep-bpe"
RESULT = "alignment-bpe"


def run(report, config, seed_run: dict, corpus_path: str, log, max_length: int) -> None:
    """Train, extract and fit the BPE model into `report` (models, training, stores, results
    under NAME and RESULT), each step timed."""
    seed = seed_run["seed"]

    def brief(m):
        return log(m) if "anchored pairs" in m or "pairing char-anchors" in m else quiet(log)(m)

    tc = dataclasses.replace(
        config.deep, seed=seed, bpe_merges=config.bpe_merges, tokens=config.deep.tokens // 2
    )
    folder = os.path.join(report.output, "models", f"{NAME}-{tc.key()}")
    report.models[NAME] = folder
    report.training[NAME] = step(
        report, f"train {NAME}", lambda: train.train(tc, folder, log=log), log
    )
    store = os.path.join(report.output, "stores", f"{NAME}.zarr")
    report.stores[NAME] = store
    step(
        report,
        f"extract {NAME}",
        lambda: align.extract(
            folder,
            CorpusSpec(corpus_path, max_length=max_length),
            store,
            ExtractOptions(batch_size=config.batch_size),
            log=brief,
        ),
        log,
    )
    result = os.path.join(report.output, "results", f"{RESULT}.zarr")
    report.results[RESULT] = result
    if not done(result):
        step(
            report,
            f"fit {RESULT}",
            lambda: align.fit(
                seed_run["stores"]["shallow"],
                store,
                result,
                FitSpec(seed=config.fit_seed),
                Execution(scheduler="synchronous", blas_threads=None),
                log=brief,
            ),
            log,
        )


def coverage(ds) -> str:
    """ "source 52.1%, target 100.0% of their tokens" from a result's recorded pairing."""
    p = ds.attrs.get("pairing") or {}
    if p.get("mode") != "char-anchors":
        return f"pairing {p.get('mode', 'tokens')}"
    return (
        f"char-anchors covering {p['source']['coverage']:.1%} of the shallow model's tokens and "
        f"{p['target']['coverage']:.1%} of the BPE model's"
    )


def record(report) -> dict:
    """What demo.json keeps of the third model: its training, the pairing (coverage per side)
    and its summary's statistics with their intervals (the keys `seeds.statistics` keeps)."""
    ds = open_result(report.results[RESULT], "alignment")
    s = ds.attrs["summary"]
    p = ds.attrs["pairing"]
    return {
        "model": report.models[NAME],
        "training": report.training[NAME],
        "pairing": {
            "mode": p["mode"],
            "pairs": p.get("pairs"),
            **{side: p[side]["coverage"] for side in ("source", "target") if side in p},
        },
        "summary": {
            "argmin_path": list(s.get("argmin_path") or []),
            **{k: s.get(k) for k in STATS},
            **{f"{k}_{e}": s.get(f"{k}_{e}") for k in STATS for e in ("low", "high")},
        },
    }
