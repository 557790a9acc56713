"""Runtime, where a fit's tasks run and what every task does on the way: `cluster` chooses and
opens the executor (threads of this process, a local Dask cluster, a scheduler address), sizes
its memory (`device_budget`, `default_memory_limit`) and cancels it on Ctrl-C or SIGTERM;
`tasks` is what runs inside every task (`blas_limit`, `stop_if_cancelled`, `threaded`)."""
