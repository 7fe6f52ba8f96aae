"""One-off diagnostics whose reports back a finding (each module says which and how to rerun it)."""
