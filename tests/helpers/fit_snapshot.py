"""Every number of a few `align extract` and `align fit` runs, kept to prove a refactor of how
options travel leaves them bit-identical (not part of the suite: a before/after check).

    python -m tests.helpers.fit_snapshot DIR            # models, stores and results under DIR/
    python -m tests.helpers.fit_snapshot DIR --compare BEFORE

The live runs (LIVE) cover the model route's option sets: one token stream and char anchors,
measures with their bootstrap, the shuffle control with saved maps, the convergence parts (a Dask
cluster's workers import align anew, so the cluster runs are left to the suite's own
cluster-against-one-process tests).

The runs go through the `align` console script in this process, so the options are parsed as a
user's are. Each result's and store's arrays are written to DIR/<run>.npz; --compare checks each
against BEFORE/<run>.npz with np.array_equal (NaN equal to NaN) and exits 1 on any difference."""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

from tests.helpers.zoo import CORPUS_TEXT, make_model

FITS = {
    "default": [],
    "shuffle": ["--control", "shuffle", "--scheduler", "synchronous"],
    "measures": [
        "--measures",
        "cka,procrustes",
        "--bootstrap",
        "100",
        "--scheduler",
        "synchronous",
    ],
    "options": [
        "--seed",
        "3",
        "--alphas",
        "1e-3,1e-1,1",
        "--include-first-token",
        "--save-maps",
        "--source-boundaries",
        "0,2",
        "--test-fraction",
        "0.3",
        "--bootstrap",
        "0",
    ],
    "anchors": ["--pairing", "char-anchors", "--bootstrap", "0", "--scheduler", "synchronous"],
}

LIVE = {
    "fit-live": ["--target-random-init", "--target-init-seed", "5", "--bootstrap", "0"],
    "live-measures": ["--measures", "cka,procrustes,mknn", "--bootstrap", "100"],
    "live-shuffle": ["--control", "shuffle", "--bootstrap", "0", "--save-maps"],
    "live-anchors": ["--pairing", "char-anchors", "--bootstrap", "0"],
    "live-convergence": ["--convergence", "--seed", "2", "--bootstrap", "0"],
}


def _run(args: list[str]) -> None:
    from align.cli.main import main

    try:
        main([str(a) for a in args])
    except SystemExit as e:
        if e.code not in (0, None):
            raise RuntimeError(f"align {' '.join(map(str, args))} exited {e.code}") from None


def _arrays(path: pathlib.Path) -> dict:
    import zarr

    group = zarr.open_group(str(path), mode="r")
    return {name: np.asarray(a[...]) for name, a in group.arrays()}


def run(root: pathlib.Path) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    corpus = root / "docs.txt"
    corpus.write_text(CORPUS_TEXT, encoding="utf-8")
    a = root / "model-a"
    b = root / "model-b"
    c = root / "model-c"
    if not a.exists():
        make_model("qwen2", str(a), seed=0)
        make_model("qwen2", str(b), seed=1, num_hidden_layers=3)
        make_model("llama", str(c), seed=2, vocab_size=280)
    out = {}
    stores = {}
    extract_args = {
        "a": [a, corpus, "--max-length", "64"],
        "b": [b, corpus, "--max-length", "64", "--batch-size", "3", "--store-dtype", "float16"],
        "c": [c, corpus, "--max-length", "64", "--boundaries", "0,1,2", "--sublayers"],
    }
    for name, args in extract_args.items():
        store = root / f"store-{name}.zarr"
        _run(["extract", *args, "-o", store, "--overwrite"])
        stores[name] = store
        out[f"store-{name}"] = _arrays(store)
    for name, opts in FITS.items():
        result = root / f"fit-{name}.zarr"
        second = stores["c"] if name == "anchors" else stores["b"]
        _run(["fit", stores["a"], second, "-o", result, "--overwrite", *opts])
        out[f"fit-{name}"] = _arrays(result)
    live_common = ["--max-length", "64", "--batch-size", "4", "--overwrite"]
    for name, opts in LIVE.items():
        result = root / f"{name}.zarr"
        second = c if name == "live-anchors" else b
        _run(["fit", "--live", a, second, corpus, "-o", result, *live_common, *opts])
        out[name] = _arrays(result)
    for name, arrays in out.items():
        np.savez(root / f"{name}.npz", **arrays)
    return out


def compare(now: dict, before: pathlib.Path) -> list[str]:
    bad = []
    for name, arrays in now.items():
        with np.load(before / f"{name}.npz") as old:
            if sorted(old.files) != sorted(arrays):
                bad.append(f"{name}: arrays {sorted(set(old.files) ^ set(arrays))} differ")
            for key in sorted(set(old.files) & set(arrays)):
                same = np.array_equal(
                    old[key], arrays[key], equal_nan=arrays[key].dtype.kind == "f"
                )
                if not same:
                    bad.append(f"{name}/{key}: not bit-identical")
        print(f"{name}: {len(arrays)} arrays compared", file=sys.stderr)
    return bad


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=pathlib.Path)
    parser.add_argument("--compare", type=pathlib.Path, default=None)
    ns = parser.parse_args()
    arrays = run(ns.root)
    if ns.compare is not None:
        bad = compare(arrays, ns.compare)
        print("\n".join(bad) or "every array bit-identical", file=sys.stderr)
        sys.exit(1 if bad else 0)
