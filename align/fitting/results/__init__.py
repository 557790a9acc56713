"""Results, from reduced statistics to the written alignment, shared by both routes: `solver`
chooses α per pair on the validation part and refits on fit + validation (`check_alphas`,
`solve`); `dataset` turns held-out sums into scores (`pair_results`), builds the alignment
Dataset with its summary and provenance, checks the room for it and writes it; `uncertainty` is
the document bootstrap of the scores and the summary; `headline` the one line a fit ends on;
`maps` applies a saved map to new activations (`apply_map`)."""
