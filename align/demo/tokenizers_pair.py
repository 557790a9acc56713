"""The demo's third model: the deep model's shape trained on the same arithmetic text read by
another tokenizer (a BPE learnt on the training text, `tokenizer.build_bpe`), extracted and
fitted from the shallow model of the first seed as units of its study (`as_study`: the pair
shallow -> deep-bpe, `[fit] pairing` auto). `align fit` pairs the two models' tokens on
the text (`--pairing auto` → char-anchors): every BPE token ends at a character where the
character model ends one, so all of its tokens are anchors, and the character model's anchors
are the characters where a BPE token ends.

It trains once (the first seed), on half the deep model's tokens: a BPE token holds about two
characters, so it reads about as much text."""

from __future__ import annotations

import dataclasses
import os

from align.demo import train
from align.demo.steps import quiet, step
from align.stats.replicates import STATS
from align.store import open_result

NAME = "deep-bpe"
RESULT = "alignment-bpe"


def train_model(report, config, seed: int, log) -> tuple:
    """Train the BPE model of the first seed (cached as every demo model is); returns (its
    folder, its train.json), the step timed. The first seed's study extracts it and fits it
    from the shallow model (`as_study`)."""
    tc = dataclasses.replace(
        config.deep, seed=seed, bpe_merges=config.bpe_merges, tokens=config.deep.tokens // 2
    )
    folder = os.path.join(report.output, "models", f"{NAME}-{tc.key()}")
    training = step(report, f"train {NAME}", lambda: train.train(tc, folder, log=log), log)
    return folder, training


def brief(log):
    """The study's log reduced as `steps.quiet` does, keeping the fit's pairing lines (how
    many anchored pairs the two tokenizers gave)."""
    reduced = quiet(log)
    return lambda m: log(m) if "anchored pairs" in m or "pairing char-anchors" in m else reduced(m)


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
