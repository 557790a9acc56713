"""Depth score over difficulty levels (docs/methods.md, Depth score; [P1] §3.3).

From one "skipping" result per difficulty level (MQuAKE hop count, MATH level, digits of a
generated arithmetic problem), the centre of mass over skipped layers s of an effect m:

    DS(m) = Σ_s s·m_s / Σ_s m_s        (in layers; DS / L compares models)

per setting, part and aggregation the skip results hold, with

- the output effect m_s = O[s], s = 0..L−1, in both settings;
- the layer effect in the future setting, [P1]'s depth score (its code: skip_max_depth.py,
  `main` and `effect_layer_score`): m_s = Σ_l R[s, l] / max(L−1−s, 1), s = 0..L−1. The
  future setting leaves layers l ≤ s unchanged at the measured positions (R[s, l ≤ s] = 0),
  so m_s is the mean over the later layers l > s and m_{L−1} = 0. This is the headline
  (attrs["headline"]): the future setting, part layer, aggregation max, layer effect;
- the layer effect in the current setting, align's extension (not in [P1]): m_s = mean over
  later layers l > s of R[s, l], s = 0..L−2 (s = L−1 has no later layer and is left out).
  [P1]'s formula would count R[s, s] = 1 there (the skipped layer's own contribution is gone
  at every position), adding 1/(L−1−s) to each m_s: a pull toward the last layers that says
  nothing about the model.

DS is undefined (NaN, with the reason in attrs["undefined"]) when Σ_s m_s = 0: skipping
changed nothing. [P1] measures its depth score at the answer: `align skip --split
answer-start` on MQuAKE, `--split answer-points` on MATH (attrs["splits"] keeps each skip
result's split; results of different splits are refused).

A flat DS across levels means the model does not move its computation to later (or earlier)
layers for harder items: it does not use more depth for harder problems ([P1] finds DS flat
across MQuAKE hop counts and MATH levels).

Intervals: a prompt bootstrap over the per-prompt maxima R_prompt, O_prompt that `align skip`
stores. With rng = numpy.random.default_rng(seed), for each level (in the order given) and
each setting (in the result's order): P = the prompts that setting used (finite per-prompt
values), n = len(P), idx = rng.integers(0, n, size=(B, n)); resample b takes prompts P[idx[b]],
re-aggregates them as the point estimate does (max, or mean over the resampled prompts) for
every part and aggregation, and recomputes DS. ds_low, ds_high are the 2.5 and 97.5
percentiles (numpy.nanpercentile, linear) of the B values; a resample whose Σ m_s = 0 is left
out, and all of them: NaN. The point DS is that of the stored aggregates, which must equal the
per-prompt maxima's aggregates (an edited result is refused). Results without per-prompt
values (made before they were stored) get no interval (none is faked): ds_low, ds_high are
NaN and attrs["intervals"] says so.

Each result's level is given (`levels`) or read from its provenance: a generated
`addition:N` / `multiplication:N` corpus has level N; a `mquake` or `math` corpus whose file
is still there with the recorded hash has the levels of its documents, which must be one level.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from align import corpus, messages
from align import store as st
from align.errors import InputError, NonFiniteError, StoreMismatch
from align.fitting.live_route.progress import Progress
from align.stats.bootstrap import Resampling, draw, percentile_interval, record
from align.version import __version__

EFFECTS = ("layer", "output")
HEADLINE = {"setting": "future", "part": "layer", "agg": "max", "effect": "layer"}
SCORES = {
    "future": "P1's depth score: DS = sum_s s*m_s / sum_s m_s with m_s = sum_l R[s, l] / max(L-1-s, 1) (layer "
    "effect; the mean over later layers, R[s, l<=s] = 0 in this setting) or m_s = O[s] (output effect)",
    "current": "align's extension, not in P1: DS of the layer effect m_s = mean over later layers l > s of R[s, l], "
    "s = 0..L-2 (P1's formula would count R[s, s] = 1 here), or of the output effect m_s = O[s]",
}
INTERVALS = (
    "none: a prompt bootstrap needs R and O per prompt, and {name} holds only their aggregates over "
    "prompts (rerun `align skip` to store per-prompt values)"
)
BOOTSTRAP = (
    "prompt bootstrap: {B} resamples of prompts per level and setting, seed {seed}, 2.5 and 97.5 "
    "percentiles of DS (ds_low, ds_high)"
)


def layer_effect(R: np.ndarray, setting: str = "future") -> np.ndarray:
    """The layer effect m of an (L, L) matrix R[skipped, later]: in the future setting [P1]'s
    m_s = Σ_l R[s, l] / max(L−1−s, 1) for s = 0..L−1; in the current setting align's m_s =
    mean over l > s of R[s, l] for s = 0..L−2."""
    R = np.asarray(R, np.float64)
    L = R.shape[0]
    if setting == "future":
        return R.sum(1) / np.maximum(L - 1 - np.arange(L), 1)
    return np.array([R[s, s + 1 :].mean() for s in range(L - 1)])


def depth_score(m: np.ndarray) -> float:
    """Σ_s s·m_s / Σ_s m_s over s = 0..len(m)−1; NaN when Σ_s m_s = 0."""
    m = np.asarray(m, np.float64)
    total = m.sum()
    if total == 0:
        return float("nan")
    return float((np.arange(len(m)) * m).sum() / total)


def level_from_provenance(attrs: dict, where: str) -> int | None:
    """The level of a result's corpus from its provenance (module docstring), or None when
    its corpus has no levels or cannot be read back."""

    prov = attrs.get("corpus") or {}
    recorded = prov.get("levels")
    if isinstance(recorded, list) and recorded:
        if len(set(recorded)) != 1:
            raise InputError(
                f"{where} mixes levels {sorted(set(recorded))}: run the skip analysis on one level's "
                f"prompts per result"
            )
        return int(recorded[0])
    fmt = prov.get("fmt", "plain")
    try:
        generated = corpus.generated_format(fmt)
    except InputError:
        return None
    if generated is not None:
        return generated[1]
    if fmt not in ("mquake", "math") or prov.get("dataset"):
        return None
    source = prov.get("source")
    fields = {
        k: prov[k] for k in corpus.CorpusSpec.__dataclass_fields__ if k in prov and k != "path"
    }
    spec = corpus.CorpusSpec(path=source, **fields)
    if not source or not os.path.exists(source) or corpus.corpus_hash(spec) != prov.get("hash"):
        return None
    levels = {lv for lv in corpus.document_levels(spec) if lv is not None}
    if len(levels) > 1:
        raise InputError(
            f"{where} comes from {source}, whose prompts have levels {sorted(levels)}: write one corpus "
            f"per level and run the skip analysis on each"
        )
    return levels.pop() if levels else None


def parse_levels(text: str | None, n: int) -> list[int] | None:
    """`--levels 2,3,4`: one integer per skip result, in their order."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not all(p.lstrip("-").isdigit() for p in parts):
        raise InputError(
            f"`levels` {text!r}: give comma-separated integers, one per skip result, e.g. 2,3,4"
        )
    if len(parts) != n:
        raise InputError(
            f"`levels` {text!r} gives {len(parts)} levels for {n} skip results: give one per result"
        )
    return [int(p) for p in parts]


def _aggregate(x: np.ndarray, agg: str) -> np.ndarray:
    return x.max(0) if agg == "max" else x.mean(0)


def per_prompt(ds, name, setting, R, O, coords):
    """(R (n, part, L, L), O (n, part, L)) of the prompts `setting` used, checked against the
    stored aggregates R, O (part, agg, ...)."""
    Rp = (
        ds["R_prompt"]
        .sel(setting=setting)
        .transpose("prompt", "part", "skipped", "later")
        .values.astype(np.float64)
    )
    Op = (
        ds["O_prompt"]
        .sel(setting=setting)
        .transpose("prompt", "part", "skipped")
        .values.astype(np.float64)
    )
    used = np.isfinite(Rp).all(axis=(1, 2, 3)) & np.isfinite(Op).all(axis=(1, 2))
    if not used.any():
        raise InputError(
            f"{name}: no prompt has per-prompt values in setting {setting!r}: nothing to resample"
        )
    Rp, Op = Rp[used], Op[used]
    for c, agg in enumerate(coords["agg"]):
        for got, want, var in (
            (_aggregate(Rp, agg), R[:, c], "R"),
            (_aggregate(Op, agg), O[:, c], "O"),
        ):
            if not np.allclose(got, want, rtol=1e-12, atol=0):
                raise StoreMismatch(
                    f"{name}: {var} ({setting}, {agg}) is not the {agg} of {var}_prompt: the result was "
                    f"edited; rerun `align skip`"
                )
    return Rp, Op


def bootstrap_scores(
    Rp: np.ndarray, Op: np.ndarray, aggs, idx: np.ndarray, setting: str = "future"
) -> np.ndarray:
    """DS of every resample: (B, part, agg, effect) from per-prompt R (n, part, L, L), O (n,
    part, L) of `setting` and resample indices idx (B, n) into the prompts."""
    B = idx.shape[0]
    n_parts = Rp.shape[1]
    out = np.full((B, n_parts, len(aggs), len(EFFECTS)), np.nan)
    for b in range(B):
        Rs, Os = Rp[idx[b]], Op[idx[b]]
        for c, agg in enumerate(aggs):
            Ra, Oa = _aggregate(Rs, agg), _aggregate(Os, agg)
            for k in range(n_parts):
                out[b, k, c, 0] = depth_score(layer_effect(Ra[k], setting))
                out[b, k, c, 1] = depth_score(Oa[k])
    return out


def check_results(results: list, levels: list[int], names: list[str]) -> tuple[dict, int, list]:
    """(coords {"setting", "part", "agg": values}, L, each result's split) of "skipping"
    Datasets that make one depth score: one result per level, one model, the same settings,
    parts and aggregations, and the same split where the future setting is measured."""
    if len(set(levels)) != len(levels):
        dup = sorted({lv for lv in levels if levels.count(lv) > 1})
        raise InputError(
            f"level {dup[0]} is given to more than one skip result: give one result per level"
        )
    first = results[0]
    coords = {k: [str(v) for v in first[k].values] for k in ("setting", "part", "agg")}
    L = int(first.sizes["skipped"])
    for ds, name in zip(results[1:], names[1:]):
        for key in ("model", "config_hash"):
            if ds.attrs.get(key) != first.attrs.get(key):
                raise StoreMismatch(
                    f"{name} and {names[0]} come from different models ({key}: "
                    f"{ds.attrs.get(key)!r} vs {first.attrs.get(key)!r})"
                )
        for k, want in coords.items():
            if [str(v) for v in ds[k].values] != want:
                raise StoreMismatch(
                    f"{name} holds {k} {[str(v) for v in ds[k].values]}, {names[0]} holds {want}: "
                    f"run the skip analyses with the same `settings` and `parts`"
                )
    splits = [(ds.attrs.get("options") or {}).get("split") for ds in results]
    known = [(sp, name) for sp, name in zip(splits, names) if sp is not None]
    if "future" in coords["setting"] and len({sp for sp, _ in known}) > 1:
        (sa, na), (sb, nb) = known[0], next(k for k in known if k[0] != known[0][0])
        raise StoreMismatch(
            f"{nb} was run with `split` {sb}, {na} with `split` {sa}: the future setting's levels "
            f"compare only at the same split points; run the skip analyses with the same `split`"
        )
    return coords, L, splits


def lacking_prompts(results: list, names: list[str]) -> list[str]:
    """The names of the results that hold no per-prompt values (no interval can be drawn)."""
    return [
        name for ds, name in zip(results, names) if "R_prompt" not in ds or "O_prompt" not in ds
    ]


def depth_scores(
    results: list,
    levels: list[int],
    names: list[str],
    bootstrap: int = 1000,
    seed: int = 0,
    progress=None,
) -> dict:
    """DS per level, setting, part, agg and effect from "skipping" Datasets (one per level),
    with prompt-bootstrap intervals where every result holds per-prompt values (module
    docstring); `progress` (align.fitting.live_route.progress.Progress, counting resamples) hears of
    each level and setting's resamples."""
    resampling = Resampling(
        bootstrap, seed
    )  # refuses a count outside MIN_RESAMPLES..MAX_RESAMPLES or a negative seed
    coords, L, splits = check_results(results, levels, names)
    shape = (
        len(levels),
        len(coords["setting"]),
        len(coords["part"]),
        len(coords["agg"]),
        len(EFFECTS),
    )
    out = np.full(shape, np.nan)
    low, high = np.full(shape, np.nan), np.full(shape, np.nan)
    lacking = lacking_prompts(results, names)
    rng = np.random.default_rng(seed) if not lacking else None
    undefined = []
    n_resampled = [{} for _ in results]
    for i, (ds, name) in enumerate(zip(results, names)):
        R = (
            ds["R"]
            .transpose("setting", "part", "agg", "skipped", "later")
            .values.astype(np.float64)
        )
        O = ds["O"].transpose("setting", "part", "agg", "skipped").values.astype(np.float64)
        for arr, var in ((R, "R"), (O, "O")):
            if not np.isfinite(arr).all():
                raise NonFiniteError(
                    f"{name}: {var} holds a non-finite value: a depth score of it would be wrong"
                )
        for a, setting in enumerate(coords["setting"]):
            for b, part in enumerate(coords["part"]):
                for c, agg in enumerate(coords["agg"]):
                    for e, m in enumerate((layer_effect(R[a, b, c], setting), O[a, b, c])):
                        out[i, a, b, c, e] = depth_score(m)
                        if not np.isfinite(out[i, a, b, c, e]):
                            undefined.append(
                                f"level {levels[i]} {setting} {part} {agg} {EFFECTS[e]} effect: "
                                f"skipping changed nothing (sum of m_s is 0)"
                            )
            if rng is not None:
                t = time.perf_counter()
                Rp, Op = per_prompt(ds, name, setting, R[a], O[a], coords)
                idx = draw(rng, len(Rp), bootstrap)
                n_resampled[i][setting] = len(Rp)
                low[i, a], high[i, a] = percentile_interval(
                    bootstrap_scores(Rp, Op, coords["agg"], idx, setting)
                )
                if progress is not None:
                    progress.forward("bootstrap", bootstrap, time.perf_counter() - t)
                    progress.step(f"level {levels[i]} {setting}", bootstrap)
    intervals = (
        INTERVALS.format(name=lacking[0]) if lacking else BOOTSTRAP.format(B=bootstrap, seed=seed)
    )
    return {
        "ds": out,
        "ds_low": low,
        "ds_high": high,
        "intervals": intervals,
        "levels": list(levels),
        "n_layers": L,
        "undefined": undefined,
        **coords,
        "splits": splits,
        "bootstrap": None
        if lacking
        else record([{"level": lv, **n} for lv, n in zip(levels, n_resampled)], resampling),
        "n_prompts": [int(ds.attrs.get("n_prompts", 0)) for ds in results],
    }


def headline(res: dict) -> dict:
    """The cell a depth score is quoted by: HEADLINE ([P1]'s: future setting, part layer, max,
    layer effect), or the nearest cell the results hold (the current setting: align's
    extension), with the score's name."""
    pick = {
        k: (HEADLINE[k] if HEADLINE[k] in res[k] else res[k][0]) for k in ("setting", "part", "agg")
    }
    name = (
        "P1's depth score"
        if pick["setting"] == "future"
        else "align's current-setting depth score (not in P1)"
    )
    return {**pick, "effect": HEADLINE["effect"], "name": name}


def to_dataset(res: dict, attrs: dict):
    """The "depthscore" result Dataset: DS, ds_low, ds_high (level, setting, part, agg,
    effect) in layers."""
    import xarray as xr

    dims = ("level", "setting", "part", "agg", "effect")
    ds = xr.Dataset(
        {
            "DS": (dims, res["ds"]),
            "ds_low": (dims, res["ds_low"]),
            "ds_high": (dims, res["ds_high"]),
            "n_prompts": (("level",), np.asarray(res["n_prompts"], np.int64)),
        },
        coords={
            "level": np.asarray(res["levels"], np.int64),
            "setting": res["setting"],
            "part": res["part"],
            "agg": res["agg"],
            "effect": list(EFFECTS),
        },
    )
    ds.attrs = {
        **attrs,
        "n_layers": res["n_layers"],
        "undefined": res["undefined"],
        "intervals": res["intervals"],
        "headline": headline(res),
        "scores": {s: SCORES[s] for s in res["setting"] if s in SCORES},
        "splits": res.get("splits"),
    }
    if res.get("bootstrap"):
        ds.attrs["bootstrap"] = res["bootstrap"]
    return ds.sortby("level")


def run_depthscore(
    paths,
    output,
    *,
    levels: str | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    overwrite: bool = False,
    log=None,
) -> str:
    """Run `align depthscore`: DS over levels from one skip result per level; writes `output`.

    A progress line (a bar on a terminal) counts the resamples of the bootstrap.

    Parameters
    ----------
    paths : list of str
        One "skipping" result per level.
    output : str
        Where the result is written.
    levels : str, optional
        One level per result, comma-separated (default: each result's corpus level from its
        provenance).
    bootstrap : int, optional
        Resamples of the intervals.
    seed : int, optional
        The resampling's seed.
    overwrite : bool, optional
        Replace a result of the same schema at `output`.
    log : callable, optional
        Receives each message (default: stderr).

    Returns
    -------
    str
        `output`.

    Raises
    ------
    InputError
        No result, or a result without a level when `levels` is not given.
    """

    log = log or messages.say
    paths, results, given, inputs = _read(paths, output, levels, overwrite)
    n_settings = results[0].sizes["setting"]
    total = 0 if lacking_prompts(results, paths) else len(paths) * n_settings * bootstrap
    terminal = log is messages.say and sys.stderr.isatty()
    progress = Progress(
        total,
        log,
        terminal,
        command="align depthscore",
        sides=("bootstrap",),
        unit="resample",
        rate_unit="resamples",
    )
    try:
        res = depth_scores(results, given, paths, bootstrap, seed, progress if total else None)
    finally:
        progress.close()
    attrs = {k: results[0].attrs.get(k) for k in ("model", "revision", "model_type", "config_hash")}
    attrs.update(
        {
            "skip_results": paths,
            "align_version": __version__,
            "options": {"levels": given, "bootstrap": bootstrap, "seed": seed},
            "corpora": [ds.attrs.get("corpus") for ds in results],
        }
    )
    st.write_result(
        output, to_dataset(res, attrs), "depthscore", overwrite=overwrite, inputs=inputs
    )
    log(f"align depthscore: wrote {output}: {summary(res)}")
    return output


def _read(paths, output, levels: str | None, overwrite: bool):
    """(paths as str, their "skipping" Datasets, each one's level, the inputs -o must spare) of
    `align depthscore`, -o checked first; the levels given (`levels`) or read from each
    result's provenance."""
    paths = [str(p) for p in paths]
    if not paths:
        raise InputError("give at least one SKIP_RESULT (a result of `align skip`)")
    given = parse_levels(levels, len(paths))
    inputs = {f"SKIP_RESULT {p}": p for p in paths}
    st.check_output(output, "depthscore", inputs=inputs, overwrite=overwrite)
    results = [st.open_result(p, "skipping") for p in paths]
    if given is None:
        found = [level_from_provenance(ds.attrs, p) for ds, p in zip(results, paths)]
        missing = [p for p, lv in zip(paths, found) if lv is None]
        if missing:
            raise InputError(
                f"{missing[0]} has no level in its provenance (its corpus has none, or its file changed): "
                f"pass `levels` with one level per skip result, e.g. `levels` 2,3,4"
            )
        given = found
    return paths, results, given, inputs


def _count(n: int, word: str) -> str:
    """ "1 level", "3 levels"."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


TIMED = 50  # resamples timed by the dry run (fewer when fewer are asked for)


def plan_depthscore(
    paths,
    output,
    *,
    levels: str | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    overwrite: bool = False,
    log=None,
) -> dict:
    """`align depthscore --dry-run`: the checks of a real run (-o, the levels, one model, the
    same settings, parts and split, the per-prompt values against the aggregates), then what
    it will read, resample, hold and write, and its time from TIMED resamples of the first
    level's first setting, scaled by resamples × prompts (a resample copies its prompts'
    values). Writes nothing. Returns the plan's numbers."""
    log = log or messages.say
    Resampling(bootstrap, seed)
    paths, results, given, _ = _read(paths, output, levels, overwrite)
    coords, L, _ = check_results(results, given, paths)
    lacking = lacking_prompts(results, paths)
    n_used = []  # prompts each (level, setting) resamples
    per = []
    for ds, name in zip(results, paths):
        R = ds["R"].transpose("setting", "part", "agg", "skipped", "later").values
        O = ds["O"].transpose("setting", "part", "agg", "skipped").values
        counts = {}
        for a, setting in enumerate(coords["setting"]):
            if not lacking:
                Rp, Op = per_prompt(ds, name, setting, R[a], O[a], coords)
                counts[setting] = len(Rp)
                per.append((Rp, Op, setting))
        n_used.append(counts)
    cells = len(coords["part"]) * len(coords["agg"]) * len(EFFECTS)  # DS of one setting
    out_bytes = 3 * len(paths) * len(coords["setting"]) * cells * 8
    head = f"align depthscore --dry-run: {output} (a depthscore result)"
    lines = [head, f"  reads      {_count(len(paths), 'skip result')} of {L} layers:"]
    for name, lv, ds, counts in zip(paths, given, results, n_used):
        used = ", ".join(f"{k} {v:,}" for k, v in counts.items())
        lines.append(
            f"    level {lv}  {name}: {int(ds.attrs.get('n_prompts', ds.sizes.get('prompt', 0))):,} "
            f"prompts" + (f" (resampled: {used})" if used else "")
        )
    if lacking:
        lines += [
            f"  computes   DS of {cells} cells (parts × aggs × effects) per level and setting; "
            f"no intervals: {INTERVALS.format(name=lacking[0])}",
            f"  writes     ~{messages.human_bytes(out_bytes)} (DS, ds_low, ds_high)",
            "  time       well under a second; nothing was written",
        ]
        for line in lines:
            log(line)
        return {"resamples": 0, "seconds_estimate": 0.0, "result_bytes": out_bytes}
    Rp, Op, setting = per[0]
    k = min(TIMED, bootstrap)
    idx = draw(np.random.default_rng(seed), len(Rp), k)
    times = []
    for _ in range(2):  # the faster of two: a machine shared with other jobs slows single runs
        t = time.perf_counter()
        bootstrap_scores(Rp, Op, coords["agg"], idx, setting)
        times.append(time.perf_counter() - t)
    seconds = min(times)
    prompt_resamples = bootstrap * sum(len(r) for r, _, _ in per)
    estimate = seconds * prompt_resamples / (k * len(Rp))
    held = max(2 * (r.nbytes + o.nbytes) for r, o, _ in per)
    lines += [
        f"  computes   DS of {cells} cells (parts × aggs × effects) per level, setting and "
        f"resample: {bootstrap:,} resamples × {_count(len(paths), 'level')} × "
        f"{_count(len(coords['setting']), 'setting')} = {bootstrap * len(per):,} resamples over {prompt_resamples:,} prompts drawn",
        f"  memory     ~{messages.human_bytes(held)} (one level's per-prompt R and O in float64, "
        "and one resample's copy)",
        f"  writes     ~{messages.human_bytes(out_bytes)} (DS, ds_low, ds_high)",
        f"  one batch  {k} resamples of level {given[0]} ({setting}, {len(Rp):,} prompts) in "
        f"{seconds * 1e3:,.1f} ms",
        f"  time       ~{estimate:,.3g} s (reading the results not counted); nothing was written",
    ]
    for line in lines:
        log(line)
    return {
        "resamples": bootstrap * len(per),
        "prompts_drawn": prompt_resamples,
        "seconds_estimate": estimate,
        "result_bytes": out_bytes,
    }


def summary(res: dict) -> str:
    """The log line's text: the headline's layer-effect DS by level (with its interval), then,
    where the results hold both settings, align's current-setting extension."""
    head = headline(res)
    k, g = res["part"].index(head["part"]), res["agg"].index(head["agg"])

    def by_level(setting):
        a = res["setting"].index(setting)

        def one(i):
            v, lo, hi = (res[key][i, a, k, g, 0] for key in ("ds", "ds_low", "ds_high"))
            return f"{v:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if np.isfinite(lo) else "")

        return ", ".join(
            f"{lv}: {one(i)}" for i, lv in sorted(enumerate(res["levels"]), key=lambda x: x[1])
        )

    split = next((sp for sp in res.get("splits") or [] if sp), None)
    where = f"{head['setting']} setting" + (
        f", `split` {split}" if head["setting"] == "future" and split else ""
    )
    text = (
        f"{head['name']} ({where}; layer effect, part {head['part']}, {head['agg']}) by level "
        f"{by_level(head['setting'])} of {res['n_layers']} layers"
    )
    if head["setting"] == "future" and "current" in res["setting"]:
        text += f"; align's current-setting extension by level {by_level('current')}"
    return (
        text
        + (f"; {len(res['undefined'])} undefined" if res["undefined"] else "")
        + ("" if np.isfinite(res["ds_low"]).any() else f"; intervals {res['intervals']}")
    )
