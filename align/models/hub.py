"""Where a model comes from: a local folder, or a hub id read from the cache or downloaded.

A name is a local folder when one exists; otherwise it must have the form of a hub id, and is
refused at once when offline mode is set or the hub cannot be reached and the cache lacks it.
"""

from __future__ import annotations

import os

from align.errors import InputError, ModelError
from align.models.spec import ModelSpec

_TRUE = ("1", "on", "yes", "true")


def _offline() -> bool:
    """Whether the hub must not be asked (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set), read
    from the environment at call time."""
    return any(
        os.environ.get(v, "").strip().lower() in _TRUE
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


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
            u = urlparse(
                proxy if "://" in proxy else "http://" + proxy
            )  # behind a proxy, the proxy is what must answer
        try:
            socket.create_connection(
                (u.hostname, u.port or (443 if u.scheme == "https" else 80)), timeout=timeout
            ).close()
            _REACHABLE[endpoint] = True
        except (OSError, ValueError):
            _REACHABLE[endpoint] = False
    return _REACHABLE[endpoint]


def _is_hub_id(name: str) -> bool:
    """ "org/name" or "name" as the hub spells repository ids (no leading dot, slash or tilde)."""
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


def local_files_only(spec: ModelSpec) -> bool:
    """Whether a hub id must be read from the cache alone: offline mode, or an unreachable hub
    (the cache then answers at once instead of after the client's retries)."""
    return _offline() or not _hub_reachable()


def check_source(spec: ModelSpec) -> str:
    """ "local" for an existing model folder, "hub" for a hub id that can be read (cached, or
    the hub is reachable); otherwise an InputError in one line saying why, before any download
    is tried. A name that is not an existing folder is looked up on the hub only when it has the
    form of a hub id."""
    name = os.path.expanduser(spec.name)
    if os.path.isdir(name):
        return "local"
    if os.path.exists(name):
        raise InputError(
            f"model {spec.name!r} is a file, not a folder: pass a folder made by save_pretrained or a hub id"
        )
    if not _is_hub_id(name):
        raise InputError(
            f"model folder {spec.name!r} does not exist, and it is not a hub id: check the path"
        )
    if _cached(spec) is not None:
        return "hub"
    if _offline():
        raise InputError(
            f"no folder {spec.name!r} here (model folder does not exist), and offline mode is set "
            f"({_offline_var()}) so it cannot be fetched as a hub id: check the path"
        )
    if not _hub_reachable():
        raise InputError(
            f"no folder {spec.name!r} here (model folder does not exist), and the hub ({_hub_endpoint()}) "
            "could not be reached to fetch it as a hub id: check the path"
        )
    return "hub"


def hub_commit(spec: ModelSpec) -> str | None:
    """The commit a hub id resolves to (its snapshot in the hub cache, downloading config.json
    if needed); None for a local folder. transformers 5 configs no longer carry `_commit_hash`."""
    import re

    if check_source(spec) == "local":
        return None
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(
            spec.name,
            "config.json",
            revision=spec.revision,
            local_files_only=local_files_only(spec),
        )
    except Exception as e:  # the hub client's own message, one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot resolve the commit of {spec.name!r}: {first}") from None
    m = re.search(r"[/\\]snapshots[/\\]([0-9a-f]{40})[/\\]", path)
    return m.group(1) if m else None
