"""Models: which weights run (`ModelSpec`), loading them, and their tokenizer.

Where a family keeps its blocks, norms and unembedding is align.families' (the only place that
knows architectures); this module re-exports what the rest of align asks of it.

Loading goes through `AutoModelForCausalLM.from_pretrained`, the same call for a small test
model saved with `save_pretrained` and for a real Qwen 2.5 checkpoint on a GPU. The tokenizer
is read from the checkpoint's own tokenizer.json, exactly as saved (`load_tokenizer`). A name
is a local folder when one exists; otherwise it must have the form of a hub id, and is refused
at once when offline mode is set or the hub cannot be reached and the cache lacks it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from align import discovery, families, textfiles
from align.errors import InputError, ModelError

# The family table and the parts of a built model live in align.families; these names are
# what the rest of align asks this module for.
from align.families import (  # noqa: F401
    FAMILIES, SUPPORTED, Family, base_model, blocks, checkpoint_keys, final_norm, get_path, head, sublayer_modules, unembed,
)


DTYPES = ("float32", "bfloat16", "float16")


# ----------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class ModelSpec:
    """Everything that decides which weights run: part of a store's defining options."""

    name: str
    revision: str | None = None
    dtype: str | None = None  # None: bfloat16 where a GPU computes, float32 on CPU
    device: str = "cpu"  # cpu | cuda | auto
    trust_remote_code: bool = False
    allow_pickle_weights: bool = False
    random_init: bool = False
    seed: int = 0
    family: str | None = None  # a family asserted for the model_type (--family); None: the table's, or discovered

    def resolved_dtype(self) -> str:
        if self.dtype is not None:
            if self.dtype not in DTYPES:
                raise InputError(f"--dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
            return self.dtype
        if self.device == "cuda":
            return "bfloat16"
        if self.device == "auto":
            import torch

            return "bfloat16" if torch.cuda.is_available() else "float32"
        return "float32"


_TRUE = ("1", "on", "yes", "true")


def _offline() -> bool:
    """Whether the hub must not be asked (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set), read
    from the environment at call time."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _offline_var() -> str:
    for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(v, "").strip().lower() in _TRUE:
            return f"{v}={os.environ[v]}"
    return "HF_HUB_OFFLINE=1"


_REACHABLE: dict[str, bool] = {}


def _hub_endpoint() -> str:
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT") or constants.ENDPOINT


def _hub_reachable(timeout: float = 3.0) -> bool:
    """One TCP connection to the hub's host (once per process): the hub client retries an
    unreachable host for half a minute, and a typo'd local path deserves a fast answer."""
    import socket
    from urllib.parse import urlparse

    from urllib.request import getproxies, proxy_bypass

    endpoint = _hub_endpoint()
    if endpoint not in _REACHABLE:
        u = urlparse(endpoint)
        proxy = getproxies().get(u.scheme)
        if proxy and not proxy_bypass(u.hostname or ""):
            u = urlparse(proxy if "://" in proxy else "http://" + proxy)  # behind a proxy, the proxy is what must answer
        try:
            socket.create_connection((u.hostname, u.port or (443 if u.scheme == "https" else 80)), timeout=timeout).close()
            _REACHABLE[endpoint] = True
        except (OSError, ValueError):
            _REACHABLE[endpoint] = False
    return _REACHABLE[endpoint]


def _is_hub_id(name: str) -> bool:
    """"org/name" or "name" as the hub spells repository ids (no leading dot, slash or tilde)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def _cached(spec: ModelSpec, filename: str = "config.json") -> str | None:
    """The hub cache's copy of `filename` of the hub id `spec.name`, or None."""
    from huggingface_hub import try_to_load_from_cache

    try:
        got = try_to_load_from_cache(spec.name, filename, revision=spec.revision)
    except Exception:  # a malformed cache or revision is no reason to fail here; loading will say
        return None
    return got if isinstance(got, str) else None


def _local_files_only(spec: ModelSpec) -> bool:
    """Whether a hub id must be read from the cache alone: offline mode, or an unreachable hub
    (the cache then answers at once instead of after the client's retries)."""
    return _offline() or not _hub_reachable()


def check_source(spec: ModelSpec) -> str:
    """"local" for an existing model folder, "hub" for a hub id that can be read (cached, or
    the hub is reachable); otherwise an InputError in one line saying why, before any download
    is tried. A name that is not an existing folder is looked up on the hub only when it has the
    form of a hub id."""
    name = os.path.expanduser(spec.name)
    if os.path.isdir(name):
        return "local"
    if os.path.exists(name):
        raise InputError(f"model {spec.name!r} is a file, not a folder: pass a folder made by save_pretrained or a hub id")
    if not _is_hub_id(name):
        raise InputError(f"model folder {spec.name!r} does not exist, and it is not a hub id: check the path")
    if _cached(spec) is not None:
        return "hub"
    if _offline():
        raise InputError(f"no folder {spec.name!r} here (model folder does not exist), and offline mode is set "
                         f"({_offline_var()}) so it cannot be fetched as a hub id: check the path")
    if not _hub_reachable():
        raise InputError(f"no folder {spec.name!r} here (model folder does not exist), and the hub ({_hub_endpoint()}) "
                         "could not be reached to fetch it as a hub id: check the path")
    return "hub"


def hub_commit(spec: ModelSpec) -> str | None:
    """The commit a hub id resolves to (its snapshot in the hub cache, downloading config.json
    if needed); None for a local folder. transformers 5 configs no longer carry `_commit_hash`."""
    import re

    if check_source(spec) == "local":
        return None
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(spec.name, "config.json", revision=spec.revision, local_files_only=_local_files_only(spec))
    except Exception as e:  # the hub client's own message, one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot resolve the commit of {spec.name!r}: {first}") from None
    m = re.search(r"[/\\]snapshots[/\\]([0-9a-f]{40})[/\\]", path)
    return m.group(1) if m else None


def load_config(spec: ModelSpec):
    """The model's config, checked against the supported families."""
    from transformers import AutoConfig

    name = os.path.expanduser(spec.name)
    source = check_source(spec)
    if source == "local" and not os.path.isfile(os.path.join(name, "config.json")):
        raise InputError(f"model folder {spec.name!r} has no config.json: pass a folder made by save_pretrained")
    kwargs = {"local_files_only": True} if source == "hub" and _local_files_only(spec) else {}
    try:
        config = AutoConfig.from_pretrained(name, revision=spec.revision, trust_remote_code=spec.trust_remote_code, **kwargs)
    except (OSError, ValueError, KeyError) as e:
        if source == "local":  # a config that is not UTF-8 is named as every text file is (align.textfiles)
            textfiles.read(os.path.join(name, "config.json"), "model config", ModelError)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot load the config of {spec.name!r}: {first}") from None
    discovery.of_config(config, spec.family, spec.trust_remote_code)  # a model align cannot read is refused here
    return config


def config_hash(config) -> str:
    """sha256 of the config's full JSON, keys sorted (what decides the architecture)."""
    d = config.to_dict()
    for k in ("_name_or_path", "transformers_version", "_commit_hash", "dtype", "torch_dtype", "_attn_implementation_autoset"):
        d.pop(k, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()


def init_device(device: str) -> str:
    """Where `--random-init` draws its weights for `--device` cpu | cuda | auto: on the GPU for
    cuda (no minutes-long build on the CPU and copy), on the CPU otherwise (auto spreads a
    CPU-built model with accelerate). The device is part of the weights' identity: the same
    seed gives other numbers on another device's generator."""
    return "cuda" if device == "cuda" else "cpu"


def build_random(config, seed: int, dtype, device: str, attn: str = "sdpa"):
    """The architecture of `config` with weights from its own initialiser, drawn on `device`
    under `torch.manual_seed(seed)` (which seeds the CPU and every CUDA generator): the
    parameters are created and initialised there, never on the CPU first."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attn)


def attention_implementation(config) -> str:
    """torch's scaled_dot_product_attention where the family supports it, else transformers'
    eager attention (Gemma 2 and gpt-oss: soft-capping and attention sinks are eager-only)."""
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        cls = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    except KeyError:
        return "sdpa"
    return "sdpa" if getattr(cls, "_supports_sdpa", True) else "eager"


def load_model(spec: ModelSpec):
    """(model, config) in eval mode, on the asked device and dtype.

    `spec.random_init` builds the same architecture from the config with weights drawn from
    the config's own initialiser under `torch.manual_seed(spec.seed)`, on the device
    `init_device` names: the untrained control. Checkpoints with `--device cuda` load straight
    to the GPU (device_map), never through host memory.
    """
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    config = load_config(spec)
    dtype = getattr(torch, spec.resolved_dtype())
    if spec.device not in ("cpu", "cuda", "auto"):
        raise InputError(f"--device {spec.device!r} is not one of cpu, cuda, auto")
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda was asked for but torch sees no CUDA device: use --device cpu")
    name = os.path.expanduser(spec.name)
    attn = attention_implementation(config)
    if spec.random_init:
        model = build_random(config, spec.seed, dtype, init_device(spec.device), attn)
        if spec.device == "auto":
            from accelerate import dispatch_model, infer_auto_device_map

            model = dispatch_model(model, infer_auto_device_map(model, no_split_module_classes=model._no_split_modules))
    else:
        kwargs = dict(
            revision=spec.revision,
            dtype=dtype,
            trust_remote_code=spec.trust_remote_code,
            use_safetensors=None if spec.allow_pickle_weights else True,
            attn_implementation=attn,
        )
        if spec.device == "auto":
            kwargs["device_map"] = "auto"
        elif spec.device == "cuda":
            # Straight to the GPU: no full copy of the weights in host memory first.
            kwargs["device_map"] = {"": "cuda"}
        if check_source(spec) == "hub" and _local_files_only(spec):
            kwargs["local_files_only"] = True
        try:
            model = AutoModelForCausalLM.from_pretrained(name, config=config, **kwargs)
        except (OSError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            hint = "" if spec.allow_pickle_weights else " (align loads only safetensors weights unless --allow-pickle-weights)"
            raise ModelError(f"cannot load the weights of {spec.name!r}: {first}{hint}") from None
    model.eval()
    model.requires_grad_(False)
    family = families.for_config(config, spec.family)
    if family is None or family.found != "table":
        # A discovered or asserted family is proved on this model before anything is written.
        families.assign(model, family or discovery.discover(model))
        discovery.verify(model)
    return model, config


def check_token_ids(spec: ModelSpec, config, max_id: int, where: str) -> None:
    """Refuse a token id the model has no embedding row for (ids 0..vocab_size-1): a tokenizer
    that does not belong to the weights, which would otherwise fail deep inside the forward.
    `where` says where the id first occurs (document and position)."""
    n = getattr(config, "vocab_size", None)
    if isinstance(n, int) and max_id >= n:
        raise InputError(
            f"the tokenizer of {spec.name!r} gives token id {max_id:,} ({where}), but the model has {n:,} token "
            "embeddings (config vocab_size): the tokenizer and the weights do not belong together; "
            "use the tokenizer saved with these weights"
        )


def input_device(model):
    """Where token ids must go (the embedding's device, also under device_map)."""
    return model.get_input_embeddings().weight.device


# What a checkpoint may hold its tokenizer in: tokenizer.json (a `tokenizers` serialization,
# read as it is) or the files of a slow tokenizer (converted by transformers).
TOKENIZER_JSON = "tokenizer.json"
# tokenizer_config.json alone holds no vocabulary: AutoTokenizer would build an empty tokenizer
# from it that drops every character.
SLOW_TOKENIZER_FILES = ("tokenizer.model", "spiece.model", "vocab.json", "vocab.txt")
_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")


def _tokenizer_file(spec: ModelSpec, filename: str) -> str | None:
    """A local path to `filename` of the model's folder or hub snapshot, or None if it has none."""
    name = os.path.expanduser(spec.name)
    if os.path.isdir(name):
        path = os.path.join(name, filename)
        return path if os.path.isfile(path) else None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    try:
        return hf_hub_download(name, filename, revision=spec.revision, local_files_only=_local_files_only(spec))
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
        if os.path.isfile(path):  # a file that is not UTF-8 is named as every text file is (align.textfiles)
            textfiles.read(path, "tokenizer file", ModelError)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot read the tokenizer.json of {label!r}: {first}") from None
    vocab = saved.get_vocab(with_added_tokens=True)
    kwargs = {k: v for k, v in (config or {}).items() if k in _SPECIAL_KEYS and isinstance(v, str) and v in vocab}
    if "model_max_length" in (config or {}):
        kwargs["model_max_length"] = config["model_max_length"]
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(path), **kwargs)
    backend = tok.backend_tokenizer
    want = json.loads(saved.to_str())
    if want.get("post_processor") is None and backend.post_processor is not None:
        # transformers puts a template in place of a missing post-processor; the saved one adds nothing.
        backend.post_processor = None
    got = json.loads(backend.to_str())
    differ = [k for k in ("normalizer", "pre_tokenizer", "model", "post_processor", "decoder", "added_tokens")
              if got.get(k) != want.get(k)]
    if differ:
        raise ModelError(f"loading the tokenizer of {label!r} changed its {', '.join(differ)} from what tokenizer.json "
                         "says: align refuses to tokenize with anything but the saved tokenizer")
    # tokenizer_config.json's add_bos_token/add_eos_token, where given, must describe what the
    # file's post-processor does: transformers would rebuild the wrapping from the flags, the
    # file says otherwise, and which one the model was trained with cannot be told from here.
    plain, full = saved.encode("a b", add_special_tokens=False).ids, saved.encode("a b").ids
    k = next((i for i in range(len(full) - len(plain) + 1) if full[i:i + len(plain)] == plain), 0)
    prefix, suffix = full[:k], full[k + len(plain):]
    for flag, name, ids in (("add_bos_token", "bos_token", prefix), ("add_eos_token", "eos_token", suffix)):
        want_flag = (config or {}).get(flag)
        token_id = saved.token_to_id(kwargs[name]) if name in kwargs else None
        if want_flag is None or (want_flag and token_id is None):
            continue
        if want_flag != (token_id in ids):
            does = "adds" if token_id in ids else "does not add"
            raise ModelError(f"the tokenizer files of {label!r} disagree: tokenizer_config.json says {flag}="
                             f"{str(want_flag).lower()} but tokenizer.json's post-processor {does} {kwargs[name]!r}: "
                             "make the two agree in a local copy of the checkpoint")
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
    if source == "local" and not any(os.path.isfile(os.path.join(name, f)) for f in SLOW_TOKENIZER_FILES):
        raise InputError(f"model folder {spec.name!r} has no tokenizer files (looked for {TOKENIZER_JSON}, "
                         f"{', '.join(SLOW_TOKENIZER_FILES)}): save the tokenizer into it with "
                         "tokenizer.save_pretrained(folder)")
    from transformers import AutoTokenizer

    kwargs = {"local_files_only": True} if source == "hub" and _local_files_only(spec) else {}
    try:
        tok = AutoTokenizer.from_pretrained(name, revision=spec.revision, trust_remote_code=spec.trust_remote_code, **kwargs)
    except (OSError, ValueError, KeyError, TypeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot load the tokenizer of {spec.name!r}: {first}") from None
    if not getattr(tok, "is_fast", False):
        raise ModelError(f"the tokenizer of {spec.name!r} is not a fast tokenizer: align needs character offsets")
    if tok.backend_tokenizer.get_vocab_size(with_added_tokens=False) == 0:
        raise ModelError(f"the tokenizer of {spec.name!r} has an empty vocabulary (no {TOKENIZER_JSON} and no "
                         f"{', '.join(SLOW_TOKENIZER_FILES)} was found): save the tokenizer with the model")
    return tok
