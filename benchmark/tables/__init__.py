"""Paper tables as targets: specs (``paper_tables/*.yaml``) -> planned runs -> tidy rows -> verdicts -> tables."""
