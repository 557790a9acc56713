"""The demo pipeline: train a shallow and a deep model on generated arithmetic, extract both
(and an untrained model of the deep model's shape, the control), fit shallow→deep and
shallow→control, run the companion analyses, draw the figures, print a summary.

Everything lands in one output folder:

    OUT/models/{shallow,deep}-<key>/   trained checkpoints of every seed (save_pretrained + train.json)
    OUT/models/{shallow,deep,deep-bpe} links to the first seed's (the models analysed)
    OUT/corpus/heldout.txt             the generated evaluation corpus (one for every seed)
    OUT/study.toml, OUT/study/         every seed's extractions and fits as one study (align study), each
                                       seed's models a replicate of "shallow" and "deep", the spread
                                       across seeds and its verdicts (OUT/study/results/replicates.json),
                                       the first seed's analyses, the third model's extraction and fits
    OUT/report/index.html              its report (a link to OUT/study/report)
    OUT/stores/*.zarr                  activation stores of the first seed (links into OUT/study/stores)
    OUT/results/*.zarr                 the first seed's alignments (links into OUT/study/results/fits),
                                       contributions, lens, skipping, depth results (links into
                                       OUT/study/results/{contrib,lens,skip,depth})
    OUT/seeds/seed-<s>/{stores,results}/   every other seed's three stores and two alignments,
                                       links into the study
    OUT/figures/*.png                  figures of the first seed (align.plotting)
    OUT/demo.json                      the demo's configuration, summary, across-seed statistics, machine

Every seed trains its own shallow and deep model (initialisation, batches and training stream
drawn from the seed) and extracts its own control (an untrained deep-shaped model, seed
control_seed + seeds[0] + k for the k-th seed from 0), so the control's range across seeds holds its initialisation's noise too;
all seeds are extracted on the same held-out documents, so the spread across seeds is that of
training, not of the evaluation text. The analyses and figures are the first seed's only.

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
import time
from dataclasses import dataclass, field

from align import messages, plotting, seeding, textfiles
from align.demo import as_study, data, threads, tokenizers_pair, train
from align.demo.steps import step
from align.demo.train import TrainConfig
from align.errors import InputError
from align.stats import replicates as across
from align.store import open_result

STATE_FILE = "demo.json"


@dataclass(frozen=True)
class DemoConfig:
    """The demo's sizes. `shallow`/`deep` are training configurations (same token count);
    `n_docs` held-out documents of `lines_per_doc` problems are extracted; the layer-skipping
    analysis reads the first `skip_docs` of them. `seeds` are the training seeds; the first is
    the seed of `shallow` and `deep` (the one analysed and drawn)."""

    shallow: TrainConfig
    deep: TrainConfig
    n_docs: int = 300
    lines_per_doc: int = 6
    skip_docs: int = 8
    seeds: tuple = (0,)
    control_seed: int = 1
    fit_seed: int = 0
    batch_size: int = 16
    bpe_merges: int = 48  # the third model's tokenizer (`tokenizers_pair`); 0: no third model

    def key(self) -> str:
        # "format" 2: stores made since align reads a checkpoint's tokenizer.json as saved
        # (format 1 stores lost every newline); 3: the stores and fits are a study's
        # (`as_study`); 4: the first seed's analyses and third model are its study's too; 5:
        # a study's state carries align's marker (a study folder without it is refused); 6:
        # every seed is a replicate of one study, which computes the verdicts across seeds.
        # An older output is recomputed, models kept.
        blob = json.dumps(
            {
                **dataclasses.asdict(self),
                "shallow_key": self.shallow.key(),
                "deep_key": self.deep.key(),
                "format": 6,
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


SIZES = ("full", "tiny")  # `align demo --size`: default_config, tiny_config


def default_config(tokens: int = 400_000, seeds=(0, 1, 2)) -> DemoConfig:
    """6 layers against 12 layers, both d=128, both trained on `tokens` tokens, per seed."""
    seeds = _check_seeds(seeds)
    return DemoConfig(
        TrainConfig(n_layers=6, d_model=128, tokens=tokens, seed=seeds[0]),
        TrainConfig(n_layers=12, d_model=128, tokens=tokens, seed=seeds[0]),
        seeds=seeds,
    )


def tiny_config(tokens: int = 4_000, seeds=(0, 1)) -> DemoConfig:
    """A reduced demo for tests: 2 layers d=32 against 4 layers d=48, a few seconds each, two seeds."""
    seeds = _check_seeds(seeds)
    return DemoConfig(
        TrainConfig(
            n_layers=2,
            d_model=32,
            tokens=tokens,
            seq_len=32,
            batch_size=8,
            warmup_steps=5,
            seed=seeds[0],
        ),
        TrainConfig(
            n_layers=4,
            d_model=48,
            tokens=tokens,
            seq_len=32,
            batch_size=8,
            warmup_steps=5,
            seed=seeds[0],
        ),
        n_docs=30,
        lines_per_doc=3,
        skip_docs=2,
        batch_size=16,
        seeds=seeds,
    )


def _check_seeds(seeds) -> tuple:
    seeds = tuple(int(s) for s in seeds)
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise InputError(
            f"seeds {list(seeds)} must be distinct non-negative integers, at least one"
        )
    for s in seeds:
        seeding.check(s, "seeds")
        if s + DemoConfig.control_seed > seeding.MAX_SEED:
            raise InputError(
                f"`seeds` {s}: the untrained control of a seed is drawn with seed + "
                f"{DemoConfig.control_seed}, beyond 2**63 - 1; give a smaller seed"
            )
    return seeds


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
    seeds: list = field(default_factory=list)  # per seed: {seed, models, training, stores, results}
    across: dict = field(
        default_factory=dict
    )  # across-seed statistics and robustness (align.stats.replicates)
    machine: dict = field(default_factory=dict)  # cores, CPU model, load averages before and after
    summary: str = ""


def _prepare(output: str, key: str, log) -> None:
    """Clear what a run of another configuration left (stores, results, figures)."""
    os.makedirs(output, exist_ok=True)
    state_path = os.path.join(output, STATE_FILE)
    old = None
    if os.path.exists(state_path):
        old = json.loads(textfiles.read(state_path, "demo state file")).get("key")
    if old is not None and old != key:
        log(
            f"align demo: {output} holds a demo of another configuration ({old}); recomputing its stores and results"
        )
        for sub in ("stores", "results", "figures", "corpus", "seeds", as_study.FOLDER):
            shutil.rmtree(os.path.join(output, sub), ignore_errors=True)
        for sub in ("report", as_study.FILE):  # links and files
            if os.path.lexists(os.path.join(output, sub)):
                os.remove(os.path.join(output, sub))


def run(
    output: str = "demo-output", config: DemoConfig | None = None, log=None, figures: bool = True
) -> DemoReport:
    """Run the whole demo into `output`; returns a DemoReport (its .summary is printed by the CLI)."""
    import warnings

    with warnings.catch_warnings():
        # Result stores hold short string coordinates ("attn", "mean"), which zarr 3 stores
        # with a warning that their encoding is not yet in the v3 specification.
        warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification.*")
        return _run(output, config, log, figures)


def _run(output, config, log, figures) -> DemoReport:

    log = log or messages.say
    config = config or default_config()
    key = config.key()
    t_all = time.time()
    _prepare(output, key, log)
    report = DemoReport(output)
    # Chosen once, before the demo's own threads count in the load average.
    threads.apply(log)
    report.machine = machine()
    sub = lambda *p: os.path.join(output, *p)  # noqa: E731

    # 1. The evaluation corpus: generated, distinct from every training stream, one for all seeds.
    corpus_path = sub("corpus", "heldout.txt")
    if not os.path.exists(corpus_path):
        os.makedirs(sub("corpus"), exist_ok=True)
        docs = data.heldout_documents(
            config.n_docs,
            config.shallow.seed,
            config.lines_per_doc,
            config.shallow.min_ops,
            config.shallow.max_ops,
        )
        data.write_corpus(corpus_path + ".tmp", docs)
        os.replace(corpus_path + ".tmp", corpus_path)

    # 2. Per seed: train a shallow and a deep model; the first seed also trains the third model
    # (another tokenizer). 3. One study of every seed: each seed's models a checkpoint of
    # "shallow" and of "deep" (replicates), extracted with the deep model's untrained twin of that
    # seed, fitted shallow -> deep and -> control, the spread across seeds and the verdicts in its
    # `replicates` unit; the companion analyses of the first seed's models (contributions and lens
    # from the stores, skipping on the first documents, effective depth), and the third model
    # extracted and paired with the shallow model on the text.
    models, more = {}, {"models": {}, "training": {}}
    for k, seed in enumerate(config.seeds):
        x = _train_seed(report, config, seed, log)
        report.seeds.append(x)
        for name, folder in x["models"].items():
            models.setdefault(name, []).append(folder)
    if config.bpe_merges:  # the third model: another tokenizer, trained once (the first seed)
        folder, training = tokenizers_pair.train_model(report, config, config.seeds[0], log)
        models[tokenizers_pair.NAME] = more["models"][tokenizers_pair.NAME] = folder
        more["training"][tokenizers_pair.NAME] = training
    run = as_study.run(output, models, corpus_path, config, tokenizers_pair.brief(log))
    for x, held in zip(report.seeds, run["seeds"]):
        x.update(held)
    report.timings.update(run["seconds"])
    more.update(run["more"])
    first = report.seeds[0]
    for kind in ("models", "training", "stores", "results"):
        getattr(report, kind).update({**first[kind], **more.get(kind, {})})
    link_models(report.output, report.models)
    report.across = across_seeds(run["replicates"], report.seeds)

    # 4. Figures and the summary.
    if figures:
        step(report, "figures", lambda: draw_figures(report), log)
    report.summary = summarize(report)
    report.timings["total"] = round(time.time() - t_all, 2)
    report.machine["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    with open(sub(STATE_FILE), "w", encoding="utf-8") as f:
        json.dump(
            {
                "key": key,
                "config": dataclasses.asdict(config),
                "models": report.models,
                "stores": report.stores,
                "results": report.results,
                "figures": report.figures,
                "timings": report.timings,
                "seeds": report.seeds,
                "across_seeds": report.across,
                "machine": report.machine,
                "tokenizers_pair": tokenizers_pair.record(report)
                if tokenizers_pair.RESULT in report.results
                else None,
                "summary": report.summary,
            },
            f,
            indent=1,
        )
    return report


def link_models(output: str, models: dict) -> None:
    """OUT/models/NAME for the first seed's analysed models ("shallow", "deep", "deep-bpe"): a
    relative link to its cached folder (NAME-<key>, one a training configuration), so a command
    line names one model where a pattern such as models/deep-* matches every seed's. A link is
    replaced in one rename when a run picks another folder; a real folder there is left alone."""
    for name, folder in models.items():
        link = os.path.join(output, "models", name)
        if os.path.abspath(folder) == os.path.abspath(link):
            continue
        if os.path.lexists(link) and not os.path.islink(link):
            continue
        tmp = f"{link}.link-tmp"
        if os.path.lexists(tmp):
            os.remove(tmp)
        os.symlink(os.path.basename(folder.rstrip("/")), tmp)
        os.replace(tmp, link)


def _train_seed(report: DemoReport, config: DemoConfig, seed: int, log) -> dict:
    """Train one seed's shallow and deep model (each cached by its training configuration);
    returns {seed, models, training} (the study adds its stores and results)."""
    out = {"seed": seed, "models": {}, "training": {}, "stores": {}, "results": {}}
    tag = "" if seed == config.seeds[0] else f" seed {seed}"
    for name, tc in (("shallow", config.shallow), ("deep", config.deep)):
        tc = dataclasses.replace(tc, seed=seed)
        folder = os.path.join(report.output, "models", f"{name}-{tc.key()}")
        out["models"][name] = folder
        out["training"][name] = step(
            report, f"train {name}{tag}", lambda: train.train(tc, folder, log=log), log
        )
    return out


def across_seeds(record: dict | None, seed_runs: list) -> dict:
    """The across-seed statistics and verdicts of the pair shallow -> deep against its
    untrained control as the study computed them (`record`: its pair's record in
    results/replicates.json, `align.study.replicates`), its replicates named by their training
    seeds: the study's K-th replicate is the K-th seed. With one seed the study has no
    replicates (`record` None): the one seed's statistics are read from its two fits."""
    seeds = [x["seed"] for x in seed_runs]
    if record is None:
        return across.statistics([_seed_summaries(x) for x in seed_runs])
    st = record["against"]["random_init"]
    out = {
        "seeds": seeds,
        "rule": across.rule("seed"),
        "per_seed": [
            {"seed": seeds[row["replicate"] - 1], **{p: row[p] for p in across.PAIRS}}
            for row in st["per_replicate"]
        ],
        **{p: st[p] for p in across.PAIRS},
        "separation": st["separation"],
    }
    # The study's verdicts, worded for seeds: `sentences` only words the study's numbers and
    # its separation sides.
    out["sentences"] = across.sentences(out, "seed")
    return out


def _seed_summaries(seed_run: dict) -> dict:
    """{seed, trained, control}: a seed's two alignment summaries (attrs["summary"])."""

    return {
        "seed": seed_run["seed"],
        **{
            pair: open_result(seed_run["results"][name], "alignment").attrs["summary"]
            for pair, name in (("trained", "alignment"), ("control", "alignment-control"))
        },
    }


def machine() -> dict:
    """Where the demo runs: CPU cores, the CPU model (/proc/cpuinfo), the 1/5/15-minute load
    averages at the start (the end's are added when it finishes), torch's thread count and the
    OMP_NUM_THREADS it was given (None: unset)."""
    import platform

    import torch

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next(
                (line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                model,
            )
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "platform": platform.platform(),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }


def draw_figures(report: DemoReport) -> dict:
    """Every figure of the demo into OUT/figures; returns name -> path."""
    fig_dir = os.path.join(report.output, "figures")
    r = report.results
    trained, control = (
        open_result(r["alignment"], "alignment"),
        open_result(r["alignment-control"], "alignment"),
    )
    for metric in ("relative_error", "r2"):
        name = "alignment" if metric == "relative_error" else "alignment-r2"
        fig = plotting.plot_alignments(
            [trained, control],
            metric=metric,
            titles=["trained shallow → trained deep", "trained shallow → untrained deep (control)"],
        )
        report.figures[name] = plotting.save(fig, os.path.join(fig_dir, f"{name}.png"))
    if tokenizers_pair.RESULT in r:
        fig = plotting.plot_alignments(
            [trained, open_result(r[tokenizers_pair.RESULT], "alignment")],
            titles=[
                "shallow → deep, one tokenizer",
                "shallow → deep BPE, pairs anchored on the text",
            ],
        )
        report.figures["alignment-tokenizers"] = plotting.save(
            fig, os.path.join(fig_dir, "alignment-tokenizers.png")
        )
    for name in ("shallow", "deep"):
        depth = open_result(r[f"depth-{name}"], "depth")
        figs = {
            f"contributions-{name}": plotting.plot_contributions(
                open_result(r[f"contributions-{name}"], "contributions"), depth=depth
            ),
            f"lens-{name}": plotting.plot_lens(open_result(r[f"lens-{name}"], "lens"), depth=depth),
            f"skipping-{name}": plotting.plot_skipping(
                open_result(r[f"skipping-{name}"], "skipping")
            ),
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
        lines.append(
            f"    slope of j*/L_T on i/L_S {s['slope']:.2f}{_interval(s, 'slope')} (1: the diagonal, 0: flat);  "
            f"nulls: mean gap {flat.get('mean_depth_gap', float('nan')):.3f} for a flat path at "
            f"{flat.get('target_boundary')}, {uni.get('mean_depth_gap', float('nan')):.3f} for uniform paths"
        )
    return lines


def _interval(s: dict, key: str, digits: int = 2) -> str:
    """ " [low, high]" of a summary statistic's 95% document-bootstrap interval, or ""."""
    lo, hi = s.get(f"{key}_low"), s.get(f"{key}_high")
    if lo is None or hi is None:
        return ""
    return f" [{lo:.{digits}f}, {hi:.{digits}f}]"


def summarize(report: DemoReport) -> str:
    """The printed summary: where everything is, the §1 matrix summary for the trained pair
    and the control, training losses, effective depths."""
    import numpy as np

    r = report.results
    lines = [f"align demo: everything is in {report.output}/"]
    for name in ("shallow", "deep"):
        t = report.training[name]
        c = t["config"]
        lines.append(
            f"  model {name:<8} {report.models[name]}  ({c['n_layers']} layers, d={c['d_model']}, "
            f"{t['tokens_seen']:,} training tokens, held-out loss {t['heldout_loss_init']:.2f} -> "
            f"{t['heldout_loss_trained']:.2f} nats/char)"
        )
    if tokenizers_pair.NAME in report.training:
        t = report.training[tokenizers_pair.NAME]
        c = t["config"]
        lines.append(
            f"  model {tokenizers_pair.NAME:<8} {report.models[tokenizers_pair.NAME]}  ({c['n_layers']} layers, "
            f"d={c['d_model']}, a BPE of {c['bpe_merges']} merges, {t['tokens_seen']:,} training tokens, held-out "
            f"loss {t['heldout_loss_init']:.2f} -> {t['heldout_loss_trained']:.2f} nats/token)"
        )
    for x in report.seeds[1:]:
        folder = os.path.join(report.output, "seeds", f"seed-{x['seed']}")
        losses = ", ".join(
            f"{name} {t['heldout_loss_init']:.2f} -> {t['heldout_loss_trained']:.2f}"
            for name, t in x["training"].items()
        )
        lines.append(f"  seed {x['seed']:<4} {folder}/ (held-out loss {losses} nats/char)")
    lines.append(f"  stores   {', '.join(report.stores.values())}")
    lines.append(f"  results  {os.path.join(report.output, 'results')}/ ({len(r)} stores)")
    if report.figures:
        lines.append(
            f"  figures  {os.path.join(report.output, 'figures')}/ ({', '.join(sorted(os.path.basename(p) for p in report.figures.values()))})"
        )
    lines.append(
        f"Layer-to-layer maps, shallow -> deep, seed {report.seeds[0]['seed'] if report.seeds else 0} "
        "(relative error on held-out documents, boundaries >= 1):"
    )
    lines += _matrix_lines(open_result(r["alignment"], "alignment"), "trained -> trained")
    lines += _matrix_lines(
        open_result(r["alignment-control"], "alignment"), "trained -> untrained deep (control)"
    )
    if tokenizers_pair.RESULT in r:
        bpe = open_result(r[tokenizers_pair.RESULT], "alignment")
        lines += _matrix_lines(
            bpe, f"trained -> trained deep with a BPE tokenizer ({tokenizers_pair.coverage(bpe)})"
        )
    if report.across:
        lines += across.lines(report.across)
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
            parts.append(
                f"{rule} {ed:g}{ci} ({float(d['ratio'].sel(rule=rule)):.2f})"
                if np.isfinite(ed)
                else f"{rule} undefined"
            )
        lines.append(f"  {name:<8} " + "; ".join(parts))
    return "\n".join(lines)
