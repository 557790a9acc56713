"""The live route, a fit from two models forwarded as the statistics accumulate: `pipeline` is
`fit_live` (configs and tokenizers, the token table, split, plan of passes, the passes, the
result) with its stages; `batches` cuts the token table into the batches `align extract` would;
`passes` loads the models and runs each pass's forwards into the sums; `anchors` pairs two
tokenizers' rows per grouping window; `shards` and `cluster` run the passes as tasks on a Dask
cluster; `estimate` is the dry run; `progress` the lines a pass prints."""
