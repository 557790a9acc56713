"""The live route, a fit from two models forwarded as the statistics accumulate: `pipeline` is
`fit_live`, its pipeline and the stages it calls (prepare and check, plan, the passes here or
on a cluster, the result); `plan` is what is known before the first forward (`Prepared`) and
the memory plan of the passes; `batches` cuts the token table into the batches `align extract`
would; `passes` loads the models and runs each pass's forwards into the sums; `anchors` pairs two
tokenizers' rows per grouping window; `shards` and `cluster` run the passes as tasks on a Dask
cluster; `estimate` is the dry run; `progress` the terminal's progress lines (the analyses that
run a model use it too)."""
