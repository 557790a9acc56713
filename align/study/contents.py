"""What a unit reads, by content: the files of the inputs the provenance records (a model
folder's config.json, its weight files as `provenance.weight_files` lists them, its tokenizer
files; the corpus's source files), each as the sha256 of its bytes, so that a unit's key
changes when a file it reads is rewritten in place, and the log names that file.

A file is hashed again only when its size or modification time (ns) differs from what the
study's state recorded beside its hash (`Hashes`): a rerun with nothing changed reads no
file. A hub id is taken as named (its revision is in the unit's options; the commit that ran
is in each output's provenance); a model that is not there, or a corpus from a data set,
adds nothing here (the unit says what is wrong when it runs).
"""

from __future__ import annotations

import json
import os

from align import provenance
from align.corpus.formats import generated_format
from align.corpus.sources import source_files
from align.errors import AlignError
from align.models.tokenizer import SLOW_TOKENIZER_FILES, TOKENIZER_JSON

CONFIG = "config.json"
TOKENIZER_FILES = (
    TOKENIZER_JSON,
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "merges.txt",
    *SLOW_TOKENIZER_FILES,
)


class Hashes:
    """sha256 of files, cached as {path: [size, mtime_ns, hex]} in `cache` (the study state's
    `hashes`); `used` is every path asked for (what the state keeps)."""

    def __init__(self, cache: dict | None = None):
        self.cache = cache if isinstance(cache, dict) else {}
        self.used: dict = {}

    def of(self, path: str) -> str | None:
        """The sha256 of `path`'s bytes (None: no such file), hashed only when its size or
        mtime differs from the cached one's."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        seen = self.used.get(path) or self.cache.get(path)
        if isinstance(seen, list) and seen[:2] == [st.st_size, st.st_mtime_ns]:
            self.used[path] = seen
            return seen[2]
        try:
            digest = provenance.file_sha256(path)
        except OSError:
            return None
        self.used[path] = [st.st_size, st.st_mtime_ns, digest]
        return digest


def model_files(spec) -> list[str]:
    """The files of a local model folder its units read: config.json, the weight files (none
    for a random initialisation) and the tokenizer's files, those present."""
    folder = os.path.expanduser(spec.name)
    if not os.path.isdir(folder):
        return []
    names = [CONFIG]
    if not spec.random_init:
        try:
            names += provenance.weight_files(
                folder, spec.allow_pickle_weights, _explicit_weights(folder)
            )
        except AlignError:  # no weights: the unit's run says so
            pass
    names += TOKENIZER_FILES
    return [os.path.join(folder, n) for n in names if os.path.isfile(os.path.join(folder, n))]


def _explicit_weights(folder: str) -> str | None:
    """The weight file config.json names (`transformers_weights`), if it names one."""
    try:
        with open(os.path.join(folder, CONFIG), "rb") as f:
            config = json.loads(f.read())
    except (OSError, ValueError):
        return None
    named = config.get("transformers_weights") if isinstance(config, dict) else None
    return named if isinstance(named, str) else None


def corpus_files(cspec) -> list[str]:
    """The corpus's source files (none for a data set or a generated format)."""
    if cspec.path is None or cspec.dataset is not None or generated_format(cspec.fmt):
        return []
    try:
        return source_files(cspec)
    except AlignError:  # the unit's run says what is wrong
        return []


def of_model(name: str, spec, hashes: Hashes) -> dict:
    """{"FILE of model NAME": sha256} of the model folder's files its units read."""
    return {f"{os.path.basename(p)} of model {name}": hashes.of(p) for p in model_files(spec)}


def of_corpus(cspec, hashes: Hashes) -> dict:
    """{"corpus file PATH": sha256} of the corpus's source files."""
    return {f"corpus file {p}": hashes.of(p) for p in corpus_files(cspec)}


def differ(old: dict, new: dict) -> list:
    """The labels whose hash differs between two contents records (added or gone too)."""
    return [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
