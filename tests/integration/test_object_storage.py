"""Stores on an S3 API (moto's server on loopback): same arrays as a local store, objects
listed through boto3, credentials from the environment and never written anywhere."""

from __future__ import annotations

import json

import numpy as np
import pytest

import align
from align.corpus import CorpusSpec
from align.errors import StoreLocked
from align.extraction import ExtractOptions
from align.store import open_activations

pytest.importorskip("moto.server")
pytest.importorskip("s3fs")

from tests.conftest import S3_KEY_ID as KEY_ID  # noqa: E402
from tests.conftest import S3_SECRET as SECRET


@pytest.fixture(scope="module", autouse=True)
def bucket(s3):
    s3.create_bucket(Bucket="align-test")


def _all_objects(client, prefix):
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket="align-test", Prefix=prefix
    ):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def test_extract_to_s3_equals_local(s3, zoo, corpus_file, extracted, capfd):
    url = "s3://align-test/acts/qwen2.zarr"
    lines = []
    align.extract(
        zoo("qwen2"),
        corpus_file,
        url,
        ExtractOptions(batch_size=4, chunk_tokens=512, sublayers=True),
        log=lines.append,
    )
    local = open_activations(extracted("qwen2", batch_size=4, chunk_tokens=512, sublayers=True))
    remote = open_activations(url).require_complete()
    for b in local.boundaries:
        np.testing.assert_array_equal(remote.resid(b), local.resid(b))
        np.testing.assert_array_equal(remote.dask("resid", b).compute(), local.resid(b))
    for l in local.layers:
        np.testing.assert_array_equal(remote.attn(l), local.attn(l))
    np.testing.assert_array_equal(remote.tokens("token_id"), local.tokens("token_id"))

    keys = _all_objects(s3, "acts/qwen2.zarr/")
    assert "acts/qwen2.zarr/zarr.json" in keys and "acts/qwen2.zarr/resid/c/2/4/0" in keys
    assert not any(k.endswith("align.lock") for k in keys)  # released at the end
    # Credentials appear in no stored object and no log line.
    for key in keys:
        body = s3.get_object(Bucket="align-test", Key=key)["Body"].read()
        assert KEY_ID.encode() not in body and SECRET.encode() not in body, key
    captured = capfd.readouterr()
    for text in ["\n".join(lines), captured.out, captured.err, json.dumps(remote.attrs)]:
        assert KEY_ID not in text and SECRET not in text


def test_s3_lock_refuses_a_second_writer(s3, zoo, corpus_file):
    """What is promised on object stores: a writer that finds a lock object is refused,
    naming the holder (the check-then-write window of one round trip is documented)."""
    url = "s3://align-test/acts/locked.zarr"
    s3.put_object(
        Bucket="align-test",
        Key="acts/locked.zarr/align.lock",
        Body=json.dumps(
            {"host": "other-node", "pid": 99, "started": "2026-11-29T00:00:00+0000"}
        ).encode(),
    )
    with pytest.raises(StoreLocked, match="other-node.*pid 99"):
        align.extract(zoo("qwen2"), CorpusSpec(corpus_file, max_docs=2), url, log=lambda m: None)
    align.extract(
        zoo("qwen2"),
        CorpusSpec(corpus_file, max_docs=2),
        url,
        ExtractOptions(break_lock=True),
        log=lambda m: None,
    )
    assert open_activations(url).complete
