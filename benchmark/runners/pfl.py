"""The ``pfl`` runner: fedbabu's personalised federated learning from scratch (FedAvg, FedBABU and the
personalised-FL baselines on the CIFAR networks), one :class:`PFLTrainJob` per (configuration, seed) and one
:class:`PFLEvalJob` per evaluation of its selected model (initial, personalised after fine-tuning, or NCM).

A cell's values are **per seed, the mean across clients**; its tidy rows carry every client's accuracy
(``metric`` ``client_accuracy``, ``note`` ``client=<i>``) and the std across clients (ddof 0), the quantity the
paper prints after ``±`` (``std_over: clients``), which the table shows beside ours.

Planning does not depend on the machine: with ``device: cuda`` (or ``cpu_training: true``) every cell whose
configuration this suite implements is planned; otherwise the cell is NOT RUN with the cost estimate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from benchmark.jobs import Job, register_job

_TRAIN_DIR = (
    "results/runs/pfl/{dataset}/{model}-bn{bn}/{scheme}{scheme_param}-K{clients}-p{server_fraction}/{algorithm}/"
    "f{participation}-tau{local_epochs}-R{rounds}-m{momentum}-hl{head_lr}-{head_init}-mu{prox_mu}/{selection}"
)


@dataclass(frozen=True)
class _PFLFields(Job):
    """The configuration of one federated run (strings where a wildcard carries a float)."""

    dataset: str
    model: str
    bn: str
    scheme: str
    scheme_param: str
    clients: int
    server_fraction: str
    algorithm: str
    participation: str
    local_epochs: int
    rounds: int
    momentum: str
    head_lr: str
    head_init: str
    prox_mu: str
    selection: str
    seed: int

    def pfl_config(self) -> Any:
        from benchmark.pfl.trainer import PFLConfig

        return PFLConfig(
            dataset=self.dataset, model=self.model, algorithm=self.algorithm, clients=self.clients,
            participation=float(self.participation), local_epochs=self.local_epochs, rounds=self.rounds,
            momentum=float(self.momentum), head_lr_ratio=float(self.head_lr), head_init=self.head_init,
            prox_mu=None if self.prox_mu == "default" else float(self.prox_mu), bn=self.bn,
            selection=self.selection, seed=self.seed,
        )  # fmt: skip

    def partition(self) -> dict[str, Any]:
        key = "shards_per_client" if self.scheme == "shards" else "beta"
        value = int(self.scheme_param) if self.scheme == "shards" else float(self.scheme_param)
        return {"kind": self.scheme, key: value, "server_fraction": float(self.server_fraction)}

    def train_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(_PFLFields)}


@register_job
@dataclass(frozen=True)
class PFLTrainJob(_PFLFields):
    """One federated training run (:func:`benchmark.pfl.run.train_step`): the record with per-client initial
    accuracies, the selected model and the per-round curve."""

    KIND: ClassVar[str] = "pfl_train"
    RESOURCES: ClassVar[dict[str, Any]] = {"gpu": 1}
    PATTERN: ClassVar[str] = _TRAIN_DIR + "/seed{seed}.json"

    @property
    def curve_path(self) -> str:
        return self.path.removesuffix(".json") + ".curve.csv"

    def execute(self, config: Mapping[str, Any]) -> None:
        from benchmark.pfl.run import train_step

        ckpt = Path("results/checkpoints/" + self.path.removeprefix("results/").removesuffix(".json") + ".pt")
        train_step(
            self.pfl_config(), self.partition(), self.path, device=config.get("device"),
            data_root=config.get("data_root"), checkpoint=ckpt, progress=bool(config.get("progress", True)),
        )  # fmt: skip


@register_job
@dataclass(frozen=True)
class PFLEvalJob(_PFLFields):
    """One evaluation of a training run's selected model, per client: ``initial``, ``personalised`` (fine-tune
    ``ft_part`` for ``ft_epochs`` at ``ft_lr`` with momentum ``ft_momentum``) or ``ncm``."""

    KIND: ClassVar[str] = "pfl_eval"
    RESOURCES: ClassVar[dict[str, Any]] = {"gpu": 1}
    PATTERN: ClassVar[str] = _TRAIN_DIR + "/seed{seed}/{evaluation}-{ft_part}-e{ft_epochs}-lr{ft_lr}-m{ft_momentum}.json"
    evaluation: str
    ft_part: str
    ft_epochs: int
    ft_lr: str
    ft_momentum: str

    def training(self) -> PFLTrainJob:
        return PFLTrainJob(**self.train_fields())

    def inputs(self) -> tuple[Job, ...]:
        return (self.training(),)

    def execute(self, config: Mapping[str, Any]) -> None:
        from benchmark.pfl.personalise import FineTune
        from benchmark.pfl.run import eval_step

        ft = FineTune(self.ft_part, self.ft_epochs, float(self.ft_lr), float(self.ft_momentum))
        eval_step(
            self.training().path, self.evaluation, self.path, ft=ft if self.evaluation == "personalised" else None,
            device=config.get("device"), data_root=config.get("data_root"),
        )  # fmt: skip
