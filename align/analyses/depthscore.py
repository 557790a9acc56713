"""Depth score over difficulty levels (METHODS.md §6, [P1] §3.3).

From one "skipping" result per difficulty level (MQuAKE hop count, MATH level, digits of a
generated arithmetic problem), the centre of mass over skipped layers s of

- the layer effect m_s = mean over later layers l > s of R[s, l], for s = 0..L−2 (s = L−1
  has no later layer and is left out), and
- the output effect m_s = O[s], for s = 0..L−1:

    DS(m) = Σ_s s·m_s / Σ_s m_s        (in layers; DS / L compares models)

per setting, part and aggregation the skip results hold. DS is undefined (NaN, with the
reason in attrs["undefined"]) when Σ_s m_s = 0: skipping changed nothing.

A flat DS across levels means the model does not move its computation to later (or earlier)
layers for harder items: it does not use more depth for harder problems ([P1] finds DS flat
across MQuAKE hop counts and MATH levels).

Intervals: a prompt bootstrap needs R and O per prompt; "skipping" results hold only their
aggregates over prompts ("max", "mean_over_prompts"), so no interval is computed (none is
faked): attrs["intervals"] says so.

Each result's level is given (`levels`) or read from its provenance: a generated
`addition:N` / `multiplication:N` corpus has level N; a `mquake` or `math` corpus whose file
is still there with the recorded hash has the levels of its documents, which must be one level.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from align.errors import InputError, NonFiniteError, StoreMismatch

EFFECTS = ("layer", "output")
INTERVALS = ("none: a prompt bootstrap needs R and O per prompt, and skipping results hold only their "
             "aggregates over prompts")


def layer_effect(R: np.ndarray) -> np.ndarray:
    """m_s = mean over l > s of R[s, l] for s = 0..L−2, from an (L, L) matrix R[skipped, later]."""
    R = np.asarray(R, np.float64)
    L = R.shape[0]
    return np.array([R[s, s + 1:].mean() for s in range(L - 1)])


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
    from align import corpus

    prov = attrs.get("corpus") or {}
    recorded = prov.get("levels")
    if isinstance(recorded, list) and recorded:
        if len(set(recorded)) != 1:
            raise InputError(f"{where} mixes levels {sorted(set(recorded))}: run the skip analysis on one level's "
                             f"prompts per result")
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
    fields = {k: prov[k] for k in corpus.CorpusSpec.__dataclass_fields__ if k in prov and k != "path"}
    spec = corpus.CorpusSpec(path=source, **fields)
    if not source or not os.path.exists(source) or corpus.corpus_hash(spec) != prov.get("hash"):
        return None
    levels = {lv for lv in corpus.document_levels(spec) if lv is not None}
    if len(levels) > 1:
        raise InputError(f"{where} comes from {source}, whose prompts have levels {sorted(levels)}: write one corpus "
                         f"per level and run the skip analysis on each")
    return levels.pop() if levels else None


def parse_levels(text: str | None, n: int) -> list[int] | None:
    """`--levels 2,3,4`: one integer per skip result, in their order."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not all(p.lstrip("-").isdigit() for p in parts):
        raise InputError(f"--levels {text!r}: give comma-separated integers, one per skip result, e.g. 2,3,4")
    if len(parts) != n:
        raise InputError(f"--levels {text!r} gives {len(parts)} levels for {n} skip results: give one per result")
    return [int(p) for p in parts]


def depth_scores(results: list, levels: list[int], names: list[str]) -> dict:
    """DS per level, setting, part, agg and effect from "skipping" Datasets (one per level)."""
    if len(set(levels)) != len(levels):
        dup = sorted({lv for lv in levels if levels.count(lv) > 1})
        raise InputError(f"level {dup[0]} is given to more than one skip result: give one result per level")
    first = results[0]
    coords = {k: [str(v) for v in first[k].values] for k in ("setting", "part", "agg")}
    L = int(first.sizes["skipped"])
    for ds, name in zip(results[1:], names[1:]):
        for key in ("model", "config_hash"):
            if ds.attrs.get(key) != first.attrs.get(key):
                raise StoreMismatch(f"{name} and {names[0]} come from different models ({key}: "
                                    f"{ds.attrs.get(key)!r} vs {first.attrs.get(key)!r})")
        for k, want in coords.items():
            if [str(v) for v in ds[k].values] != want:
                raise StoreMismatch(f"{name} holds {k} {[str(v) for v in ds[k].values]}, {names[0]} holds {want}: "
                                    f"run the skip analyses with the same --settings and --parts")
    shape = (len(levels), len(coords["setting"]), len(coords["part"]), len(coords["agg"]), len(EFFECTS))
    out = np.full(shape, np.nan)
    undefined = []
    for i, (ds, name) in enumerate(zip(results, names)):
        R = ds["R"].transpose("setting", "part", "agg", "skipped", "later").values.astype(np.float64)
        O = ds["O"].transpose("setting", "part", "agg", "skipped").values.astype(np.float64)
        for arr, var in ((R, "R"), (O, "O")):
            if not np.isfinite(arr).all():
                raise NonFiniteError(f"{name}: {var} holds a non-finite value: a depth score of it would be wrong")
        for a, setting in enumerate(coords["setting"]):
            for b, part in enumerate(coords["part"]):
                for c, agg in enumerate(coords["agg"]):
                    for e, m in enumerate((layer_effect(R[a, b, c]), O[a, b, c])):
                        out[i, a, b, c, e] = depth_score(m)
                        if not np.isfinite(out[i, a, b, c, e]):
                            undefined.append(f"level {levels[i]} {setting} {part} {agg} {EFFECTS[e]} effect: "
                                             f"skipping changed nothing (sum of m_s is 0)")
    return {"ds": out, "levels": list(levels), "n_layers": L, "undefined": undefined, **coords,
            "n_prompts": [int(ds.attrs.get("n_prompts", 0)) for ds in results]}


def to_dataset(res: dict, attrs: dict):
    """The "depthscore" result Dataset: DS (level, setting, part, agg, effect) in layers."""
    import xarray as xr

    ds = xr.Dataset(
        {"DS": (("level", "setting", "part", "agg", "effect"), res["ds"]),
         "n_prompts": (("level",), np.asarray(res["n_prompts"], np.int64))},
        coords={"level": np.asarray(res["levels"], np.int64), "setting": res["setting"], "part": res["part"],
                "agg": res["agg"], "effect": list(EFFECTS)},
    )
    ds.attrs = {**attrs, "n_layers": res["n_layers"], "undefined": res["undefined"], "intervals": INTERVALS}
    return ds.sortby("level")


def run_depthscore(paths, output, *, levels: str | None = None, overwrite: bool = False, log=None) -> str:
    """`align depthscore`: DS over levels from one skip result per level; writes `output`."""
    import align
    from align import store as st

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
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
            raise InputError(f"{missing[0]} has no level in its provenance (its corpus has none, or its file changed): "
                             f"pass --levels with one level per skip result, e.g. --levels 2,3,4")
        given = found
    res = depth_scores(results, given, paths)
    attrs = {k: results[0].attrs.get(k) for k in ("model", "revision", "model_type", "config_hash")}
    attrs.update({"skip_results": paths, "align_version": align.__version__, "options": {"levels": given},
                  "corpora": [ds.attrs.get("corpus") for ds in results]})
    st.write_result(output, to_dataset(res, attrs), "depthscore", overwrite=overwrite, inputs=inputs)
    k = res["part"].index("layer") if "layer" in res["part"] else 0
    a, g = 0, 0
    shown = ", ".join(f"{lv}: {res['ds'][i, a, k, g, 0]:.2f}" for i, lv in enumerate(res["levels"]))
    log(f"align depthscore: wrote {output}: layer-effect DS ({res['setting'][a]}, {res['part'][k]}, {res['agg'][g]}) "
        f"by level {shown} of {res['n_layers']} layers" + (f"; {len(res['undefined'])} undefined" if res["undefined"] else ""))
    return output
