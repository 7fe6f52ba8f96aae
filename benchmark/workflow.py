"""Config and parameter helpers for the Snakemake workflow (``workflow/``), kept here so pytest can reach them.

The file layout under ``results/`` is that of the typed jobs (:mod:`benchmark.jobs`, one path template per
job type); ``tidy/<target>.csv`` holds all rows of a target and ``plans/<target>.json`` its plan
(:mod:`benchmark.tables.plan`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmark.errors import ConfigError
from benchmark.jobs import (
    ClosedFormJob,
    ExtractJob,
    FLRunJob,
    PartitionJob,
    parse_partition_tag,
    partition_tag,
)

__all__ = ["parse_partition_tag", "partition_tag"]  # re-exported: the job module owns the partition tag

ROOT = Path(__file__).resolve().parents[1]
#: The Snakemake community layout: the config schema beside the workflow, the default config in config/.
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = ROOT / "config" / "config.yaml"


def coerce_cli_booleans(config: dict[str, Any]) -> dict[str, Any]:
    """Snakemake's ``--config key=true`` passes the string ``'true'``: for every field the schema types as a
    boolean, turn ``'true'`` / ``'false'`` (any case) into the boolean, in place, so the documented
    ``--config cpu_training=true`` works (anything else is left for :func:`validate_config` to refuse)."""
    import yaml

    props = yaml.safe_load(SCHEMA.read_text()).get("properties", {})
    for key, value in list(config.items()):
        if isinstance(value, str) and props.get(key, {}).get("type") == "boolean":
            if value.lower() in ("true", "false"):
                config[key] = value.lower() == "true"
    return config


def validate_config(config: Mapping[str, Any]) -> None:
    """Validate against ``workflow/schemas/config.schema.yaml``; raise :class:`ConfigError` naming the offending field,
    or the data root / weights folder that the config or the environment names and that is not a folder."""
    import jsonschema
    import yaml

    schema = yaml.safe_load(SCHEMA.read_text())
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(dict(config)), key=lambda e: list(e.path)
    )
    if errors:
        e = errors[0]
        field = ".".join(str(p) for p in e.path) or "(top level)"
        raise ConfigError(f"config field {field!r}: {e.message}", "fix it in the config file or --config")
    from benchmark.paths import check_locations

    check_locations(config.get("data_root"), config.get("weights_dir"))  # a named folder must exist


def load_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The default config, overlaid by ``path`` and then by ``overrides``; validated."""
    import yaml

    cfg = yaml.safe_load(DEFAULT_CONFIG.read_text())
    if path:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist", "pass an existing YAML file")
        cfg.update(yaml.safe_load(p.read_text()) or {})
    cfg.update(overrides or {})
    validate_config(cfg)
    return cfg


def data_root_identity(config: Mapping[str, Any]) -> str:
    """The resolved dataset root the data-reading jobs use (config ``data_root``, else ``$FLB_DATA_ROOT``, else
    ``./data``). The rules that read data carry it as a ``params``, so that pointing the workflow at other
    data re-runs them (Snakemake's params rerun trigger) instead of keeping outputs of the old data."""
    from benchmark.paths import data_root

    return str(data_root(config.get("data_root")).resolve())


def unknown_target(name: str, targets: Sequence[str]) -> None:
    """Refuse a requested name that no rule produces, listing the ``targets`` (the Snakefile's catch-all rule
    calls it; Snakemake's own "No rule to produce X" does not say which targets exist)."""
    raise ConfigError(
        f"unknown snakemake target {name!r}",
        f"use one of: {', '.join(sorted(targets))} (or an output path under results/)",
    )


def target(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    try:
        return config["targets"][name]
    except KeyError:
        raise ConfigError(
            f"no target {name!r} in config 'targets'", f"define it, or use one of {sorted(config['targets'])}"
        ) from None


def partition_cli_args(tag: str) -> str:
    """``dirichlet-alpha0.1-num_clients100`` -> ``--scheme dirichlet --param alpha=0.1 --param num_clients=100``."""
    scheme, params = parse_partition_tag(tag)
    return " ".join([f"--scheme {scheme}", *(f"--param {k}={v}" for k, v in params.items())])


def features_path(
    dataset: str, backbone: str, weights: str, preprocess: str, precision: str, subset: str, split: str
) -> str:
    return ExtractJob(dataset, backbone, weights, preprocess, precision, subset, split).path


def closed_form_path(
    dataset: str,
    model: str,
    weights: str,
    preprocess: str,
    precision: str,
    subset: str,
    ptag: str,
    seed: int,
    protocol: str = "suite",
) -> str:
    """Tidy rows of every method of a closed-form ``protocol`` for one (features, partition, seed)
    (:class:`benchmark.jobs.ClosedFormJob`)."""
    return ClosedFormJob(
        dataset, model, weights, preprocess, precision, subset, ptag, protocol, int(seed)
    ).path


def run_inputs(job: ClosedFormJob | FLRunJob) -> dict[str, str]:
    """The named inputs of a run on cached features (``train``, ``test``, ``partition``: the Snakefile's
    ``closed_form`` and ``fl_run`` rules)."""
    return {"train": job.features("train").path, "test": job.features("test").path,
            "partition": job.partition().path}  # fmt: skip


def partition_path(dataset: str, subset: str, ptag: str, seed: int | str) -> str:
    return PartitionJob(dataset, subset, ptag, int(seed)).path


def target_runs(config: Mapping[str, Any], name: str) -> list[str]:
    """Closed-form run files of a free-form target (one per backbone and seed)."""
    t = target(config, name)
    tag = partition_tag(t["partition"])
    subset = t.get("subset", "all")
    protocol = t.get("protocol", "suite")
    return [
        closed_form_path(
            t["dataset"], b, t["weights"], t["preprocess"], config["precision"], subset, tag, s, protocol
        )
        for b in t["backbones"]
        for s in t["seeds"]
    ]


def closed_form_targets(config: Mapping[str, Any]) -> list[str]:
    return sorted(config["targets"])


def parse_kv(items: Sequence[str]) -> dict[str, Any]:
    """``["alpha=0.1", "clients=100"]`` -> ``{"alpha": 0.1, "clients": 100}`` (JSON values where they parse)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"expected key=value, got {item!r}", "write parameters as key=value")
        k, v = item.split("=", 1)
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def data_marker(dataset: str) -> str:
    """Output of the ``fetch_data`` rule: the verified identity of a downloaded dataset (``flb data fetch``)."""
    return f"results/data/{dataset}.json"


def weights_marker(model: str) -> str:
    """Output of the ``fetch_weights`` rule: the verified torchvision checkpoint of ``model``."""
    return f"results/data/weights/{model}.json"


def fetch_inputs(
    config: Mapping[str, Any], dataset: str, backbone: str | None = None, weights: str | None = None
) -> list[str]:
    """The fetch markers an extraction or partition job waits for (inputs of the ``extract`` and
    ``partition`` rules).

    A marker is an input when its fetch is planned (the data or checkpoint is absent, has a public
    download and the network is reachable: :mod:`benchmark.tables.availability`), and stays one once it
    exists, so that the set of inputs does not change after the download (which would make Snakemake
    re-run the extraction). Data that was here from the start needs no marker.
    """
    from benchmark.tables.availability import dataset_fetch_planned, weights_fetch_planned

    out = []
    marker = data_marker(dataset)
    if Path(marker).exists() or dataset_fetch_planned(dataset, config.get("data_root")):
        out.append(marker)
    if backbone and weights == "torchvision":
        marker = weights_marker(backbone)
        if Path(marker).exists() or weights_fetch_planned(backbone):
            out.append(marker)
    return out


def hub_dir() -> Path:
    """torch's hub folder, where torchvision checkpoints are kept (``$TORCH_HOME/hub``)."""
    import torch

    return Path(torch.hub.get_dir())


#: Job kinds with their own rules in workflow/rules/ (features.smk, runs.smk).
BUILTIN_JOB_KINDS = ("extract", "partition", "closed_form", "fl_run")


def plugin_job_types() -> dict[str, Any]:
    """Job types registered by runner plug-ins (:mod:`benchmark.runners`) that no built-in rule produces; the
    workflow gives each a rule of its own (workflow/rules/plugins.smk), so a new runner needs no rule."""
    from benchmark.jobs import JOB_KINDS
    from benchmark.runners import load_runners

    load_runners()
    return {k: cls for k, cls in sorted(JOB_KINDS.items()) if k not in BUILTIN_JOB_KINDS}


def plugin_job_inputs(cls: Any) -> Any:
    """The input function of a plug-in job's rule: the outputs of the jobs it reads."""
    return lambda wildcards: [j.path for j in cls.from_wildcards(wildcards).inputs()]


def plugin_job_arg(cls: Any) -> Any:
    """The params function of a plug-in job's rule: the job as shell-quoted JSON for ``flb job``."""
    import shlex

    from benchmark.jobs import job_to_dict

    return lambda wildcards: shlex.quote(json.dumps(job_to_dict(cls.from_wildcards(wildcards))))
