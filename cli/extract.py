"""`align extract` and `align info`."""

from __future__ import annotations

import json

import click

from align.cli.numbers import SEED, whole
from align.corpus import DOC_SPLITS, FORMATS, OVERFLOWS, CorpusSpec, unescape
from align.fitting.fit_options import MODEL_DEVICES
from align.models import DTYPES, ModelSpec, families
from align.records import build
from align.result_info import describe
from align.store import open_activations, open_result, read_attrs
from align.store.codecs import CODECS, DEFAULT_CODEC, STORE_DTYPES


def corpus_options(f):
    """The corpus options shared by every command that reads prompts."""
    opts = [
        click.option(
            "--dataset",
            metavar="NAME[:CONFIG]:SPLIT",
            help="Read a `datasets` split instead of CORPUS (needs the datasets package).",
        ),
        click.option(
            "--text-field",
            default="text",
            show_default=True,
            help="Field holding the text in a .jsonl corpus.",
        ),
        click.option(
            "--format",
            "fmt",
            default="plain",
            show_default=True,
            metavar="|".join(FORMATS),
            help="Build task prompts from a data set's fields (gsm8k, mquake, math, hellaswag, aime: a .jsonl "
            "file or --dataset), or generate N-digit arithmetic (addition:N[:SEED], multiplication:N[:SEED], "
            "--max-docs problems, default 100); templates in docs/formats.md.",
        ),
        click.option(
            "--doc-split",
            type=click.Choice(DOC_SPLITS),
            default=None,
            help="How a .txt file becomes documents [default: blank lines for a file, one per file for a folder].",
        ),
        click.option(
            "--max-length",
            type=whole(2),
            default=512,
            show_default=True,
            help="Tokens per sequence, special tokens included; longer documents are cut (see --overflow). Capped at the model's max_position_embeddings (said in a log line) unless --allow-long.",
        ),
        click.option(
            "--overflow",
            type=click.Choice(OVERFLOWS),
            default="split",
            show_default=True,
            help="split: every window of a long document is a sequence; truncate: only the first.",
        ),
        click.option(
            "--max-tokens",
            type=whole(1),
            default=None,
            help="Stop after this many tokens.",
        ),
        click.option(
            "--max-docs",
            type=whole(1),
            default=None,
            help="Read at most this many documents.",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def protocol_options(f):
    """P1's protocol (align.corpus): documents packed into full windows, a stand-in first
    token. Commands that read a corpus through CorpusSpec can take these as they are."""
    opts = [
        click.option(
            "--pack",
            "pack",
            default=None,
            metavar="SEPARATOR",
            help="Join the documents with SEPARATOR (text, tokenized; \\n \\t \\r \\\\ are escapes, e.g. "
            "'\\n\\n' or '<|endoftext|>') and cut them into full windows of --max-length tokens; the "
            "last partial window is left out. Part of the store's identity.",
        ),
        click.option(
            "--stand-in-token",
            type=whole(0),
            default=None,
            metavar="ID",
            help="Put token ID at position 0 of every sequence (P1: 0 for a model without BOS, e.g. Qwen 2.5), "
            "so the fit's default leaves out only it; refused when the tokenizer adds a BOS.",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def corpus_spec(path, values: dict) -> CorpusSpec:
    """The CorpusSpec of a command's corpus and protocol options, field by field from click's
    parsed `values` (the separator's escapes read). Whether CORPUS may be left out (a generated
    --format needs none) is `align.corpus.validate`'s rule: the one place that decides it."""
    pack = values.get("pack")
    return build(CorpusSpec, values, path=path, pack=None if pack is None else unescape(pack))


def model_spec(name, values: dict) -> ModelSpec:
    """The ModelSpec of MODEL and the model options, field by field from click's parsed `values`."""
    return build(ModelSpec, values, name=name)


DTYPE_HELP = "Compute dtype [default: float32 on CPU, bfloat16 on CUDA]."


def float32_model_options(f):
    """`model_options` of a command that computes in float32 on every device unless --dtype
    says otherwise (igrad: gradients)."""
    return model_options(f, "Compute dtype [default: float32 on every device: gradients need it].")


def model_options(f, dtype_help: str = DTYPE_HELP):
    opts = [
        click.option("--revision", default=None, help="Hub revision (branch, tag or commit)."),
        click.option("--dtype", type=click.Choice(DTYPES), default=None, help=dtype_help),
        click.option(
            "--device",
            type=click.Choice(MODEL_DEVICES),
            default="cpu",
            show_default=True,
            help="auto: accelerate's device_map='auto' (spreads a large model over the GPUs).",
        ),
        click.option(
            "--trust-remote-code",
            is_flag=True,
            help="Allow the checkpoint's own Python code to run.",
        ),
        click.option(
            "--allow-pickle-weights",
            is_flag=True,
            help="Also load .bin (pickle) weights; default is safetensors only.",
        ),
        click.option(
            "--random-init",
            is_flag=True,
            help="Same architecture, seeded random weights: the untrained control.",
        ),
        click.option(
            "--seed",
            type=SEED,
            default=0,
            show_default=True,
            help="Seed of --random-init.",
        ),
        click.option(
            "--family",
            type=click.Choice(families.NAMES),
            default=None,
            help="Read the model as this family (a renamed model_type); checked by a probe forward at load "
            "[default: the family table's, or discovered and checked].",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


@click.command("extract")
@click.argument("model")
@click.argument("corpus", required=False)
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="STORE",
    help="Activation store to write (a folder, or an fsspec URL).",
)
@model_options
@corpus_options
@protocol_options
@click.option(
    "--batch-size",
    type=whole(1),
    default=8,
    show_default=True,
    help="Sequences per forward pass.",
)
@click.option(
    "--boundaries",
    default=None,
    metavar="SPEC",
    help="Residual boundaries to keep: e.g. 0,4,8 or ::2 or 1: [default: all 0..L].",
)
@click.option(
    "--sublayers", is_flag=True, help="Also store what attention and MLP add to the residual."
)
@click.option(
    "--store-dtype",
    type=click.Choice(STORE_DTYPES),
    default=None,
    help="Storage dtype [default: the compute dtype, lossless]. float16 refuses values beyond 65504.",
)
@click.option(
    "--codec",
    type=click.Choice(CODECS),
    default=DEFAULT_CODEC,
    show_default=True,
    help="Chunk codec (docs/commands/extract.md, the store layout).",
)
@click.option(
    "--chunk-tokens",
    type=whole(1),
    default=None,
    help="Tokens per stored chunk [default: ~4 MiB per chunk, measured; docs/commands/extract.md]. Part of the store's identity.",
)
@click.option(
    "--allow-long",
    is_flag=True,
    help="Keep a --max-length above the model's max_position_embeddings (capped at it otherwise).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what the run would write and cost, and check free disk; write nothing.",
)
@click.option("--break-lock", is_flag=True, help="Remove a stale lock left by a run that died.")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace an activation store at -o made from other inputs (or complete) by a new extraction; nothing else is ever removed.",
)
def extract_cmd(
    model,
    corpus,
    output,
    revision,
    dtype,
    device,
    trust_remote_code,
    allow_pickle_weights,
    random_init,
    seed,
    family,
    dataset,
    text_field,
    fmt,
    doc_split,
    max_length,
    overflow,
    max_tokens,
    max_docs,
    pack,
    stand_in_token,
    batch_size,
    boundaries,
    sublayers,
    store_dtype,
    codec,
    chunk_tokens,
    allow_long,
    dry_run,
    break_lock,
    overwrite,
):
    """Store MODEL's residual stream at every boundary over CORPUS.

    MODEL is a folder made by save_pretrained or a hub id. CORPUS is a .txt file, a .jsonl
    file, or a folder of .txt files. Re-running the same command resumes an incomplete store
    (refused if the weights changed; --overwrite replaces it). The last line reports characters the tokenizer dropped.
    """
    from align.extraction import (  # torch and transformers: loaded when the command runs
        ExtractOptions,
        extract,
    )

    values = dict(locals())
    extract(
        model_spec(model, values),
        corpus_spec(corpus, values),
        output,
        build(ExtractOptions, values),
    )


@click.command("info")
@click.argument("store")
@click.option("--json", "as_json", is_flag=True, help="Print the attributes as JSON.")
def info_cmd(store, as_json):
    """Print what STORE holds: model, tokens, boundaries, dtype, size, completeness, provenance."""
    from align.extraction import dropped_summary
    from align.study.state import describe as describe_study
    from align.study.state import is_study

    if is_study(store) and not as_json:
        click.echo("\n".join(describe_study(store)))
        return
    attrs = read_attrs(store)
    if as_json:
        click.echo(json.dumps(attrs, indent=2, sort_keys=True))
        return
    schema = attrs["align"]["schema"]
    if schema != "activations":
        click.echo(describe(store, open_result(store, schema)))
        click.echo(f"  (every attribute: align info {store} --json)")
        return
    s = open_activations(store)
    p, lay, prov = s.progress, s.layout, s.provenance
    state = (
        "complete"
        if p["complete"]
        else f"INCOMPLETE ({p['committed_tokens']:,} of {lay.n_tokens:,} tokens committed; re-run the same extract command to resume)"
    )
    size = s.nbytes_stored()
    lines = [
        f"{store}: activation store, {state}",
        f"  model       {prov['model']}"
        + (f" @ {prov['revision']}" if prov.get("revision") else "")
        + (f" (random init, seed {prov['seed']})" if prov.get("random_init") else ""),
        f"  family      {prov['model_type']}, {lay.n_layers} layers, d_model {lay.d_model}"
        + (
            f" (read as {prov['family']['name']}, {prov['family']['found']})"
            if prov.get("family")
            else ""
        ),
        f"  tokens      {lay.n_tokens:,} in {lay.n_sequences:,} sequences from {prov['counts']['n_docs']:,} documents",
        f"  boundaries  {list(lay.boundaries)}",
        f"  sublayers   {list(lay.layers) if lay.layers else 'none'}",
        f"  dtype       compute {prov['compute_dtype']}, stored {lay.store_dtype}"
        + (" (as uint16 bits)" if lay.store_dtype == "bfloat16" else ""),
        f"  chunks      {lay.chunk_tokens} tokens, codec {lay.codec}",
        f"  size        {size / 2**20:,.1f} MiB on disk" if size >= 0 else "  size        (remote)",
        f"  corpus      {prov['corpus']['source']} (sha256 {prov['corpus']['hash'][:12]}), max_length {prov['corpus']['max_length']}, {prov['corpus']['overflow']}"
        + _protocol(prov["corpus"]),
        f"  special     prefix {prov['special_tokens']['prefix']}, suffix {prov['special_tokens']['suffix']}",
        f"  hashes      config {prov['config_hash'][:12]}, tokenizer {prov['tokenizer_hash']['all'][:12]}",
        f"  weights     {prov.get('weights', {}).get('id', 'not recorded')}",
        f"  dropped     {dropped_summary(prov['corpus'])}",
        f"  align       {prov['align_version']}",
    ]
    for r in prov.get("runs", []):
        stop = "…" if r["tokens"][1] is None else f"{r['tokens'][1]:,}"
        lines.append(
            f"  run         tokens {r['tokens'][0]:,}..{stop}, batch size {r['batch_size']}, {r['device']}, "
            f"{r['dtype']}, align {r['align_version']}, {r['host']}, started {r['started']}"
        )
    click.echo("\n".join(lines))


def _protocol(corpus: dict) -> str:
    """', packed with separator "\\n\\n" (37 tokens after the last full window left out),
    stand-in token 0' for a store of P1's protocol, '' otherwise."""
    out = ""
    if corpus.get("pack") is not None:
        out += f", packed with separator {json.dumps(corpus['pack'])}"
        if corpus.get("packed_tail_tokens"):
            out += f" ({corpus['packed_tail_tokens']:,} tokens after the last full window left out)"
    if corpus.get("stand_in_token") is not None:
        out += f", stand-in token {corpus['stand_in_token']} at position 0"
    return out


commands = [extract_cmd, info_cmd]
