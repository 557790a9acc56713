"""What a store or a result records about its inputs, built once: the model, its tokenizer
and the corpus (`inputs_record`, shared by extraction and every live-model analysis; a live
model's result adds its source, `model_record`; a result read from a store records the store,
`store_record`), which weights ran, and each run segment of an extraction.

Weights (`weights_identity`) are part of an activation store's identity, so that a resume
against other weights is refused instead of mixing two models in one store:

- a local checkpoint folder: sha256 over the full bytes of every weight file that
  `from_pretrained` reads (model.safetensors, or the shards a model.safetensors.index.json
  names and the index itself; the pickle files only when pickle weights are allowed).
  Full bytes, not the safetensors header and file sizes: two checkpoints of one config have
  byte-identical headers (same names, dtypes, shapes and offsets), so a header hash cannot
  tell a retrained or re-seeded model from the original, which is the case that matters.
  Measured: 100 MB hash in 0.11-0.15 s on one core of the 2-core test machine (0.7-0.9 GB/s,
  SHA-NI); shards are hashed in parallel threads (hashlib releases the GIL), so a 28 GB 14B
  checkpoint costs about as much as reading it once, which loading it does anyway.
- a hub id: the commit the revision resolved to (the hub cache's snapshot of config.json,
  which reading the config has just refreshed, or which offline is the answer); the weights
  are then loaded at that commit, so the recorded commit is the one that ran even when
  `revision` is a branch that moves.
- `--random-init`: the config hash and the seed (they decide the weights).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import socket

from align import corpus, textfiles
from align.errors import ModelError
from align.models import config_hash, discovery, families, init_device
from align.threads import side_by_side
from align.version import __version__

SAFE_WEIGHTS = "model.safetensors"
SAFE_INDEX = "model.safetensors.index.json"
PICKLE_WEIGHTS = "pytorch_model.bin"
PICKLE_INDEX = "pytorch_model.bin.index.json"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _sharded(folder: str, index: str) -> list[str]:
    """The index file and every shard its weight_map names (sorted, each once)."""
    try:
        weight_map = json.loads(
            textfiles.read(os.path.join(folder, index), "weight index", ModelError)
        )["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ModelError(
            f"the weight index {os.path.join(folder, index)} cannot be read ({type(e).__name__}: {e}): "
            "the checkpoint is damaged"
        ) from None
    for s in shards:
        if not os.path.isfile(os.path.join(folder, s)):
            raise ModelError(
                f"the weight index {os.path.join(folder, index)} names {s}, which is missing: "
                "the checkpoint is incomplete (copy every shard)"
            )
    return [index] + shards


def weight_files(folder: str, allow_pickle: bool, explicit: str | None = None) -> list[str]:
    """The weight files of a local checkpoint folder that `from_pretrained` reads, relative to
    `folder`, in the order transformers looks for them (safetensors before pickle).

    Raises ModelError naming what is there when nothing loadable is: a pickle-only folder
    without `allow_pickle` is refused here, before any store exists."""
    if explicit:  # config.transformers_weights: the file the checkpoint says to load
        if not os.path.isfile(os.path.join(folder, explicit)):
            raise ModelError(
                f"model folder {folder!r}: its config names weights {explicit!r}, which is missing"
            )
        return _sharded(folder, explicit) if explicit.endswith(".index.json") else [explicit]
    if os.path.isfile(os.path.join(folder, SAFE_WEIGHTS)):
        return [SAFE_WEIGHTS]
    if os.path.isfile(os.path.join(folder, SAFE_INDEX)):
        return _sharded(folder, SAFE_INDEX)
    pickles = [n for n in (PICKLE_WEIGHTS, PICKLE_INDEX) if os.path.isfile(os.path.join(folder, n))]
    if pickles and not allow_pickle:
        raise ModelError(
            f"model folder {folder!r} has only pickle weights ({pickles[0]}) and no {SAFE_WEIGHTS}: loading a pickle "
            "can run code; pass `allow_pickle_weights` if you trust it, or convert it to safetensors"
        )
    if PICKLE_WEIGHTS in pickles:
        return [PICKLE_WEIGHTS]
    if PICKLE_INDEX in pickles:
        return _sharded(folder, PICKLE_INDEX)
    raise ModelError(
        f"model folder {folder!r} holds no weights ({SAFE_WEIGHTS} or {SAFE_INDEX}): "
        "pass a folder made by save_pretrained, or `random_init` for the untrained control"
    )


def file_sha256(path: str) -> str:
    """sha256 of a file's bytes, read in 16 MiB blocks (memory stays flat)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def files_identity(folder: str, names: list[str]) -> dict:
    """{"id": "sha256 HEX", "kind": "files", "files": {name: {"bytes", "sha256"}}}: HEX is the
    sha256 of the JSON list of (name, bytes, sha256) in name order."""
    paths = [os.path.join(folder, n) for n in names]
    try:
        digests = side_by_side(file_sha256, paths, os.cpu_count() or 1)
        sizes = [os.path.getsize(p) for p in paths]
    except OSError as e:
        raise ModelError(
            f"cannot read the weights in {folder!r}: {e.strerror or e} ({e.filename})"
        ) from None
    files = {n: {"bytes": s, "sha256": d} for n, s, d in sorted(zip(names, sizes, digests))}
    combined = hashlib.sha256(
        json.dumps([[n, f["bytes"], f["sha256"]] for n, f in files.items()]).encode()
    ).hexdigest()
    return {"id": f"sha256 {combined}", "kind": "files", "files": files}


def _hub_commit(repo: str, revision: str | None) -> str | None:
    """The commit `revision` (default main) of hub repo `repo` resolves to in the local hub
    cache: the snapshot folder holding its config.json. Reading the config (load_config) has
    just refreshed the cache's ref when the hub is reachable; offline the cache is the answer."""
    from huggingface_hub import try_to_load_from_cache

    try:
        got = try_to_load_from_cache(repo, "config.json", revision=revision)
    except Exception:  # a malformed cache entry: fall back to the other sources of the commit
        return None
    if not isinstance(got, str):
        return None
    parts = os.path.normpath(got).split(os.sep)
    if "snapshots" in parts[:-1]:
        commit = parts[parts.index("snapshots") + 1]
        return commit if _COMMIT.match(commit) else None
    return None


def weights_identity(spec, config) -> dict:
    """What decides the weights a run uses (see the module docstring): a dict with `id`, a
    short string that is part of a store's identity, and the details behind it.

    `spec` is an align.models.ModelSpec, `config` the config loaded from it."""
    if spec.random_init:
        h, dev = config_hash(config), init_device(spec.device)
        # A CPU draw keeps the id stores made before the device was recorded have; another
        # device's generator gives other weights, so it is part of the id.
        where = "" if dev == "cpu" else f" on {dev}"
        return {
            "id": f"random init seed {spec.seed}{where}, config sha256 {h}",
            "kind": "random_init",
            "seed": spec.seed,
            "config_hash": h,
            "init_device": dev,
        }
    folder = os.path.expanduser(spec.name)
    if os.path.isdir(folder):
        names = weight_files(
            folder, spec.allow_pickle_weights, getattr(config, "transformers_weights", None)
        )
        return files_identity(folder, names)
    commit = _hub_commit(spec.name, spec.revision) or getattr(config, "_commit_hash", None)
    if not commit and spec.revision and _COMMIT.match(spec.revision):
        commit = spec.revision
    if not commit:
        raise ModelError(
            f"cannot tell which commit of hub model {spec.name!r} revision {spec.revision or 'main'} "
            "is in use: download it again, or pass a local folder"
        )
    return {
        "id": f"hub commit {commit}",
        "kind": "hub",
        "repo": spec.name,
        "revision": spec.revision,
        "commit": commit,
    }


def run_segment(start_token: int, batch_size: int, device: str, dtype: str) -> dict:
    """One run (first run or resume) of an extraction: tokens [start, stop) it covers (stop is
    None until it finishes, or until the next run fills in where this one stopped), and how
    it ran."""
    return {
        "tokens": [int(start_token), None],
        "batch_size": int(batch_size),
        "device": device,
        "dtype": dtype,
        "align_version": __version__,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
    }


def model_id(name: str) -> str:
    """A model as recorded: a local folder as its absolute path (so the record finds it from
    any working folder), a hub id as given."""
    expanded = os.path.expanduser(name)
    return os.path.abspath(expanded) if os.path.isdir(expanded) else name


def inputs_record(spec, config, tokenizer, cspec, corpus_record: dict | None = None) -> dict:
    """What every artifact computed from a model over a corpus records about its inputs, the
    same keys for an activation store and an analysis result: the model (`model_id`), the
    revision as asked, random init and its seed, the architecture, config and tokenizer
    hashes, the special tokens added around each sequence, the corpus
    (`corpus.provenance(cspec)` unless `corpus_record` is given), the compute dtype and
    align's version.

    `spec` is an align.models.ModelSpec, `config` and `tokenizer` loaded from it, `cspec`
    an align.corpus.CorpusSpec."""
    return {
        "model": spec.label or model_id(spec.name),
        "revision": spec.revision,
        "model_type": config.model_type,
        "random_init": spec.random_init,
        "seed": spec.seed if spec.random_init else None,
        "config_hash": config_hash(config),
        "tokenizer_hash": corpus.tokenizer_hashes(tokenizer),
        "special_tokens": dict(zip(("prefix", "suffix"), corpus.special_tokens(tokenizer))),
        "corpus": corpus.provenance(cspec) if corpus_record is None else corpus_record,
        "compute_dtype": spec.resolved_dtype(),
        "align_version": __version__,
        "family": families.record(
            discovery.of_config(config, getattr(spec, "family", None), spec.trust_remote_code)
        ),
    }


def model_record(spec, config, tokenizer, cspec, corpus_hash: str | None = None) -> dict:
    """What a result computed from a live model records about the model, its tokenizer and
    the corpus (every live-model analysis writes the same keys). `corpus_hash`: the hash of
    the read whose tokens the result was computed from (corpus.Reading)."""
    record = corpus.provenance(cspec, corpus_hash)
    return {**inputs_record(spec, config, tokenizer, cspec, record), "source": "model"}


def store_record(store) -> dict:
    """What a result computed from an activation store records about it: the store's model,
    tokenizer and corpus keys, the store's path and align's version."""
    p = store.provenance
    keep = (
        "model",
        "revision",
        "model_type",
        "random_init",
        "seed",
        "config_hash",
        "tokenizer_hash",
        "special_tokens",
        "corpus",
        "compute_dtype",
        "store_dtype",
    )
    return {
        **{k: p.get(k) for k in keep},
        "source": "store",
        "store": store.path,
        "align_version": __version__,
    }
