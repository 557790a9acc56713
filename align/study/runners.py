"""What each kind of study unit runs: the library function of its command (`align.extract`,
`align.fit`, `align.fitting.live_route.pipeline.fit_live`, `align.analyses.run`'s `run_*`, the report and
the replicates' spread), called the same way by the local run (`execute`) and by a Dask
worker (`placement`)."""

from __future__ import annotations

import os
from dataclasses import replace

from align.analyses import run as analyses
from align.analyses.analysis_options import LensOptions
from align.errors import InputError
from align.extraction import extract, reusable
from align.fitting import Execution, fit
from align.fitting.fit_options import LiveJob
from align.fitting.live_route.pipeline import fit_live
from align.stats.bootstrap import Resampling
from align.study import replicates
from align.study import units as units_mod
from align.study.report import write_report
from align.study.schema import Study


def run_unit(u, study: Study, root: str, log) -> None:
    """Run unit `u` through its command's library function."""
    RUNNERS[u.kind](u, study, root, log)


def _resampling(study: Study):
    b, seed = study.fit.bootstrap, study.fit.bootstrap_seed
    return Resampling(b, seed) if b else Resampling(seed=seed)


def _extract(u, study, root, log):
    """Extract the model's store, or link a complete store of the same identity found in an
    `[extraction] reuse` folder (never written to: the link is the unit's output)."""
    m = study.model(u.models[0])
    out = os.path.join(root, u.output)
    stores = sorted(
        os.path.join(folder, name)
        for folder in study.reuse
        for name in os.listdir(folder)
        if name.endswith(".zarr")
    )
    found = stores and reusable(m.spec, study.corpus, out, stores, study.extraction, log)
    if found:
        os.makedirs(os.path.dirname(out), exist_ok=True)
        os.symlink(found, out)
        log(
            f"align study: reusing store {found} (complete; the same weights, tokenizer, corpus "
            f"and options): linked as {u.output}"
        )
        return
    extract(m.spec, study.corpus, out, study.extraction, log=log)


def _fit(u, study, root, log):
    spec = replace(study.fit, control="shuffle" if u.control == "shuffle" else None)
    run = Execution(device=study.device, overwrite=True)
    out = os.path.join(root, u.output)
    if study.route == "live":
        src, tgt = (study.model(n).spec for n in u.models)
        job = LiveJob(
            src, tgt, study.corpus, study.extraction.batch_size, study.extraction.allow_long
        )
        fit_live(job, out, spec, run, log=log)
        return
    src, tgt = (os.path.join(root, units_mod.output_of("extract", (n,))) for n in u.models)
    fit(src, tgt, out, spec, run, log=log)


def _analysis(u, study, root, log):
    """A contrib, lens or skip unit: from the model's activation store where its definition
    names one (`units.reads_stores`), else on the model over the study's corpus (skip: cut to
    `[analyses] skip_docs` documents)."""
    m = study.model(u.models[0])
    out = os.path.join(root, u.output)
    common = dict(resampling=_resampling(study), overwrite=True, log=log)
    store = u.definition.get("store")
    if store is not None:
        store = os.path.join(root, store)
        if u.kind == "contrib":
            analyses.run_contrib(out, store=store, **common)
        else:
            opts = LensOptions(device=m.spec.device, dtype=m.spec.dtype)
            analyses.run_lens(out, spec=m.spec, store=store, options=opts, **common)
        return
    common.update(spec=m.spec, cspec=study.corpus)
    if u.kind == "contrib":
        analyses.run_contrib(out, batch_size=study.analyses_batch, **common)
    elif u.kind == "lens":
        opts = LensOptions(batch_size=study.analyses_batch)
        analyses.run_lens(out, options=opts, **common)
    else:
        common["cspec"] = units_mod.skip_corpus(study)
        analyses.run_skip(out, batch_size=study.analyses_batch, **common)


def _lens_kind(u, study, root, log):
    """A linear or tuned lens unit: `align lens --kind` on the model's store (stores route) or
    on the model over the study's corpus."""
    m = study.model(u.models[0])
    d = u.definition
    opts = LensOptions(
        batch_size=study.analyses_batch, device=m.spec.device, dtype=m.spec.dtype, kind=d["kind"]
    )
    if d["kind"] == "tuned":  # `[analyses] lens_steps`, recorded in the unit's definition
        opts = replace(opts, steps=d["steps"])
    store = os.path.join(root, d["store"]) if "store" in d else None
    analyses.run_lens(
        os.path.join(root, u.output),
        spec=m.spec,
        cspec=None if store else study.corpus,
        store=store,
        options=opts,
        resampling=_resampling(study),
        overwrite=True,
        log=log,
    )


def _through(u, study, root, log):
    """A pair's source read through its target's head: the maps onto the target's last
    boundary fitted with the pair's options (maps.zarr), then the lens through them
    (lens.zarr). Where the lens refuses the pair (vocabularies that differ, a pairing by
    character anchors), the refusal is written as refused.txt, which the report shows."""
    out = os.path.join(root, u.output)
    os.makedirs(out, exist_ok=True)
    src, tgt = (os.path.join(root, units_mod.output_of("extract", (n,))) for n in u.models)
    maps = os.path.join(out, "maps.zarr")
    run = Execution(device=study.device, overwrite=True)
    fit(src, tgt, maps, units_mod.through_spec(study), run, log=log)
    target = study.model(u.models[1])
    opts = LensOptions(
        device=target.spec.device, dtype=target.spec.dtype, through=target.spec.name, maps=maps
    )
    try:
        analyses.run_lens(
            os.path.join(out, "lens.zarr"),
            options=opts,
            resampling=_resampling(study),
            overwrite=True,
            log=log,
        )
    except InputError as e:
        with open(os.path.join(out, "refused.txt"), "w", encoding="utf-8") as f:
            f.write(f"{e}\n")
        log(f"align study: {u.name} refused: {e}")


def _depth(u, study, root, log):
    name = u.models[0]
    analyses.run_depth(
        os.path.join(root, u.output),
        contrib_path=os.path.join(root, units_mod.output_of("contrib", (name,))),
        lens_path=os.path.join(root, units_mod.output_of("lens", (name,))),
        resampling=_resampling(study),
        overwrite=True,
        log=log,
    )


def _report(u, study, root, log):
    write_report(root, os.path.join(root, u.output), log=log)


RUNNERS = {
    "extract": _extract,
    "fit": _fit,
    "contrib": _analysis,
    "lens": _analysis,
    "lens-linear": _lens_kind,
    "lens-tuned": _lens_kind,
    units_mod.THROUGH: _through,
    "skip": _analysis,
    "depth": _depth,
    "replicates": replicates.run,
    "report": _report,
}
