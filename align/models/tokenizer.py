"""The checkpoint's tokenizer, read exactly as saved: its tokenizer.json (checked component by
component after loading), or a slow tokenizer's files converted by transformers."""

from __future__ import annotations

import json
import os

from align import textfiles
from align.errors import InputError, ModelError
from align.models.hub import check_source, local_files_only
from align.models.spec import ModelSpec

# What a checkpoint may hold its tokenizer in: tokenizer.json (a `tokenizers` serialization,
# read as it is) or the files of a slow tokenizer (converted by transformers).
TOKENIZER_JSON = "tokenizer.json"
# tokenizer_config.json alone holds no vocabulary: AutoTokenizer would build an empty tokenizer
# from it that drops every character.
SLOW_TOKENIZER_FILES = ("tokenizer.model", "spiece.model", "vocab.json", "vocab.txt")
_SPECIAL_KEYS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "pad_token",
    "sep_token",
    "cls_token",
    "mask_token",
)


def _tokenizer_file(spec: ModelSpec, filename: str) -> str | None:
    """A local path to `filename` of the model's folder or hub snapshot, or None if it has none."""
    name = os.path.expanduser(spec.name)
    if os.path.isdir(name):
        path = os.path.join(name, filename)
        return path if os.path.isfile(path) else None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    try:
        return hf_hub_download(
            name, filename, revision=spec.revision, local_files_only=local_files_only(spec)
        )
    except (EntryNotFoundError, LocalEntryNotFoundError):
        return None
    except Exception as e:  # network, auth, revision: the hub client's own message, one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot read {filename} of {spec.name!r}: {first}") from None


def _special_tokens_config(spec: ModelSpec) -> dict:
    """The named special tokens and model_max_length the checkpoint's tokenizer_config.json
    (or an older special_tokens_map.json) declares."""
    out: dict = {}
    for filename in ("special_tokens_map.json", "tokenizer_config.json"):  # the second wins
        path = _tokenizer_file(spec, filename)
        if path is None:
            continue
        try:
            cfg = json.loads(textfiles.read(path, "tokenizer file", ModelError))
        except ValueError as e:
            raise ModelError(f"cannot read {filename} of {spec.name!r}: {e}") from None
        for key in _SPECIAL_KEYS:
            if key in cfg:
                v = cfg[key]
                out[key] = v.get("content") if isinstance(v, dict) else v
        if isinstance(cfg.get("model_max_length"), int):
            out["model_max_length"] = cfg["model_max_length"]
        for key in ("add_bos_token", "add_eos_token"):
            if isinstance(cfg.get(key), bool):
                out[key] = cfg[key]
    return out


def tokenizer_from_file(path: str, config: dict | None = None, name: str | None = None):
    """A transformers fast tokenizer whose backend is exactly the `tokenizers` serialization at
    `path`: same normalizer, pre-tokenizer, model, post-processor (Llama's BOS), added tokens.

    `config` names the special tokens (bos/eos/unk/pad...) as tokenizer_config.json does; a
    name the file's vocabulary lacks is left out rather than added, since adding a token would
    change the vocabulary. AutoTokenizer is not used: for a folder whose config.json names a
    model type it builds that model's tokenizer class, which replaces the saved normalizer and
    pre-tokenizer with its own (a Qwen2 config gives byte-level splitting and NFC to any
    tokenizer.json). The result is checked against the file, component by component."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    label = name or path
    try:
        saved = Tokenizer.from_file(path)
    except Exception as e:  # the tokenizers library raises plain Exceptions for bad JSON
        if os.path.isfile(
            path
        ):  # a file that is not UTF-8 is named as every text file is (align.textfiles)
            textfiles.read(path, "tokenizer file", ModelError)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot read the tokenizer.json of {label!r}: {first}") from None
    vocab = saved.get_vocab(with_added_tokens=True)
    kwargs = {
        k: v
        for k, v in (config or {}).items()
        if k in _SPECIAL_KEYS and isinstance(v, str) and v in vocab
    }
    if "model_max_length" in (config or {}):
        kwargs["model_max_length"] = config["model_max_length"]
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(path), **kwargs)
    backend = tok.backend_tokenizer
    want = json.loads(saved.to_str())
    if want.get("post_processor") is None and backend.post_processor is not None:
        # transformers puts a template in place of a missing post-processor; the saved one adds nothing.
        backend.post_processor = None
    got = json.loads(backend.to_str())
    differ = [
        k
        for k in (
            "normalizer",
            "pre_tokenizer",
            "model",
            "post_processor",
            "decoder",
            "added_tokens",
        )
        if got.get(k) != want.get(k)
    ]
    if differ:
        raise ModelError(
            f"loading the tokenizer of {label!r} changed its {', '.join(differ)} from what tokenizer.json "
            "says: align refuses to tokenize with anything but the saved tokenizer"
        )
    # tokenizer_config.json's add_bos_token/add_eos_token, where given, must describe what the
    # file's post-processor does: transformers would rebuild the wrapping from the flags, the
    # file says otherwise, and which one the model was trained with cannot be told from here.
    plain, full = saved.encode("a b", add_special_tokens=False).ids, saved.encode("a b").ids
    k = next((i for i in range(len(full) - len(plain) + 1) if full[i : i + len(plain)] == plain), 0)
    prefix, suffix = full[:k], full[k + len(plain) :]
    for flag, name, ids in (
        ("add_bos_token", "bos_token", prefix),
        ("add_eos_token", "eos_token", suffix),
    ):
        want_flag = (config or {}).get(flag)
        token_id = saved.token_to_id(kwargs[name]) if name in kwargs else None
        if want_flag is None or (want_flag and token_id is None):
            continue
        if want_flag != (token_id in ids):
            does = "adds" if token_id in ids else "does not add"
            raise ModelError(
                f"the tokenizer files of {label!r} disagree: tokenizer_config.json says {flag}="
                f"{str(want_flag).lower()} but tokenizer.json's post-processor {does} {kwargs[name]!r}: "
                "make the two agree in a local copy of the checkpoint"
            )
    return tok


def load_tokenizer(spec: ModelSpec):
    """The checkpoint's tokenizer exactly as saved (a fast tokenizer: align needs character offsets).

    A folder or hub snapshot with a tokenizer.json is read from that file (`tokenizer_from_file`);
    one with only a slow tokenizer's files (a sentencepiece model, vocab.json + merges.txt) goes
    through AutoTokenizer, which converts it; one with none is refused, naming the files looked
    for."""
    name = os.path.expanduser(spec.name)
    source = check_source(spec)
    path = _tokenizer_file(spec, TOKENIZER_JSON)
    if path is not None:
        return tokenizer_from_file(path, _special_tokens_config(spec), spec.name)
    if source == "local" and not any(
        os.path.isfile(os.path.join(name, f)) for f in SLOW_TOKENIZER_FILES
    ):
        raise InputError(
            f"model folder {spec.name!r} has no tokenizer files (looked for {TOKENIZER_JSON}, "
            f"{', '.join(SLOW_TOKENIZER_FILES)}): save the tokenizer into it with "
            "tokenizer.save_pretrained(folder)"
        )
    from transformers import AutoTokenizer

    kwargs = {"local_files_only": True} if source == "hub" and local_files_only(spec) else {}
    try:
        tok = AutoTokenizer.from_pretrained(
            name, revision=spec.revision, trust_remote_code=spec.trust_remote_code, **kwargs
        )
    except (OSError, ValueError, KeyError, TypeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot load the tokenizer of {spec.name!r}: {first}") from None
    if not getattr(tok, "is_fast", False):
        raise ModelError(
            f"the tokenizer of {spec.name!r} is not a fast tokenizer: align needs character offsets"
        )
    if tok.backend_tokenizer.get_vocab_size(with_added_tokens=False) == 0:
        raise ModelError(
            f"the tokenizer of {spec.name!r} has an empty vocabulary (no {TOKENIZER_JSON} and no "
            f"{', '.join(SLOW_TOKENIZER_FILES)} was found): save the tokenizer with the model"
        )
    return tok


# Text whose ids tell two tokenizers apart where transformers' classes replace a saved
# normalizer or pre-tokenizer: digits, runs of spaces, newlines, a tab, accents, CJK, an emoji.
PROBE_TEXT = "Hello world. 12,345 + 678 = 13,023\n\n  indented\ttab café naïve 東京 😀 end\n"
# The parts of a `tokenizers` serialization that decide the ids.
ID_COMPONENTS = ("normalizer", "pre_tokenizer", "model", "post_processor", "added_tokens")


def saved_tokenizer_file(name: str) -> str | None:
    """The tokenizer.json that `name` (a local folder, or a hub id already in the local cache:
    no network is asked) holds, or None."""
    local = os.path.expanduser(str(name))
    if os.path.isdir(local):
        path = os.path.join(local, TOKENIZER_JSON)
        return path if os.path.isfile(path) else None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(str(name), TOKENIZER_JSON)
    except Exception:  # not a hub id: nothing to compare with
        return None
    return found if isinstance(found, str) else None


def tokenizer_disagreement(tokenizer, path: str) -> str | None:
    """How `tokenizer` (a transformers tokenizer) tokenizes otherwise than the tokenizer.json
    at `path` read by `tokenizers` alone, or None where they agree: the serialized components
    that decide the ids and differ (`ID_COMPONENTS`; a post-processor only where the file has
    one, since transformers fills a missing one with a template), and the ids of PROBE_TEXT
    (special tokens added by both)."""
    from tokenizers import Tokenizer

    try:
        saved = Tokenizer.from_file(path)
        want = json.loads(saved.to_str())
        backend = getattr(tokenizer, "backend_tokenizer", None)
        got = json.loads(backend.to_str()) if backend is not None else None
        theirs = list(tokenizer(PROBE_TEXT)["input_ids"])
    except Exception:  # an unreadable file or tokenizer: the run's own checks name it
        return None
    ours = saved.encode(PROBE_TEXT).ids
    differ = [
        k
        for k in ID_COMPONENTS
        if got is not None
        and got.get(k) != want.get(k)
        and (k != "post_processor" or want.get(k) is not None)
    ]
    if not differ and theirs == ours:
        return None
    verb = "differs" if len(differ) == 1 else "differ"
    parts = f"its {', '.join(differ)} {verb}" if differ else "its ids differ"
    return (
        f"{parts}; a probe text gives {len(theirs):,} tokens"
        f"{' (other ids)' if len(theirs) == len(ours) else ''} where the file gives {len(ours):,}"
    )
