"""An activation store is trusted only as far as it checks out (docs/reliability.md, "Stores").

Edited metadata (an array's data type or shape in its zarr.json, or in the group's
consolidated copy) is refused on open, naming the array, by every command that reads a
store; a NaN or inf written into one chunk (through zarr, so its crc32c checksum stays
valid) is refused on read, naming the array, boundary, chunk, token (doc, pos) and count,
by `align fit`, `align contrib --store` and `align lens --store`, and by the dask read path.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from tests.helpers.assertions import one_line_error

CHUNK = 256  # tokens per chunk of the stores here, so that a store has several chunks


@pytest.fixture(scope="module")
def stores(extracted):
    return {
        "S": extracted("qwen2", sublayers=True, chunk_tokens=CHUNK),
        "T": extracted(
            "qwen2", model_overrides={"num_hidden_layers": 4, "hidden_size": 96}, chunk_tokens=CHUNK
        ),
    }


def _copy(stores, tmp_path) -> str:
    dst = str(tmp_path / "S.zarr")
    shutil.copytree(stores["S"], dst)
    return dst


def _argv(command, store, stores, out):
    return {
        "fit": ["fit", store, stores["T"], "-o", out, "--scheduler", "synchronous"],
        "contrib": ["contrib", "--store", store, "-o", out],
        "lens": ["lens", "--store", store, "-o", out],
        "info": ["info", store],
    }[command]


def _edit(path, array, key, change, consolidated=False):
    """Change `key` of `array`'s metadata by hand, in its own zarr.json or in the group's
    consolidated copy."""
    meta_file = (
        os.path.join(path, "zarr.json") if consolidated else os.path.join(path, array, "zarr.json")
    )
    with open(meta_file) as f:
        meta = json.load(f)
    target = meta["consolidated_metadata"]["metadata"][array] if consolidated else meta
    target[key] = change(target[key])
    with open(meta_file, "w") as f:
        json.dump(meta, f)


EDITS = {
    "resid-dtype-int32": (
        "resid",
        "data_type",
        lambda v: "int32",
        "data type int32, expected float32",
    ),
    "resid-shape-shrunk": ("resid", "shape", lambda v: [v[0], v[1] - 10, v[2]], "has shape"),
    "attn-dtype-float16": (
        "attn",
        "data_type",
        lambda v: "float16",
        "data type float16, expected float32",
    ),
    "token_id-dtype-int64": (
        "token_id",
        "data_type",
        lambda v: "int64",
        "data type int64, expected int32",
    ),
    "doc-shape-shrunk": ("doc", "shape", lambda v: [v[0] - 1], "has shape"),
}


@pytest.mark.parametrize("consolidated", [False, True], ids=["array-zarr.json", "consolidated"])
@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("command", ["fit", "contrib", "lens", "info"])
def test_edited_metadata_is_refused_naming_the_array(
    cli, stores, tmp_path, command, edit, consolidated
):
    array, key, change, phrase = EDITS[edit]
    path = _copy(stores, tmp_path)
    _edit(path, array, key, change, consolidated)
    out = str(tmp_path / "r.zarr")
    code, _, err = cli(*_argv(command, path, stores, out))
    one_line_error(code, err, path, f"array {array!r}", phrase)
    assert not os.path.exists(out)


def _poison(path, boundary_row, token, col, value):
    """Write `value` into resid[boundary_row, token, col] through zarr (the chunk's crc32c is
    recomputed, so only the value is wrong)."""
    import zarr

    g = zarr.open_group(path, mode="r+", zarr_format=3)
    g["resid"][boundary_row, token, col] = value
    return int(g["doc"][token]), int(g["pos"][token])


@pytest.mark.parametrize("value", [np.nan, np.inf], ids=["nan", "inf"])
@pytest.mark.parametrize("command", ["fit", "contrib", "lens"])
def test_non_finite_activation_is_refused_naming_array_chunk_and_token(
    cli, stores, tmp_path, command, value
):
    path = _copy(stores, tmp_path)
    token = 2 * CHUNK + 37  # in chunk 2
    doc, pos = _poison(path, 1, token, 3, value)
    out = str(tmp_path / "r.zarr")
    code, _, err = cli(*_argv(command, path, stores, out))
    # The fit finds the NaN while it reads, after its plan line: the refusal is the one error
    # line, and the last.
    one_line_error(
        code,
        err,
        path,
        "array 'resid' at boundary 1",
        "non-finite",
        f"token {token:,} (doc {doc}, pos {pos})",
        "in chunk 2",
        "1 non-finite value",
        progress=(f"align {command}: ",),
    )
    assert (
        not os.path.exists(out)
        and [n for n in os.listdir(tmp_path) if n.startswith(".r.zarr")] == []
    )


@pytest.mark.parametrize("store_dtype", ["float32", "bfloat16", "float16"])
def test_non_finite_read_is_refused_on_the_dask_path_too(tmp_path, store_dtype):
    """The lazy (dask) read of a block refuses like the numpy read, for every storage dtype;
    a clean store reads back exactly what was written."""
    from align.errors import NonFiniteError
    from align.store import open_activations
    from align.store.arrays import StoreFormat, write_activations
    from tests.helpers.fixtures_fit import TOKENIZER, token_table

    tokens = token_table(4, 96)
    x = np.random.default_rng(0).standard_normal((3, 384, 8)).astype(np.float32)
    path = str(tmp_path / "s.zarr")
    write_activations(
        path,
        x,
        tokens,
        {"model": "m", "model_type": "synthetic", "tokenizer_hash": TOKENIZER},
        fmt=StoreFormat(store_dtype, "crc32c", 64),
    )
    s = open_activations(path)
    tol = {"float32": 0, "bfloat16": 2**-8, "float16": 2**-11}[store_dtype]
    np.testing.assert_allclose(s.dask("resid", 2).compute(), x[2], rtol=tol, atol=tol)
    import zarr

    g = zarr.open_group(path, mode="r+", zarr_format=3)
    nan_bits = np.uint16(0x7FC0) if store_dtype == "bfloat16" else np.nan
    g["resid"][2, 200, 5] = nan_bits
    g["resid"][2, 201, 0] = nan_bits
    for read in (
        lambda: open_activations(path).dask("resid", 2).compute(),
        lambda: open_activations(path).resid(2),
    ):
        with pytest.raises(NonFiniteError) as e:
            read()
        msg = str(e.value)
        assert "array 'resid' at boundary 2" in msg and "chunk 3" in msg, msg
        assert (
            f"token 200 (doc {tokens['doc'][200]}, pos {tokens['pos'][200]})" in msg
            and "2 non-finite value" in msg
        ), msg
    np.testing.assert_allclose(
        open_activations(path).resid(1), x[1], rtol=tol, atol=tol
    )  # other rows still read


def test_an_edit_after_a_first_open_is_still_refused(stores, tmp_path):
    """The check runs once per state of the metadata in a process (the fit opens a store
    per task): an edit between two opens is seen."""
    from align.errors import StoreError
    from align.store import open_activations

    path = _copy(stores, tmp_path)
    assert open_activations(path).n_tokens > 0
    _edit(path, "resid", "data_type", lambda v: "int32")
    with pytest.raises(StoreError, match="array 'resid' has data type int32"):
        open_activations(path)
