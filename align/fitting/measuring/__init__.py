"""Measures in a fit, the similarity measures computed beside ridge's held-out scores (both
routes): `measured` turns the streamed sums into each pair's value and delete-a-group jackknife
interval and the result's `<measure>` arrays; `sampled` draws the held-out rows the row measures
and every measure's calibration use (before the pass, by the split's seed), gathers them, plans
their memory, and measures them once for the whole grid."""
