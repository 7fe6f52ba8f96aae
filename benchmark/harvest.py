"""Harvest scarce compute: run a target's unrun planned training jobs, most cells per estimated minute first,
in a pool of worker processes, until a time budget is spent.

A **unit** is one training job and the jobs that read it (its evaluations), run in that order in one worker
process: the unit fills the cells of every job in it. Units are ordered by cells filled per estimated second
(jobs that fill many cells and short jobs first; for equal value the lowest seed first). A worker that is still
running when the budget ends is stopped; its checkpoint (every ``checkpoint_every`` rounds) stays under
``results/checkpoints/`` and the next harvest resumes the job from it, to the same numbers as an uninterrupted
run (each runner's resumption guarantee).

Each finished job is written to ``results/`` as if Snakemake had run it, and a **manifest** (``--out``,
``harvest-<stamp>.json``) lists every job with its start and end time, wall time, exit status, the command a
user would type to run it alone, and the machine; ``flb runs import`` turns the outputs into recorded runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.jobs import Job, job_from_dict, job_to_dict

#: Job kinds that are training (the heavy root of a unit); everything else runs inside the unit that needs it.
TRAINING_KINDS = ("pfl_train", "pfl_central", "fl_train", "zo_train")


@dataclass(frozen=True)
class Unit:
    """One training job and its dependants, with the cells they fill and the estimated seconds."""

    jobs: tuple[Job, ...]
    cells: tuple[str, ...]
    est_s: float
    seed: int = 0

    @property
    def root(self) -> Job:
        return self.jobs[0]

    @property
    def value(self) -> float:
        """Cells filled per estimated minute."""
        return len(self.cells) / max(self.est_s / 60.0, 1e-9)

    def to_dict(self) -> dict[str, Any]:
        return {"jobs": [job_to_dict(j) for j in self.jobs], "cells": list(self.cells), "est_s": self.est_s,
                "seed": self.seed}  # fmt: skip

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Unit:
        from benchmark.runners import load_runners

        load_runners()  # registers the plug-in job kinds
        return cls(tuple(job_from_dict(j) for j in raw["jobs"]), tuple(raw["cells"]), float(raw["est_s"]),
                   int(raw.get("seed", 0)))  # fmt: skip


def _training_root(job: Job) -> Job | None:
    if job.KIND in TRAINING_KINDS:
        return job
    for dep in job.inputs():
        found = _training_root(dep)
        if found is not None:
            return found
    return None


def pfl_seconds(job: Any, rate: float, eval_rate: float) -> float:
    """Estimated seconds of one pfl training job at ``rate`` training images/s and ``eval_rate`` evaluated
    images/s (500 training and 100 test images per client, every client evaluated every round)."""
    m = max(int(float(job.participation) * job.clients), 1)
    train = job.rounds * m * job.local_epochs * 500
    evals = job.rounds * job.clients * 100
    return train / rate + evals / eval_rate


def training_identity(job: Job) -> Job:
    """The job whose training ``job`` shares: pfl jobs that differ by their model selection only train once
    (``pfl_both_selections``), so they share the ``best`` job's unit."""
    if job.KIND == "pfl_train" and getattr(job, "selection", None) == "last":
        return dataclasses.replace(job, selection="best")  # type: ignore[type-var]
    return job


def group_units(planned: Iterable[tuple[str, Job]], seconds: Callable[[Job], float]) -> list[Unit]:
    """Units from ``(cell, job)`` pairs of a plan: jobs grouped by the training they read (the training job
    first, then the other jobs by path), ordered by :attr:`Unit.value` (ties: lower seed first, then path)."""
    roots: dict[str, tuple[Job, dict[str, Job], set[str]]] = {}
    for cell, job in planned:
        train = _training_root(job)
        if train is None:
            continue
        root = training_identity(train)
        _, deps, cells = roots.setdefault(root.path, (root, {}, set()))
        for j in (train, job):
            if j.path != root.path:
                deps[j.path] = j
        cells.add(cell)
    units = []
    for root, deps, cells in roots.values():
        ordered = sorted(deps.values(), key=lambda j: (j.KIND not in TRAINING_KINDS, j.path))
        units.append(Unit((root, *ordered), tuple(sorted(cells)), seconds(root), int(getattr(root, "seed", 0))))
    return sorted(units, key=lambda u: (-u.value, u.seed, u.root.path))


def plan_units(targets: Iterable[str], config: Mapping[str, Any], seconds: Callable[[Job], float]) -> list[Unit]:
    """The training units of ``targets`` under ``config`` (with ``pfl_both_selections``, the cells of both pfl
    model selections: one training fills them all)."""
    from benchmark.tables.plan import plan_target

    configs = [dict(config)]
    if config.get("pfl_both_selections"):
        other = "last" if config.get("pfl_selection", "best") == "best" else "best"
        configs.append({**config, "pfl_selection": other})
    pairs = []
    for cfg in configs:
        for target in targets:
            for plan in plan_target(target, cfg):
                if plan.status == "planned":
                    sel = f"[{cfg.get('pfl_selection', 'best')}]" if len(configs) > 1 else ""
                    pairs += [(f"{target}:{plan.cell.id}{sel}", job) for job in plan.jobs]
    return group_units(pairs, seconds)


def pending(units: Iterable[Unit], root: Path = Path(".")) -> list[Unit]:
    """The units with at least one job whose output is missing."""
    return [u for u in units if any(not (root / j.path).exists() for j in u.jobs)]


# ------------------------------------------------------------------------------------------------- running
def run_unit(unit: Unit, config: Mapping[str, Any], log: Callable[[dict[str, Any]], None]) -> None:
    """Run the unit's jobs in this process, skipping those whose output exists; ``log`` gets one entry per job."""
    try:  # fp32 means fp32: no TF32 convolutions or matmuls unless the config asks for them
        import torch

        torch.backends.cudnn.allow_tf32 = bool(config.get("tf32", False))
        torch.backends.cuda.matmul.allow_tf32 = bool(config.get("tf32", False))
    except ImportError:  # pragma: no cover
        pass
    for job in unit.jobs:
        if Path(job.path).exists():
            continue
        start = time.time()
        entry = {"job": job_to_dict(job), "path": job.path, "start": start,
                 "command": "flb job " + json.dumps(job_to_dict(job), sort_keys=True)}  # fmt: skip
        try:
            job.execute(config)
        except BaseException as exc:  # recorded, then re-raised: the parent sees the exit status
            log({**entry, "end": time.time(), "status": f"error: {type(exc).__name__}: {exc}"})
            raise
        log({**entry, "end": time.time(), "wall_s": time.time() - start, "status": "done"})


def worker_main(argv: list[str]) -> int:
    """``python -m benchmark.harvest UNIT.json CONFIG.json LOG.jsonl``: run one unit (a harvest worker)."""
    unit = Unit.from_dict(json.loads(Path(argv[0]).read_text()))
    config = json.loads(Path(argv[1]).read_text())
    log_path = Path(argv[2])

    def log(entry: dict[str, Any]) -> None:
        with log_path.open("a") as fh:
            fh.write(json.dumps(entry) + "\n")

    run_unit(unit, config, log)
    return 0


@dataclass
class Running:
    unit: Unit
    proc: subprocess.Popen
    started: float
    log: Path


def harvest(units: list[Unit], config: Mapping[str, Any], budget_s: float, workers: int, work: Path,
            print_fn: Callable[[str], None] = print, min_left_s: float = 0.0) -> list[dict[str, Any]]:  # fmt: skip
    """Run ``units`` (in order) in ``workers`` processes until all are done or ``budget_s`` has passed; a unit is
    started only while more than ``min_left_s`` of the budget is left. Returns the per-job log entries."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.json").write_text(json.dumps(dict(config)))
    deadline = time.time() + budget_s
    queue = list(units)
    running: list[Running] = []
    finished: list[tuple[Unit, int]] = []
    env = {**os.environ, "OMP_NUM_THREADS": str(config.get("threads_per_worker", 1)), "PYTHONUNBUFFERED": "1"}
    total = len(queue)
    while queue or running:
        now = time.time()
        while queue and len(running) < workers and deadline - now > min_left_s:
            unit = queue.pop(0)
            idx = total - len(queue)
            ufile = work / f"unit{idx:03d}.json"
            ufile.write_text(json.dumps(unit.to_dict()))
            logf = work / f"unit{idx:03d}.jsonl"
            out = open(work / f"unit{idx:03d}.log", "w")
            proc = subprocess.Popen([sys.executable, "-m", "benchmark.harvest", str(ufile), str(work / "config.json"),
                                     str(logf)], stdout=out, stderr=subprocess.STDOUT, env=env)  # fmt: skip
            running.append(Running(unit, proc, now, logf))
            print_fn(f"[harvest] start {idx}/{total} {unit.root.path} ({len(unit.cells)} cells, est {unit.est_s:.0f} s)")
        for r in list(running):
            rc = r.proc.poll()
            if rc is not None:
                running.remove(r)
                finished.append((r.unit, rc))
                print_fn(f"[harvest] {'done' if rc == 0 else f'FAILED rc={rc}'} {r.unit.root.path} "
                         f"in {time.time() - r.started:.0f} s")  # fmt: skip
        if time.time() >= deadline:
            for r in running:
                r.proc.terminate()
            for r in running:
                try:
                    r.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    r.proc.kill()
                print_fn(f"[harvest] budget spent: stopped {r.unit.root.path} (resumes from its checkpoint)")
            break
        if not queue and not running:
            break
        if not queue and deadline - time.time() <= min_left_s and not running:
            break
        time.sleep(1.0)
    entries = []
    for f in sorted(work.glob("unit*.jsonl")):
        entries += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return entries


def manifest(entries: list[dict[str, Any]], config: Mapping[str, Any], budget_s: float) -> dict[str, Any]:
    """What a harvest ran, where and how (``flb runs import`` reads it)."""
    from benchmark.provenance import git_commit, machine, package_versions

    try:
        import torch

        cuda = {"torch_cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
                "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32)} if torch.cuda.is_available() else {}  # fmt: skip
        threads = torch.get_num_threads()
    except ImportError:  # pragma: no cover
        cuda, threads = {}, None
    return {"kind": "harvest", "machine": machine(), "versions": package_versions(), "git_commit": git_commit(),
            "cuda": cuda, "threads_per_worker": config.get("threads_per_worker", threads), "budget_s": budget_s,
            "config": {k: v for k, v in config.items() if k not in ("data_root", "weights_dir", "cache_dir")},
            "jobs": entries}  # fmt: skip


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
