"""The toy training runner of tests/test_ledger_build.py: one job per seed writing 40 + seed, planned only when
training is allowed, and an evaluation job (50 + seed) reading its training run; both log their runs."""

from toy_plugin import toy_job, toy_runner

ToyJob = toy_job("ToyJob", "toy_ledger", "results/runs/toy_ledger/{method}/seed{seed}.csv", 40.0, log=True)
ToyEvalJob = toy_job("ToyEvalJob", "toy_ledger_eval", "results/runs/toy_ledger/{method}/seed{seed}/eval.csv", 50.0,
                     log=True, reads=ToyJob)  # fmt: skip
toy_runner("toy_ledger", ToyJob, trains=True)
