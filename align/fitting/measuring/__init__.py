"""Measures in a fit, the similarity measures computed beside ridge's held-out scores as the
rows pass: `measured` holds the streamed measures' sums (their groups, rotations and the
jackknife's left-out values); `sampled` draws the held-out rows the row measures need, plans
their memory, and runs the measures with their bootstrap and permutation null."""
