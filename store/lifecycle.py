"""An activation store's life cycle as a writer meets it: refuse a store made from other
inputs, say whether there is anything left to do, and, under the write lock, create the
store (layout, provenance, token table) or resume it (partial chunk files of a killed write
removed). Extraction hands this module its identity, layout, provenance and token rows, and
arrays to the writer; it never creates, opens or compares a store itself.

Identity: `provenance["identity"]` holds the values that decide the store's numbers. A
store whose values for the `defining` keys differ is another store: it is refused, never
resumed or overwritten. Run segments (`provenance["runs"]`) record each run (first or
resumed) and the tokens it covered.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass

from align.errors import StoreMismatch
from align.store.group import clean_partial_writes, exists, read_attrs, remove_contents
from align.store.layout import SCHEMA
from align.store.lock import LOCK_NAME, write_lock
from align.store.reader import ActivationStore, open_activations
from align.store.writer import PlanWriter, create_activations

ABSENT, INCOMPLETE, COMPLETE = "absent", "incomplete", "complete"


@dataclass(frozen=True)
class Existing:
    """What -o holds now: `state` is ABSENT, INCOMPLETE or COMPLETE; `n_tokens` the planned
    token count of a store that exists (None otherwise)."""

    state: str
    n_tokens: int | None = None


def _short(v) -> str:
    """An identity value for a one-line message: hashes cut to 12 hex digits."""
    if isinstance(v, str):
        return re.sub(r"\b([0-9a-f]{12})[0-9a-f]{8,}\b", "\\1…", v)
    r = repr(v)
    return r if len(r) <= 40 else r[:16] + "..." + r[-8:]


def inspect_activations(
    path: str, identity: dict, defining: tuple[str, ...], overwrite: bool = False
) -> Existing:
    """What `path` holds for a writer of `identity`. Raises StoreMismatch (one line) when it
    is another kind of align store, or an activation store whose `defining` identity values
    differ (up to five named, with both values). With `overwrite`, an activation store of any
    identity is ABSENT: it is replaced. Reads attributes only; takes no lock."""
    if not exists(path):
        return Existing(ABSENT)
    attrs = read_attrs(path)
    if attrs["align"]["schema"] != SCHEMA:
        raise StoreMismatch(
            f"{path} already holds an align store of schema {attrs['align']['schema']!r}: choose another `output`"
        )
    if overwrite:
        return Existing(ABSENT)
    old = dict(attrs.get("provenance", {}).get("identity", {}))
    if "layers" in old and "boundaries" not in old:  # the kept boundaries' name before the rename
        old["boundaries"] = old.pop("layers")
    differ = [k for k in defining if old.get(k) != identity.get(k)]
    if differ:
        detail = "; ".join(
            f"{k}: store has {_short(old.get(k))}, now {_short(identity.get(k))}"
            for k in differ[:5]
        )
        raise StoreMismatch(
            f"store {path} was made with different options or inputs ({detail}): use another `output`, "
            "or delete the store to start over"
        )
    n = attrs.get("layout", {}).get("n_tokens")
    return Existing(COMPLETE if attrs["progress"]["complete"] else INCOMPLETE, n)


@dataclass
class Opened:
    """A store open for writing: `resumed` (False: created by this call, token table written),
    `removed` (partial chunk files of a killed write removed before resuming)."""

    store: ActivationStore
    resumed: bool
    removed: int = 0


@contextmanager
def writing_activations(
    path: str,
    layout,
    provenance: dict,
    rows,
    *,
    defining: tuple[str, ...],
    break_lock: bool = False,
    overwrite: bool = False,
):
    """Hold `path`'s write lock and yield an `Opened` store to append to, whatever -o holds:

    - nothing, or a store whose token table was never finished: create it with `layout` and
      `provenance` (which carries `identity`) and write the token table from `rows` (an
      iterable of per-token field dicts, consumed only here);
    - a store of the same identity: resume it, removing the partial files a killed write left;
    - anything else: StoreMismatch (checked again under the lock, so a store another writer
      made meanwhile is never overwritten);
    - with `overwrite`, an activation store of any identity, complete or not, is emptied
      (under the lock, its own lock file kept) and created anew; any other store or folder is
      still refused (`align.store.check_output` and the schema check here).

    The lock is released when the block ends, by an error too."""
    with write_lock(path, break_lock=break_lock):
        found = inspect_activations(path, provenance["identity"], defining, overwrite)
        if overwrite and exists(path):
            remove_contents(path, keep=(LOCK_NAME,))
        store = open_activations(path) if found.state != ABSENT else None
        if store is None or not store.progress["planned"]:
            create_activations(path, layout, provenance)
            store = open_activations(path, mode="r+")
            plan = PlanWriter(store)
            for fields in rows:
                plan.append(fields)
            plan.finish()
            yield Opened(store, resumed=False)
        else:
            removed = clean_partial_writes(path)
            yield Opened(open_activations(path, mode="r+"), resumed=True, removed=removed)


def _set_runs(store: ActivationStore, runs: list) -> None:
    """Rewrite the store's provenance with `runs` (its list of run segments). Called only while
    no writer thread runs, so it never races the writer's progress updates."""
    prov = dict(store.group.attrs["provenance"])
    prov["runs"] = runs
    store.group.attrs["provenance"] = prov
    store.provenance = prov


def start_run(store: ActivationStore, segment: dict) -> None:
    """Append this run's segment (`segment["tokens"] = [start, None]`). What an earlier run
    covered is known only now (it may have been killed): it ends where this one starts."""
    runs = [dict(r) for r in store.group.attrs["provenance"].get("runs", [])]
    if runs:
        runs[-1]["tokens"] = [runs[-1]["tokens"][0], segment["tokens"][0]]
    _set_runs(store, runs + [segment])


def end_run(store: ActivationStore, padding: float) -> None:
    """Close the last run's segment at the store's last token, with its padded fraction of
    computed positions."""
    runs = [dict(r) for r in store.group.attrs["provenance"].get("runs", [])]
    runs[-1]["tokens"] = [runs[-1]["tokens"][0], store.n_tokens]
    runs[-1]["padding_fraction"] = round(float(padding), 6)
    _set_runs(store, runs)
