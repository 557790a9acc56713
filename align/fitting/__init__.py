"""`align fit`: ridge maps from every boundary of a source model to every boundary of a
target model, scored on held-out documents (docs/methods.md, The fit). Two routes produce the
statistics; everything after them is shared.

One concept a module:

- `fit_options`: `FitSpec` (what a fit computes, recorded in the result), `Execution` (where
  and how it runs), `request` (both and `FitHooks` checked as a `FitRequest`)
  and `check_device`, the one check of the device a fit computes on.
- `split`: documents → parts (pure): `make_split(doc, pos, options) -> Split` (document ids
  per part, each token's part ridge.FIT / ridge.VAL / TEST / -1, counts).
- `budget`: pure arithmetic of memory and disk: `statistics_bytes`, `block_bytes`,
  `plan_blocks` (a `BlockPlan` of the `PairGrid`: (source boundaries, target boundaries)
  blocks and tokens per task, or None: the caller words the refusal), `result_bytes` (a
  `ResultBytes` of a `ResultShape`), `human_bytes`.
- `cluster`: where the store route runs (threads of this process, a local Dask cluster, a
  scheduler address) and what that costs in memory (`device_budget`); `tasks`: what runs inside
  every task (`blas_limit`, `stop_if_cancelled`).
- `graph`: the store route's Dask tasks (statistics read from the stores, tree sums,
  solve, held-out sums); `stores`: the store route itself, `fit(source, target, output)`.
- `solver`: reduced statistics → maps: `check_alphas` (before any pass), `solve` (α per pair
  on the validation part, refit on fit + validation; torch on a GPU).
- `result`: held-out sums → scores (`pair_results`), the alignment Dataset with summary and
  provenance (`alignment_dataset`, `Side`, route "store" or "live"), `check_result_room`,
  `write_alignment`; `uncertainty`: the document bootstrap of the scores and the summary.
- `maps`: `apply_map`, a map saved with `save_maps` applied to new activations.
- `live`: the model route (`fit_live`), with `live_estimate` (its dry run), `live_cluster`
  (its run on a Dask cluster), `batches`,
  `passes`, `shards`, `progress`; `live_anchors`: two tokenizers on the live route (each model
  forwarded in its own batches, its rows paired per grouping window).
- `pairing`: which rows pair two models (one token stream, or anchors on the text) and the
  check that two tokenizers behave alike; `anchors`: the anchor rule, its coverage and the
  windows check (pure).

The seam a source of statistics plugs into (the live route does what `stores.fit` does):

    opts = request(FitSpec(...), Execution(...))          # .spec, .run, .hooks
    split = make_split(doc, pos, opts.spec)                  # doc, pos: (n_tokens,) of the token stream
    check_result_room(output, src_boundaries, tgt_boundaries, source_side, target_side, split, opts.spec.save_maps)
    check_alphas(opts.spec.alphas, scale, split.n_select, split.n_train)
    plan = plan_blocks(PairGrid(src_boundaries, tgt_boundaries, d_s, d_t), tokens, budget_bytes, n_tokens=N)  # None: refuse
    for I, J in blocks:                                  # blocks of one source block are consecutive
        stats = ridge.Statistics.zeros(I, J, d_s, d_t, backend)      # accumulate on the device
        ridge.chunk_statistics(xs, ys, part, (x_shift, y_shift), backend, into=stats)   # per batch
        fitted = solve(stats.numpy(backend), opts.spec.alphas, x_shift, y_shift, opts.run.device, factors)
        sums = ridge.tree_sum([ridge.heldout_sums(xs, ys, fitted, backend) ...], ridge.add_heldout)
        results.update(pair_results(fitted, sums))
    ds = alignment_dataset(results, (src_boundaries, tgt_boundaries), (source_side, target_side), split,
                           opts.recorded(n_tokens=split.counts, ...), route="live", save_maps=opts.spec.save_maps)
    write_alignment(output, ds, inputs={...}, overwrite=opts.run.overwrite)

x_shift / y_shift ({boundary: float64 (d,)}) are any fixed vectors near the training mean
(the first batch's mean of its training rows): they only keep the float64 sums well
conditioned; the maps come back in raw units.
"""

from align.devices import check_device
from align.fitting.budget import (
    BlockPlan,
    PairGrid,
    ResultBytes,
    ResultShape,
    block_bytes,
    human_bytes,
    plan_blocks,
    result_bytes,
    statistics_bytes,
)
from align.fitting.fit_options import Execution, FitSpec, request
from align.fitting.maps import apply_map
from align.fitting.result import (
    Side,
    alignment_dataset,
    check_result_room,
    pair_results,
    write_alignment,
)
from align.fitting.solver import check_alphas, solve
from align.fitting.split import TEST, Split, make_split, split_documents, token_parts
from align.fitting.stores import FitReport, fit, open_pair

__all__ = [
    "BlockPlan",
    "Execution",
    "FitReport",
    "FitSpec",
    "PairGrid",
    "ResultBytes",
    "ResultShape",
    "Side",
    "Split",
    "TEST",
    "alignment_dataset",
    "apply_map",
    "block_bytes",
    "check_alphas",
    "check_device",
    "check_result_room",
    "fit",
    "human_bytes",
    "make_split",
    "open_pair",
    "pair_results",
    "plan_blocks",
    "request",
    "result_bytes",
    "solve",
    "split_documents",
    "statistics_bytes",
    "token_parts",
    "write_alignment",
]
