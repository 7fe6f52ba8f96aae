"""Batched feature extraction and the content-addressed feature cache."""
