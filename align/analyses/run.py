"""The analyses end to end: load the model and prompts, compute, write the result store with
its provenance. The CLI calls these; notebooks may too."""

from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np

from align import corpus, messages, models, provenance
from align import store as st
from align.analyses import answers as answer_files
from align.analyses import checkpoint, contrib, depth, dryrun, lens, lens_run, skip
from align.analyses import prompts as prompt_files
from align.analyses.analysis_options import LensOptions, SkipOptions
from align.analyses.prompts import batches
from align.errors import InputError, StoreMismatch
from align.fitting.live_route.progress import Progress
from align.stats.bootstrap import DEFAULT, MIN_RESAMPLES, Resampling
from align.version import __version__

_log_default = messages.say


def _model_id(name: str) -> str:
    p = os.path.expanduser(name)
    return os.path.abspath(p) if os.path.isdir(p) else name


def load(spec: models.ModelSpec, cspec: corpus.CorpusSpec, check=None):
    """(model, config, prompts, provenance) for a live-model analysis; `check(prompts)` runs
    before the weights are loaded, so bad input fails fast."""

    corpus.validate(cspec)
    config = models.load_config(spec)
    tokenizer = models.load_tokenizer(spec)
    reading = corpus.Reading(cspec)
    prompts = prompt_files.load_prompts(cspec, tokenizer, reading)
    check_vocabulary(spec, config, prompts)
    if check is not None:
        check(prompts)
    model, _ = models.load_model(spec)
    return (
        model,
        config,
        prompts,
        provenance.model_record(spec, config, tokenizer, cspec, reading.hexdigest()),
    )


def check_vocabulary(spec: models.ModelSpec, config, prompts) -> None:
    """Every prompt's token ids have an embedding row in the model (`models.check_token_ids`),
    and no prompt is longer than the positions the model was built for
    (max_position_embeddings): both would give numbers from inputs the model never saw."""
    if not prompts:
        return
    top = [int(p.max()) if len(p) else -1 for p in prompts]
    k = int(np.argmax(top))
    if top[k] >= 0:
        models.check_token_ids(
            spec, config, top[k], f"prompt {k}, position {int(np.argmax(prompts[k]))}"
        )
    limit = getattr(config, "max_position_embeddings", None)
    longest = int(np.argmax([len(p) for p in prompts]))
    if limit and len(prompts[longest]) > limit:
        raise InputError(
            f"prompt {longest} has {len(prompts[longest]):,} tokens, above the model's position limit "
            f"(max_position_embeddings {limit:,}): use `max_length` {limit} or less"
        )


def _inputs(spec=None, cspec=None, **paths) -> dict:
    """The command's inputs by label, for `check_output`: -o may be none of them, lie inside
    none and hold none (a hub id that names no local folder cannot be harmed)."""
    out = {f"`{k.replace('_path', '')}` {v}": v for k, v in paths.items() if v is not None}
    if spec is not None:
        out[f"MODEL {spec.name}"] = spec.name
    if cspec is not None and cspec.path is not None:
        out[f"CORPUS {cspec.path}"] = cspec.path
    return out


def _batched(prompts, batch_size):

    return list(batches(prompts, batch_size))


def _progress(command: str, total: int, log, unit: str = "batch") -> Progress:
    """The run's progress: a bar with the ETA on a terminal (the default `log` on a terminal),
    else a log line every ~10 s and at the end."""
    terminal = log is _log_default and sys.stderr.isatty()
    return Progress(total, log, terminal, command=command, sides=("model",), unit=unit)


def _reading(spec, cspec, prompts) -> dict:
    """What a dry run says it reads: the model, the corpus, its prompts and tokens."""
    return {
        "model": spec.name,
        "corpus": cspec.describe(),
        "prompts": len(prompts),
        "tokens": int(sum(len(p) for p in prompts)),
        "longest": max((len(p) for p in prompts), default=0),
    }


def dry_run(
    command: str,
    output,
    *,
    spec,
    cspec,
    batch_size: int = 8,
    skip_options: SkipOptions = SkipOptions(),
    overwrite=False,
    log=_log_default,
):
    """`--dry-run` of `command` ("contrib", "lens" or "skip") on a live model: the checks of a
    real run (-o included), then what it will read, run, hold and write and its time from one
    timed batch (`align.analyses.dryrun`); writes nothing. `batch_size`: prompts (skip: rows)
    per forward; `skip_options`: skip's settings, parts and split points. Returns the
    estimate (`dryrun.dry_run`)."""
    schema = {"contrib": "contributions", "lens": "lens", "skip": "skipping"}[command]
    st.check_output(output, schema, inputs=_inputs(spec, cspec), overwrite=overwrite)
    if command == "skip":
        opts = skip_options
        model, config, prompts, _, splits, _ = _skip_inputs(spec, cspec, opts, None)
        plan = skip.plan_rows(prompts, opts.settings, opts.split_seed, batch_size, splits=splits)
        work = dryrun.skip_work(model, config, plan, opts.parts)
    else:
        model, config, prompts, _ = load(spec, cspec)
        make = dryrun.contrib_work if command == "contrib" else dryrun.lens_work
        work = make(model, config, _batched(prompts, batch_size))
    return dryrun.dry_run(model, config, _reading(spec, cspec, prompts), work, output, log)


def run_contrib(
    output,
    *,
    spec=None,
    cspec=None,
    store=None,
    batch_size=8,
    resampling: Resampling = DEFAULT,
    overwrite=False,
    log=_log_default,
):
    """Run `align contrib`: contributions from a live model or an activation store, written.

    From a live model (spec + cspec) or an activation store path; the intervals drawn by
    `resampling`.

    Parameters
    ----------
    output : str
        Where the result is written.
    spec : ModelSpec, optional
        The model (with `cspec`).
    cspec : CorpusSpec, optional
        The corpus of prompts.
    store : str, optional
        An activation store path holding every boundary and the sublayers, instead of a model.
    batch_size : int, optional
        Prompts per forward.
    resampling : Resampling, optional
        How the intervals are drawn.
    overwrite : bool, optional
        Replace a result of the same schema at `output`.
    log : callable, optional
        Receives each message (default: stderr).

    Returns
    -------
    str
        `output`.
    """

    inputs = _inputs(spec, cspec, store=store)
    st.check_output(output, "contributions", inputs=inputs, overwrite=overwrite)
    if store is not None:
        s = st.open_activations(store)
        progress = _progress("align contrib", -(-s.n_tokens // s.chunk_tokens), log, "chunk")
        try:
            res = contrib.contributions_from_store(s, progress=progress)
        finally:
            progress.close()
        attrs = {**provenance.store_record(s), "options": {}}
    else:
        model, _, prompts, prov = load(spec, cspec)
        work = _batched(prompts, batch_size)
        progress = _progress("align contrib", len(work), log)
        try:
            res = contrib.contributions_from_model(model, work, progress=progress)
        finally:
            progress.close()
        attrs = {**prov, "options": {"batch_size": batch_size}, "kind": "logit"}
    ds = contrib.to_dataset(res, attrs, resampling)
    st.write_result(output, ds, "contributions", overwrite=overwrite, inputs=inputs)
    log(
        f"align contrib: wrote {output} ({res['n_tokens']:,} tokens, {res['resid_cos'].shape[0]} layers; {intervals_note(ds.attrs)})"
    )
    return output


def _stream_before(cspec, spec, options) -> list:
    """The answer prompts of `options.split_stream_after` (read with `cspec`'s options, in
    order): those that draw from --split answer-points-stream's stream before this file's."""
    tokenizer = models.load_tokenizer(spec)
    return [
        ap
        for path in options.split_stream_after
        for ap in answer_files.load_answer_prompts(
            dataclasses.replace(cspec, path=path),
            tokenizer,
            options.answer_field,
            options.answer_marker,
        )
    ]


def run_skip(
    output,
    *,
    spec,
    cspec,
    options: SkipOptions = SkipOptions(),
    batch_size=8,
    resampling: Resampling = DEFAULT,
    overwrite=False,
    log=_log_default,
) -> str:
    """Run `align skip`: current and future settings, parts layer/attn/mlp, written as "skipping".

    `options.split` is "random" (P1's seeded split points, GSM8K), "answer-start" (the future
    setting's one split point per prompt is its first answer token: P1 on MQuAKE) or
    "answer-points" (up to 4 points inside the answer: P1 on MATH), the prompts of both read as
    `align erase` reads them; each prompt's level is stored where the corpus has levels.

    Parameters
    ----------
    output : str
        Where the result is written.
    spec : ModelSpec
        The model.
    cspec : CorpusSpec
        The corpus of prompts.
    options : SkipOptions, optional
        The settings and parts run, the future setting's split points and their seed.
    batch_size : int, optional
        Rows per forward.
    resampling : Resampling, optional
        Draws the intervals; its equal-n mode is checked against the prompts before the weights
        load.
    overwrite : bool, optional
        Replace a result of the same schema at `output`.
    log : callable, optional
        Receives each message (default: stderr).

    Returns
    -------
    str
        `output`.
    """
    import time

    settings, parts, split, split_seed = (
        options.settings,
        options.parts,
        options.split,
        options.split_seed,
    )
    answer_field, answer_marker = options.answer_field, options.answer_marker
    answers = split != "random"
    inputs = _inputs(spec, cspec)
    st.check_output(output, "skipping", inputs=inputs, overwrite=overwrite)
    model, config, prompts, prov, splits, levels = _skip_inputs(
        spec, cspec, options, resampling.equal_n
    )
    t0 = time.time()
    plan = skip.plan_rows(prompts, settings, split_seed, batch_size, splits=splits)
    L = config.num_hidden_layers
    progress = _progress("align skip", plan.n_forwards(len(parts), L), log, unit="forward")
    try:
        res = skip.skip_rows(model, plan, parts, progress)
    finally:
        progress.close()
    dt = time.time() - t0
    timing = {
        "seconds": round(dt, 3),
        "n_forwards": res["n_forwards"],
        "n_forwards_one_at_a_time": res["n_forwards_one_at_a_time"],
    }
    opts = {
        "batch_size": batch_size,
        "settings": list(settings),
        "parts": list(parts),
        "split": split,
        "split_seed": split_seed,
    }
    extra = {}
    if answers:
        opts.update({"answer_field": answer_field, "answer_marker": answer_marker})
        # Each prompt's future split points (those a prompt cannot use included: t <= 1).
        extra = {"split_points": splits}
    ds = skip.to_dataset(
        res, {**prov, "options": opts, "timing": timing, **extra}, split_seed, levels, resampling
    )
    st.write_result(output, ds, "skipping", overwrite=overwrite, inputs=inputs)
    log(
        f"align skip: wrote {output} ({len(prompts)} prompts, {L} layers; "
        + ", ".join(f"{k}: {v} prompts" for k, v in res["n_prompts"].items())
        + (
            f"; {res['n_prompts_too_short']} "
            + (
                "with no usable split point in the answer"
                if splits is not None
                else "too short for the future setting"
            )
            if "future" in settings
            else ""
        )
        + f") in {dt:.1f} s: {res['n_forwards']:,} batched forward passes "
        f"(a one-prompt-at-a-time loop makes {res['n_forwards_one_at_a_time']:,}); {intervals_note(ds.attrs)}"
    )
    return output


def _skip_inputs(spec, cspec, options: SkipOptions, equal_n):
    """(model, config, prompts, provenance, split points or None, levels or None) of
    `align skip`: with `options.split` other than "random", the prompts with their answers read
    as `align erase` reads them and their split points; every prompt checked before the
    weights load (`equal_n` against the prompts a setting uses)."""
    split, settings = options.split, options.settings
    if split not in skip.SPLITS:
        raise InputError(f"`split` {split!r} is not one of {', '.join(skip.SPLITS)}")
    if options.split_stream_after and split != "answer-points-stream":
        raise InputError(
            f"`split_stream_after` is read only with `split` answer-points-stream, not {split!r}: "
            "drop it, or draw with `split` answer-points-stream"
        )
    if split == "random":
        model, config, prompts, prov = load(
            spec, cspec, check=lambda ps: skip.check_prompts(ps, settings, equal_n=equal_n)
        )
        levels = skip.prompt_levels(cspec, models.load_tokenizer(spec))
        return model, config, prompts, prov, None, levels
    # As `load` does: corpus, then config, then tokenizer, so bad input is named in that order.
    corpus.validate(cspec)
    models.load_config(spec)
    reading = corpus.Reading(cspec)  # the prompts' tokens and the recorded hash come from this read
    aps = answer_files.load_answer_prompts(
        cspec, models.load_tokenizer(spec), options.answer_field, options.answer_marker, reading
    )
    before = _stream_before(cspec, spec, options) if split == "answer-points-stream" else []
    splits = skip.answer_splits(aps, split, options.split_seed, before)
    skip.check_prompts([a.token_id for a in aps], settings, splits, equal_n, split)
    levels = skip.answer_prompt_levels(cspec)
    model, config, _, _ = load(spec, cspec)
    prompts = [np.asarray(a.token_id, np.int64) for a in aps]
    check_vocabulary(spec, config, prompts)
    prov = provenance.model_record(
        spec, config, models.load_tokenizer(spec), cspec, reading.hexdigest()
    )
    return model, config, prompts, prov, splits, levels


def run_lens(
    output,
    *,
    spec=None,
    cspec=None,
    store=None,
    options: LensOptions = LensOptions(),
    resampling: Resampling = DEFAULT,
    overwrite=False,
    log=_log_default,
):
    """Run `align lens`: the logit lens from a live model or from a store, written.

    From a live model, or from a store plus the checkpoint's final norm and unembedding (spec
    names the checkpoint; default: the store's model). With a store the head runs on
    `options.device` (cpu | cuda | auto) in `options.dtype` (default: the model's compute dtype
    there, float32 on CPU, bfloat16 on CUDA), `options.tokens_per_step` tokens per head
    application.

    Parameters
    ----------
    output : str
        Where the result is written.
    spec : ModelSpec, optional
        The model, or with a store the checkpoint whose head is read.
    cspec : CorpusSpec, optional
        The corpus of prompts (a live model).
    store : str, optional
        An activation store path holding boundary L, instead of running the model.
    options : LensOptions, optional
        Batch size, and the head's device, dtype and tokens per step.
    resampling : Resampling, optional
        How the intervals are drawn.
    overwrite : bool, optional
        Replace a result of the same schema at `output`.
    log : callable, optional
        Receives each message (default: stderr).

    Returns
    -------
    str
        `output`.
    """

    batch_size, device, dtype, tokens_per_step = (
        options.batch_size,
        options.device,
        options.dtype,
        options.tokens_per_step,
    )
    inputs = _inputs(spec, cspec, store=store, map=options.maps, save_maps=options.save_maps)
    options = lens_run.check_options(options, store, cspec)
    st.check_output(output, "lens", inputs=inputs, overwrite=overwrite)
    if options.kind != "logit":
        ds = lens_run.run_kind(
            output,
            spec=spec,
            cspec=cspec,
            store=store,
            options=options,
            resampling=resampling,
            overwrite=overwrite,
            log=log,
        )
        st.write_result(output, ds, "lens", overwrite=overwrite, inputs=inputs)
        log(f"align lens: wrote {output} ({lens_run.summary(ds)})")
        return output
    if store is not None:
        s = st.open_activations(store)
        name, revision = _head_model(spec, s, inputs)
        st.check_output(output, "lens", inputs=inputs, overwrite=overwrite)
        head_dtype = models.ModelSpec(name, revision, dtype, device).resolved_dtype()
        step = tokens_per_step or lens.HEAD_TOKENS
        config, head = checkpoint.read_head(
            name,
            revision,
            dtype=head_dtype,
            device=device,
            trust_remote_code=spec.trust_remote_code if spec is not None else False,
        )
        if models.config_hash(config) != s.provenance.get("config_hash"):
            raise StoreMismatch(
                f"checkpoint {name!r} has another config than the model of store {store}: pass the model the store was extracted from"
            )
        progress = _progress("align lens", -(-s.n_tokens // step), log, "step")
        try:
            res = lens.logit_lens_from_store(s, head, tokens_per_step=step, progress=progress)
        finally:
            progress.close()
        L = s.n_layers
        head_dev = str(head.parameter.device)
        attrs = {
            **provenance.store_record(s),
            "head_model": _model_id(name),
            "options": {"device": head_dev, "dtype": head_dtype, "tokens_per_step": step},
            "kind": "logit",
        }
    else:
        model, config, prompts, prov = load(spec, cspec)
        work = _batched(prompts, batch_size)
        progress = _progress("align lens", len(work), log)
        try:
            res = lens.logit_lens(model, work, progress=progress)
        finally:
            progress.close()
        L = config.num_hidden_layers
        attrs = {**prov, "options": {"batch_size": batch_size}, "kind": "logit"}
    ds = lens.to_dataset(res, attrs, L, resampling)
    st.write_result(output, ds, "lens", overwrite=overwrite, inputs=inputs)
    log(
        f"align lens: wrote {output} ({res['n_tokens']:,} tokens, {res['n_prompts']} prompts, boundaries 0..{L}; "
        f"{intervals_note(ds.attrs)})"
    )
    return output


def _head_model(spec, s, inputs: dict) -> tuple[str, str | None]:
    """(name, revision) of the checkpoint whose head `align lens --store` applies to store `s`:
    `spec`'s, or the store's model (added to `inputs`, which -o must spare); a store of a
    randomly initialised model is refused (its weights are in no checkpoint)."""
    name = (
        spec.name
        if spec is not None
        else s.provenance.get("identity", {}).get("model") or s.provenance["model"]
    )
    inputs[f"the store's model {name}"] = name
    if s.provenance.get("random_init"):
        raise InputError(
            f"store {s.path} was extracted from a randomly initialised model: its weights are in no checkpoint; run `align lens` on the model instead"
        )
    return name, spec.revision if spec is not None else s.provenance.get("revision")


def plan_from_store(
    command: str, output, *, store, spec=None, overwrite=False, log=_log_default
) -> dict:
    """`--dry-run` of `command` ("contrib" or "lens") reading `store`: the checks of a real run
    (-o, what the store must hold; lens: the checkpoint's config against the store's), then
    what the store holds and what the run will read and write. No model runs and nothing is
    timed (the run reads chunks; lens applies the head at each boundary); writes nothing.
    Returns the numbers said."""
    schema = {"contrib": "contributions", "lens": "lens"}[command]
    inputs = _inputs(spec, None, store=store)
    st.check_output(output, schema, inputs=inputs, overwrite=overwrite)
    s = st.open_activations(store)
    n_chunks = -(-s.n_tokens // s.chunk_tokens)
    if command == "lens":
        name, revision = _head_model(spec, s, inputs)
        st.check_output(output, schema, inputs=inputs, overwrite=overwrite)
        trust = spec.trust_remote_code if spec is not None else False
        config = models.load_config(models.ModelSpec(name, revision, trust_remote_code=trust))
        if models.config_hash(config) != s.provenance.get("config_hash"):
            raise StoreMismatch(
                f"checkpoint {name!r} has another config than the model of store {store}: pass the model the store was extracted from"
            )
        checkpoint.head_source(name, revision, config, trust)  # the head the run would read
        lens.check_store(s)
        arrays = len(s.boundaries)
        what = (
            f"the residual at each of its {arrays} boundaries ({s.n_tokens:,} tokens each)"
            f", {{read}}; the final norm and unembedding of {name} (vocabulary "
            f"{config.vocab_size:,})"
        )
    else:
        contrib.check_store(s)
        arrays = len(s.boundaries) + 2 * len(s.layers)
        what = (
            f"{_count(n_chunks, 'chunk')} of {s.chunk_tokens:,} tokens of every boundary's "
            "residual and every block's attention and MLP output, {read}"
        )
    size = 4 if s.layout.store_dtype == "float32" else 2  # bytes a value
    read = s.n_tokens * s.d_model * arrays * size
    L = s.n_layers
    sublayers = f", sublayers of blocks {_span(s.layers)}" if s.layers else ", no sublayers"
    result = s.layout.n_sequences * (7 * L if command == "contrib" else 2 * (L + 1)) * 8
    head = {"contrib": "align contrib --dry-run", "lens": "align lens --dry-run"}[command]
    lines = [
        f"{head}: {output} (a {schema} result) from store {store}",
        f"  store      {s.n_tokens:,} tokens in {s.layout.n_sequences:,} sequences of "
        f"{s.provenance.get('model')}, {L} layers, d_model {s.d_model}, "
        f"{s.layout.store_dtype}; boundaries {_span(s.boundaries)}{sublayers}",
        f"  reads      {what.format(read=messages.human_bytes(read))}",
        f"  writes     ~{messages.human_bytes(result)} (the result's per-prompt arrays; a "
        "prompt is a sequence of the store)",
        "  time       not estimated (the store route is not timed); nothing was written",
    ]
    for line in lines:
        log(line)
    return {"chunks": n_chunks, "read_bytes": read, "result_bytes": result}


def _count(n: int, word: str) -> str:
    """ "1 chunk", "3 chunks"."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _span(values) -> str:
    """ "0..6" for consecutive values, else the list."""
    v = list(values)
    consecutive = v == list(range(v[0], v[-1] + 1)) if v else False
    return f"{v[0]}..{v[-1]}" if consecutive and len(v) > 1 else ", ".join(map(str, v))


def run_depth(
    output,
    *,
    contrib_path,
    lens_path,
    resampling: Resampling = DEFAULT,
    overwrite=False,
    log=_log_default,
):
    """Run `align depth`: effective depth from a contributions and a lens result, written.

    Intervals are drawn by `resampling` where both hold per-prompt sums. The log line gives
    each rule's depth and interval, e.g. "kl 40 [38, 42] (ratio 0.62)".

    Parameters
    ----------
    output : str
        Where the result is written.
    contrib_path : str
        A "contributions" result.
    lens_path : str
        A "lens" result of the same model.
    resampling : Resampling, optional
        How the intervals are drawn.
    overwrite : bool, optional
        Replace a result of the same schema at `output`.
    log : callable, optional
        Receives each message (default: stderr).

    Returns
    -------
    str
        `output`.
    """

    inputs = _inputs(contrib_path=contrib_path, lens_path=lens_path)
    st.check_output(output, "depth", inputs=inputs, overwrite=overwrite)
    c, l = st.open_result(contrib_path, "contributions"), st.open_result(lens_path, "lens")
    if l.attrs.get("kind", "logit") != "logit":
        raise InputError(
            f"{lens_path} is a {l.attrs['kind']} lens on held-out documents: effective depth reads the logit lens (`align lens` with its default `kind` logit)"
        )
    for key in ("model", "config_hash"):
        if c.attrs.get(key) != l.attrs.get(key):
            raise StoreMismatch(
                f"{contrib_path} and {lens_path} come from different models ({key}: {c.attrs.get(key)!r} vs {l.attrs.get(key)!r})"
            )
    res = depth.depth_from_results(c, l, resampling)
    attrs = {
        k: c.attrs.get(k)
        for k in ("model", "revision", "model_type", "config_hash", "tokenizer_hash", "corpus")
    }
    attrs.update(
        {
            "contributions": str(contrib_path),
            "lens": str(lens_path),
            "align_version": __version__,
            "lens_corpus": l.attrs.get("corpus"),
            "options": {},
        }
    )
    ds = depth.to_dataset(res, attrs)
    st.write_result(output, ds, "depth", overwrite=overwrite, inputs=inputs)
    parts = [depth_summary(res, k, rule) for k, rule in enumerate(depth.RULES)]
    log(
        f"align depth: wrote {output}: "
        + "; ".join(parts)
        + f" of {res['n_layers']} layers; {intervals_note(ds.attrs)}"
    )
    return output


def _number(x: float) -> str:
    """A depth or interval end for a log line: "40", or "38.5" where a percentile falls
    between two depths (one decimal)."""
    return f"{x:.1f}".removesuffix(".0")


def depth_summary(res: dict, k: int, rule: str) -> str:
    """Rule k of a depth result in words: "kl 40 [38, 42] (ratio 0.62)", with the interval in
    brackets where the result has one and the share of resamples where the rule is defined
    when not all; "kl undefined (reason)" where the point estimate is undefined."""
    ed = float(res["effective_depth"][k])
    text = (
        f"{rule} {_number(ed)}" if np.isfinite(ed) else f"{rule} undefined ({res['reasons'][rule]})"
    )
    notes = [f"ratio {res['ratio'][k]:.2f}"] if np.isfinite(ed) else []
    if "effective_depth_low" in res:
        low, high, frac = (
            res["effective_depth_low"][k],
            res["effective_depth_high"][k],
            res["defined_fraction"][k],
        )
        if np.isfinite(low) and np.isfinite(high):
            text += f" [{_number(low)}, {_number(high)}]"
        B = int((res.get("bootstrap") or {}).get("resamples", 0))
        n = int(round(frac * B))
        if B and n < MIN_RESAMPLES:
            notes.append(
                f"defined in {n:,} of {B:,} resamples: no interval, fewer than the {MIN_RESAMPLES} one needs"
            )
        elif frac < 1:
            notes.append(f"defined in {frac:.0%} of resamples")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def intervals_note(attrs: dict) -> str:
    """How a result's intervals were drawn, for its log line: "95% intervals over 1,000 prompt
    resamples (seed 0)", or "no intervals" when the result holds none."""
    b = attrs.get("bootstrap")
    if not b:
        return "no intervals"
    equal_n = f", equal-n {b['equal_n']}" if b.get("equal_n") else ""
    unit = "held-out document" if b.get("method", "").startswith("document") else "prompt"
    return f"{b['level']:.0%} intervals over {b['resamples']:,} {unit} resamples (seed {b['seed']}{equal_n})"
