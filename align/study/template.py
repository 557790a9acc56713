"""The commented study file `align study --init` writes."""

TEMPLATE = """\
# An align study: every pair of these models, every analysis, in one folder.
#   `align study FILE -o DIR --dry-run`        the plan: units, disk, memory, time
#   `align study FILE -o DIR`                  run it (re-run to resume; an edit reruns what it changes)
#   `align info DIR`                           each unit's state
#   `align report DIR -o REPORT`               the report (also written at the end of every run)
# Relative paths are read from this file's folder. Unknown keys are refused.

[study]
name = "my-study"

# One [[models]] table per model: name (letters, digits, . _ -), path (a folder or a hub id),
# and optionally revision, family, dtype (float32, bfloat16, float16), device (cpu, cuda, auto)
# and the analyses of this model (contrib, lens, skip, depth; depth runs contrib and lens).
# Several checkpoints of one model (training seeds, revisions) are its replicates: give
# paths = ["seed0", "seed1"] instead of path, or revisions = ["step1000", "step2000"] beside
# it; each checkpoint K is the model NAME@K, and the study reports the spread across them.
# labels = ["seed 0", "seed 1"] beside them names each checkpoint on the pages (NAME@K (label)).
[[models]]
name = "small"
path = "Qwen/Qwen2.5-0.5B"
revision = "main"
analyses = ["contrib", "lens", "depth"]

[[models]]
name = "large"
path = "Qwen/Qwen2.5-1.5B"
analyses = ["contrib", "lens", "depth"]

# Every key of [corpus], [extraction] and [fit] is the option of that name of `align extract`
# or `align fit` (`max_tokens = 100000` is `--max-tokens 100000`), with its default.
[corpus]
path = "corpus.txt"          # or dataset = "NAME[:CONFIG]:SPLIT", or format = "addition:3"
max_length = 512             # tokens per sequence
max_tokens = 100000          # tokens of the corpus to read
# doc_split = "blank"        # blank, line, file
# max_docs = 1000

[extraction]
# boundaries = "::2"         # which boundaries to keep (default: all)
# reuse = ["demo-output/stores"]  # folders of stores to reuse where one matches (not extracted again)
batch_size = 8
# sublayers = true           # also attention's and the MLP's outputs; with every boundary kept,
                             # contrib and lens read the stores instead of running the models

[pairs]
mode = "all"                 # all ordered pairs; "list" with list = [["small", "large"]];
                             # "reference" with reference = "large": each model -> the reference

# A list where the option takes a comma-separated one (`bootstrap = 1000` is `--bootstrap 1000`).
[fit]
measures = ["ridge"]         # beside ridge: cka, cka-debiased, procrustes, cca, svcca (`align fit --measures`)
# permutations = 99          # null draws of every measure's calibration (default: 99 for mknn, cknna and rsa alone)
test_fraction = 0.2
val_fraction = 0.2
seed = 0
# alphas = [0.001, 0.01, 0.1]
bootstrap = 1000             # document resamples of every interval (0: none for the fits)
bootstrap_seed = 0
# measure_interval = "bootstrap"  # mknn, cknna, rsa: the percentile bootstrap, not the jackknife of every measure

[controls]
random_init = []             # models whose untrained twin is also extracted and fitted as a target
shuffle = false              # also fit every pair with the shuffle control

[analyses]
batch_size = 8               # prompts per forward of the analyses that run the model
# skip_docs = 50             # skip reads the corpus's first 50 documents (default: all of them)
# checkpoints = "first"      # a model of several checkpoints: analyse its first only (default "all")
# lens = ["logit", "linear", "tuned"]  # the lenses a model's lens runs (default: logit)
# lens_through = true        # also read each pair's source through its target's head
# lens_steps = 250           # the tuned lens's optimiser steps per boundary (align lens --steps)

[route]
kind = "stores"              # stores: N extractions and N(N-1) fits; live: each pair's two models run together
device = "cpu"               # where fits compute
"""
