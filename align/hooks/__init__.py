"""Forward hooks on a model's blocks and sublayers: the mechanics the extraction and the analyses
share. `capture` catches residuals and sublayer outputs; `skip`, `erase` and `igrad` replace
what a block or sublayer computes (skipping, residual erasure, integrated gradients'
interpolation); `outputs` reads and replaces the tensor a hooked module returns. What is
measured from the hooked runs lives in `align.analyses`."""
