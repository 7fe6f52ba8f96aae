"""The ``fl_train`` runner: full-model federated training on real images (legate2023 FT, FedNCM+FT, Random,
LP->FT under FedAvg / FedProx / FedAdam; fedcof FT and Fed3R/FedCOF+FT), one :class:`FLTrainJob` per seed.

The spec maps ``<dataset>@<image_size>`` (or ``<dataset>``) to a training protocol of
``benchmark/protocols/fl_train.yaml`` (:mod:`benchmark.fl.train_protocols`) and each paper method label to
``<method>`` or ``<method>@<algorithm>``; the algorithm is otherwise the cell's ``fl_algorithm`` (FedAvg when the
cell states none). Learning rates the paper tuned without printing are tuned first: one :class:`FLTuneJob` per
grid point on a validation split of the training set and an :class:`LRChoiceJob` that records the winner, which
every seed's training job reads (unless a recorded choice is in ``benchmark/fl/lr_grid/train/``).

Planning does not depend on the machine it runs on, only on the config: with ``device: cuda`` (or
``cpu_training: true``) every cell the data and weights allow is planned; otherwise the cell is NOT RUN with an
estimate of its cost (:mod:`benchmark.fl.estimate`) and how to run it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from benchmark.data.registry import dataset_info, split_size
from benchmark.data.subsets import parse_subset
from benchmark.errors import BenchmarkError, ConfigError
from benchmark.federated.precision_values import check_value
from benchmark.fl.estimate import describe, run_cost
from benchmark.fl.train_protocols import TrainProtocol, get_train_protocol
from benchmark.fl.train_tuning import choose_lr
from benchmark.io import read_verified_json
from benchmark.jobs import Job, PartitionJob, checkpoint_for, partition_tag, register_job
from benchmark.reasons import NotRunReason, ReasonKind, needs_training
from benchmark.runners import CellResult, register_runner
from benchmark.runners._features import ProtocolRunner, collect_runs, report_metric, run_preprocess
from benchmark.tables.availability import training_allowed

#: Recorded learning-rate choices (committed tuning records, e.g. from a GPU run): used instead of re-tuning.
RECORDED_LR_DIR = Path(__file__).resolve().parents[1] / "fl" / "lr_grid" / "train"
_TRAIN = (
    "results/runs/fl_train/{dataset}/{model}-{weights}/{preprocess}/{subset}/{ptag}/{protocol}/"
    "{algorithm}/{method}/{train_precision}/seed{seed}.csv"
)
_TUNE = (
    "results/runs/fl_tune/{dataset}/{model}-{weights}/{preprocess}/{subset}/{protocol}/"
    "{algorithm}/{method}/{train_precision}"
)


@dataclass(frozen=True)
class LearningRates:
    """The client and server learning rates a training job uses, typed from the protocol (or a tuning
    record) to the run's record: ``None`` = the protocol's stated value; ``choice`` says where they came
    from (written into the run's record as ``lr_choice``)."""

    client: float | None
    server: float | None
    choice: Mapping[str, Any]


def recorded_choice_path(protocol: str, algorithm: str, method: str) -> Path:
    return RECORDED_LR_DIR / f"{protocol}-{algorithm}-{method}.json"


#: ``lr_search``: how a learning rate the paper tuned is chosen when no choice is recorded: ``grid`` (every grid
#: point to full length, :class:`LRChoiceJob`) or ``halving`` (successive halving, :class:`LRHalvingJob`).
LR_SEARCHES = ("grid", "halving")


@dataclass(frozen=True)
class HalvingSettings:
    """Successive halving's settings (``--config lr_halving_eta=3 lr_halving_keep=2``). keep 2 by default: two
    points run to full length, so that a tie or near tie at the last short rung is decided at full length
    (``docs/runs/lr_halving_cpu``: with keep 1 a tie at 9 of 27 rounds picked another point than the full grid)."""

    eta: int = 3
    keep: int = 2

    @property
    def lr_from(self) -> str:
        """The training job's ``lr_from`` (its path segment) for a choice by this search."""
        return f"halving-eta{self.eta}-keep{self.keep}"

    @classmethod
    def from_lr_from(cls, lr_from: str) -> HalvingSettings:
        eta, sep, keep = lr_from.removeprefix("halving-eta").partition("-keep")
        if not (lr_from.startswith("halving-eta") and sep and eta.isdigit() and keep.isdigit()):
            raise ConfigError(f"lr_from {lr_from!r} is not halving-eta<E>-keep<K>", "e.g. halving-eta3-keep2")
        return cls(int(eta), int(keep))

    def rungs(self, proto: TrainProtocol, method: str, points: int) -> list[Any]:
        """The rungs of a search over ``points`` grid points of ``method`` under ``proto``
        (:func:`benchmark.fl.lr_halving.rungs`: the method's real rounds, its evaluation interval)."""
        from benchmark.fl.lr_halving import rungs

        return rungs(points, proto.real_rounds(method), eta=self.eta, keep=self.keep, interval=proto.eval_interval())

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> HalvingSettings:
        try:
            out = cls(int(config.get("lr_halving_eta", 3)), int(config.get("lr_halving_keep", 2)))
        except (TypeError, ValueError):
            raise ConfigError("lr_halving_eta and lr_halving_keep must be integers", "e.g. lr_halving_eta=3") from None
        if out.eta < 2 or out.keep < 1:
            raise ConfigError(f"lr_halving_eta={out.eta}, lr_halving_keep={out.keep}: eta must be >= 2 and keep >= 1",
                              "e.g. lr_halving_eta=3 lr_halving_keep=2")  # fmt: skip
        return out


def lr_source(proto: TrainProtocol, algorithm: str, method: str, config: Mapping[str, Any]) -> str:
    """A training job's ``lr_from``: ``stated`` by the protocol, ``recorded`` (a committed choice), else chosen by
    the config's ``lr_search`` (``tuned`` = the full grid, or ``halving-eta<E>-keep<K>``). An unknown
    ``lr_search`` is one :class:`ConfigError`."""
    search = str(config.get("lr_search", "grid"))
    if search not in LR_SEARCHES:
        raise ConfigError(f"lr_search={search!r} is not one of {', '.join(LR_SEARCHES)}", "e.g. lr_search=halving")
    if not proto.algorithm(algorithm).tuned:
        return "stated"
    if recorded_choice_path(proto.name, algorithm, method).is_file():
        return "recorded"
    if search == "halving" and proto.method(method).engine != "lp_ft":
        return HalvingSettings.from_config(config).lr_from
    return "tuned"


@dataclass(frozen=True)
class _TrainFields(Job):
    """The fields every job of one (protocol, algorithm, method) shares."""

    dataset: str
    model: str
    weights: str
    preprocess: str
    subset: str
    protocol: str
    algorithm: str
    method: str
    train_precision: str

    def train_fields(self) -> dict[str, Any]:
        """This job's :class:`_TrainFields` values (to build another job of the same method)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(_TrainFields)}


@dataclass(frozen=True)
class _TrainRun(_TrainFields):
    """A training run (:func:`benchmark.fl.jobs.train_step`): tidy rows at :attr:`path`, its per-round curve at
    :attr:`curve_path`, its record at :attr:`record_path`, checkpoints outside the outputs (so a failed or killed
    job keeps them for the rerun)."""

    @property
    def curve_path(self) -> str:
        return self.path.removesuffix(".csv") + ".curve.csv"

    @property
    def record_path(self) -> str:
        return self.path.removesuffix(".csv") + ".record.json"

    def checkpoint_file(self) -> Path:
        return checkpoint_for(self.path)

    def _request(self, config: Mapping[str, Any], **kw: Any) -> Any:
        """The :class:`~benchmark.fl.jobs.TrainRequest` this job runs under ``config``."""
        from benchmark.fl.jobs import TrainRequest  # local: heavy import (pandas, scipy, torch)

        device = config.get("device") or "auto"
        exec_ = config.get("train_exec", "auto")
        if exec_ == "auto":
            exec_ = "vectorised" if str(device).startswith("cuda") else "loop"
        from benchmark.federated.precision import precision_from  # local: torch

        checkpoint = self.checkpoint_file()
        return TrainRequest(
            protocol=self.protocol, method=self.method, algorithm=self.algorithm, weights=self.weights,
            subset=self.subset, device=device, amp=precision_from(train_precision=self.train_precision).amp,
            client_exec=exec_,
            vector_chunk=int(config.get("train_chunk", 10)), channels_last=bool(config.get("channels_last", False)),
            data_root=config.get("data_root"), weights_dir=config.get("weights_dir"),
            progress=bool(config.get("progress", True)), checkpoint=checkpoint, preprocess=self.preprocess, **kw,
        )  # fmt: skip

    def _train(self, request: Any) -> None:
        from benchmark.fl.jobs import train_step  # local: heavy import (pandas, scipy, torch)

        train_step(request, out=self.path, curve=self.curve_path, record=self.record_path)


@register_job
@dataclass(frozen=True)
class FLTuneJob(_TrainRun):
    """One grid point of a tuned learning rate: the method trained on the training split minus a validation
    share, evaluated on that share (seed 0)."""

    KIND: ClassVar[str] = "fl_tune"
    RESOURCES: ClassVar[dict[str, Any]] = {"gpu": 1}  # the generated rule's resources (plugins.smk)
    PATTERN: ClassVar[str] = _TUNE + "/lrc{client_lr}_s{server_lr}.csv"
    client_lr: float
    server_lr: float

    def execute(self, config: Mapping[str, Any]) -> None:
        lrs = {"client_lr": self.client_lr, "server_lr": self.server_lr}
        self._train(self._request(config, seed=0, holdout="validation", lr_choice={"grid_point": lrs}, **lrs))


@register_job
@dataclass(frozen=True)
class LRChoiceJob(_TrainFields):
    """The tuned learning rate(s) of one (protocol, algorithm, method): the grid point with the best selected
    validation accuracy (ties: the first in grid order), with every point's accuracy."""

    KIND: ClassVar[str] = "fl_lr_choice"
    PATTERN: ClassVar[str] = _TUNE + "/choice.json"

    def grid(self) -> list[FLTuneJob]:
        pairs = get_train_protocol(self.protocol).lr_grid(self.algorithm)
        return [FLTuneJob(**self.train_fields(), client_lr=float(c), server_lr=float(s)) for c, s in pairs]

    def inputs(self) -> tuple[Job, ...]:
        return tuple(self.grid())

    def execute(self, config: Mapping[str, Any]) -> None:
        choose_lr(
            [(j.client_lr, j.server_lr, Path(j.path)) for j in self.grid()], out=self.path,
            what={"protocol": self.protocol, "algorithm": self.algorithm, "method": self.method},
        )  # fmt: skip


@register_job
@dataclass(frozen=True)
class LRHalvingJob(_TrainFields):
    """The tuned learning rate(s) of one (protocol, algorithm, method) by successive halving over the same grid
    (:mod:`benchmark.fl.lr_halving`): each grid point is its :class:`FLTuneJob`'s training, stopped at the rungs
    and continued from its checkpoint, so a survivor's full-length run writes that grid point's own outputs, bit
    for bit; the choice among the full-length survivors is :func:`choose_lr`'s rule. The record is the grid
    choice's (``choice``, ``val_accuracy``, ``grid`` = the full-length points) plus ``search``: the rule, ``eta``,
    ``keep``, every rung's rounds and scores, the eliminated points, the point-rounds trained and the full grid's."""

    KIND: ClassVar[str] = "fl_lr_halving"
    RESOURCES: ClassVar[dict[str, Any]] = {"gpu": 1}  # it trains the grid points (plugins.smk)
    PATTERN: ClassVar[str] = _TUNE + "/halving-eta{eta}-keep{keep}.json"
    eta: int
    keep: int

    def grid_choice(self) -> LRChoiceJob:
        return LRChoiceJob(**self.train_fields())

    def plan(self) -> list[Any]:
        """The search's rungs (:meth:`HalvingSettings.rungs`)."""
        settings = HalvingSettings(self.eta, self.keep)
        return settings.rungs(get_train_protocol(self.protocol), self.method, len(self.grid_choice().grid()))

    def execute(self, config: Mapping[str, Any]) -> None:
        from benchmark.fl.train_tuning import run_search

        proto = get_train_protocol(self.protocol)
        if proto.method(self.method).engine == "lp_ft":
            raise ConfigError(f"{self.method}: successive halving stops one round stage; lp_ft has two",
                              "use lr_search=grid for this method")  # fmt: skip
        run_search(self, self.grid_choice().grid(), self.plan(), config, out=self.path)


@register_job
@dataclass(frozen=True)
class FLTrainJob(_TrainRun):
    """One seed of full-model federated training. ``lr_from``: ``stated`` (the protocol's values), ``tuned`` (the
    :class:`LRChoiceJob` of this run) or ``recorded`` (a committed tuning record)."""

    KIND: ClassVar[str] = "fl_train"
    RESOURCES: ClassVar[dict[str, Any]] = {"gpu": 1}
    PATTERN: ClassVar[str] = _TRAIN.replace("/seed{seed}.csv", "/{lr_from}/seed{seed}.csv")
    ptag: str
    lr_from: str
    seed: int

    def choice(self) -> LRChoiceJob | LRHalvingJob:
        """The job choosing this run's learning rate (``lr_from``: ``tuned`` or ``halving-...``)."""
        if self.lr_from.startswith("halving"):
            h = HalvingSettings.from_lr_from(self.lr_from)
            return LRHalvingJob(**self.train_fields(), eta=h.eta, keep=h.keep)
        return LRChoiceJob(**self.train_fields())

    def partition(self) -> PartitionJob:
        return PartitionJob(self.dataset, self.subset, self.ptag, self.seed)

    def inputs(self) -> tuple[Job, ...]:
        extra: tuple[Job, ...] = (self.choice(),) if self.lr_from not in ("stated", "recorded") else ()
        return (self.partition(), *extra)

    def learning_rates(self) -> LearningRates:
        """The rates this seed trains with (``lr_from``): stated by the protocol, or read from the tuning
        record (the :class:`LRChoiceJob`'s output, or a committed one)."""
        if self.lr_from == "stated":
            return LearningRates(None, None, {"source": "stated by the protocol"})
        path = (
            recorded_choice_path(self.protocol, self.algorithm, self.method)
            if self.lr_from == "recorded"
            else self.choice().path
        )
        try:
            rec = read_verified_json(path, fix="delete it and re-run the tuning")
            chosen = rec["choice"]
            return LearningRates(float(chosen["client_lr"]), float(chosen["server_lr"]), {"source": str(path), **rec})
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ConfigError(
                f"{path}: not a learning-rate choice ({err})", "delete it and re-run the tuning"
            ) from None

    def request(self, config: Mapping[str, Any]) -> Any:
        """What :meth:`execute` trains (also what the pinned reduced guard trains, in process)."""
        lrs = self.learning_rates()
        return self._request(
            config, seed=self.seed, client_lr=lrs.client, server_lr=lrs.server, lr_choice=lrs.choice,
            partition=Path(self.partition().path), checkpoint_every=int(config.get("checkpoint_every", 20)),
        )  # fmt: skip

    def execute(self, config: Mapping[str, Any]) -> None:
        self._train(self.request(config))


# ------------------------------------------------------------------------------------------------ planning
def _method_algorithm(label: str, cell_algorithm: Any) -> tuple[str, str]:
    method, _, algorithm = str(label).partition("@")
    return method, algorithm or str(cell_algorithm or "fedavg")


@lru_cache(maxsize=32)
def _split_size(dataset: str, split: str, subset: str, root: str | None) -> int | None:
    """Images of a split after the subset, without downloading anything (``None``: not here yet)."""
    try:
        size = split_size(dataset, split, root)
    except BenchmarkError:
        return None
    kind, per_class = parse_subset(subset)
    return size if kind != "stratified" else int(per_class) * dataset_info(dataset).num_classes


def cell_estimate(
    proto: Any, method: str, algorithm: str, seeds: int, root: str | None, image_size: Any,
    config: Mapping[str, Any] | None = None,
) -> str:  # fmt: skip
    """The cost of a cell's runs (its seeds plus the learning-rate search it needs: the full grid, or successive
    halving over it with ``lr_search: halving``), as :func:`benchmark.fl.estimate.describe` states it."""
    n_train = _split_size(proto.dataset, "train", proto.subset, root)
    n_test = _split_size(proto.dataset, "test", proto.subset, root)
    if n_train is None or n_test is None:
        return f"{seeds} seed(s); the cost is estimated once the data is here"
    rounds = proto.real_rounds(method) + proto.method(method).lp_stage_rounds
    one = run_cost(proto.images_per_round(n_train), rounds, proto.eval_interval(), n_test)
    total = one * seeds
    grid = proto.lr_grid(algorithm)
    source = lr_source(proto, algorithm, method, config or {})
    tuned = source not in ("stated", "recorded")
    if tuned:
        points = float(len(grid))
        search = f"a {len(grid)}-point learning-rate grid"
        if source != "tuned":
            from benchmark.fl.lr_halving import rounds_spent

            plan = HalvingSettings.from_lr_from(source).rungs(proto, method, len(grid))
            points = rounds_spent(plan) / plan[-1].rounds
            search = f"successive halving over a {len(grid)}-point learning-rate grid ({points:.2f} full runs)"
        total = total + one * (points * (1 - proto.val_fraction))
    what = f"{seeds} seed(s)" + (f" + {search}" if tuned else "")
    return f"{what}: {describe(total, proto.backbone, int(image_size or 224))}"


class FLTrainRunner(ProtocolRunner):
    name = "fl_train"
    catalogue = "benchmark/protocols/fl_train.yaml"

    get_protocol = staticmethod(get_train_protocol)

    def plan_under(self, proto: TrainProtocol, spec, plan, config: Mapping[str, Any]):
        name, image_size = proto.name, plan.cell.protocol.get("image_size")
        method, algorithm = _method_algorithm(str(plan.method), plan.cell.protocol.get("fl_algorithm"))
        if method not in proto.methods or algorithm not in proto.algorithms:
            plan.not_run = NotRunReason(
                ReasonKind.NOT_IMPLEMENTED, f"{method} under {algorithm} in {name}",
                f"training protocol {name} has no {method} under {algorithm} (methods: {', '.join(proto.methods)}; "
                f"algorithms: {', '.join(proto.algorithms)})",
            )  # fmt: skip
            return plan
        plan.protocol = name
        plan.method = method
        plan.params = {**plan.params, "algorithm": algorithm}
        if not training_allowed(config):
            est = cell_estimate(
                proto, method, algorithm, len(spec.seeds), config.get("data_root"), image_size, config
            )
            plan.not_run = needs_training(
                "full-backbone training", f"full-model training ({name}: {method} under {algorithm}) needs a GPU: {est}"
            )
            return plan
        lr_from = lr_source(proto, algorithm, method, config)
        train_precision = str(config.get("train_precision", "fp32"))
        check_value("train_precision", train_precision)  # an unknown value is a ConfigError naming the field
        plan.jobs = tuple(
            FLTrainJob(
                dataset=plan.dataset,
                model=plan.model,
                weights=plan.weights,
                preprocess=run_preprocess(proto.preprocess, config),
                subset=proto.subset if proto.subset != "all" else str(config.get("table_subset", "all")),
                protocol=name,
                algorithm=algorithm,
                method=method,
                train_precision=train_precision,
                ptag=partition_tag(proto.partition()),
                lr_from=lr_from,
                seed=s,
            )
            for s in spec.seeds
        )
        plan.status = "planned"
        return plan

    def collect(self, spec, plan, labels, settings) -> CellResult:
        """Accuracy per seed; the note gives the learning rates used and the run's communication, measured
        (the tensors that crossed the wire) beside the App. A arithmetic the cost cells print."""
        import pandas as pd  # local: heavy import (pandas)

        from benchmark.tidy import read_tidy  # local: heavy import (pandas)

        res = collect_runs(spec, plan, report_metric(settings))
        if res.reason:
            return res
        runs = pd.concat([read_tidy(j.path) for j in plan.jobs], ignore_index=True)
        mean = runs.groupby("metric")["value"].mean()
        parts = [f"{m.replace('_', ' ')} {mean[m]:g}" for m in ("client_lr", "server_lr") if m in mean]
        arith = mean.get("uplink_bytes", 0) + mean.get("downlink_bytes", 0)
        if "uplink_bytes_measured" in mean:
            measured = mean["uplink_bytes_measured"] + mean.get("downlink_bytes_measured", 0)
            parts.append(
                f"communication {measured / 1e9:.4g} GB measured, {arith / 1e9:.4g} GB by App. A arithmetic"
            )
        res.note = "; ".join(parts)
        return res

    def artefacts(self, plan) -> dict[str, list[str]]:
        """The per-round curves of the cell's seeds (plotted beside the table)."""
        return {"curves": [j.curve_path for j in plan.jobs if Path(j.curve_path).is_file()]}


register_runner(FLTrainRunner())
