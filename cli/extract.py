"""`align extract` and `align info`."""

from __future__ import annotations

import json

import click

from align.cli.declared import Parsed, fields, options_of
from align.cli.shared_options import EXTRACT_OUTPUT
from align.corpus import CorpusSpec, unescape
from align.corpus.spec import PROTOCOL
from align.declarations import declarations, flag
from align.extraction import ExtractOptions, dropped_summary, extract
from align.models import ModelSpec
from align.result_info import describe
from align.store import open_activations, open_result, read_attrs
from align.study.overview import describe as describe_study
from align.study.state import is_study

# The corpus options every command that reads prompts shares; P1's protocol (documents packed
# into full windows, a stand-in first token) is `align extract`'s alone.
CORPUS_FIELDS = tuple(n for n in declarations(CorpusSpec) if n not in PROTOCOL)


# `align extract`'s options in the order of its help, each group a table of its page
EXTRACT_MODEL = (EXTRACT_OUTPUT, fields(ModelSpec))
EXTRACT_CORPUS = (fields(CorpusSpec),)
EXTRACT_RUN = (fields(ExtractOptions),)


def _parsed(values) -> Parsed:
    return values if isinstance(values, Parsed) else Parsed(values)


def corpus_spec(path, values) -> CorpusSpec:
    """The CorpusSpec of a command's corpus and protocol options, by their declarations (the
    separator's escapes read). Whether CORPUS may be left out (a generated --format needs
    none) is `align.corpus.validate`'s rule: the one place that decides it."""
    given = _parsed(values).fields(CorpusSpec)
    pack = given.get("pack")
    return CorpusSpec(**{**given, "path": path, "pack": None if pack is None else unescape(pack)})


def model_spec(name, values) -> ModelSpec:
    """The ModelSpec of MODEL and the model options, by their declarations."""
    return _parsed(values).record(ModelSpec, name=name)


@click.command("extract")
@click.argument("model")
@click.argument("corpus", required=False)
@options_of(*EXTRACT_MODEL, *EXTRACT_CORPUS, *EXTRACT_RUN)
def extract_cmd(model, corpus, **values):
    """Store MODEL's residual stream at every boundary over CORPUS.

    MODEL is a folder made by save_pretrained or a hub id. CORPUS is a .txt file, a .jsonl
    file, or a folder of .txt files. Re-running the same command resumes an incomplete store
    (refused if the weights changed; --overwrite replaces it). The last line reports characters the tokenizer dropped.
    """
    parsed = Parsed(values)
    spec, cspec = model_spec(model, parsed), corpus_spec(corpus, parsed)
    options = parsed.record(ExtractOptions)
    output = parsed.take(EXTRACT_OUTPUT)
    parsed.done()
    extract(spec, cspec, output, options)


INFO_JSON = flag(
    "--json",
    help="print every attribute of the store or result as JSON (sorted keys), in full",
    is_flag=True,
    name="as_json",
)


@click.command("info")
@click.argument("store")
@options_of(INFO_JSON)
def info_cmd(store, **values):
    """Print what STORE holds: model, tokens, boundaries, dtype, size, completeness, provenance."""
    as_json = Parsed(values).take(INFO_JSON)

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
