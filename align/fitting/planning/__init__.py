"""Planning, the arithmetic a fit does before it reads a row (pure: no I/O, no model): `split`
turns documents into the fit / validation / held-out parts and marks every token's part;
`budget` counts the bytes of the sums, blocks, passes, bootstrap and result and plans the
blocks of the pair grid that fit the memory (`plan_blocks`, `plan_passes`), or says why none
does; `sample_budget` counts what the row measures' sample holds (rows, neighbours, spectra)."""
