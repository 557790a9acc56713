"""What each lens of `align lens` costs against one forward of the held-out tokens: a
random-weight Qwen2 saved with its tokenizer, its residuals extracted and fitted onto its own
last boundary with the maps kept (untimed), then, interleaved `--repeats` times in one process
after the same imports:

- the floor: the model's forward (transformers' own, float32, its logits included) over the
  held-out documents' sequences of that self-fit, the model already loaded;
- the logit lens (`run_lens` from the model, over the held-out documents as its prompts);
- the linear lens from the existing self-fit (`run_lens` with `maps`): no fit, no forward;
- the linear lens fitting its own maps (`run_lens` on the store, `kind` linear);
- the tuned lens (`run_lens` on the store, `kind` tuned, its default steps and training tokens).

Each lens is timed end to end, as `align lens` pays it (the store opened, the head read, the
bootstrap drawn, the result written), and inside it the parts that compute: the held-out
evaluation (`lens_heldout.evaluate`), the self-fit (`lens_run.self_fit`) and the translators'
training (`lens_tuned.train`); then one more run of the linear lens from the self-fit under
cProfile, its functions by their own time. Medians over the repeats (the tuned lens: over its first
`--tuned-repeats`, one by default: its training takes minutes where the others take seconds).

    .venv/bin/python bench/lens.py --out bench/results/lens.json
    .venv/bin/python bench/lens.py --quick --out /tmp/lens.json     # a tiny model, one repeat

Writes the JSON (the model, the token counts, each run's seconds and parts, the ratios to the
forward, the load averages before and after). Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time

from common import build_qwen2

# (layers, hidden, heads, kv_heads, intermediate, vocab): the default, and --quick's
MODEL = (4, 128, 4, 2, 512, 1024)
QUICK = (2, 64, 4, 2, 128, 512)


class Parts:
    """Seconds spent inside the wrapped library functions since the last `take`."""

    def __init__(self):
        self.seconds: dict = {}

    def wrap(self, module, name: str, label: str) -> None:
        inner = getattr(module, name)

        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - t

        setattr(module, name, timed)

    def take(self) -> dict:
        out, self.seconds = self.seconds, {}
        return out


def profiled(run, top: int = 10) -> list:
    """[[function, seconds], ...]: the `top` functions of one more call of `run` by the time
    spent in their own code (cProfile's tottime), a C function named by itself."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    run()
    prof.disable()
    rows = pstats.Stats(prof).stats.items()
    named = [
        (f"{os.path.basename(file)}:{name}" if file != "~" else name.strip("<>"), tt)
        for (file, _, name), (_, _, tt, _, _) in rows
    ]
    return [[n, t] for n, t in sorted(named, key=lambda x: -x[1])[:top]]


def build(root: str, shape: tuple, n_docs: int, words_per_doc: int) -> tuple:
    """(model folder, corpus file, the documents): the model and `n_docs` documents of its
    tokenizer's words."""
    layers, hidden, heads, kv, inter, vocab = shape
    model = os.path.join(root, "model")
    words = build_qwen2(model, vocab, hidden, heads, kv, inter, layers)
    rng = random.Random(1)
    docs = [" ".join(rng.choice(words) for _ in range(words_per_doc)) for _ in range(n_docs)]
    corpus = os.path.join(root, "docs.txt")
    with open(corpus, "w") as f:
        f.write("\n\n".join(docs))
    return model, corpus, docs


def prepare(model: str, corpus: str, root: str) -> tuple:
    """(store, self-fit): the residuals of every boundary, and their ridge maps onto boundary
    L with the maps kept, as `align lens --kind linear --save-maps` fits them."""
    import align
    from align.analyses.lens_run import self_fit

    store = os.path.join(root, "store.zarr")
    align.extract(model, corpus, store, log=lambda m: None)
    L = align.open_activations(store).n_layers
    maps = os.path.join(root, "self-fit.zarr")
    self_fit(store, L, maps, overwrite=False)
    return store, maps


def forward_floor(model: str, store: str, heldout: list, batch: int = 8):
    """A callable running the model's own forward (logits included) over the sequences of
    the held-out documents, as the store holds them (right-padded batches of `batch`)."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    import align

    s = align.open_activations(store)
    ids, seq, doc = (s.tokens(k) for k in ("token_id", "seq", "doc"))
    keep = np.isin(doc, heldout)
    seqs = [ids[keep & (seq == q)] for q in np.unique(seq[keep])]
    net = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    batches = []
    for k in range(0, len(seqs), batch):
        group = seqs[k : k + batch]
        width = max(len(x) for x in group)
        x = torch.zeros((len(group), width), dtype=torch.long)
        mask = torch.zeros_like(x)
        for j, t in enumerate(group):
            x[j, : len(t)], mask[j, : len(t)] = torch.from_numpy(t.astype(np.int64)), 1
        batches.append((x, mask))

    def run():
        with torch.inference_mode():
            for x, mask in batches:
                net(input_ids=x, attention_mask=mask, use_cache=False)  # logits included

    return run, int(sum(len(x) for x in seqs))


def lens_runs(model: str, store: str, maps: str, heldout_corpus: str, out: str, tuned) -> dict:
    """name -> a callable running that lens into a fresh result under `out` (`tuned`: the
    tuned lens's LensOptions)."""
    from align.analyses.analysis_options import LensOptions
    from align.analyses.run import run_lens
    from align.corpus import CorpusSpec
    from align.models import ModelSpec

    spec, quiet = ModelSpec(model), dict(overwrite=True, log=lambda m: None)
    return {
        "logit lens": lambda: run_lens(
            os.path.join(out, "logit.zarr"), spec=spec, cspec=CorpusSpec(heldout_corpus), **quiet
        ),
        "linear lens, existing self-fit": lambda: run_lens(
            os.path.join(out, "linear-map.zarr"),
            options=LensOptions(kind="linear", maps=maps),
            **quiet,
        ),
        "linear lens, fitting its maps": lambda: run_lens(
            os.path.join(out, "linear-fit.zarr"),
            spec=spec,
            store=store,
            options=LensOptions(kind="linear"),
            **quiet,
        ),
        "tuned lens": lambda: run_lens(
            os.path.join(out, "tuned.zarr"),
            spec=spec,
            store=store,
            options=tuned,
            **quiet,
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=200, help="documents of the corpus")
    ap.add_argument("--words", type=int, default=120, help="words a document")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--tuned-repeats",
        type=int,
        default=1,
        help="of the repeats, the first N also train the tuned lens (its 250 steps a boundary "
        "take minutes on a loaded CPU)",
    )
    ap.add_argument("--threads", type=int, default=1, help="torch's threads (every run alike)")
    ap.add_argument(
        "--steps", type=int, default=None, help="the tuned lens's steps (default: its own, 250)"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a tiny model, 40 documents, 1 repeat, 5 tuned steps: the script runs, no measurement",
    )
    ap.add_argument("--out", default="bench/results/lens.json")
    args = ap.parse_args()
    shape = QUICK if args.quick else MODEL
    if args.quick:
        args.docs, args.words, args.repeats, args.steps = 40, 30, 1, 5
    import torch

    torch.set_num_threads(args.threads)

    import align
    from align.analyses import lens_heldout, lens_run, lens_tuned
    from align.analyses.analysis_options import LensOptions
    from align.store import open_result

    parts = Parts()
    parts.wrap(lens_heldout, "evaluate", "held-out evaluation")
    parts.wrap(lens_run, "self_fit", "self-fit")
    parts.wrap(lens_tuned, "train", "training")
    load0 = os.getloadavg()
    times: dict = {}
    with tempfile.TemporaryDirectory() as root:
        model, corpus, docs = build(root, shape, args.docs, args.words)
        store, maps = prepare(model, corpus, root)
        fitted = align.open_alignment(maps)
        heldout = sorted(int(d) for d in fitted.attrs["split"]["heldout_docs"])
        heldout_corpus = os.path.join(root, "heldout.txt")
        with open(heldout_corpus, "w") as f:
            f.write("\n\n".join(docs[d] for d in heldout))
        forward, n_forward = forward_floor(model, store, heldout)
        runs = {"forward of the held-out tokens": forward}
        steps = {} if args.steps is None else {"steps": args.steps}
        tuned = LensOptions(kind="tuned", **steps)
        runs.update(lens_runs(model, store, maps, heldout_corpus, root, tuned))
        forward()  # a warm-up: the first forward allocates
        parts.take()
        for k in range(args.repeats):
            for name, run in runs.items():
                if name == "tuned lens" and k >= args.tuned_repeats:
                    continue
                t = time.perf_counter()
                run()
                wall = time.perf_counter() - t
                times.setdefault(name, []).append({"s": wall, **parts.take()})
        profile = profiled(runs["linear lens, existing self-fit"])
        lens = align.open_activations(store)
        n_tokens, n_layers = lens.n_tokens, lens.n_layers
        scored = open_result(os.path.join(root, "linear-map.zarr"), "lens").attrs["n_tokens"]
    floor = statistics.median(x["s"] for x in times["forward of the held-out tokens"])
    rows = {}
    for name, got in times.items():
        keys = sorted({k for x in got for k in x})
        med = {k: statistics.median(x.get(k, 0.0) for x in got) for k in keys}
        rows[name] = {"median": med, "runs": got, "ratio_to_forward": med["s"] / floor}
    layers, hidden, heads, kv, inter, vocab = shape
    out = {
        "config": {
            "model": f"qwen2 {layers} layers x {hidden}, vocabulary {vocab:,}, random weights",
            "layers": layers,
            "d_model": hidden,
            "vocab": vocab,
            "docs": args.docs,
            "heldout_docs": len(heldout),
            "tokens": int(n_tokens),
            "forward_tokens": n_forward,
            "scored_tokens": scored,
            "boundaries": n_layers + 1,
            "tuned_steps": tuned.steps,
            "tuned_train_tokens": tuned.train_tokens,
            "repeats": args.repeats,
            "tuned_repeats": min(args.tuned_repeats, args.repeats),
            "torch_threads": torch.get_num_threads(),
        },
        "runs": rows,
        "profile_linear_existing_self_fit": profile,
        "machine": {"cores": os.cpu_count(), "cpu": platform.processor() or platform.machine()},
        "load_average_before_after": [load0, os.getloadavg()],
        "command": "bench/lens.py " + " ".join(sys.argv[1:]),
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps({k: round(v["ratio_to_forward"], 2) for k, v in rows.items()}))


if __name__ == "__main__":
    main()
