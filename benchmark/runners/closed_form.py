"""The ``closed_form`` runner: training-free heads (FedNCM, Fed3R, FedCOF, ...) on cached features, one
:class:`~benchmark.jobs.ClosedFormJob` per seed of the table (every method of the paper's closed-form protocol,
:mod:`benchmark.closed_form.protocols`, in one job)."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

from benchmark.data.partition import available_partitioners, get_partitioner
from benchmark.errors import ConfigError
from benchmark.jobs import ClosedFormJob, partition_tag
from benchmark.protocols import load_catalogue
from benchmark.runners import CellResult, Runner, register_runner
from benchmark.runners._features import collect_runs, seeded_jobs
from benchmark.schema import check_mapping, check_name, coerce
from benchmark.tables.plan import choose_preprocess

#: ``fedncm_bias`` (config.yaml) -> the closed-form protocol a legate2023-family table runs under (issue 26).
FEDNCM_BIASES: tuple[str, ...] = ("zero", "torch_default_init")


def code_bias_protocol(protocol: str, config: Mapping[str, Any]) -> str:
    """``protocol`` under the config's ``fedncm_bias``: ``zero`` (default: legate2023 §3.2, "the bias term to 0")
    keeps it; ``torch_default_init`` (the legate2023 code keeps ``nn.Linear``'s random bias init, papers-code.md
    §1.4) turns ``legate2023`` into ``legate2023-code``. Other papers' protocols keep their own bias (fedcof's
    code has none). An unknown value is one :class:`~benchmark.errors.ConfigError`."""
    value = str(config.get("fedncm_bias") or "zero")
    if value not in FEDNCM_BIASES:
        raise ConfigError(f"fedncm_bias {value!r} unknown", f"set fedncm_bias to one of: {', '.join(FEDNCM_BIASES)}")
    return "legate2023-code" if value == "torch_default_init" and protocol == "legate2023" else protocol


class ClosedFormRunner(Runner):
    name = "closed_form"
    params: ClassVar[dict[str, Any]] = {
        "methods": dict[str, str], "partition": dict[str, Any], "preprocess": dict[str, str],
        "natural_users": list[str], "protocol": str,
    }  # fmt: skip

    def check_params(self, params, where) -> None:
        """``protocol`` is a closed-form protocol; ``partition`` (required: it names every job's clients) a known
        scheme with only its own parameters."""

        if "protocol" in params:  # the names from the catalogue file (its module imports torch)
            names = lambda: dict(load_catalogue("closed_form").data.get("protocols") or {})
            check_name(params["protocol"], where.at("protocol"), names, "closed-form protocol")
        part = params.get("partition")
        if not part:
            raise where.at("partition").error(
                "is missing or empty: the closed-form runner splits every dataset among clients",
                "give it, e.g. partition: {scheme: dirichlet, alpha: 0.1, num_clients: 100}",
            )
        scheme = check_name(part.get("scheme"), where.at("partition", "scheme"), available_partitioners,
                            "partition scheme")  # fmt: skip
        fn = get_partitioner(scheme)
        args = list(inspect.signature(fn).parameters)[2:]
        check_mapping(part, where.at("partition"), allowed=["scheme", *args])
        hints = typing.get_type_hints(fn)
        plain = {int, float, str, bool, type(None)}
        for key, value in part.items():
            hint = hints.get(key, Any)
            if key != "scheme" and set(typing.get_args(hint) or (hint,)) <= plain:  # not array parameters
                coerce(value, hint, where.at("partition", key))
        if isinstance(part.get("num_clients"), int) and part["num_clients"] < 1:
            raise where.at("partition", "num_clients").error(f"must be >= 1, got {part['num_clients']}", "e.g. 100")

    def runner_protocol(self, spec, cell, rule, dataset) -> dict[str, Any] | None:
        natural = dataset in rule.params.get("natural_users", [])
        clients = None if natural else rule.params.get("partition", {}).get("num_clients")
        return {"clients": clients, "per_class": None, "participation": None}

    def plan(self, spec, rule, plan, config: Mapping[str, Any]):
        # local: heavy import (scipy, torch, torchvision)
        from benchmark.closed_form.protocols import PAPER_PROTOCOL, check_protocol

        plan.protocol = check_protocol(
            code_bias_protocol(str(rule.params.get("protocol") or PAPER_PROTOCOL.get(spec.paper, "suite")), config)
        )
        pre = choose_preprocess(
            rule.params.get("preprocess", {}), plan.dataset, plan.cell.protocol.get("image_size")
        )
        part = dict(rule.params.get("partition", {}))
        if plan.dataset in rule.params.get("natural_users", []):
            part = {"scheme": "natural"}
        plan.jobs = seeded_jobs(
            ClosedFormJob, spec, plan, config, preprocess=pre, ptag=partition_tag(part), protocol=plan.protocol
        )
        plan.status = "planned"
        return plan

    def collect(self, spec, plan, labels, settings) -> CellResult:
        return collect_runs(spec, plan)


register_runner(ClosedFormRunner())
