"""`align extract`: a model's residual streams over a corpus into an activation store.

The run is: check options, -o, the device and the weights (their identity, see
align.provenance; align.extraction.inputs) → ask the store what -o holds (refused when made
from other inputs; nothing to do when complete) → tokenize once to count and check the disk
(align.extraction.plan) → load the model → have the store created (its token table written)
or resumed, under its write lock (align.store.writing_activations) → forward batches grouped
by length (align.extraction.batches), copy each to host (align.extraction.transfer) and hand
the sequences, in corpus order, to the writer thread (align.extraction.pipeline). Every check
that can fail runs before the store exists, but one: each read of the corpus hashes the bytes
it decodes (align.corpus.Reading), and a read of other bytes than the identity's hash (the
corpus changed during the run) is refused, the last one before the token table is finished.
Re-running the same command resumes an
incomplete store from its last committed sequence, and records each run as a segment of the
store's provenance. `--dry-run` times one batch end to end instead (align.extraction.dryrun).

Module map: extract_options (ExtractOptions, the three records from extract's arguments), memory (a model object in memory
saved for the run), inputs (checks, identity), plan
(counting, layout, disk, the store's provenance), batches (length grouping, windows, pad),
transfer (forward_batch: device → host), pipeline (the writer thread, the run loop), dryrun,
report (ExtractReport).
"""

from __future__ import annotations

import sys
import time

from align import corpus, messages, models, provenance
from align import store as st
from align.declarations import refuse_fields
from align.errors import AlignError, InputError
from align.extraction import batches, dryrun, memory, pipeline, plan
from align.extraction.extract_options import CORPUS_KEYWORDS, ExtractOptions, specs
from align.extraction.inputs import DEFINING, resolve
from align.extraction.plan import dropped_summary
from align.extraction.report import ExtractReport

__all__ = ["ExtractOptions", "ExtractReport", "dropped_summary", "extract"]


_stderr = messages.say


def extract(
    model,
    corpus_source: corpus.CorpusSpec | str | None,
    output: str,
    options: ExtractOptions | None = None,
    *,
    tokenizer=None,
    log=None,
    **keywords,
) -> ExtractReport:
    """Extract the residual streams of a model over a corpus into an activation store.

    The raw residuals (boundaries 0..L, before the final norm) and optionally the sublayer
    outputs of `model` over `corpus_source` are written into the activation store `output`.
    A model object in memory is written into a temporary folder for the run and recorded as
    `in memory: NAME` with the sha256 of its weights (see align.extraction.memory).

    Options come as records only: how the model is loaded in a ModelSpec, how the corpus is
    read in a CorpusSpec, how the store is written in an ExtractOptions
    (`align.extract(ModelSpec(path, dtype="float32"), CorpusSpec(path, max_length=64), out,
    ExtractOptions(batch_size=8))`); a path stands for a record with its defaults.

    Parameters
    ----------
    model : ModelSpec, str or transformers.PreTrainedModel
        A ModelSpec, a model folder or hub id, or a model object in memory (a transformers
        PreTrainedModel, given with its `tokenizer`; as a ModelSpec's `name` where it runs
        otherwise than ModelSpec's defaults, `ModelSpec(model, device="cuda")`).
    corpus_source : CorpusSpec, str or None
        A CorpusSpec or a corpus path (a dataset or a generated format: a CorpusSpec naming
        it).
    output : str
        The activation store to write (a folder or a remote URL); an incomplete store made from
        the same inputs is resumed.
    options : ExtractOptions, optional
        How the store is written (batch size, sublayers, dtypes, boundaries, ...).
    tokenizer : transformers tokenizer, optional
        The tokenizer of a model object given in memory.
    log : callable, optional
        Receives each message (default: stderr, with a progress bar on a terminal).
    **keywords
        None are taken: a field of ModelSpec, CorpusSpec or ExtractOptions given as a keyword
        (the earlier flat form, `batch_size=8`) is a TypeError that names the record it goes in.

    Returns
    -------
    ExtractReport
        The store's path, the run's status, its token count and its rate.

    Raises
    ------
    AlignError
        A subclass for every bad input, all of them before the store is created.
    """
    refuse_fields(
        "align.extract",
        keywords,
        (models.ModelSpec, corpus.CorpusSpec, ExtractOptions),
        CORPUS_KEYWORDS,
    )
    if memory.is_model_object(model):
        said = memory.tokenizer_warning(model, tokenizer) if tokenizer is not None else None
        if said:
            (log or _stderr)(said)
        with memory.saved_model(model, tokenizer) as spec:
            return extract(spec, corpus_source, output, options, log=log)
    if tokenizer is not None:
        raise InputError(
            "`tokenizer` goes with a model object in memory; `model` names a checkpoint, whose "
            "own tokenizer is used: leave `tokenizer` out"
        )
    spec, cspec, options = specs(model, corpus_source, options)
    terminal = log is None and sys.stderr.isatty()
    log = log or _stderr
    t0 = time.time()
    inputs = resolve(spec, cspec, options, output, log)
    cspec = inputs.cspec  # `max_length` capped at the model's positions
    replacing = options.overwrite and st.exists(output)
    found = st.inspect_activations(output, inputs.identity, DEFINING, options.overwrite)
    if found.state == st.COMPLETE:
        log(
            f"align extract: store {output} is already complete ({found.n_tokens:,} tokens); nothing to do"
        )
        return ExtractReport(output, "already complete", found.n_tokens, time.time() - t0, 0.0)

    counted = plan.count(cspec, inputs.tokenizer, inputs.corpus_hash)
    models.check_token_ids(
        inputs.spec,
        inputs.config,
        counted.max_id,
        "document {}, position {}".format(*counted.max_id_at),
    )
    _warn_special_tokens(counted, log)
    layout = plan.layout(inputs, counted)
    local = st.is_local(output)
    free = st.free_bytes(output) if local else None
    record = plan.store_provenance(inputs, counted)
    sizes = plan.store_bytes(
        layout, record, st.block_bytes(output) if local else st.footprint.BLOCK
    )
    if options.dry_run:
        return dryrun.dry_run(inputs, counted, layout, free, output, log, t0, sizes)
    # What a store being resumed already takes is part of its size, not needed again.
    plan.check_disk(output, sum(sizes.values()), free, st.used_bytes(output) if local else 0)

    # The model is loaded before the store exists: a model that cannot load (no CUDA, pickle
    # weights not allowed, a damaged file) leaves nothing behind.
    net, _ = models.load_model(inputs.spec)
    rows = plan.token_rows(cspec, inputs.tokenizer, counted.n_tokens, inputs.corpus_hash, output)
    with (
        plan.full_disk_named(output, sum(sizes.values())),
        st.writing_activations(
            output,
            layout,
            record,
            rows,
            defining=DEFINING,
            break_lock=options.break_lock,
            overwrite=options.overwrite,
        ) as opened,
    ):
        store = opened.store
        if replacing:
            log(f"align extract: replaced the activation store at {output} (`overwrite`)")
        if opened.resumed:
            p = store.progress
            log(
                f"align extract: resuming {output} at {p['committed_tokens']:,} of {store.n_tokens:,} tokens"
                + (
                    f" (removed {opened.removed} partial file(s) left by a killed write)"
                    if opened.removed
                    else ""
                )
            )
        segment = provenance.run_segment(
            store.progress["committed_tokens"],
            options.batch_size,
            spec.device,
            inputs.compute_dtype,
        )
        segment["group_window"] = options.batch_size * batches.GROUP_FACTOR
        st.start_run(store, segment)
        return pipeline.forward_all(
            net,
            store,
            options.batch_size,
            inputs,
            status="resumed" if opened.resumed else "complete",
            log=log,
            t0=t0,
            terminal=terminal,
        )


def reusable(
    model: models.ModelSpec,
    corpus_source: corpus.CorpusSpec,
    output: str,
    candidates: list,
    options: ExtractOptions = ExtractOptions(),
    log=None,
) -> str | None:
    """The first of `candidates` that is a complete activation store of the identity
    `extract(model, corpus_source, output, options)` would write (its provenance records the
    same weights, tokenizer, corpus and options: `inputs.DEFINING`), or None. Reads the
    candidates' attributes only; a candidate of another identity, another kind or no store
    at all is passed over."""
    inputs = resolve(model, corpus_source, options, output, log or (lambda line: None))
    for path in candidates:
        try:
            found = st.inspect_activations(path, inputs.identity, DEFINING)
        except AlignError:
            continue
        if found.state == st.COMPLETE:
            return path
    return None


def _warn_special_tokens(counted: plan.Plan, log) -> None:
    """Literal special-token text in the corpus is read as special tokens, as the tokenizer
    does: say so, with the first occurrence."""
    if counted.stats.special_token_text:
        doc, text = counted.stats.first_special
        log(
            f"align extract: warning: {counted.stats.special_token_text:,} literal special-token text(s) in the corpus are "
            f"read as special tokens, as the tokenizer does (first: {text!r} in document {doc}); remove them from "
            "the text if they are meant as plain text"
        )
