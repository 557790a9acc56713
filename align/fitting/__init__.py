"""`align fit`: ridge maps from every boundary of a source model to every boundary of a
target model, scored on held-out documents (docs/methods.md, The fit). Two routes produce the
statistics; everything after them is shared.

The stages, a subpackage each, in the order a fit meets them:

- `fit_options`: `FitSpec` (what a fit computes, recorded in the result), `Execution` (where
  and how it runs), `request` (both and `FitHooks` checked as a `FitRequest`).
- `planning`: the documents' parts (`split`) and the memory and disk arithmetic (`budget`,
  `sample_budget`), pure.
- `pairing`: which rows of two models pair (`partners`) and the char-anchor rule (`anchors`).
- `runtime`: where the tasks run (`cluster`) and what every task does (`tasks`).
- `store_route` and `live_route`: the two sources of statistics, `align.fit` and `fit_live`
  (each route's `pipeline`), with their passes and dry runs (`estimate`).
- `measuring`: the similarity measures a fit computes beside ridge (`measured`, `sampled`).
- `results`: reduced statistics to maps (`solver`), scores, the Dataset and its writing
  (`dataset`), the bootstrap (`uncertainty`), the last line (`headline`), `maps`.

A module imports from the stages before it and from its own; the routes share the store route's
task functions (`store_route.graph`), and `runtime.cluster` imports the graph's module so that a
warm worker's footprint counts it.

The seam a source of statistics plugs into (the live route does what `store_route.pipeline.fit` does):

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
from align.fitting.fit_options import Execution, FitSpec, request
from align.fitting.planning.budget import (
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
from align.fitting.planning.split import TEST, Split, make_split, split_documents, token_parts
from align.fitting.results.dataset import (
    Side,
    alignment_dataset,
    check_result_room,
    pair_results,
    write_alignment,
)
from align.fitting.results.maps import apply_map
from align.fitting.results.solver import check_alphas, solve
from align.fitting.store_route.pair import open_pair
from align.fitting.store_route.pipeline import FitReport, fit

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
