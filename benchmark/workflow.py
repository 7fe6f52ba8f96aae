"""Config and parameter helpers for the Snakemake workflow (``workflow/``), kept here so pytest can reach them.

The file layout under ``results/`` is that of the typed jobs (:mod:`benchmark.jobs`, one path template per
job type); ``tidy/<target>.csv`` holds all rows of a target and ``plans/<target>-<sha12>.json`` its plan
(:mod:`benchmark.tables.plan`).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml

from benchmark import jobs as jobs_module  # module attribute: tests replace JOB_KINDS
from benchmark.errors import BenchmarkError, ConfigError
from benchmark.jobs import (
    ClosedFormJob,
    ExtractJob,
    FLRunJob,
    PartitionJob,
    job_to_dict,
    parse_partition_tag,
    partition_tag,
)
from benchmark.kv import parse_kv
from benchmark.paths import check_locations, data_root
from benchmark.runners import load_runners
from benchmark.suggest import did_you_mean
from benchmark.tables.availability import dataset_fetch_planned, weights_fetch_planned
from benchmark.tables.records import recorded_output

# re-exported: the job module owns the partition tag, benchmark.kv the key=value parser
__all__ = ["parse_kv", "parse_partition_tag", "partition_tag"]

ROOT = Path(__file__).resolve().parents[1]
#: The Snakemake community layout: the config schema beside the workflow, the default config in config/. These are
#: the installed package's; the Snakefile reads its own checkout's (:func:`checkout_files`).
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = ROOT / "config" / "config.yaml"

#: What to write for a device the schema refuses (its pattern: cpu, cuda, cuda:N, mps; null = CUDA when available).
_DEVICE_FIX = "use cpu, cuda (a GPU), cuda:N (GPU N) or mps, or leave it null (CUDA when available, else CPU)"


@dataclass(frozen=True)
class CheckoutFiles:
    """The files a workflow reads from the checkout its Snakefile is in (never from the imported package)."""

    root: Path  # the checkout: the folder holding workflow/ and config/
    config: Path  # config/config.yaml
    schema: Path  # workflow/schemas/config.schema.yaml


def checkout_files(basedir: str | Path) -> CheckoutFiles:
    """The config and schema of the checkout whose ``workflow/Snakefile`` is in ``basedir`` (its folder),
    so that a second checkout sharing the environment runs with its own config."""
    root = Path(basedir).resolve().parent
    return CheckoutFiles(root, root / "config" / "config.yaml", root / "workflow" / "schemas" / "config.schema.yaml")


def checkout_package(root: Path) -> None:
    """Make the workflow of checkout ``root`` run that checkout's ``benchmark`` package, when it holds one: the
    Snakefile calls this before importing anything else of the package. The checkout goes first on ``sys.path``
    (this process: plans) and on ``PYTHONPATH`` (the jobs it starts), as ``python -m`` already does for a job
    started in the checkout. A package imported earlier from elsewhere cannot be replaced: a
    :class:`ConfigError` says so."""
    package = Path(root) / "benchmark"
    if not (package / "__init__.py").is_file():
        return  # a workflow without its package (a copy of workflow/ and config/): the installed one runs
    here = str(Path(root).resolve())
    loaded = getattr(sys.modules.get("benchmark"), "__file__", None)
    if loaded is not None and Path(loaded).resolve().parent != package.resolve():
        raise ConfigError(
            f"the workflow of {here} would run the benchmark package imported from {Path(loaded).resolve().parent}",
            f"run it in a fresh process with PYTHONPATH={here} (or `pip install -e {here}`)",
        )
    paths = [str(Path(p).resolve()) if p else p for p in sys.path]
    if here not in paths:
        sys.path.insert(0, here)
    env = os.environ.get("PYTHONPATH", "")
    if here not in [str(Path(p).resolve()) for p in env.split(os.pathsep) if p]:
        os.environ["PYTHONPATH"] = os.pathsep.join([here, *([env] if env else [])])


def _schema(schema: str | Path | None = None) -> dict[str, Any]:
    """The parsed schema (read again when the file changes)."""
    path = Path(schema or SCHEMA).resolve()
    return _parsed_schema(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _parsed_schema(path: Path, mtime_ns: int) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def coerce_cli_booleans(config: dict[str, Any], schema: str | Path | None = None) -> dict[str, Any]:
    """Snakemake's ``--config key=value`` passes ``true`` and ``null`` as strings: for every top-level field the
    schema types as a boolean, turn ``'true'`` / ``'false'`` (any case) into the boolean, and for every field it
    allows to be null, ``'null'`` / ``'none'`` / ``'~'`` (any case) into ``None``, in place, so the documented
    ``--config cpu_training=true`` works (anything else is left for :func:`validate_config` to refuse)."""
    props = _schema(schema).get("properties", {})
    for key, value in list(config.items()):
        if not isinstance(key, str) or not isinstance(value, str) or not isinstance(props.get(key), dict):
            continue
        types = props[key].get("type")
        types = types if isinstance(types, list) else [types]
        if "boolean" in types and value.lower() in ("true", "false"):
            config[key] = value.lower() == "true"
        elif "null" in types and value.lower() in ("null", "none", "~"):
            config[key] = None
    return config


def _path_text(path: Sequence[Any]) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def _schema_error(e: Any) -> ConfigError:
    """One :class:`ConfigError` for a jsonschema error: the field, what is wrong, what to do."""
    where = list(e.path)
    if e.validator == "additionalProperties" and isinstance(e.instance, dict):
        valid = sorted(e.schema.get("properties") or {})
        unknown = sorted((str(k) for k in e.instance if k not in valid), key=str)
        key = unknown[0] if unknown else "?"
        place = f" in {_path_text(where)}" if where else ""
        hint = did_you_mean(key, valid)
        return ConfigError(
            f"unknown config key {key!r}{place}" + (f" ({hint})" if hint else ""),
            "fix the key in the config file or --config (every key: workflow/schemas/config.schema.yaml)" if hint
            else f"valid keys{place}: {', '.join(valid)}",
        )
    if e.validator == "uniqueItems" and isinstance(e.instance, list):
        twice = next((v for i, v in enumerate(e.instance) if v in e.instance[:i]), None)
        return ConfigError(
            f"config field {_path_text(where)!r}: {twice!r} is listed more than once in {e.instance!r}",
            "list each value once (a repeated seed would be counted twice in the mean and std)",
        )
    if where and where[-1] == "device" and len(where) == 1:
        return ConfigError(f"config field 'device': {e.instance!r} is not a device", _DEVICE_FIX)
    return ConfigError(f"config field {_path_text(where)!r}: {e.message}", "fix it in the config file or --config")


def _validator(schema: str | Path | None = None) -> Any:
    import jsonschema  # local: heavy import (jsonschema)

    return jsonschema.Draft202012Validator(_schema(schema))


def validate_config(config: Mapping[str, Any], schema: str | Path | None = None) -> None:
    """Validate against ``workflow/schemas/config.schema.yaml`` (or ``schema``) and the checks a schema cannot
    state (``cell_filter`` is a regular expression); raise one :class:`ConfigError` naming the offending field,
    with the closest valid key for an unknown one; a data root / weights folder that the config or the environment
    names must be a folder (:func:`benchmark.paths.check_locations`). Any input either passes or raises
    :class:`ConfigError`."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"the config is a {type(config).__name__}, not a mapping of keys to values",
                          "write the config as YAML key: value lines")  # fmt: skip
    try:
        errors = sorted(
            _validator(schema).iter_errors(dict(config)),
            key=lambda e: (e.validator != "additionalProperties", [str(p) for p in e.path]),
        )
    except (TypeError, ValueError, RecursionError) as err:  # values no YAML or JSON config can hold
        raise ConfigError(f"the config holds a value of no config type ({err})",
                          "use strings, numbers, booleans, lists and mappings") from None  # fmt: skip
    if errors:
        raise _schema_error(errors[0])
    pattern = config.get("cell_filter")
    if pattern is not None:
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as err:
            raise ConfigError(
                f"config field 'cell_filter': {pattern!r} is not a regular expression ({err})",
                "fix the pattern (Python `re` syntax), e.g. cell_filter='cifar10/.*'",
            ) from None

    check_locations(config.get("data_root"), config.get("weights_dir"))  # a named folder must exist


def load_config(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    base: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The default config (or ``base``, e.g. the whole config the workflow passes to a job), overlaid by
    ``path`` and then by ``overrides``; validated."""
    cfg = dict(base) if base is not None else yaml.safe_load(DEFAULT_CONFIG.read_text())
    if path:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist", "pass an existing YAML file")
        cfg.update(yaml.safe_load(p.read_text()) or {})
    cfg.update(overrides or {})
    validate_config(cfg)
    return cfg


def job_config_arg(config: Mapping[str, Any]) -> str:
    """The whole (validated) workflow config as one shell-quoted JSON word: what ``flb job --config-json`` runs
    a plug-in job with, so every key the user set reaches the job as typed."""
    return shlex.quote(json.dumps(dict(config), sort_keys=True, default=str))


def shell_word(value: Any) -> str:
    """``value`` quoted for a shell line (a path with spaces stays one argument)."""
    return shlex.quote(str(value))


def exit_on_error(err: BenchmarkError) -> NoReturn:
    """Print ``err`` as the one line the command line prints (``flb: error: ...``) and end the process with
    status 2: how the Snakefile and its input functions report bad input, instead of a Snakemake traceback."""
    print(f"flb: error: {err}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def one_line_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (an input or params function of a rule) with its :class:`BenchmarkError` turned into
    :func:`exit_on_error`."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BenchmarkError as err:
            exit_on_error(err)

    return wrapped


def data_root_identity(config: Mapping[str, Any]) -> str:
    """The resolved dataset root the data-reading jobs use (config ``data_root``, else ``$FLB_DATA_ROOT``, else
    ``./data``). The rules that read data carry it as a ``params``, so that pointing the workflow at other
    data re-runs them (Snakemake's params rerun trigger) instead of keeping outputs of the old data."""
    return str(data_root(config.get("data_root")).resolve())


def unknown_target(name: str, targets: Sequence[str]) -> None:
    """Refuse a requested name that no rule produces, with the closest target names (the Snakefile's catch-all
    rule calls it; Snakemake's own "No rule to produce X" does not say which targets exist)."""
    hint = did_you_mean(name, targets)
    raise ConfigError(
        f"unknown snakemake target {name!r}" + (f" ({hint})" if hint else ""),
        "list every target with `snakemake --list-target-rules` (or name an output path under results/)",
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
    ``closed_form`` and ``fl_run`` rules); none for a run filled from the ledger of recorded runs
    (:func:`benchmark.tables.records.recorded_output`), which Snakemake then neither runs nor feeds."""
    if recorded_output(job):
        return {}
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
    import torch  # local: heavy import (torch)

    return Path(torch.hub.get_dir())


#: Job kinds with their own rules in workflow/rules/ (features.smk, runs.smk).
BUILTIN_JOB_KINDS = ("extract", "partition", "closed_form", "fl_run")


def plugin_job_types() -> dict[str, Any]:
    """Job types registered by runner plug-ins (:mod:`benchmark.runners`) that no built-in rule produces; the
    workflow gives each a rule of its own (workflow/rules/plugins.smk), so a new runner needs no rule."""
    load_runners()
    return {k: cls for k, cls in sorted(jobs_module.JOB_KINDS.items()) if k not in BUILTIN_JOB_KINDS}


def plugin_job_inputs(cls: Any) -> Any:
    """The input function of a plug-in job's rule: the outputs of the jobs it reads (none for a job filled from
    the ledger of recorded runs: :func:`benchmark.tables.records.recorded_output`)."""
    def inputs(wildcards: Any) -> list[str]:
        job = cls.from_wildcards(wildcards)
        return [] if recorded_output(job) else [j.path for j in job.inputs()]

    return inputs


def plugin_job_arg(cls: Any) -> Any:
    """The params function of a plug-in job's rule: the job as shell-quoted JSON for ``flb job``."""

    return lambda wildcards: shlex.quote(json.dumps(job_to_dict(cls.from_wildcards(wildcards))))
