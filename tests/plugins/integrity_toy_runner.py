"""The toy runner of tests/robustness/test_integrity.py: one job per seed writing 60.125 + seed for the method
toy_ncm, with a note holding a comma, a quote mark's neighbour and a semicolon."""

from toy_plugin import toy_job, toy_runner

IntegrityToyJob = toy_job("IntegrityToyJob", "integrity_toy", "results/runs/toy/{method}/seed{seed}.csv", 60.125,
                          note="a, quoted; note")  # fmt: skip
toy_runner("integrity_toy", IntegrityToyJob, method="toy_ncm")
