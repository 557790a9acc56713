"""`align erase` and `align igrad` end to end: check -o, load the prompts with their answers
(and the reference prompts), load the model, compute, write the result with its provenance;
and their `--dry-run` (`plan_erase`, `plan_igrad`). The CLI calls these; notebooks may too."""

from __future__ import annotations

import dataclasses
import time

from align import corpus, models, provenance
from align import store as st
from align.analyses import answers, dryrun, erase, igrad
from align.analyses import prompts as prompt_files
from align.analyses.analysis_options import EraseOptions, IgradOptions
from align.analyses.run import _inputs, _log_default, _progress, _reading, check_vocabulary


def _answer_options(answer_field, answer_marker) -> dict:
    return {
        "answer_field": None if answer_marker is not None else answer_field,
        "answer_marker": answer_marker,
    }


def run_erase(
    output, *, spec, cspec, options: EraseOptions, batch_size=8, overwrite=False, log=_log_default
):
    """Run `align erase`: residual erasure of every (boundary 0..L, position) of each prompt.

    The replacement is the mean residual of the first `options.reference_docs` documents of the
    corpus `options.reference` (a path; read with the prompts' text field and max length, each
    document truncated to one sequence); written as "erasure".

    Parameters
    ----------
    output : str
        Where the result is written.
    spec : ModelSpec
        The model.
    cspec : CorpusSpec
        The corpus of prompts.
    options : EraseOptions
        The reference corpus and its document count, and how each prompt's answer is read.
    batch_size : int, optional
        Rows per forward.
    overwrite : bool, optional
        Replace a result of the same schema at `output`.
    log : callable, optional
        Receives each message (default: stderr).

    Returns
    -------
    str
        `output`.
    """
    reference, reference_docs = options.reference, options.reference_docs
    answer_field, answer_marker = options.answer_field, options.answer_marker
    inputs = _inputs(spec, cspec, reference=reference)
    st.check_output(output, "erasure", inputs=inputs, overwrite=overwrite)
    config, prompts, ref, rspec, ref_hash, prov = _erase_inputs(spec, cspec, options)
    model, _ = models.load_model(spec)
    t0 = time.time()
    L = config.num_hidden_layers
    n_rows = len(erase.rows_for(prompts))
    total = -(-len(ref) // batch_size) + -(-n_rows // batch_size) * (1 + L)
    progress = _progress("align erase", total, log, unit="forward")
    try:
        mean, n_ref_tokens = erase.reference_mean(model, ref, batch_size, progress=progress)
        res = erase.erasure(model, prompts, mean, batch_size=batch_size, progress=progress)
    finally:
        progress.close()
    dt = time.time() - t0
    timing = {
        "seconds": round(dt, 3),
        "n_forwards": res["n_forwards"],
        "n_forwards_reference": -(-len(ref) // batch_size),
        "n_forwards_one_at_a_time": res["n_forwards_one_at_a_time"],
    }
    opts = {
        "batch_size": batch_size,
        "reference_docs": reference_docs,
        **_answer_options(answer_field, answer_marker),
    }
    refp = {
        "source": rspec.describe(),
        "hash": ref_hash,
        "n_prompts": len(ref),
        "n_tokens": n_ref_tokens,
    }
    ds = erase.to_dataset(
        res, prompts, {**prov, "options": opts, "timing": timing, "reference": refp}, mean
    )
    st.write_result(output, ds, "erasure", overwrite=overwrite, inputs=inputs)
    log(
        f"align erase: wrote {output} ({len(prompts)} prompts, {res['n_rows']:,} erased positions, boundaries 0..{L}; "
        f"reference mean over {n_ref_tokens:,} tokens of {len(ref)} prompts) in {dt:.1f} s: {res['n_forwards']:,} batched "
        f"forward passes (a one-position-at-a-time loop makes {res['n_forwards_one_at_a_time']:,})"
    )
    return output


def _erase_inputs(spec, cspec, options: EraseOptions):
    """(config, prompts, reference prompts, reference CorpusSpec, its hash, provenance) of
    `align erase`, every input checked before the weights load."""
    rspec = corpus.CorpusSpec(
        options.reference,
        text_field=cspec.text_field,
        max_length=cspec.max_length,
        overflow="truncate",
        max_docs=options.reference_docs,
    )
    corpus.validate(cspec)
    corpus.validate(rspec)
    config = models.load_config(spec)
    tokenizer = models.load_tokenizer(spec)
    reading = corpus.Reading(cspec)
    prompts = answers.load_answer_prompts(
        cspec, tokenizer, options.answer_field, options.answer_marker, reading
    )
    check_vocabulary(spec, config, [p.token_id for p in prompts])
    ref_reading = corpus.Reading(rspec)
    ref = prompt_files.load_prompts(rspec, tokenizer, ref_reading)
    check_vocabulary(spec, config, ref)
    erase.check_reference(len(ref), options.reference_docs, options.reference)
    prov = provenance.model_record(spec, config, tokenizer, cspec, reading.hexdigest())
    return config, prompts, ref, rspec, ref_reading.hexdigest(), prov


def _igrad_inputs(spec, cspec, options: IgradOptions):
    """(spec in float32 unless it names a dtype, variant, config, prompts, provenance) of
    `align igrad`, every input checked before the weights load."""
    v = igrad.PROTOCOLS["p1"] if options.variant is None else options.variant
    if spec.dtype is None:  # gradients: float32 unless asked, also where the default is bfloat16
        spec = dataclasses.replace(spec, dtype="float32")
    igrad.alphas(v.steps, v.rule)
    igrad.check_parts(options.parts)
    corpus.validate(cspec)
    config = models.load_config(spec)
    tokenizer = models.load_tokenizer(spec)
    prompts = answers.load_answer_prompts(
        cspec, tokenizer, options.answer_field, options.answer_marker
    )
    check_vocabulary(spec, config, [p.token_id for p in prompts])
    return spec, v, config, prompts, provenance.model_record(spec, config, tokenizer, cspec)


def plan_erase(
    output, *, spec, cspec, options: EraseOptions, batch_size=8, overwrite=False, log=_log_default
) -> dict:
    """`align erase --dry-run`: the checks of a real run (-o included), then what it will read,
    run, hold and write and its time from one timed batch (`align.analyses.dryrun`); writes
    nothing. Returns the estimate (`dryrun.dry_run`)."""
    inputs = _inputs(spec, cspec, reference=options.reference)
    st.check_output(output, "erasure", inputs=inputs, overwrite=overwrite)
    config, prompts, ref, rspec, _, _ = _erase_inputs(spec, cspec, options)
    model, _ = models.load_model(spec)
    work = dryrun.erase_work(model, config, prompts, ref, batch_size, rspec.describe())
    reading = _reading(spec, cspec, [p.token_id for p in prompts])
    return dryrun.dry_run(model, config, reading, work, output, log)


def plan_igrad(
    output,
    *,
    spec,
    cspec,
    options: IgradOptions = IgradOptions(),
    batch_size=16,
    overwrite=False,
    log=_log_default,
) -> dict:
    """`align igrad --dry-run`: the checks of a real run (-o included), then what it will read,
    run, hold and write and its time from one timed pass (`align.analyses.dryrun`); writes
    nothing. Returns the estimate (`dryrun.dry_run`)."""
    st.check_output(output, "igrad", inputs=_inputs(spec, cspec), overwrite=overwrite)
    spec, v, config, prompts, _ = _igrad_inputs(spec, cspec, options)
    model, _ = models.load_model(spec)
    work = dryrun.igrad_work(model, config, prompts, options.parts, v, batch_size)
    reading = _reading(spec, cspec, [p.token_id for p in prompts])
    return dryrun.dry_run(model, config, reading, work, output, log)


def run_igrad(
    output,
    *,
    spec,
    cspec,
    options: IgradOptions = IgradOptions(),
    batch_size=16,
    overwrite=False,
    log=_log_default,
):
    """Run `align igrad`: integrated gradients of each prompt's answer, written as "igrad".

    Per part (`options.parts`), layer and position in `options.variant`
    (`align.analyses.igrad_options.Variant`) [default P1's, `PROTOCOLS["p1"]`], the variant in
    attrs["variant"]. The model computes in float32 unless spec.dtype asks for another dtype.

    Parameters
    ----------
    output : str
        Where the result is written.
    spec : ModelSpec
        The model.
    cspec : CorpusSpec
        The corpus of prompts.
    options : IgradOptions, optional
        The parts, the variant, and how each prompt's answer is read.
    batch_size : int, optional
        Rows per pass.
    overwrite : bool, optional
        Replace a result of the same schema at `output`.
    log : callable, optional
        Receives each message (default: stderr).

    Returns
    -------
    str
        `output`.
    """
    parts, answer_field, answer_marker = options.parts, options.answer_field, options.answer_marker
    inputs = _inputs(spec, cspec)
    st.check_output(output, "igrad", inputs=inputs, overwrite=overwrite)
    spec, v, config, prompts, prov = _igrad_inputs(spec, cspec, options)
    model, _ = models.load_model(spec)
    t0 = time.time()
    L = config.num_hidden_layers
    total = len(prompts) * len(parts) * L * -(-(v.steps + 2) // batch_size)
    progress = _progress("align igrad", total, log, unit="pass")
    try:
        res = igrad.integrated_gradients(
            model, prompts, parts=parts, variant=v, batch_size=batch_size, progress=progress
        )
    finally:
        progress.close()
    dt = time.time() - t0
    timing = {
        "seconds": round(dt, 3),
        "n_passes": res["n_passes"],
        "n_passes_one_at_a_time": res["n_passes_one_at_a_time"],
    }
    opts = {
        "batch_size": batch_size,
        "parts": list(parts),
        "steps": v.steps,
        **_answer_options(answer_field, answer_marker),
    }
    st.write_result(
        output,
        igrad.to_dataset(res, prompts, {**prov, "options": opts, "timing": timing}),
        "igrad",
        overwrite=overwrite,
        inputs=inputs,
    )
    gap, delta = (
        float(abs(res["gap"]).max()),
        float(abs(res["f"][:, None, None] - res["f_baseline"]).max()),
    )
    log(
        f"align igrad: wrote {output} ({len(prompts)} prompts, parts {','.join(parts)}, {L} layers; variant {v.describe()}; "
        f"completeness: largest |Σ_t A − (f(x) − f(baseline))| {gap:.3g}, largest |f(x) − f(baseline)| {delta:.3g}) in {dt:.1f} s: "
        f"{res['n_passes']:,} batched forward and backward passes (a one-point-at-a-time loop makes "
        f"{res['n_passes_one_at_a_time']:,})"
    )
    return output
