"""The store route, a fit from two activation stores: `pipeline` is `align.fit` (open the
pair, split, plan, build the graph, run it, write the result) with its stages; `graph` builds the
Dask tasks (statistics read from the stores, tree sums, solve, held-out sums, measures' sums),
which the live route's cluster reuses; `estimate` is the dry run (`--dry-run`: what a fit would
hold, from one task measured on the first block)."""
