"""A unit's key covers the contents of the files it reads: a model folder's config.json,
weights and tokenizer files, the corpus's files. After one of them is rewritten, exactly the
units that depend on it must run, and the reason names the file (and, downstream, only the
units whose keys changed). A file is hashed again only when its size or modification time
changed. The units and reasons expected are written out by hand for this small study."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from tests.helpers.study_files import write_study

UNITS = ["extract a", "extract b", "fit a->b", "contrib a", "report"]


def folder(tmp_path):
    for k in range(2):
        m = tmp_path / f"m{k}"
        m.mkdir()
        (m / "config.json").write_text(json.dumps({"model_type": "qwen2", "k": k}), "utf-8")
        (m / "model.safetensors").write_bytes(os.urandom(64))
        (m / "tokenizer.json").write_text('{"model": {}}', "utf-8")
        (m / "README.md").write_text("not read by any unit", "utf-8")
    (tmp_path / "docs.txt").write_text("one\n\ntwo\n", "utf-8")


class Counted:
    """provenance.file_sha256 with a record of the paths it read."""

    def __init__(self, monkeypatch):
        from align import provenance

        self.read, real = [], provenance.file_sha256
        monkeypatch.setattr(provenance, "file_sha256", lambda p: self.read.append(p) or real(p))


def planned(tmp_path, cache: dict, extra: str = ""):
    from align.study import load_study
    from align.study.contents import Hashes
    from align.study.units import plan

    p = write_study(
        tmp_path / "s.toml", analyses={"a": ["contrib"]}, pairs=[["a", "b"]], extra=extra
    )
    hashes = Hashes(cache)
    units = plan(load_study(str(p)), hashes)
    return units, hashes.used


def done(units, root) -> dict:
    """The state's entries after a run of `units` (as `Ledger.start` and `done` write them),
    with each output made."""
    entries = {}
    for u in units:
        os.makedirs(os.path.join(root, u.output), exist_ok=True)
        entries[u.name] = {
            "key": u.key,
            "definition": u.definition,
            "contents": u.contents,
            "inputs": u.input_keys,
            "state": "done",
            "output": u.output,
        }
    return entries


def reasons(units, entries, root) -> dict:
    from align.study.execute import why

    return {u.name: r for u in units if (r := why(u, entries[u.name], str(root))) is not None}


def rewrite(path, data: bytes):
    """Rewrite `path` in place, its modification time a second later (what a rewrite leaves,
    beyond any file system's timestamp granularity)."""
    before = os.stat(path).st_mtime_ns
    with open(path, "wb") as f:
        f.write(data)
    os.utime(path, ns=(before + 10**9, before + 10**9))


@pytest.mark.parametrize(
    "changed, expected",
    [
        (
            "m1/model.safetensors",
            {
                "extract b": "changed: model.safetensors of model b",
                "fit a->b": "an input changed: extract b",
                "report": "an input changed: extract b, fit a->b",
            },
        ),
        (
            "m0/config.json",
            {
                "extract a": "changed: config.json of model a",
                "fit a->b": "an input changed: extract a",
                "contrib a": "changed: config.json of model a",
                "report": "an input changed: extract a, fit a->b, contrib a",
            },
        ),
        (
            "m0/tokenizer.json",
            {
                "extract a": "changed: tokenizer.json of model a",
                "fit a->b": "an input changed: extract a",
                "contrib a": "changed: tokenizer.json of model a",
                "report": "an input changed: extract a, fit a->b, contrib a",
            },
        ),
        (
            "docs.txt",
            {
                "extract a": "changed: corpus file {docs}",
                "extract b": "changed: corpus file {docs}",
                "fit a->b": "an input changed: extract a, extract b",
                "contrib a": "changed: corpus file {docs}",
                "report": "an input changed: extract a, extract b, fit a->b, contrib a",
            },
        ),
        ("m0/README.md", {}),  # no unit reads it
    ],
)
def test_a_rewritten_input_reruns_what_reads_it_and_names_it(
    tmp_path, monkeypatch, changed, expected
):
    folder(tmp_path)
    units, cache = planned(tmp_path, {})
    assert [u.name for u in units] == UNITS
    entries = done(units, tmp_path / "out")
    count = Counted(monkeypatch)
    again, cache = planned(tmp_path, cache)
    assert count.read == [] and reasons(again, entries, tmp_path / "out") == {}

    path = str(tmp_path / changed)
    with open(path, "rb") as f:
        rewrite(path, f.read() + b"\n")
    again, cache = planned(tmp_path, cache)
    assert count.read == ([path] if changed != "m0/README.md" else [])  # only it, and once
    docs = str(tmp_path / "docs.txt")
    assert reasons(again, entries, tmp_path / "out") == {
        k: v.format(docs=docs) for k, v in expected.items()
    }
    if count.read:
        with open(path, "rb") as f:
            assert cache[path][2] == hashlib.sha256(f.read()).hexdigest()


def test_a_file_touched_but_unchanged_is_hashed_again_and_runs_nothing(tmp_path, monkeypatch):
    folder(tmp_path)
    units, cache = planned(tmp_path, {})
    entries = done(units, tmp_path / "out")
    count = Counted(monkeypatch)
    weights = str(tmp_path / "m1" / "model.safetensors")
    with open(weights, "rb") as f:
        rewrite(weights, f.read())
    again, _ = planned(tmp_path, cache)
    assert count.read == [weights] and reasons(again, entries, tmp_path / "out") == {}


def test_an_option_edit_names_only_the_inputs_that_changed(tmp_path):
    """A `[fit] seed` edit: the fit reruns for its option, the report for the fit alone (it
    used to name every one of its inputs as changed)."""
    folder(tmp_path)
    units, cache = planned(tmp_path, {})
    entries = done(units, tmp_path / "out")
    again, _ = planned(tmp_path, cache, "[fit]\nseed = 1\n")
    assert reasons(again, entries, tmp_path / "out") == {
        "fit a->b": "options changed: spec.seed",
        "report": "an input changed: fit a->b",
    }


def test_a_random_init_twin_reads_its_models_config_and_tokenizer_not_its_weights(tmp_path):
    folder(tmp_path)
    units, _ = planned(tmp_path, {}, "[controls]\nrandom_init = ['b']\n")
    twin = next(u for u in units if u.name == "extract b.random")
    assert set(twin.contents) == {
        f"corpus file {tmp_path / 'docs.txt'}",
        "config.json of model b.random",
        "tokenizer.json of model b.random",
    }
