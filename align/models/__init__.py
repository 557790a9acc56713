"""Models: which weights run (`ModelSpec`), where they come from, loading them, and their
tokenizer; the ONLY place that knows architectures (`families`, `discovery`).

One concept a module: `spec` (`ModelSpec`), `hub` (a local folder or a hub id), `loading`
(config, weights, the token-id and device checks), `tokenizer` (the checkpoint's tokenizer
exactly as saved), `families` (the table of where each family keeps its blocks, norms and
unembedding, and the parts of a built model), `discovery` (a family found and proved for a
model_type not in the table). The names the rest of align asks for are importable from here.
"""

from align.models import discovery, families
from align.models.families import (
    FAMILIES,
    SUPPORTED,
    Family,
    base_model,
    blocks,
    checkpoint_keys,
    final_norm,
    get_path,
    head,
    sublayer_modules,
    unembed,
)
from align.models.hub import check_source, hub_commit
from align.models.loading import (
    attention_implementation,
    build_random,
    check_token_ids,
    config_hash,
    init_device,
    input_device,
    load_config,
    load_model,
)
from align.models.spec import DTYPES, ModelSpec
from align.models.tokenizer import (
    SLOW_TOKENIZER_FILES,
    TOKENIZER_JSON,
    load_tokenizer,
    saved_tokenizer_file,
    tokenizer_disagreement,
    tokenizer_from_file,
)
from align.models.weights import head_tied, loaded_names

__all__ = [
    "DTYPES",
    "FAMILIES",
    "SLOW_TOKENIZER_FILES",
    "SUPPORTED",
    "TOKENIZER_JSON",
    "Family",
    "ModelSpec",
    "attention_implementation",
    "base_model",
    "blocks",
    "build_random",
    "check_source",
    "check_token_ids",
    "checkpoint_keys",
    "config_hash",
    "discovery",
    "families",
    "final_norm",
    "get_path",
    "head",
    "head_tied",
    "hub_commit",
    "init_device",
    "input_device",
    "load_config",
    "load_model",
    "load_tokenizer",
    "loaded_names",
    "saved_tokenizer_file",
    "sublayer_modules",
    "tokenizer_disagreement",
    "tokenizer_from_file",
    "unembed",
]
