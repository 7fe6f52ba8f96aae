"""Turn finished jobs into recorded runs (:mod:`benchmark.ledger`): the outputs found under a results tree (this
machine's ``results/``, a lent GPU's output folder, a cluster's), matched to the jobs a plan would run, with
their provenance read from the files themselves and, where a harvest wrote one, its manifest.

A job is identified by the plan, never by parsing a path back: the targets are planned under the config
(both pfl model selections when ``pfl_both_selections``), and every planned job whose output file exists under
the tree is recorded.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.errors import ConfigError
from benchmark.jobs import Job, job_closure
from benchmark.ledger import (
    LEDGER_DIR,
    Provenance,
    RecordExistsError,
    RunRecord,
    job_outputs,
    record_folder,
    write_record,
)
from benchmark.runners.pfl import planning_configs
from benchmark.tables.plan import plan_target


@dataclass(frozen=True)
class ImportOptions:
    """What the importer is told beyond the files: the commit whose code ran when the files name another one
    (a copy of the tree whose ``.git`` was stale, say), notes, where the files came from, a harvest manifest."""

    commit: str | None = None
    notes: tuple[str, ...] = ()
    source: str = ""
    manifest: Mapping[str, Any] | None = None
    replace: bool = False
    caveats: tuple[str, ...] = ()  # shown with every verdict the records fill


def results_root(path: Path) -> Path:
    """The folder that holds ``results/`` (``path`` itself, or its parent when ``path`` is a ``results``
    folder)."""
    path = Path(path)
    if (path / "results").is_dir():
        return path
    if path.name == "results" and path.is_dir():
        return path.parent
    raise ConfigError(f"{path} holds no results/ folder", "name the folder that contains results/ (or results/ itself)")


def planned_jobs(targets: Iterable[str], config: Mapping[str, Any]) -> list[Job]:
    """Every job (inputs included) the targets' plans run, both pfl selections when ``pfl_both_selections``."""
    configs = planning_configs(config)
    return job_closure(job for cfg in configs for target in targets for plan in plan_target(target, cfg)
                       for job in plan.jobs)  # fmt: skip


def _iso(ts: float | None) -> str:
    if ts is None:
        return ""
    return dt.datetime.fromtimestamp(float(ts), tz=dt.UTC).isoformat(timespec="seconds")


def _own_json(path: Path) -> dict[str, Any]:
    if path.suffix != ".json":
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def provenance_for(job: Job, root: Path, options: ImportOptions) -> tuple[Provenance, dict[str, Any]]:
    """The provenance of ``job``'s output under ``root`` and the inputs it states (dataset checksums)."""
    own = _own_json(root / job.path)
    man = options.manifest or {}
    ran = str(own.get("sibling_of") or job.path)  # a pfl run writes both selections' outputs in one job
    entry = next((e for e in man.get("jobs", ()) if e.get("path") == ran and e.get("status") == "done"), {})
    reported = str(own.get("git_commit") or man.get("git_commit") or "")
    commit = options.commit or reported or "unknown"
    cfg = man.get("config", {}) if man else {}
    device = str(own.get("device") or cfg.get("device") or "")
    precision = str((own.get("config") or {}).get("dtype") or "float32")
    if device.startswith("cuda"):
        precision += ", TF32 " + ("on" if cfg.get("tf32") else "off") if man else ", TF32 not recorded"
    wall = entry.get("wall_s", own.get("wall_s"))
    notes = list(options.notes)
    if ran != job.path:
        notes.append(f"written by the run of {ran} (the same training; this job's selection of its model)")
    if options.commit and reported and reported != options.commit:
        notes.append(f"the files name commit {reported}; the code that ran was {options.commit}")
    prov = Provenance(
        code_commit=commit, machine=str(own.get("machine") or man.get("machine") or "unknown"),
        versions=str(own.get("versions") or man.get("versions") or ""), device=device,
        threads=man.get("threads_per_worker"), precision=precision, start=_iso(entry.get("start")),
        end=_iso(entry.get("end")), wall_s=None if wall is None else float(wall),
        command=str(entry.get("command") or ""), source=options.source,
        reported_commit=reported if reported != commit else "", notes=tuple(notes), caveats=options.caveats,
    )  # fmt: skip
    inputs = {k: own[k] for k in ("data_checksum", "partition_hash", "weights_sha256") if k in own}
    return prov, inputs


def import_results(path: Path, jobs: Iterable[Job], options: ImportOptions, ledger: Path = LEDGER_DIR,
                   kept: list[str] | None = None) -> list[RunRecord]:  # fmt: skip
    """Record every job of ``jobs`` whose output exists under the results tree ``path``; returns the new records.
    A job already recorded with the same files is left as it is; one recorded from another run keeps its record
    (unless ``options.replace``), and one line per such job goes to ``kept``."""
    root = results_root(path)
    out = []
    for job in jobs:
        if not job_outputs(job, root):
            continue
        prov, inputs = provenance_for(job, root, options)
        if (record_folder(job, ledger) / "record.json").is_file() and not options.replace:
            try:
                write_record(job, prov, root=root, ledger=ledger, inputs=inputs)  # the same files: nothing to do
            except RecordExistsError as exc:
                if kept is not None:
                    kept.append(exc.what)
            continue
        try:
            out.append(write_record(job, prov, root=root, ledger=ledger, inputs=inputs, replace=options.replace))
        except RecordExistsError as exc:
            if kept is not None:
                kept.append(exc.what)
    return out
