"""The demo pipeline: train a shallow and a deep model on generated arithmetic, extract both
(and an untrained model of the deep model's shape, the control), fit shallow→deep and
shallow→control, run the companion analyses, draw the figures, print a summary.

Everything lands in one output folder:

    OUT/models/{shallow,deep}-<key>/   trained checkpoints (save_pretrained + train.json)
    OUT/corpus/heldout.txt             the generated evaluation corpus
    OUT/stores/*.zarr                  activation stores (align extract)
    OUT/results/*.zarr                 alignment, contributions, lens, skipping, depth results
    OUT/figures/*.png                  figures (align.plotting)
    OUT/demo.json                      the demo's configuration and summary

Every step is skipped when its output exists and was made with the same configuration
(`demo.json` carries its key; another key clears the stores, results and figures first, never
the trained models, which are cached by their own training configuration).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field

from align import textfiles
from align.demo import data
from align.errors import StoreError
from align.demo.train import TrainConfig

STATE_FILE = "demo.json"


@dataclass(frozen=True)
class DemoConfig:
    """The demo's sizes. `shallow`/`deep` are training configurations (same token count);
    `n_docs` held-out documents of `lines_per_doc` problems are extracted; the layer-skipping
    analysis reads the first `skip_docs` of them."""

    shallow: TrainConfig
    deep: TrainConfig
    n_docs: int = 300
    lines_per_doc: int = 6
    skip_docs: int = 24
    control_seed: int = 1
    fit_seed: int = 0
    batch_size: int = 16

    def key(self) -> str:
        # "format" 2: stores made since align reads a checkpoint's tokenizer.json as saved
        # (format 1 stores lost every newline); an older output is recomputed, models kept.
        blob = json.dumps({**dataclasses.asdict(self), "shallow_key": self.shallow.key(), "deep_key": self.deep.key(),
                           "format": 2}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


SIZES = ("full", "tiny")  # `align demo --size`: default_config, tiny_config


def default_config(tokens: int = 600_000, seed: int = 0) -> DemoConfig:
    """6 layers d=128 against 12 layers d=192, both trained on `tokens` tokens."""
    return DemoConfig(TrainConfig(n_layers=6, d_model=128, tokens=tokens, seed=seed),
                      TrainConfig(n_layers=12, d_model=192, tokens=tokens, seed=seed))


def tiny_config(tokens: int = 4_000, seed: int = 0) -> DemoConfig:
    """A reduced demo for tests: 2 layers d=32 against 4 layers d=48, a few seconds each."""
    return DemoConfig(TrainConfig(n_layers=2, d_model=32, tokens=tokens, seq_len=32, batch_size=8, warmup_steps=5, seed=seed),
                      TrainConfig(n_layers=4, d_model=48, tokens=tokens, seq_len=32, batch_size=8, warmup_steps=5, seed=seed),
                      n_docs=30, lines_per_doc=3, skip_docs=2, batch_size=16)


@dataclass
class DemoReport:
    """Where everything is, and the numbers the summary prints."""

    output: str
    models: dict = field(default_factory=dict)  # name -> folder
    stores: dict = field(default_factory=dict)  # name -> activation store
    results: dict = field(default_factory=dict)  # name -> result store
    figures: dict = field(default_factory=dict)  # name -> PNG
    training: dict = field(default_factory=dict)  # name -> train.json
    timings: dict = field(default_factory=dict)  # step -> seconds
    summary: str = ""


def _prepare(output: str, key: str, log) -> None:
    """Clear what a run of another configuration left (stores, results, figures)."""
    os.makedirs(output, exist_ok=True)
    state_path = os.path.join(output, STATE_FILE)
    old = None
    if os.path.exists(state_path):
        old = json.loads(textfiles.read(state_path, "demo state file")).get("key")
    if old is not None and old != key:
        log(f"align demo: {output} holds a demo of another configuration ({old}); recomputing its stores and results")
        for sub in ("stores", "results", "figures", "corpus"):
            shutil.rmtree(os.path.join(output, sub), ignore_errors=True)


def _step(report: DemoReport, name: str, fn, log):
    t = time.time()
    out = fn()
    report.timings[name] = round(time.time() - t, 2)
    return out


def _done(path: str) -> bool:
    """A step's result is done when it opens as a complete result (a killed write leaves one
    that does not, and the step then runs again)."""
    from align import store as st

    try:
        st.open_result(path)
    except StoreError:
        return False
    return True


def run(output: str = "demo-output", config: DemoConfig | None = None, log=None, figures: bool = True) -> DemoReport:
    """Run the whole demo into `output`; returns a DemoReport (its .summary is printed by the CLI)."""
    import warnings

    with warnings.catch_warnings():
        # Result stores hold short string coordinates ("attn", "mean"), which zarr 3 stores
        # with a warning that their encoding is not yet in the v3 specification.
        warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification.*")
        return _run(output, config, log, figures)


def _run(output, config, log, figures) -> DemoReport:
    import align
    from align import store as st
    from align.analyses import run as analyses
    from align.corpus import CorpusSpec
    from align.demo import train
    from align.models import ModelSpec

    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    config = config or default_config()
    key = config.key()
    t_all = time.time()
    _prepare(output, key, log)
    report = DemoReport(output)
    sub = lambda *p: os.path.join(output, *p)  # noqa: E731

    # 1. Train (cached by the training configuration).
    for name, tc in (("shallow", config.shallow), ("deep", config.deep)):
        folder = sub("models", f"{name}-{tc.key()}")
        report.models[name] = folder
        report.training[name] = _step(report, f"train {name}", lambda: train.train(tc, folder, log=log), log)

    # 2. The evaluation corpus: generated, distinct from the training stream.
    corpus_path = sub("corpus", "heldout.txt")
    if not os.path.exists(corpus_path):
        os.makedirs(sub("corpus"), exist_ok=True)
        docs = data.heldout_documents(config.n_docs, config.shallow.seed, config.lines_per_doc,
                                      config.shallow.min_ops, config.shallow.max_ops)
        data.write_corpus(corpus_path + ".tmp", docs)
        os.replace(corpus_path + ".tmp", corpus_path)
    # A document is a few problems: well under max_length, so one sequence per document.
    max_length = 512

    # 3. Extract: both trained models and the untrained control of the deep model's shape.
    quiet = lambda m: log(m) if "wrote" in m or "already complete" in m else None  # noqa: E731
    jobs = (("shallow", report.models["shallow"], False), ("deep", report.models["deep"], False),
            ("control", report.models["deep"], True))
    for name, model, random_init in jobs:
        path = sub("stores", f"{name}.zarr")
        report.stores[name] = path
        _step(report, f"extract {name}", lambda: align.extract(
            model, corpus_path, path, random_init=random_init, seed=config.control_seed, max_length=max_length,
            batch_size=config.batch_size, sublayers=True, log=quiet), log)

    # 4. Fit shallow → deep and shallow → control.
    for name, target in (("alignment", "deep"), ("alignment-control", "control")):
        path = sub("results", f"{name}.zarr")
        report.results[name] = path
        if not _done(path):
            _step(report, f"fit {name}", lambda: align.fit(
                report.stores["shallow"], report.stores[target], path, seed=config.fit_seed, scheduler="synchronous",
                blas_threads=None, log=quiet), log)

    # 5. Companion analyses of both trained models: contributions and lens from the stores,
    # skipping from the live model on the first documents, effective depth from the first two.
    skip_spec = CorpusSpec(corpus_path, max_length=max_length, max_docs=config.skip_docs)
    for name in ("shallow", "deep"):
        paths = {kind: sub("results", f"{kind}-{name}.zarr") for kind in ("contributions", "lens", "skipping", "depth")}
        report.results.update({f"{kind}-{name}": p for kind, p in paths.items()})
        if not _done(paths["contributions"]):
            _step(report, f"contrib {name}", lambda: analyses.run_contrib(paths["contributions"], store=report.stores[name],
                                                                          log=quiet), log)
        if not _done(paths["lens"]):
            _step(report, f"lens {name}", lambda: analyses.run_lens(paths["lens"], store=report.stores[name], log=quiet), log)
        if not _done(paths["skipping"]):
            spec = ModelSpec(report.models[name])
            _step(report, f"skip {name}", lambda: analyses.run_skip(paths["skipping"], spec=spec, cspec=skip_spec,
                                                                    batch_size=config.batch_size, log=quiet), log)
        if not _done(paths["depth"]):
            _step(report, f"depth {name}", lambda: analyses.run_depth(paths["depth"], contrib_path=paths["contributions"],
                                                                      lens_path=paths["lens"], log=quiet), log)

    # 6. Figures and the summary.
    if figures:
        _step(report, "figures", lambda: draw_figures(report), log)
    report.summary = summarize(report)
    report.timings["total"] = round(time.time() - t_all, 2)
    with open(sub(STATE_FILE), "w", encoding="utf-8") as f:
        json.dump({"key": key, "config": dataclasses.asdict(config), "models": report.models, "stores": report.stores,
                   "results": report.results, "figures": report.figures, "timings": report.timings,
                   "summary": report.summary}, f, indent=1)
    return report


def draw_figures(report: DemoReport) -> dict:
    """Every figure of the demo into OUT/figures; returns name -> path."""
    from align import plotting
    from align.store import open_result

    fig_dir = os.path.join(report.output, "figures")
    r = report.results
    trained, control = open_result(r["alignment"], "alignment"), open_result(r["alignment-control"], "alignment")
    for metric in ("relative_error", "r2"):
        name = "alignment" if metric == "relative_error" else "alignment-r2"
        fig = plotting.plot_alignments([trained, control], metric=metric,
                                       titles=["trained shallow → trained deep", "trained shallow → untrained deep (control)"])
        report.figures[name] = plotting.save(fig, os.path.join(fig_dir, f"{name}.png"))
    for name in ("shallow", "deep"):
        depth = open_result(r[f"depth-{name}"], "depth")
        figs = {
            f"contributions-{name}": plotting.plot_contributions(open_result(r[f"contributions-{name}"], "contributions"), depth=depth),
            f"lens-{name}": plotting.plot_lens(open_result(r[f"lens-{name}"], "lens"), depth=depth),
            f"skipping-{name}": plotting.plot_skipping(open_result(r[f"skipping-{name}"], "skipping")),
        }
        for fname, fig in figs.items():
            report.figures[fname] = plotting.save(fig, os.path.join(fig_dir, f"{fname}.png"))
    return report.figures


def _matrix_lines(ds, label: str) -> list[str]:
    s = ds.attrs.get("summary") or {}
    rho = s.get("spearman")
    rho_txt = f"{rho:.2f}" if rho is not None else f"undefined ({s.get('spearman_note', '')})"
    Ls, Lt = ds.attrs.get("n_layers_source"), ds.attrs.get("n_layers_target")
    perfect = [round(i * Lt / Ls) for i in s.get("source_boundaries", [])]
    soft = ", ".join(f"{x:.2f}" for x in s.get("soft_depth", []))
    prob = s.get("argmin_path_probability")
    lines = [
        f"  {label}:",
        f"    argmin path j*(i), i = {s.get('source_boundaries')}: {s.get('argmin_path')}   (equal relative depth: {perfect})"
        + (f";  the same path in {prob:.0%} of document resamples" if prob is not None else ""),
        f"    Spearman(j*, i/L_S) {rho_txt}{_interval(s, 'spearman')};  mean |j*/L_T - i/L_S| "
        f"{s.get('mean_depth_gap', float('nan')):.3f}{_interval(s, 'mean_depth_gap', 3)}",
        f"    soft target depth per row [{soft}]; spread {s.get('soft_depth_spread', float('nan')):.3f}"
        f"{_interval(s, 'soft_depth_spread', 3)}",
    ]
    if s.get("slope") is not None:
        nulls = s.get("nulls") or {}
        flat, uni = nulls.get("flat", {}), nulls.get("uniform", {})
        lines.append(f"    slope of j*/L_T on i/L_S {s['slope']:.2f}{_interval(s, 'slope')} (1: the diagonal, 0: flat);  "
                     f"nulls: mean gap {flat.get('mean_depth_gap', float('nan')):.3f} for a flat path at "
                     f"{flat.get('target_boundary')}, {uni.get('mean_depth_gap', float('nan')):.3f} for uniform paths")
    return lines


def _interval(s: dict, key: str, digits: int = 2) -> str:
    """" [low, high]" of a summary statistic's 95% document-bootstrap interval, or ""."""
    lo, hi = s.get(f"{key}_low"), s.get(f"{key}_high")
    if lo is None or hi is None:
        return ""
    return f" [{lo:.{digits}f}, {hi:.{digits}f}]"


def summarize(report: DemoReport) -> str:
    """The printed summary: where everything is, the §1 matrix summary for the trained pair
    and the control, training losses, effective depths."""
    import numpy as np

    from align.store import open_result

    r = report.results
    lines = [f"align demo: everything is in {report.output}/"]
    for name in ("shallow", "deep"):
        t = report.training[name]
        c = t["config"]
        lines.append(f"  model {name:<8} {report.models[name]}  ({c['n_layers']} layers, d={c['d_model']}, "
                     f"{t['tokens_seen']:,} training tokens, held-out loss {t['heldout_loss_init']:.2f} -> "
                     f"{t['heldout_loss_trained']:.2f} nats/char)")
    lines.append(f"  stores   {', '.join(report.stores.values())}")
    lines.append(f"  results  {os.path.join(report.output, 'results')}/ ({len(r)} stores)")
    if report.figures:
        lines.append(f"  figures  {os.path.join(report.output, 'figures')}/ ({', '.join(sorted(os.path.basename(p) for p in report.figures.values()))})")
    lines.append("Layer-to-layer maps, shallow -> deep (relative error on held-out documents, boundaries >= 1):")
    lines += _matrix_lines(open_result(r["alignment"], "alignment"), "trained -> trained")
    lines += _matrix_lines(open_result(r["alignment-control"], "alignment"), "trained -> untrained deep (control)")
    lines.append("Effective depth (ED, ratio (ED+1)/L):")
    for name in ("shallow", "deep"):
        d = open_result(r[f"depth-{name}"], "depth")
        parts = []
        for rule in [str(x) for x in d["rule"].values]:
            ed = float(d["effective_depth"].sel(rule=rule))
            ci = ""
            if "effective_depth_low" in d:
                lo, hi = (float(d[f"effective_depth_{k}"].sel(rule=rule)) for k in ("low", "high"))
                ci = f" [{lo:g}, {hi:g}]" if np.isfinite(lo) and np.isfinite(hi) else ""
            parts.append(f"{rule} {ed:g}{ci} ({float(d['ratio'].sel(rule=rule)):.2f})" if np.isfinite(ed) else f"{rule} undefined")
        lines.append(f"  {name:<8} " + "; ".join(parts))
    return "\n".join(lines)
