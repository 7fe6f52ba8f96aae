"""The runs behind legate2023's CIFAR-10 figures: which jobs each series needs under a config, why a series
is not run, and the numbers the runs produced.

A figure series is one paper method at one federated setting (:class:`Setting`: Dirichlet alpha, clients K,
local epochs E). Where its numbers come from:

* **FedNCM** (legate2023 Alg. 1, line 71): the closed-form protocol ``legate2023`` on cached SqueezeNet
  features (:class:`~benchmark.jobs.ClosedFormJob`), one job per seed at *any* setting: seconds of CPU, so
  the alpha and client-count sweeps run in every tier.
* **LP** (linear probing with FedAvg on cached features, :class:`~benchmark.jobs.FLRunJob`): only at the
  settings for which ``benchmark/protocols/fl.yaml`` holds a legate2023 CIFAR-10 protocol (today: alpha 0.1,
  K = 100, E = 1, ``legate2023_cifar10``); in the CI tier only when ``protocol/lp`` is in
  ``config['ci_training']`` (the tables' LP runs: about 20 s of CPU per seed, shared with Table 2).
* **FT, FedNCM+FT, Random** (full-model training, :class:`~benchmark.runners.fl_train.FLTrainJob`): only when
  :func:`~benchmark.runners.fl_train.training_allowed` (``device=cuda`` or ``cpu_training``) and a protocol of
  ``benchmark/protocols/fl_train.yaml`` matches the setting; learning rates tuned or recorded exactly as the
  table planner does (:meth:`benchmark.runners.fl_train.FLTrainRunner.plan`).

A setting without a matching protocol is *not run* with that reason (the protocol to add is named), never
approximated by another setting's run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmark.errors import ConfigError
from benchmark.fl.train_protocols import get_train_protocol, list_train_protocols
from benchmark.jobs import ClosedFormJob, FLRunJob, Job, partition_tag
from benchmark.runners._features import run_preprocess
from benchmark.runners.fl_train import FLTrainJob, LRChoiceJob, lr_source, training_allowed
from benchmark.tables.availability import choose_weights, dataset_blocker

Config = Mapping[str, Any]

DATASET = "cifar10"
BACKBONE = "squeezenet1_1"
PREPROCESS = "legate2023_cifar"  # 224 px, as every legate2023 CIFAR-10 figure (§4, line 135)
CLOSED_FORM_PROTOCOL = "legate2023"
SEEDS: tuple[int, ...] = (0, 1, 2)  # "three seeds" (§4, line 135)
#: Fig. 3 (line 264): "the nearly iid alpha = 100, alpha = 0.1 ... and a very heterogeneous alpha = 0.01".
ALPHAS: tuple[float, ...] = (100.0, 0.1, 0.01)
#: Fig. 6 (line 269): "We increase the number of clients"; the counts are not printed, these are this suite's.
CLIENTS: tuple[int, ...] = (100, 200, 500, 1000)
#: Fig. 4 (line 257): local epochs; the values are not printed, these are this suite's.
LOCAL_EPOCHS: tuple[int, ...] = (1, 2, 5)
PARTICIPATION = 0.3  # 30 % for CIFAR (§4, line 125)

#: Paper method -> its tidy ``method`` name in the runs.
METHOD_KEYS: dict[str, str] = {
    "FedNCM": "fedncm",
    "LP": "lp",
    "FT": "ft",
    "FedNCM+FT": "fedncm_ft",
    "Random": "random",
}
TRAINED = ("FT", "FedNCM+FT", "Random")


@dataclass(frozen=True)
class Setting:
    """One federated setting of the CIFAR-10 experiments (the paper's primary: alpha 0.1, K = 100, E = 1)."""

    alpha: float = 0.1
    clients: int = 100
    local_epochs: int = 1

    @property
    def ptag(self) -> str:
        return partition_tag(
            {"scheme": "dirichlet", "alpha": float(self.alpha), "num_clients": int(self.clients)}
        )

    def describe(self) -> str:
        return f"alpha={self.alpha:g}, K={self.clients}, E={self.local_epochs}"


PRIMARY = Setting()


@dataclass(frozen=True)
class SeriesRuns:
    """The jobs (one per seed) of one series at one setting, or why it is not run (``jobs`` empty)."""

    series: str
    setting: Setting
    jobs: tuple[Job, ...] = ()
    reason: str | None = None

    @property
    def runs(self) -> bool:
        return self.reason is None and bool(self.jobs)

    def paths(self) -> list[str]:
        return [j.path for j in self.jobs] if self.runs else []

    def curve_paths(self) -> list[str]:
        return [j.curve_path for j in self.jobs] if self.runs else []  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------------ availability
def features_reason(config: Config) -> str | None:
    """Why the CIFAR-10 SqueezeNet features cannot be had under ``config`` (``None``: they can)."""
    missing = dataset_blocker(DATASET, config.get("data_root"))
    if missing:
        return missing.render()
    weights, why = choose_weights(BACKBONE, config.get("data_root"), config.get("weights_dir"))
    if weights is None:
        return why
    if config.get("tier", "full") == "ci":
        allowed = [tuple(x) for x in config.get("ci_closed_form", [])]
        if (DATASET, BACKBONE) not in allowed:
            return (
                f"({DATASET}, {BACKBONE}) features are not extracted in the CI tier (config 'ci_closed_form')"
            )
    return None


def weights(config: Config) -> str:
    w, why = choose_weights(BACKBONE, config.get("data_root"), config.get("weights_dir"))
    if w is None:
        raise ConfigError(f"legate2023 figures: {why}", "provide the weights (FLB_WEIGHTS_DIR)")
    return w


def _matches(p: Any, setting: Setting) -> bool:
    alpha = getattr(p, "alpha", None)
    return (
        p.paper == "legate2023" and p.dataset == DATASET and p.backbone == BACKBONE and p.preprocess == PREPROCESS
        and p.partition_scheme == "dirichlet" and alpha is not None and math.isclose(float(alpha), setting.alpha)
        and p.num_clients == setting.clients and p.local_epochs == setting.local_epochs
        and math.isclose(p.participation, PARTICIPATION) and getattr(p, "subset", "all") == "all"
    )  # fmt: skip


def lp_protocol(setting: Setting) -> str | None:
    """The fl.yaml protocol of legate2023 CIFAR-10 LP at ``setting`` (``None``: none catalogued)."""
    # local: heavy import (scipy, torch, torchvision)
    from benchmark.fl.protocols import get_protocol, list_protocols

    for name in list_protocols():
        p = get_protocol(name)
        if "lp" in p.methods and _matches(p, setting):
            return name
    return None


def train_protocol(setting: Setting, method: str) -> str | None:
    """The fl_train.yaml protocol of legate2023 CIFAR-10 full training with ``method`` at ``setting``."""
    for name in list_train_protocols():
        p = get_train_protocol(name)
        if method in p.methods and "fedavg" in p.algorithms and _matches(p, setting):
            return name
    return None


# ------------------------------------------------------------------------------------------------ jobs
def fedncm_seeds(config: Config, setting: Setting) -> tuple[int, ...]:
    """FedNCM's seeds at ``setting``: all three, except in the CI tier away from the primary setting, where
    one seed keeps the sweeps within CI's CPU budget (a partition and a closed-form job are ~5 s of CPU each;
    the seeds redraw the partition, which FedNCM's exact aggregation does not see, and under flip_stream
    run_seed the frozen flips)."""
    if config.get("tier", "full") == "ci" and setting != PRIMARY:
        return SEEDS[:1]
    return SEEDS


def fedncm_runs(config: Config, setting: Setting) -> SeriesRuns:
    reason = features_reason(config)
    if reason:
        return SeriesRuns("FedNCM", setting, reason=reason)
    jobs = tuple(
        ClosedFormJob(DATASET, BACKBONE, weights(config), run_preprocess(PREPROCESS, config),
                      str(config.get("precision", "fp32")), "all",
                      setting.ptag, CLOSED_FORM_PROTOCOL, s)
        for s in fedncm_seeds(config, setting)
    )  # fmt: skip
    return SeriesRuns("FedNCM", setting, jobs)


def lp_runs(config: Config, setting: Setting) -> SeriesRuns:
    reason = features_reason(config)
    if reason:
        return SeriesRuns("LP", setting, reason=reason)
    name = lp_protocol(setting)
    if name is None:
        return SeriesRuns(
            "LP", setting,
            reason=f"no LP protocol at {setting.describe()} in benchmark/protocols/fl.yaml (add one to run it)",
        )  # fmt: skip
    if config.get("tier", "full") == "ci" and f"{name}/lp" not in config.get("ci_training", []):
        return SeriesRuns(
            "LP",
            setting,
            reason=f"outside the CI tier ({name}/lp not in config 'ci_training'); tier=full runs it",
        )
    jobs = tuple(
        FLRunJob(DATASET, BACKBONE, weights(config), run_preprocess(PREPROCESS, config),
                 str(config.get("precision", "fp32")), "all",
                 setting.ptag, name, "lp", s)
        for s in SEEDS
    )  # fmt: skip
    return SeriesRuns("LP", setting, jobs)


def train_runs(config: Config, setting: Setting, series: str, algorithm: str = "fedavg") -> SeriesRuns:
    """FT / FedNCM+FT / Random at ``setting`` (FLTrainJob per seed, as the table planner makes them)."""
    method = METHOD_KEYS[series]
    reason = features_reason(config)
    if reason is None and not training_allowed(config):
        reason = "full-model training needs --config device=cuda (or cpu_training=true)"
    name = train_protocol(setting, method)
    if reason is None and name is None:
        reason = (
            f"no training protocol with {method} at {setting.describe()} in benchmark/protocols/fl_train.yaml"
        )
    if reason is not None:
        return SeriesRuns(series, setting, reason=reason)
    assert name is not None
    proto = get_train_protocol(name)
    lr_from = lr_source(proto, algorithm, method, config)
    jobs = tuple(
        FLTrainJob(
            dataset=DATASET, model=BACKBONE, weights=weights(config), preprocess=run_preprocess(proto.preprocess, config),
            subset=proto.subset if proto.subset != "all" else str(config.get("table_subset", "all")),
            protocol=name, algorithm=algorithm, method=method,
            train_precision=str(config.get("train_precision", "fp32")), ptag=partition_tag(proto.partition()),
            lr_from=lr_from, seed=s,
        )
        for s in SEEDS
    )  # fmt: skip
    return SeriesRuns(series, setting, jobs)


def series_runs(config: Config, series: str, setting: Setting) -> SeriesRuns:
    if series == "FedNCM":
        return fedncm_runs(config, setting)
    if series == "LP":
        return lp_runs(config, setting)
    return train_runs(config, setting, series)


def grid_jobs(config: Config, method: str, algorithm: str = "fedadam") -> tuple[str, list[Job]]:
    """The learning-rate grid points (:class:`~benchmark.runners.fl_train.FLTuneJob`) of ``method`` under
    ``algorithm`` on the primary CIFAR-10 training protocol, and that protocol's name (Fig. 5)."""
    name = train_protocol(PRIMARY, method)
    if name is None or algorithm not in get_train_protocol(name).algorithms:
        raise ConfigError(
            f"no legate2023 CIFAR-10 training protocol with {method} under {algorithm}",
            "add it to benchmark/protocols/fl_train.yaml",
        )
    proto = get_train_protocol(name)
    choice = LRChoiceJob(
        dataset=DATASET, model=BACKBONE, weights=weights(config), preprocess=run_preprocess(proto.preprocess, config),
        subset=proto.subset if proto.subset != "all" else str(config.get("table_subset", "all")),
        protocol=name, algorithm=algorithm, method=method, train_precision=str(config.get("train_precision", "fp32")),
    )  # fmt: skip
    return name, list(choice.grid())


# ------------------------------------------------------------------------------------------------ results
def seed_values(runs: SeriesRuns, metric: str = "accuracy") -> list[float]:
    """Per seed, ``metric`` of the series' method from its runs' tidy rows (status ok)."""
    import pandas as pd  # local: heavy import (pandas)

    from benchmark.tidy import read_tidy  # local: heavy import (pandas)

    if not runs.runs:
        return []
    rows = pd.concat([read_tidy(p) for p in runs.paths()], ignore_index=True)
    method = METHOD_KEYS[runs.series]
    sel = rows[(rows["metric"] == metric) & (rows["status"] == "ok")]
    if "method" in sel and (sel["method"] == method).any():
        sel = sel[sel["method"] == method]
    return [float(v) for v in sel.sort_values("seed")["value"]]


def sweep_frame(
    config: Config, series: Sequence[str], settings: Sequence[Setting], x_of: Any
) -> tuple[Any, list[str]]:
    """Tidy points (``series, x, y, y_lo, y_hi, n_seeds``: mean and min / max over seeds) of ``series`` at
    ``settings`` (``x_of(setting)`` gives x) and the notes of the points not run."""
    import pandas as pd  # local: heavy import (pandas)

    rows, notes = [], []
    for name in series:
        for st in settings:
            runs = series_runs(config, name, st)
            if not runs.runs:
                notes.append(f"{name} at {st.describe()}: NOT RUN ({runs.reason})")
                continue
            vals = seed_values(runs)
            if not vals:
                notes.append(f"{name} at {st.describe()}: no accuracy rows in {runs.paths()[0]}")
                continue
            rows.append({"series": name, "x": x_of(st), "y": sum(vals) / len(vals), "y_lo": min(vals),
                         "y_hi": max(vals), "n_seeds": len(vals)})  # fmt: skip
    return pd.DataFrame(rows, columns=["series", "x", "y", "y_lo", "y_hi", "n_seeds"]), notes


def inputs_of(
    config: Config, series: Sequence[str], settings: Sequence[Setting], curves: bool = False
) -> list[str]:
    """Every output file of the runs that do run (tidy CSVs, and with ``curves`` the LP curves: the training
    jobs' curves are written with their tidy CSV but are not outputs of their rule)."""
    out: list[str] = []
    for name in series:
        for st in settings:
            runs = series_runs(config, name, st)
            out += runs.paths()
            if curves and name == "LP":  # the fl_run rule declares its curve; an fl_train job writes its
                out += runs.curve_paths()  # curve beside its tidy CSV, which is the rule's only output
    return list(dict.fromkeys(out))
