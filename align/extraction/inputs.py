"""Everything an extraction checks and resolves before it writes anything: -o, the device,
the model's config and weights (their identity, see align.provenance), the tokenizer, the
boundaries and blocks kept, and the store's identity (the values that decide its numbers).
Every refusal here is one line, and leaves nothing behind."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass

from align import corpus, models, provenance
from align import store as st
from align.boundaries import parse_boundaries
from align.devices import MODEL_DEVICES, check_device
from align.errors import InputError, OutputRefused
from align.extraction.extract_options import ExtractOptions
from align.messages import say
from align.models import discovery, families

# Defining options: a store made with other values of these is another store. The hub
# revision as typed is not one: "weights" (the commit it resolved to, or the weight files'
# hash) is what decides the numbers, so a resume may pin the commit a moved branch had. The
# tokenizer's behaviour (its hashes) is one too: the same text read another way is other ids.
# P1's protocol (--pack, --stand-in-token) comes before the corpus hash, which it also enters,
# so a resume with another value names the option first. A store made before these options
# existed has neither (None: one document per sequence, no stand-in) and resumes as before.
DEFINING = (
    "model",
    "dtype",
    "random_init",
    "seed",
    "pack",
    "stand_in_token",
    "corpus_hash",
    "text_field",
    "format",
    "doc_split",
    "max_length",
    "overflow",
    "max_tokens",
    "max_docs",
    "boundaries",
    "sublayers",
    "store_dtype",
    "codec",
    "chunk_tokens",
    "config_hash",
    "weights",
    "tokenizer",
)


@dataclass
class Inputs:
    """A run's inputs once checked: `spec` loads the weights that were identified (a hub
    revision pinned to its commit), `asked` is the ModelSpec as the caller gave it."""

    asked: models.ModelSpec
    spec: models.ModelSpec
    cspec: corpus.CorpusSpec
    options: ExtractOptions
    config: object
    tokenizer: object
    compute_dtype: str
    store_dtype: str
    boundaries: list[int]
    sublayer_blocks: list[int]
    weights: dict
    corpus_hash: str
    identity: dict


def check_output(output: str, inputs: dict[str, str]) -> None:
    """-o must be a new path, an empty folder or an activation store: never a file, one of the
    run's own inputs (the model folder, the corpus), inside one or holding one, nor a folder
    holding anything else (align.store.check_output), and its nearest existing ancestor must
    be a folder. Nothing is touched here; refusals are one line."""

    st.check_output(output, "activations", inputs=inputs)
    local = st.local_path(output)
    if local is None:
        return
    parent = os.path.dirname(os.path.abspath(os.path.expanduser(local)))
    while parent and not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if parent and not os.path.isdir(parent):
        raise OutputRefused(
            f"`output` {output}: {parent} is a file, not a folder: choose another `output`"
        )


def capped_max_length(cspec: corpus.CorpusSpec, config, allow_long: bool, log) -> corpus.CorpusSpec:
    """A `max_length` above the positions the model was built for is lowered to them, said in
    one log line; `allow_long` keeps it as given (positions the model was not built for)."""
    limit = getattr(config, "max_position_embeddings", None)
    if not limit or cspec.max_length <= limit or allow_long:
        return cspec
    log(
        f"align extract: `max_length` {cspec.max_length} is above the model's position limit "
        f"(max_position_embeddings {limit}): windows of {limit} tokens are used; pass `allow_long` "
        "to run positions the model was not built for"
    )
    return dataclasses.replace(cspec, max_length=limit)


def kept_blocks(boundaries: list[int], n_layers: int, options: ExtractOptions) -> list[int]:
    """Blocks whose sublayer outputs are kept: with --sublayers, those whose two boundaries are."""
    if not options.sublayers:
        return []
    kept = [l for l in range(n_layers) if l in boundaries and l + 1 in boundaries]
    if not kept:
        raise InputError(
            f"`sublayers` keeps block l only when boundaries l and l+1 are both kept; "
            f"`boundaries` {options.boundaries} keeps no such pair"
        )
    return kept


def _quoted(text: str | None) -> str | None:
    """A separator as the identity holds it: JSON-quoted, so a line break reads "\\n" and a
    refusal naming it stays one line."""
    return None if text is None else json.dumps(text)


def resolve(
    spec: models.ModelSpec,
    cspec: corpus.CorpusSpec,
    options: ExtractOptions,
    output: str,
    log=say,
) -> Inputs:
    """Check every input, cheapest first, and resolve what the run will use (see Inputs); `log`
    receives the line that says a `max_length` was capped."""
    options.check()
    compute_dtype = spec.resolved_dtype()
    store_dtype = options.check_storage(compute_dtype)
    corpus.validate(cspec)
    check_output(output, {"model folder": spec.name, "corpus": cspec.path})
    check_device(
        spec.device, MODEL_DEVICES
    )  # cheap, before hashing weights or tokenizing the corpus
    config = models.load_config(spec)
    cspec = capped_max_length(cspec, config, options.allow_long, log)
    corpus.check_stand_in(cspec, getattr(config, "vocab_size", None))
    boundaries = parse_boundaries(options.boundaries, config.num_hidden_layers)
    sublayer_blocks = kept_blocks(boundaries, config.num_hidden_layers, options)
    refused = sublayer_blocks and families.refusal(
        discovery.of_config(config, spec.family, spec.trust_remote_code), config
    )
    if refused:
        raise InputError(
            f"`sublayers`: what attention and the MLP add is not defined for this model: {refused}; "
            "extract the residual stream without `sublayers`"
        )
    weights = provenance.weights_identity(spec, config)
    # Load exactly the commit recorded, even if the branch moves while this runs.
    loads = (
        dataclasses.replace(spec, revision=weights["commit"]) if weights["kind"] == "hub" else spec
    )
    tokenizer = models.load_tokenizer(loads)
    chash = corpus.corpus_hash(cspec)
    identity = {
        "model": spec.label or provenance.model_id(spec.name),
        "revision": spec.revision,
        "dtype": compute_dtype,
        "random_init": spec.random_init,
        "seed": spec.seed if spec.random_init else None,
        "corpus_hash": chash,
        "text_field": cspec.text_field,
        "format": cspec.fmt,
        "doc_split": cspec.doc_split,
        "max_length": cspec.max_length,
        "overflow": cspec.overflow,
        "max_tokens": cspec.max_tokens,
        "max_docs": cspec.max_docs,
        "pack": _quoted(cspec.pack),
        "stand_in_token": cspec.stand_in_token,
        "boundaries": boundaries,
        "sublayers": options.sublayers,
        "store_dtype": store_dtype,
        "codec": options.codec,
        "chunk_tokens": options.chunk_tokens,
        "config_hash": models.config_hash(config),
        "weights": weights["id"],
        "tokenizer": corpus.tokenizer_hashes(tokenizer)["all"],
    }
    return Inputs(
        spec,
        loads,
        cspec,
        options,
        config,
        tokenizer,
        compute_dtype,
        store_dtype,
        boundaries,
        sublayer_blocks,
        weights,
        chash,
        identity,
    )
