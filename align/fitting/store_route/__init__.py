"""The store route, a fit from two activation stores: `pipeline` is `align.fit`, its pipeline
and the stages it calls (open the pair, split, check, choose where, plan, run the blocks, the
Dataset, its write); `pair` opens and cross-checks the two stores and reads the training rows'
shift and scale; `graph` builds the Dask tasks (statistics read from the stores, tree sums,
solve, held-out sums, measures' sums), which the live route's cluster reuses; `estimate` is the
dry run (`dry_run`: pieces of the work timed and scaled)."""
