"""Statistics shared by the fit, the analyses and `align compare`: the bootstrap behind every
interval (`bootstrap`)."""
