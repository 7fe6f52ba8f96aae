"""Run a target's jobs in this process, without Snakemake (same files, same order of steps).

For machines without Snakemake (a lent GPU box, a notebook): ``flb run fedcof_table3`` produces exactly
the files the Snakemake rules would (pointer JSONs, partitions, run CSVs) and then assembles the table.
Existing outputs are kept, as Snakemake would keep them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmark.errors import ConfigError
from benchmark.workflow import features_path, parse_partition_tag, partition_path

_CLOSED_FORM = re.compile(
    r"results/runs/closed_form/(?P<dataset>[^/]+)/(?P<model>[^/]+?)-(?P<weights>torchvision|substitute|random)/"
    r"(?P<preprocess>[^/]+)-(?P<precision>fp32|bf16)/(?P<subset>[^/]+)/(?P<ptag>[^/]+)/(?P<protocol>[^/]+)/"
    r"seed(?P<seed>\d+)\.csv$"
)


_FL_RUN = re.compile(
    r"results/runs/fl/(?P<dataset>[^/]+)/(?P<model>[^/]+?)-(?P<weights>torchvision|substitute|random)/"
    r"(?P<preprocess>[^/]+)-(?P<precision>fp32|bf16)/(?P<subset>[^/]+)/(?P<ptag>[^/]+)/(?P<protocol>[^/]+)/"
    r"(?P<method>[^/]+)/seed(?P<seed>\d+)\.csv$"
)


def parse_closed_form_path(path: str) -> dict[str, str]:
    m = _CLOSED_FORM.search(path)
    if not m:
        raise ConfigError(f"not a closed-form run path: {path}", "see benchmark.workflow.closed_form_path")
    return m.groupdict()


def parse_run_path(path: str) -> dict[str, str]:
    """The fields of any run path (closed-form or training); ``runner`` says which."""
    m = _FL_RUN.search(path)
    if m:
        return {**m.groupdict(), "runner": "lp_features"}
    return {**parse_closed_form_path(path), "runner": "closed_form"}


def _inputs(p: Mapping[str, str], config: Mapping[str, Any]) -> tuple[dict[str, str], str]:
    """The feature pointers and the partition a run file needs, produced when absent."""
    from benchmark import pipeline

    pointers = {}
    for split in ("train", "test"):
        ptr = features_path(
            p["dataset"], p["model"], p["weights"], p["preprocess"], p["precision"], p["subset"], split
        )
        if not Path(ptr).exists():
            pipeline.extract_step(
                dataset=p["dataset"], split=split, backbone=p["model"], weights=p["weights"],
                preprocess=p["preprocess"], precision=p["precision"], subset=p["subset"], out=ptr,
                batch_size=int(config.get("batch_size", 64)), device=config.get("device"),
                data_root=config.get("data_root"), weights_dir=config.get("weights_dir"),
                cache_dir=config.get("cache_dir"),
            )  # fmt: skip
        pointers[split] = ptr
    part = partition_path(p["dataset"], p["subset"], p["ptag"], p["seed"])
    if not Path(part).exists():
        scheme, params = parse_partition_tag(p["ptag"])
        pipeline.partition_step(
            dataset=p["dataset"], subset=p["subset"], scheme=scheme, seed=int(p["seed"]), out=part,
            params=params, data_root=config.get("data_root"),
        )  # fmt: skip
    return pointers, part


def run_closed_form_job(path: str, config: Mapping[str, Any]) -> None:
    """Produce one closed-form run file and everything it depends on."""
    from benchmark import pipeline

    if Path(path).exists():
        return
    p = parse_closed_form_path(path)
    pointers, part = _inputs(p, config)
    pipeline.closed_form_step(
        train=pointers["train"], test=pointers["test"], partition=part, out=path, protocol=p["protocol"]
    )


def run_fl_job(path: str, config: Mapping[str, Any]) -> None:
    """Produce one federated training run file (and its curve) and everything it depends on."""
    from benchmark.fl.jobs import fl_run_step

    if Path(path).exists():
        return
    m = _FL_RUN.search(path)
    if not m:
        raise ConfigError(f"not a training run path: {path}", "see benchmark.workflow.fl_run_path")
    p = m.groupdict()
    pointers, part = _inputs(p, config)
    fl_run_step(
        protocol=p["protocol"], method=p["method"], train=pointers["train"], test=pointers["test"],
        partition=part, seed=int(p["seed"]), out=path, curve=path.removesuffix(".csv") + ".curve.csv",
        device=config.get("device") or "auto",
    )  # fmt: skip


def run_target(target: str, config: Mapping[str, Any]) -> list[str]:
    """Run every job a paper-table target needs; return the job paths."""
    from benchmark.tables.plan import target_jobs

    jobs = target_jobs(target, config)
    for job in jobs:
        if "/closed_form/" in job:
            run_closed_form_job(job, config)
        elif "/runs/fl/" in job:
            run_fl_job(job, config)
        else:  # pragma: no cover - other runners register here
            raise ConfigError(f"no in-process executor for {job}", "run it with snakemake")
    return jobs
