"""legate2023's figures (issue 14): registered in :mod:`benchmark.figures.registry`."""
