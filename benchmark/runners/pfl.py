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

import numpy as np

from benchmark.errors import ConfigError, UnknownNameError
from benchmark.fl.estimate import native_rate
from benchmark.io import read_verified_json
from benchmark.jobs import Job, checkpoint_for, job_closure, register_job
from benchmark.paths import cache_dir
from benchmark.pfl.algorithms import ALGORITHMS, get_algorithm
from benchmark.pfl.parts import CONV_PARTS
from benchmark.reasons import NotRunReason, ReasonKind, needs_training, not_implemented_method
from benchmark.runners import CellResult, Runner, register_runner
from benchmark.runners.fl_train import training_allowed
from benchmark.tables.availability import dataset_blocker
from benchmark.tables.plan import _alias

_TRAIN_DIR = (
    "results/runs/pfl/{dataset}/{model}-bn{bn}/{scheme}-{scheme_param}-K{clients}-p{server_fraction}/{algorithm}/"
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

    def pfl_config(self, config: Mapping[str, Any] | None = None) -> Any:
        """The run's :class:`~benchmark.pfl.trainer.PFLConfig`; ``config`` may carry the reduced-run knobs
        ``pfl_dtype`` and ``pfl_eval_clients`` (the pinned CI guard only; both are recorded in the record) and the
        execution knobs ``train_exec``, ``train_chunk`` and ``channels_last`` (the workflow's, shared with
        ``fl_train``; the model's memory layout, recorded, and kept by the evaluations of the run), and
        ``pfl_client_procs`` (a round's clients in that many CPU processes, bit for bit the loop)."""
        from benchmark.pfl.streams import scheme_for  # local: heavy imports (torch)
        from benchmark.pfl.trainer import PFLConfig

        knobs = config or {}
        algo = get_algorithm(self.algorithm)
        source = self.source()
        warm = {"lr_decay": algo.lr_decay, "init_model": None if source is None else source.path}
        if source is not None:  # the source's draws, hence its partition (PFLConfig.random_streams)
            warm["random_streams"] = scheme_for(source.rounds)
        if algo.lr is not None:
            warm["lr"] = algo.lr
        exec_ = str(knobs.get("train_exec", "auto"))
        if exec_ == "auto" and knobs.get("pfl_client_procs", 1) != 1:
            exec_ = "loop"  # worker processes run the per-client loop (benchmark/pfl/client_pool.py)
        elif exec_ == "auto":
            exec_ = "vectorised" if str(knobs.get("device") or "").startswith("cuda") else "loop"
        return PFLConfig(
            client_exec=exec_, vector_chunk=knobs.get("train_chunk"), channels_last=bool(knobs.get("channels_last", False)),
            client_procs=knobs.get("pfl_client_procs", 1),
            eval_every=pfl_eval_every(knobs, self.selection, self.rounds, sibling=self.writes_sibling(knobs)),
            dtype=str(knobs.get("pfl_dtype", "float32")), eval_clients=knobs.get("pfl_eval_clients"),
            dataset=self.dataset, model=self.model, algorithm=self.algorithm, clients=self.clients,
            participation=float(self.participation), local_epochs=self.local_epochs, rounds=self.rounds,
            momentum=float(self.momentum), head_lr_ratio=float(self.head_lr), head_init=self.head_init,
            prox_mu=None if self.prox_mu == "default" else float(self.prox_mu), bn=self.bn,
            selection=self.selection, seed=self.seed, **warm,
        )  # fmt: skip

    def source(self) -> PFLTrainJob | None:
        """The training whose selected model starts this one (:attr:`Algorithm.starts_from`: fedbabu App. A.3's
        LG-FedAvg after FedAvg): the same setting, seed and model selection, ``rounds_divisor`` times the rounds;
        None for a run from scratch."""
        algo = ALGORITHMS.get(self.algorithm)
        if algo is None or algo.starts_from is None:
            return None
        return PFLTrainJob(**{**self.train_fields(), "algorithm": algo.starts_from,
                              "rounds": self.rounds * algo.rounds_divisor})  # fmt: skip

    def writes_sibling(self, config: Mapping[str, Any]) -> bool:
        """Whether this run also writes the other model selection's outputs (``pfl_both_selections``): not a run
        started from another training's model, which is that training's selection too (:meth:`source`)."""
        return bool(config.get("pfl_both_selections")) and self.source() is None and self.algorithm not in (
            "local_only", "centralized_full", "centralized_body")  # fmt: skip

    def partition(self) -> dict[str, Any]:
        key = "shards_per_client" if self.scheme == "shards" else "beta"
        value = int(self.scheme_param) if self.scheme == "shards" else float(self.scheme_param)
        return {"kind": self.scheme, key: value, "server_fraction": float(self.server_fraction)}

    def train_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(_PFLFields)}


def measured_executor(config: Mapping[str, Any]) -> bool:
    """Whether the training measures which client executor to use (issue 27, :mod:`benchmark.pfl.executor`):
    ``train_exec: auto`` with ``pfl_measure_exec: true`` (the workflow's default). Without the key (a config
    built in code: the pinned reduced guard) or with it false, ``auto`` is the device rule of
    :meth:`_PFLFields.pfl_config` (lock-step on CUDA, the loop elsewhere), unmeasured; a named executor runs."""
    return str(config.get("train_exec", "auto")) == "auto" and bool(config.get("pfl_measure_exec", False))


def pfl_eval_every(config: Mapping[str, Any], selection: str, rounds: int, *, sibling: bool) -> int:
    """Rounds between evaluations of a pfl training (``pfl_eval_every``; issue 27: evaluate only where the
    selection rule needs it). ``auto``: every round when a ``best`` model is kept (this job's selection, or its
    sibling's under ``pfl_both_selections``: best-on-test needs every round's accuracy), otherwise only after
    the last round (``rounds``), which trains the same model bit for bit
    (``tests/test_pfl_core.py::test_evaluating_only_after_the_last_round_trains_the_same_model``). A number
    gives a sparse curve; with a ``best`` model kept it must be 1."""
    raw = config.get("pfl_eval_every", "auto")
    needs_every_round = selection == "best" or sibling
    if raw in (None, "auto"):
        return 1 if needs_every_round else rounds
    try:
        every = int(raw)
    except (TypeError, ValueError):
        every = 0
    if every < 1 or str(raw).strip() != str(every):
        raise ConfigError(f"pfl_eval_every={raw!r}", "use auto or a whole number of rounds >= 1")
    if needs_every_round and every != 1:
        raise ConfigError(
            f"pfl_eval_every={every} with a best-on-test model kept (pfl_selection: best, or pfl_both_selections)",
            "use pfl_eval_every: 1 (or auto), or pfl_selection: last with pfl_both_selections: false",
        )
    return every


def other_selection(selection: str) -> str:
    """The model selection that is not ``selection`` (``best`` <-> ``last``)."""
    return "last" if selection == "best" else "best"


def planning_configs(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``config``, and with ``pfl_both_selections`` the same config with the other model selection too: one
    training writes both selections' outputs, so a harvest or an import plans the cells of both."""
    configs = [dict(config)]
    if config.get("pfl_both_selections"):
        configs.append({**config, "pfl_selection": other_selection(str(config.get("pfl_selection", "last")))})
    return configs


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

    def checkpoint_file(self) -> Path:
        return checkpoint_for(self.path)

    def inputs(self) -> tuple[Job, ...]:
        source = self.source()
        return () if source is None else (source,)

    def threads(self, config: Mapping[str, Any]) -> int:
        """The CPU threads the training takes: its client processes (``pfl_client_procs``), one thread each."""
        return int(config.get("pfl_client_procs", 1))

    def execute(self, config: Mapping[str, Any]) -> None:
        from benchmark.pfl.run import train_step  # local: heavy import (torch)

        ckpt = self.checkpoint_file()
        sibling = None
        if self.writes_sibling(config):
            sibling = PFLTrainJob(**{**self.train_fields(), "selection": other_selection(self.selection)}).path
        train_step(
            self.pfl_config(config), self.partition(), self.path, device=config.get("device"),
            data_root=config.get("data_root"), checkpoint=ckpt, progress=bool(config.get("progress", True)),
            checkpoint_every=int(config.get("checkpoint_every") or 5), sibling_out=sibling,
            choose_exec=measured_executor(config), exec_cache=[cache_dir(config.get("cache_dir")), Path("results/cache")],
        )  # fmt: skip


@register_job
@dataclass(frozen=True)
class PFLEvalJob(_PFLFields):
    """One evaluation of a training run's selected model, per client: ``initial``, ``personalised`` (fine-tune
    ``ft_part`` for ``ft_epochs`` at ``ft_lr`` with momentum ``ft_momentum``) or ``ncm``."""

    KIND: ClassVar[str] = "pfl_eval"
    RESOURCES: ClassVar[dict[str, Any]] = {"gpu": 1}
    PATTERN: ClassVar[str] = (
        _TRAIN_DIR + "/seed{seed}/{evaluation}-{ft_part}-e{ft_epochs}-lr{ft_lr}-m{ft_momentum}.json"
    )
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
        from benchmark.pfl.personalise import FineTune  # local: heavy import (torch)
        from benchmark.pfl.run import eval_step  # local: heavy import (torch)

        ft = FineTune(self.ft_part, self.ft_epochs, float(self.ft_lr), float(self.ft_momentum))
        eval_step(
            self.training().path, self.evaluation, self.path,
            ft=ft if self.evaluation in ("personalised", "per_fedavg_step") else None,  # the step's momentum
            device=config.get("device"), data_root=config.get("data_root"),
        )  # fmt: skip


# ------------------------------------------------------------------------------------------------ planning
#: fedbabu's head initialisations (Table 24): the paper's names -> ``build_model(head_init=...)``.
HEAD_INITS = {
    "pytorch_default_he_uniform": "default",
    "similar_rows": "similar_rows",
    "orthogonal": "orthogonal",
}
#: Config keys that choose between a paper's protocol for a method and this suite's other version of it:
#: key -> (the algorithm a spec names, {value: the algorithm run}); the first value is the default. fedbabu's
#: LG-FedAvg: App. A.3's training after FedAvg (``after_fedavg``) or from scratch like the other methods
#: (``from_scratch``, the named departure ``lg_fedavg_from_scratch``). fedbabu's Ditto: the method of its citation
#: with App. A.3's lambda and Algorithm 2's fine-tuning (``paper``), or the released ``main_ditto.py`` as written and
#: as it reports (``released``: :data:`~benchmark.pfl.procedures.ditto.ditto_reference`, its personal models after
#: the last round not fine-tuned; the named departure ``ditto_released``).
PROTOCOL_OPTIONS: dict[str, tuple[str, dict[str, str]]] = {
    "pfl_lg_fedavg": ("lg_fedavg", {"after_fedavg": "lg_fedavg_after_fedavg", "from_scratch": "lg_fedavg"}),
    "pfl_ditto": ("ditto", {"paper": "ditto", "released": "ditto_reference"}),
}


def config_choice(config: Mapping[str, Any], key: str, choices: Any) -> str:
    """``config[key]`` (the first of ``choices`` when unset), refused with one error naming the key and the
    choices when it is not one of them."""
    value = str(config.get(key) or next(iter(choices)))
    if value not in choices:
        raise ConfigError(f"{key}={value!r}", f"use one of: {', '.join(choices)}")
    return value


#: fedbabu Algorithm 2 fine-tunes FedRep sequentially (lines 17, 20-21: ``sequential``, the default); ``joint``
#: fine-tunes it like the other methods (line 16), the named departure ``fedrep_joint_fine_tuned``.
FEDREP_FINE_TUNES = {"sequential": "sequential", "joint": "full"}


#: The momentum fedbabu's released FedRep ran at: ``scripts/run_fedrep.sh`` passes no ``--momentum``, so
#: ``utils/options.py``'s default 0.5 reached ``LocalUpdateFedRep`` (training and its per-round fine-tuning), where the
#: other scripts pass 0.9 and Ditto / Per-FedAvg hard-code it. ``pfl_fedrep_momentum: released`` runs FedRep's
#: training and personalisation so (App. D: the fine-tuning's momentum is the training's), the named departure
#: ``fedrep_released_momentum``; ``paper`` (the default) keeps the cell's stated momentum.
FEDREP_RELEASED_MOMENTUM = 0.5
FEDREP_MOMENTA = ("paper", "released")


def momenta(algorithm: str, proto: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[float, float]:
    """(training, fine-tuning) momentum of ``algorithm``'s cell ``proto`` under ``pfl_fedrep_momentum``."""
    train, tune = float(proto.get("momentum", 0.9)), float(proto.get("finetune_momentum", 0.9))
    if algorithm == "fedrep" and config_choice(config, "pfl_fedrep_momentum", FEDREP_MOMENTA) == "released":
        return FEDREP_RELEASED_MOMENTUM, FEDREP_RELEASED_MOMENTUM
    return train, tune


#: How a Per-FedAvg cell's personalised accuracy is measured: ``fine_tune`` = fedbabu Algorithm 2's fine-tuning
#: like every other method (the named departure ``per_fedavg_fine_tuned``), ``released_step`` = the released
#: ``main_per_fedavg.py`` evaluation (:func:`benchmark.pfl.personalise.per_fedavg_step`: every client adapted by
#: one lr step and one beta step on the test images of the last client its round drew; the named departure
#: ``per_fedavg_released_step``). The text's support / query split is not stated precisely enough to build.
PER_FEDAVG_EVALS = {"fine_tune": "personalised", "released_step": "per_fedavg_step"}


def personalised_part(algorithm: str, stated: str, config: Mapping[str, Any]) -> str:
    """The fine-tuning ``part`` of ``algorithm``'s personalised cell whose protocol states ``stated`` (the tables'
    ``full``, or Table 4's ``body`` / ``head``): a stated ``full`` is Algorithm 2's FINE-TUNE of the algorithm
    (:attr:`~benchmark.pfl.algorithms.Algorithm.fine_tune`: body and head together, or FedRep's head then body,
    which also trains both), under ``pfl_fedrep_finetune``."""
    own = get_algorithm(algorithm).fine_tune
    if stated != "full" or own == "full":
        return stated
    return FEDREP_FINE_TUNES[config_choice(config, "pfl_fedrep_finetune", FEDREP_FINE_TUNES)]


def chosen_algorithm(algorithm: str, config: Mapping[str, Any]) -> str:
    """The algorithm a spec's ``algorithm`` runs under ``config``'s :data:`PROTOCOL_OPTIONS`."""
    for key, (named, choices) in PROTOCOL_OPTIONS.items():
        if algorithm == named:
            return choices[config_choice(config, key, choices)]
    return algorithm


#: Cell protocol keys this runner does not implement yet, and why (the cell is NOT RUN with the reason).
UNSUPPORTED = {
    "test_distribution": "the ID/OOD test sets of fedbabu Table 20 are not implemented",
}
#: fedbabu Tables 14/15's ``local_update_parts`` and the part (:mod:`benchmark.pfl.parts`) that the algorithm a
#: cell runs must update locally: the leading conv blocks (the ``fedbabu_conv*`` algorithms), all four (FedBABU's
#: body) or all four and the linear head (FedAvg's full network).
LOCAL_UPDATE_PARTS = {**{part: part for part in CONV_PARTS}, "conv1234": "body", "conv1234_linear": "full"}

#: Epochs of Local-only training: the reference's scripts/run_local.sh (``--epochs 160``; CIFAR-100 only).
LOCAL_ONLY_EPOCHS = 160


def check_local_update_parts(proto: Mapping[str, Any], algorithm: str, where: str) -> None:
    """A cell stating ``local_update_parts`` (fedbabu Tables 14/15) must be routed to an algorithm that updates
    exactly those parts: one clear error naming the spec otherwise, never a table filled by another ablation."""
    parts = proto.get("local_update_parts")
    if parts in (None, "none"):
        return
    if parts not in LOCAL_UPDATE_PARTS:
        raise ConfigError(f"{where}: local_update_parts={parts!r}", f"use one of: {', '.join(LOCAL_UPDATE_PARTS)}")
    trains = get_algorithm(algorithm).local_part
    if trains != LOCAL_UPDATE_PARTS[parts]:
        fit = [a.name for a in ALGORITHMS.values() if a.local_part == LOCAL_UPDATE_PARTS[parts]]
        raise ConfigError(
            f"{where}: a cell updating {parts} is routed to {algorithm!r}, which updates {trains!r}",
            f"route it to one of {fit} (a `when: {{local_update_parts: {parts}}}` rule before the general one)",
        )


def _num(value: Any) -> str:
    return f"{float(value):g}"


def cell_jobs(proto: Mapping[str, Any], algorithm: str, model: str, dataset: str, seeds: tuple[int, ...],
              config: Mapping[str, Any]) -> tuple[tuple[Job, ...], NotRunReason | None]:  # fmt: skip
    """The jobs of one fedbabu cell (one per seed), or ``((), reason)``."""
    for key, why in UNSUPPORTED.items():
        value = proto.get(key)
        if value not in (None, "none"):
            return (), _not_implemented(f"{key}={value!r}", f"{why} ({key}={value!r})")
    if dataset == "emnist":
        return (), NotRunReason(
            ReasonKind.INPUT_NOT_STATED, "the 1,488-client EMNIST partition",
            "the 1,488-client EMNIST partition of fedbabu App. Table 19 (about 450 images per client) is not stated "
            "precisely enough to rebuild, and the gzip release has no writer ids",
        )  # fmt: skip
    if algorithm == "local_only":  # each client alone for LOCAL_ONLY_EPOCHS epochs (benchmark/pfl/local_only.py)
        proto = {**proto, "participation": 1.0, "local_epochs": 1, "rounds": LOCAL_ONLY_EPOCHS,
                 "stage": "initial" if proto.get("stage") == "local_only" else proto.get("stage")}  # fmt: skip
    if proto.get("server_update") not in (None, "none") or float(proto.get("server_data_fraction") or 0) > 0:
        return (), _not_implemented("FedBABU+ with server data",
                                    "FedBABU+ with server data (fedbabu Tables 2/21, p > 0) is not implemented")  # fmt: skip
    part = proto.get("partition") or {}
    if part.get("kind") == "shards" and part.get("shards_per_user"):
        scheme, param = "shards", str(int(part["shards_per_user"]))
    elif part.get("kind") == "dirichlet" and part.get("beta"):
        scheme, param = "dirichlet", _num(part["beta"])
    else:
        return (), NotRunReason(ReasonKind.INPUT_NOT_STATED, "s or beta", f"partition {part!r} states no s or beta")
    if proto.get("setting") == "centralized":  # Table 9: epochs over the union of the clients' data
        proto = {**proto, "participation": 1.0, "local_epochs": 1, "rounds": int(proto["centralized_epochs"])}
    for key in ("participation", "local_epochs", "rounds"):
        if proto.get(key) is None:
            return (), NotRunReason(ReasonKind.INPUT_NOT_STATED, key, f"the cell states no {key}")
    divisor = get_algorithm(algorithm).rounds_divisor  # a run after another: a share of the cell's R
    if int(proto["rounds"]) % divisor:
        what = f"{algorithm} after R = {proto['rounds']} rounds"
        return (), _not_implemented(what, f"{what}: R is not a multiple of {divisor}")
    head_init = HEAD_INITS.get(str(proto.get("head_init", "pytorch_default_he_uniform")))
    if head_init is None:
        what = f"head_init {proto.get('head_init')!r}"
        return (), _not_implemented(what, f"{what} is not implemented")
    from benchmark.pfl.models import pfl_model_info  # local: heavy import (torch)

    momentum, ft_momentum = momenta(algorithm, proto, config)
    base = dict(
        dataset=dataset, model=model, bn=pfl_model_info(model).default_bn, scheme=scheme, scheme_param=param,
        clients=int(proto.get("clients") or 100), server_fraction="0", algorithm=algorithm,
        participation=_num(proto["participation"]), local_epochs=int(proto["local_epochs"]),
        rounds=int(proto["rounds"]) // divisor, momentum=_num(momentum),
        head_lr=_num(proto.get("head_lr_ratio", 1.0)), head_init=head_init,
        prox_mu=_num(proto["fedprox_mu"]) if proto.get("fedprox_mu") is not None else "default",
        selection=str(config.get("pfl_selection", "last")),
    )  # fmt: skip
    stage = proto.get("stage")
    classifier = proto.get("classifier", "trained_head")
    if (stage == "initial" or (stage == "personalized" and get_algorithm(algorithm).fine_tune == "none")) and (
        classifier == "trained_head"
    ):  # a personalised cell of an algorithm reported as trained (released Ditto): the training's own evaluation
        return tuple(PFLTrainJob(**base, seed=s) for s in seeds), None
    if stage == "initial" and classifier == "nearest_template_cosine":
        ev = dict(evaluation="ncm_" + str(config.get("pfl_ncm_metric", "cosine")), ft_part="none", ft_epochs=0,
                  ft_lr="0", ft_momentum="0")  # fmt: skip
    elif (stage == "personalized" and classifier == "trained_head"
          and get_algorithm(algorithm).procedure.startswith("per_fedavg")
          and config_choice(config, "pfl_per_fedavg_eval", PER_FEDAVG_EVALS) == "released_step"):  # fmt: skip
        ev = dict(evaluation="per_fedavg_step", ft_part="none", ft_epochs=0, ft_lr="0", ft_momentum=_num(ft_momentum))
    elif stage == "personalized" and classifier == "trained_head":
        ev = dict(evaluation="personalised",
                  ft_part=personalised_part(algorithm, str(proto.get("finetune_part") or "full"), config),
                  ft_epochs=int(proto.get("finetune_epochs", 5)), ft_lr=_num(proto.get("finetune_lr") or 1e-3),
                  ft_momentum=_num(ft_momentum))  # fmt: skip
    else:
        what = f"stage {stage!r} with classifier {classifier!r}"
        return (), _not_implemented(what, f"{what} is not implemented")
    return tuple(PFLEvalJob(**base, seed=s, **ev) for s in seeds), None


def _not_implemented(what: str, detail: str) -> NotRunReason:
    return NotRunReason(ReasonKind.NOT_IMPLEMENTED, what, detail)


#: Images of the CIFAR-10 / CIFAR-100 train and test splits, which the shards scheme deals out among the clients.
CIFAR_TRAIN, CIFAR_TEST = 50_000, 10_000
#: Images per client of the Dirichlet scheme (benchmark.pfl.partition.DirichletPartitioner's defaults).
DIRICHLET_TRAIN_PER_CLIENT, DIRICHLET_TEST_PER_CLIENT = 500, 100
#: Forward-only images per training image's cost (one forward vs forward + backward + step: 1F vs 3F).
FORWARD_SPEEDUP = 3.0


def images_per_client(job: Any) -> tuple[int, int]:
    """(train, test) images of one client: the split shared among the K clients (shards: 500 / 100 for K = 100,
    100 / 20 for fedbabu Table 11's K = 500), or the Dirichlet scheme's fixed 500 / 100."""
    if job.scheme == "shards":
        return CIFAR_TRAIN // job.clients, CIFAR_TEST // job.clients
    return DIRICHLET_TRAIN_PER_CLIENT, DIRICHLET_TEST_PER_CLIENT


def sampled_clients(job: Any) -> int:
    """Clients sampled per round: fedbabu's ``max(int(fK), 1)``."""
    return max(int(float(job.participation) * job.clients), 1)


def training_images(job: Any) -> int:
    """Training images of a pfl training: rounds x sampled clients x tau x images per client."""
    return job.rounds * sampled_clients(job) * job.local_epochs * images_per_client(job)[0]


def training_passes(job: Any) -> int:
    """Images a pfl training passes forward and backward: rounds x sampled clients x its local procedure's passes
    per client (:func:`benchmark.pfl.work.local_passes`): FedAvg's :func:`training_images`, twice that for
    Ditto, ``(tau + 1) / tau`` times for FedRep, 2.2 / 0.6 / 0.4 times for Per-FedAvg at tau = 1 / 4 / 10."""
    passes = get_algorithm(job.algorithm).local_passes(images_per_client(job)[0], job.local_epochs)
    return job.rounds * sampled_clients(job) * passes


def pfl_job_seconds(job: Any, machine: str, config: Mapping[str, Any]) -> float | None:
    """Estimated seconds of one :class:`PFLTrainJob` (its :func:`training_passes` plus the evaluations its
    selection rule needs) or :class:`PFLEvalJob` (every client's evaluation, plus the personalisation's
    fine-tuning) on ``machine`` (``cpu`` / ``h100``) at the throughput table's rate for the model (an idle
    machine's), wall time: a training's passes shared among its ``pfl_client_procs`` processes; None without a
    rate."""
    rate = native_rate(machine, job.model)
    if rate is None:
        return None
    train, test = images_per_client(job)
    if job.KIND == "pfl_train":
        every = pfl_eval_every(config, job.selection, job.rounds, sibling=job.writes_sibling(config))
        evaluated = len(set(range(every, job.rounds + 1, every)) | {job.rounds})  # and always after the last round
        evals = evaluated * job.clients * test  # every client evaluated
        procs = min(job.threads(config), sampled_clients(job))  # the round's clients side by side, one core each
        return training_passes(job) / (rate * procs) + evals / (rate * FORWARD_SPEEDUP)
    evals = job.clients * (test + train) / (rate * FORWARD_SPEEDUP)
    if job.evaluation == "per_fedavg_step":  # two batches of 50 per client, no pass over its training images
        return job.clients * test / (rate * FORWARD_SPEEDUP) + job.clients * 2 * 50 / rate
    if job.evaluation != "personalised":
        return evals
    epochs = job.ft_epochs + (job.ft_part == "sequential")  # FedRep's body epoch after its head epochs
    return evals + job.clients * epochs * train / rate


def estimate(jobs: tuple[Job, ...], seeds: int, config: Mapping[str, Any]) -> str:
    """A NOT RUN cell's cost: its training images per seed (rounds x sampled clients x tau x images per client;
    the centralised and Local-only runs are such runs too) and the CPU-hours of all its jobs here, training,
    the evaluations its selection needs and its own evaluation or personalisation (:func:`pfl_job_seconds`, an
    idle machine's rates)."""
    every = job_closure(jobs)
    trains = [j for j in every if j.KIND == "pfl_train"]  # with the training a run starts from (LG-FedAvg's)
    per_seed = sum(training_images(j) for j in trains) / max(seeds, 1)
    what = f"{seeds} seed(s) x {per_seed / 1e6:.2f} M training images" if trains else ""
    one_core = {**config, "pfl_client_procs": 1}  # CPU-hours: the same whatever the processes a round is split over
    secs = [pfl_job_seconds(j, "cpu", one_core) for j in every if j.KIND in ("pfl_train", "pfl_eval")]
    if secs and all(s is not None for s in secs):
        what += f", about {sum(secs) / 3600:.1f} CPU-hours on this suite's 2-core CPU (training and evaluations)"
    return what.lstrip(", ")


class PFLRunner(Runner):
    """Routes fedbabu cells to :class:`PFLTrainJob` / :class:`PFLEvalJob` (module docstring)."""

    name = "pfl"
    needs_data = False  # trains from scratch: no weights; the dataset is checked here

    def plan(self, spec, rule, plan, config: Mapping[str, Any]):
        proto = plan.cell.protocol
        plan.dataset = _alias(spec, "dataset", proto.get("dataset"))
        plan.model = _alias(spec, "model", proto.get("model"))
        plan.params = dict(rule.params)
        plan.weights = "none (trained from scratch)"
        algorithm = rule.params.get("methods", {}).get(proto.get("method"))
        if algorithm is None:
            plan.not_run = not_implemented_method(proto.get("method"), "the pfl runner")
            return plan
        algorithm = chosen_algorithm(algorithm, config)
        plan.method = algorithm
        source = ALGORITHMS[algorithm].starts_from if algorithm in ALGORITHMS else None
        if source is not None:  # LG-FedAvg after FedAvg (App. A.3): not from scratch
            plan.weights = f"none (starts from the {source} model of its setting, itself trained from scratch)"
        from benchmark.pfl.models import pfl_model_info  # local: heavy import (torch)

        if proto.get("model_readings"):
            readings = "; ".join(f"{r['value']} ({r['source']})" for r in proto["model_readings"])
            plan.not_run = NotRunReason(ReasonKind.INPUT_NOT_STATED, "which network the table used",
                                        f"the paper names more than one network for this table: {readings}")  # fmt: skip
            return plan
        try:
            pfl_model_info(str(plan.model))
        except UnknownNameError as err:
            plan.not_run = NotRunReason(ReasonKind.NOT_IMPLEMENTED, f"a model {plan.model}", err.what, err.fix)
            return plan
        if algorithm not in ALGORITHMS:
            plan.not_run = _not_implemented(f"algorithm {algorithm!r}",
                                            f"algorithm {algorithm!r} is not implemented in benchmark/pfl/algorithms.py")  # fmt: skip
            return plan
        check_local_update_parts(proto, algorithm, f"{spec.target} cell {plan.cell.id}")  # before any NOT RUN
        missing = dataset_blocker(plan.dataset, config.get("data_root"))
        if missing:
            plan.not_run = missing
            return plan
        jobs, why = cell_jobs(proto, algorithm, plan.model, plan.dataset, spec.seeds, config)
        if why:
            plan.not_run = why
            return plan
        if not training_allowed(config):
            size = estimate(jobs, len(spec.seeds), config)
            source = get_algorithm(algorithm).starts_from
            how = "from scratch" if source is None else f"after the {source} training of its setting"
            plan.not_run = needs_training(
                f"training {how}", f"federated training {how} ({algorithm}, {plan.model}) needs a GPU: {size}"
            )
            return plan
        plan.jobs = jobs
        plan.protocol = "fedbabu"
        plan.status = "planned"
        return plan

    def collect(self, spec, plan, labels, settings) -> CellResult:
        """Per seed the mean accuracy across clients; rows: every client's accuracy, the mean and the std
        across clients (ddof 0); the std across clients (mean over seeds) goes to the table beside ours."""
        from benchmark.tidy import make_row  # local: heavy import (pandas)

        values, rows, stds, sel = [], [], [], []
        for job in plan.jobs:
            rec = read_verified_json(job.path)
            per_client = rec["initial"]["per_client"] if job.KIND == "pfl_train" else rec["per_client"]
            acc = np.asarray(per_client, dtype=float)
            values.append(float(acc.mean()))
            stds.append(float(acc.std()))
            sel.append(int(rec["selected_round"]))
            common = dict(
                paper=spec.paper, table=spec.table, cell=plan.cell.id, dataset=plan.dataset, model=plan.model,
                weights="none", method=plan.method, fl_algorithm=plan.method, partition=f"{job.scheme}{job.scheme_param}",
                clients=job.clients, participation=float(job.participation), seed=job.seed, unit="percent",
                protocol="fedbabu", git_commit=rec.get("git_commit"), versions=rec.get("versions"),
                machine=rec.get("machine"),
            )  # fmt: skip
            rows.append(
                make_row(**common, metric="accuracy", value=float(acc.mean()), note="mean over clients")
            )
            rows.append(make_row(**common, metric="client_accuracy_std", value=float(acc.std()),
                                 note="std across clients, ddof 0"))  # fmt: skip
            rows.extend(make_row(**common, metric="client_accuracy", value=float(a), note=f"client={i}")
                        for i, a in enumerate(acc))  # fmt: skip
        client_std = float(np.mean(stds))
        note = f"± across clients (ddof 0): ours {client_std:.2f}; selected round(s) {sel}"
        if len(values) > 1:  # the seeds apart: a wide spread between them widens the tolerance (expected/README.md)
            seeds = ", ".join(str(j.seed) for j in plan.jobs)
            note += f"; seeds {seeds}: {' / '.join(f'{v:.2f}' for v in values)}"
        return CellResult(values, rows, note=note, departures=cell_departures(plan, sel),
                          extra={"std_over": "clients", "ours_client_std": client_std})  # fmt: skip

    def artefacts(self, plan) -> dict[str, list[str]]:
        curves = []
        for job in plan.jobs:
            train = job if job.KIND == "pfl_train" else job.training()
            if Path(train.curve_path).is_file():
                curves.append(train.curve_path)
        return {"curves": curves}


def cell_departures(plan, selected_rounds: list[int]) -> tuple[str, ...]:
    """Where a pfl cell departs from the setup fedbabu states: a model chosen on the test sets (the reference's
    best model) instead of the last one (App. A), and the algorithm's own named departures
    (:class:`~benchmark.pfl.algorithms.Algorithm`), its personalised ones where the cell is personalised."""
    names = []
    if any(r != j.rounds for r, j in zip(selected_rounds, plan.jobs, strict=True)):
        names.append("selected_on_test")
    algorithm = ALGORITHMS[str(plan.method)]
    names.extend(algorithm.departures)
    if any(getattr(j, "evaluation", None) == "personalised" for j in plan.jobs):
        names.extend(algorithm.personalised_departures)
        if algorithm.fine_tune != "full" and any(getattr(j, "ft_part", None) == "full" for j in plan.jobs):
            names.append("fedrep_joint_fine_tuned")  # Algorithm 2's sequential fine-tuning not applied
    if any(getattr(j, "evaluation", None) == "per_fedavg_step" for j in plan.jobs):
        names.append("per_fedavg_released_step")
    if algorithm.name == "fedrep" and any(float(j.momentum) != float(plan.cell.protocol.get("momentum", 0.9))
                                          for j in plan.jobs):  # fmt: skip
        names.append("fedrep_released_momentum")
    return tuple(names)


register_runner(PFLRunner())
