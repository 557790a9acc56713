"""Companion analyses (METHODS.md §2-§5): contribution, skipping, logit lens, effective depth."""
