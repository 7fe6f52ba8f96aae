"""The toy runner of tests/test_runner_plugins.py: one job per seed writing 40 + seed for the cell's method."""

from toy_plugin import toy_job, toy_runner

ToyJob = toy_job("ToyJob", "toy", "results/runs/toy/{method}/seed{seed}.csv", 40.0)
toy_runner("toy", ToyJob)
