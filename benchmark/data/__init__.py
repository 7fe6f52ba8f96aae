"""Dataset registry (loaders by name) and client partitions."""
