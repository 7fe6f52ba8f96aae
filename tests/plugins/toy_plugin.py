"""The toy runner plug-ins of the tests, made by one pair of factories (issue 25: one definition instead of a
module text per test file).

Each plug-in is a module of this folder that a test puts on ``sys.path`` and names in ``$FLB_RUNNER_MODULES``
(the ``runner_plugin`` fixture of tests/conftest.py; a subprocess gets this folder on ``PYTHONPATH``), as a
user's runner module would be: ``toy_runner`` (tests/test_runner_plugins.py), ``toy_ledger_runner``
(tests/test_ledger_build.py) and ``integrity_toy_runner`` (tests/robustness/test_integrity.py). Each registers
job types made by :func:`toy_job` and a runner made by :func:`toy_runner`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from benchmark.jobs import Job, register_job
from benchmark.reasons import NotRunReason, ReasonKind
from benchmark.runners import Runner, register_runner
from benchmark.runners._features import collect_runs
from benchmark.tidy import make_row, write_tidy


def toy_job(
    name: str, kind: str, pattern: str, value: float, *, note: str | None = None, log: bool = False,
    reads: type[Job] | None = None,
) -> type[Job]:
    """A registered job type ``name`` (fields ``method``, ``seed``) whose job writes one tidy accuracy row,
    ``value + seed``, to ``pattern``; ``note``: the row's note; ``log``: the job also appends its path to
    ``executed.log`` in the working folder; ``reads``: the job type of the same method and seed it reads."""

    @dataclass(frozen=True)
    class ToyJob(Job):
        KIND: ClassVar[str] = kind
        PATTERN: ClassVar[str] = pattern
        method: str
        seed: int

        def inputs(self) -> tuple[Job, ...]:
            return () if reads is None else (reads(self.method, self.seed),)  # type: ignore[call-arg]

        def execute(self, config: Any) -> None:
            if log:
                with open("executed.log", "a") as f:
                    f.write(self.path + "\n")
            extra = {} if note is None else {"note": note}
            row = make_row(method=self.method, metric="accuracy", value=value + self.seed, unit="percent",
                           seed=self.seed, weights="n/a", **extra)  # fmt: skip
            write_tidy([row], self.path)

    ToyJob.__name__ = ToyJob.__qualname__ = name
    return register_job(ToyJob)


def toy_runner(runner_name: str, job: type[Job], *, method: str | None = None, trains: bool = False) -> Runner:
    """Register the runner ``runner_name``: one ``job`` per seed of the spec for the cell's method (``method``,
    else the spec's ``methods`` mapping); ``trains``: planned only where training is allowed (else NOT RUN,
    needs training), as a training runner is."""
    from benchmark.runners.fl_train import training_allowed

    class ToyRunner(Runner):
        name = runner_name
        needs_data = False

        def plan(self, spec: Any, rule: Any, plan: Any, config: Any) -> Any:
            plan.method = method or rule.params["methods"][plan.cell.protocol["method"]]
            if trains and not training_allowed(config):
                plan.not_run = NotRunReason(ReasonKind.NEEDS_TRAINING, "toy training",
                                            "toy training needs a GPU (or cpu_training=true)")  # fmt: skip
                return plan
            plan.jobs = tuple(job(plan.method, s) for s in spec.seeds)  # type: ignore[call-arg]
            plan.status = "planned"
            return plan

        def collect(self, spec: Any, plan: Any, labels: Any, settings: Any) -> Any:
            return collect_runs(spec, plan)

    runner = ToyRunner()
    register_runner(runner)
    return runner
