"""Forward hooks on a model's blocks and sublayers: the mechanics the extraction and the analyses
share. `capture` catches residuals and sublayer outputs; `bypass`, `substitute` and `interpolate`
replace what a block or sublayer computes (a layer or sublayer bypassed for skipping, a residual
substituted for erasure, an interpolation for integrated gradients); `outputs` reads and replaces the tensor a hooked module returns. What is
measured from the hooked runs lives in `align.analyses`."""
