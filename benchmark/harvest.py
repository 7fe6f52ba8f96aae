"""Harvest scarce compute: run a target's unrun planned training jobs, most cells per estimated minute first,
in a pool of worker processes, until a time budget is spent.

A **unit** is one training job, the jobs it reads that are not done yet (partitions, a learning-rate grid) and
the jobs that read it (its evaluations), run in that order in one worker process: the unit fills the cells of
every job in it. Units are ordered by cells filled per estimated minute (jobs that fill many cells and short
jobs first; for equal value the lowest seed first). A worker that is still running when the budget ends is
stopped by SIGTERM: a training in its round loop ends the round in progress, writes its checkpoint there (due
or not: :func:`benchmark.federated.loop.request_stop`) and exits; any other job (an evaluation) may still finish;
no other job of the unit starts. A job still running after the stop's grace (``--grace``, default 5 minutes after
the budget) gets a second SIGTERM and unwinds where it is (its atomic writes leave no partial file), keeping its
last checkpoint (every ``checkpoint_every`` rounds, sealed and renamed into place). The checkpoint stays under
``results/checkpoints/`` and the next harvest resumes the job from it, to the same numbers as an uninterrupted run
(each runner's resumption guarantee; ``tests/test_harvest.py``).

Each finished job is written to ``results/`` as if Snakemake had run it, and a **manifest** (:func:`manifest`;
``flb harvest`` writes it to ``results/harvest/harvest-<stamp>.json``) lists every job with its start and end
time, wall time, exit status, the command a user would type to run it alone, the machine and the numerics the
workers were given; ``flb harvest`` (:mod:`benchmark.harvest_cli`) then records every finished job in the ledger.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from benchmark.harvest_park import progress_of
from benchmark.jobs import Job, job_closure, job_from_dict, job_to_dict
from benchmark.ledger import MARKER_SUFFIX, weight_files
from benchmark.provenance import git_commit, machine, package_versions
from benchmark.runners import load_runners
from benchmark.runners.pfl import planning_configs
from benchmark.tables.plan import plan_target

#: Job kinds that are training (the heavy root of a unit); everything else runs inside the unit that needs it.
TRAINING_KINDS = ("pfl_train", "pfl_central_curve", "fl_train", "zo_train")


@dataclass(frozen=True)
class Unit:
    """One training job and its dependants, with the cells they fill and the estimated seconds. ``jobs`` are in
    the order they run: the training job's own inputs (``prereq`` of them: partitions, a learning-rate grid),
    the training job, then the jobs that read it. ``resumes``: (rounds done, rounds) of the training's checkpoint
    when a previous harvest left one (its estimate then counts the rounds left). ``job_est_s``: each job's share
    of ``est_s`` (0 for a job that does not run), in the order of ``jobs``; recorded with the job's run.
    ``unmeasured``: some job of it has no measured rate on the device (its estimate is an assumed default).
    ``input_resumes``: (kind, rounds done, rounds) of each training among the unit's inputs that has a checkpoint
    (the FedAvg model LG-FedAvg starts from): its estimate counts the rounds left too; planning only, not
    serialised."""

    jobs: tuple[Job, ...]
    cells: tuple[str, ...]
    est_s: float
    seed: int = 0
    prereq: int = 0
    resumes: tuple[int, int] | None = None
    job_est_s: tuple[float, ...] = ()
    unmeasured: bool = False
    input_resumes: tuple[tuple[str, int, int], ...] = ()

    @property
    def root(self) -> Job:
        """The training job."""
        return self.jobs[self.prereq]

    @property
    def value(self) -> float:
        """Cells filled per estimated minute."""
        return len(self.cells) / max(self.est_s / 60.0, 1e-9)

    def to_dict(self) -> dict[str, Any]:
        return {"jobs": [job_to_dict(j) for j in self.jobs], "cells": list(self.cells), "est_s": self.est_s,
                "seed": self.seed, "prereq": self.prereq,
                "resumes": None if self.resumes is None else list(self.resumes),
                "job_est_s": list(self.job_est_s)}  # fmt: skip

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Unit:
        load_runners()  # registers the plug-in job kinds
        return cls(tuple(job_from_dict(j) for j in raw["jobs"]), tuple(raw["cells"]), float(raw["est_s"]),
                   int(raw.get("seed", 0)), int(raw.get("prereq", 0)),
                   None if raw.get("resumes") is None else (int(raw["resumes"][0]), int(raw["resumes"][1])),
                   tuple(float(s) for s in raw.get("job_est_s", ())))  # fmt: skip


def _training_root(job: Job) -> Job | None:
    if job.KIND in TRAINING_KINDS:
        return job
    for dep in job.inputs():
        found = _training_root(dep)
        if found is not None:
            return found
    return None


def training_identity(job: Job, *, shared_selections: bool = True) -> Job:
    """The job whose training ``job`` shares: pfl jobs that differ by their model selection only train once
    when one training writes both (``pfl_both_selections``: ``shared_selections``), so they share the ``best``
    job's unit; otherwise each selection is its own training, as is a training started from another's selected
    model (LG-FedAvg after FedAvg: :meth:`~benchmark.runners.pfl.PFLTrainJob.source`)."""
    if (shared_selections and job.KIND == "pfl_train" and getattr(job, "selection", None) == "last"
            and getattr(job, "source", lambda: None)() is None):  # a run from another's model: not shared
        return dataclasses.replace(job, selection="best")  # type: ignore[type-var]
    return job


def written_by(job: Job, root: Job, *, shared_selections: bool = True) -> bool:
    """Whether running ``root`` writes ``job``'s outputs (the other model selection of a pfl training)."""
    return job.path != root.path and training_identity(job, shared_selections=shared_selections).path == root.path


def group_units(planned: Iterable[tuple[str, Job]], seconds: Callable[[Job], float], *,
                shared_selections: bool = True) -> list[Unit]:  # fmt: skip
    """Units from ``(cell, job)`` pairs of a plan: jobs grouped by the training they read (the training job's
    own inputs first, then the training job, then the other jobs by path), ordered by :attr:`Unit.value`: cells
    per estimated minute, highest first (ties: lower seed first, then path). A unit's estimate is the sum of
    ``seconds`` over its jobs but those its training writes itself (:func:`written_by`); issue 24: "jobs that fill
    many cells and short jobs first; cheapest seed first"."""
    roots: dict[str, tuple[Job, dict[str, Job], set[str]]] = {}
    for cell, job in planned:
        train = _training_root(job)
        if train is None:
            continue
        root = training_identity(train, shared_selections=shared_selections)
        _, deps, cells = roots.setdefault(root.path, (root, {}, set()))
        for j in (train, job):
            if j.path != root.path:
                deps[j.path] = j
        cells.add(cell)
    units = []
    for root, deps, cells in roots.values():
        before = [j for j in job_closure([root])[:-1] if j.path not in deps]
        ordered = sorted(deps.values(), key=lambda j: (j.KIND not in TRAINING_KINDS, j.path))
        jobs = (*before, root, *ordered)
        est = sum(seconds(j) for j in jobs if not written_by(j, root, shared_selections=shared_selections))
        units.append(Unit(jobs, tuple(sorted(cells)), est, int(getattr(root, "seed", 0)), len(before)))
    return sorted(units, key=lambda u: (-u.value, u.seed, u.root.path))


def plan_units(targets: Iterable[str], config: Mapping[str, Any], seconds: Callable[[Job], float],
               seeds: tuple[int, ...] | None = None) -> list[Unit]:  # fmt: skip
    """The training units of ``targets`` under ``config`` (with ``pfl_both_selections``, the cells of both pfl
    model selections: one training fills them all); ``seeds`` replaces every cell's seeds (``--seeds``)."""
    configs = planning_configs(config)
    pairs = []
    for cfg in configs:
        for target in targets:
            for plan in plan_target(target, cfg, seeds=seeds):
                if plan.status == "planned":
                    sel = f"[{cfg.get('pfl_selection', 'last')}]" if len(configs) > 1 else ""
                    pairs += [(f"{target}:{plan.cell.id}{sel}", job) for job in plan.jobs]
    return group_units(pairs, seconds, shared_selections=bool(config.get("pfl_both_selections")))


def must_run(job: Job, unit: Unit, root: Path = Path(".")) -> bool:
    """Whether running ``unit`` runs ``job``: its output is not on disk, or it is there only as a materialised
    record (``<output>.recorded``: the ledger keeps no weights) that a later job of the unit, still to run,
    reads (an evaluation needs the trained model itself), and the weights are not on disk beside it either
    (:func:`benchmark.ledger.weight_files`: restored from ``runs/parked/``, :mod:`benchmark.harvest_park`). A job
    recorded in the ledger but not on disk is run again when its unit runs: the estimate counts it
    (:func:`benchmark.harvest_cli.plan_harvest`)."""
    if not (root / job.path).exists():
        return True
    if not (root / (job.path + MARKER_SUFFIX)).exists() or weight_files(job, root):
        return False
    later = unit.jobs[unit.jobs.index(job) + 1 :]
    return any(job.path in {d.path for d in j.inputs()} and not (root / j.path).exists() for j in later)


def pending(units: Iterable[Unit], root: Path = Path(".")) -> list[Unit]:
    """The units with at least one job whose output is missing."""
    return [u for u in units if any(not (root / j.path).exists() for j in u.jobs)]


# ------------------------------------------------------------------------------------------------- running
#: Exit status of a worker stopped by SIGTERM (the budget): 128 + 15, as a shell reports it.
STOPPED = 143


class _Stopped(BaseException):
    """Raised in a worker by SIGTERM: unwinds the job (its atomic writes remove their temporary files) and ends
    the worker with :data:`STOPPED`."""


def _on_sigterm(signum: int, frame: Any) -> None:
    """The first SIGTERM of a worker lets its job go on (:func:`~benchmark.federated.loop.request_stop`): a
    training ends its round, writes its checkpoint there and stops; any other job (an evaluation) may still finish;
    no other job of the unit starts (:func:`run_unit`). A second SIGTERM (the grace is spent), or one before the
    worker has loaded the round loop, stops the job where it is (:class:`_Stopped`)."""
    loop = sys.modules.get("benchmark.federated.loop")  # never an import inside a signal handler
    if loop is not None and hasattr(loop, "stop_requested") and not loop.stop_requested():
        loop.request_stop()
        return
    raise _Stopped


def worker_numerics(config: Mapping[str, Any]) -> None:
    """Set this process's torch numerics from ``config``: fp32 means fp32 (no TF32 convolutions or matmuls
    unless ``tf32`` is true) and ``threads_per_worker`` intra-op threads. The manifest records the same
    values from the same config (:func:`manifest`)."""
    try:
        import torch  # local: torch only in the harvest's workers, not in its planning
    except ImportError:  # pragma: no cover
        return
    torch.backends.cudnn.allow_tf32 = bool(config.get("tf32", False))
    torch.backends.cuda.matmul.allow_tf32 = bool(config.get("tf32", False))
    if config.get("threads_per_worker"):
        torch.set_num_threads(int(config["threads_per_worker"]))


def resume_point(job: Job, root: Path = Path(".")) -> tuple[int, int] | None:
    """(rounds done, rounds) of ``job``'s checkpoint under ``root``, when it has one that can be read."""
    path = job.checkpoint_file()
    if path is None or not (root / path).is_file():
        return None
    return progress_of(root / path)


def run_unit(unit: Unit, config: Mapping[str, Any], log: Callable[[dict[str, Any]], None]) -> None:
    """Run the unit's jobs in this process, skipping those whose output exists; ``log`` gets one entry per job
    (``status``: ``done``, ``stopped`` (SIGTERM: the budget; ``stopped_after_round``: the round a training ended
    and checkpointed, asked to stop) or ``error: ...``)."""
    from benchmark.federated.loop import StopRequested, stop_requested  # torch: only in a worker

    worker_numerics(config)
    for job in unit.jobs:
        if not must_run(job, unit):
            continue
        if stop_requested():  # the budget ended while the previous job finished: start no other
            raise _Stopped
        for stale in (Path(job.path + MARKER_SUFFIX), Path(job.path)):  # a materialised record without weights
            stale.unlink(missing_ok=True)
        start = time.time()
        entry = {"job": job_to_dict(job), "path": job.path, "start": start,
                 "command": "flb job " + json.dumps(job_to_dict(job), sort_keys=True)}  # fmt: skip
        if (resumed := resume_point(job)) is not None:
            entry["resumed_from"] = list(resumed)
        try:
            job.execute(config)
        except (_Stopped, StopRequested) as stop:
            stopped = {"stopped_after_round": stop.rounds} if isinstance(stop, StopRequested) else {}
            log({**entry, "end": time.time(), "wall_s": time.time() - start, "status": "stopped", **stopped})
            raise _Stopped from None
        except BaseException as exc:  # recorded, then re-raised: the parent sees the exit status
            log({**entry, "end": time.time(), "wall_s": time.time() - start,
                 "status": f"error: {type(exc).__name__}: {exc}"})  # fmt: skip
            raise
        log({**entry, "end": time.time(), "wall_s": time.time() - start, "status": "done"})


#: Linux's scheduler groups processes by session ("autogroup", on by default in many kernels) and shares the
#: CPU equally between the groups: ``os.nice(19)`` yields only within its own session, so against a shell or a
#: build in another session a niced worker still takes a whole share. The group's own nice value lowers it.
AUTOGROUP = Path("/proc/self/autogroup")


def lower_autogroup(path: Path = AUTOGROUP, value: int = 19) -> bool:
    """Give this process's scheduler autogroup the nice ``value`` where Linux has autogroups; ``False``
    (nothing changed) elsewhere or where it is not allowed. Only a session leader calls it (a ``--nice``
    worker, started in its own session), so the group holds the worker alone."""
    try:
        path.write_text(f"{value}\n")
    except OSError:
        return False
    return True


def worker_main(argv: list[str]) -> int:
    """``python -m benchmark.harvest UNIT.json CONFIG.json LOG.jsonl``: run one unit (a harvest worker).

    SIGTERM (the parent's budget) ends the job by an exception, so every write in progress is abandoned the
    way :func:`benchmark.io.atomic_path` guarantees (no partial file, the previous checkpoint intact: pfl, fl and
    zo checkpoints are sealed and renamed into place, :mod:`benchmark.federated.checkpoint`), once a first SIGTERM
    has let a training end its round and write its checkpoint there, or a job finish (:func:`_on_sigterm`); exit
    status :data:`STOPPED`."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    if os.nice(0) >= 19 and os.getsid(0) == os.getpid():  # a --nice worker in its own session
        lower_autogroup()
    unit = Unit.from_dict(json.loads(Path(argv[0]).read_text()))
    config = json.loads(Path(argv[1]).read_text())
    log_path = Path(argv[2])

    def log(entry: dict[str, Any]) -> None:
        with log_path.open("a") as fh:
            fh.write(json.dumps(entry) + "\n")

    try:
        run_unit(unit, config, log)
    except _Stopped:
        return STOPPED
    return 0


@dataclass
class Running:
    unit: Unit
    proc: subprocess.Popen
    started: float
    log: Path
    out: IO[str]  # the worker's stdout and stderr: closed when the worker ends

    def finish(self) -> int:
        """Wait for the worker, close its output file; its exit status."""
        try:
            rc = self.proc.wait()
        finally:
            self.out.close()
        return rc


@dataclass(frozen=True)
class Progress:
    """Where a harvest stands (what :func:`harvest` passes to ``on_tick``)."""

    units_done: int
    units_total: int
    cells_filled: int
    running: int
    elapsed_s: float
    budget_s: float
    rounds: tuple[str, ...] = ()
    """Each running unit's latest ``round r/R`` (:func:`last_round`), where its worker has printed one."""


#: A training's plain progress line (:func:`benchmark.federated.progress.progress_line`).
ROUND_LINE = re.compile(r"\] round (\d+)/(\d+) ")


def last_round(output: Path, tail_bytes: int = 4096) -> str | None:
    """``r/R`` of the last progress line in a worker's output file (its training prints one every 5 % of the
    rounds: the harvester's ``progress`` is on and the file is not a terminal), or ``None``."""
    try:
        with Path(output).open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail_bytes))
            tail = f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    found = ROUND_LINE.findall(tail)
    return f"{found[-1][0]}/{found[-1][1]}" if found else None


def _worker_env(config: Mapping[str, Any]) -> dict[str, str]:
    """The workers' environment: this package first on ``PYTHONPATH`` (a worker runs the code of the harvest
    that started it), ``threads_per_worker`` OpenMP threads, unbuffered output."""
    here = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH", "")
    pythonpath = os.pathsep.join([here, *([path] if path else [])])
    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1"}
    if config.get("threads_per_worker"):
        env["OMP_NUM_THREADS"] = str(config["threads_per_worker"])
    return env


def _open_paths(unit: Unit) -> set[str]:
    """Output paths of the unit's jobs not done yet (two workers never run the same job: a learning-rate grid
    or a partition that two seeds' units share runs in one of them)."""
    return {j.path for j in unit.jobs if not Path(j.path).exists()}


#: Seconds a worker is given to end its round (or job) when the harvest is interrupted (Ctrl-C, a stop signal),
#: and to unwind after the second SIGTERM before SIGKILL.
INTERRUPT_GRACE_S = 20.0
#: The default grace at the end of the budget (``flb harvest --grace``): a round of a 4convNet unit at τ = 10
#: takes about 3 minutes on one core of this suite's CPU.
STOP_GRACE_S = 300.0


def _stop(running: list[Running], grace_s: float = INTERRUPT_GRACE_S) -> list[Running]:
    """Stop the running workers: SIGTERM to all (a training ends its round and writes its checkpoint, any other
    job may finish: :func:`_on_sigterm`); a second SIGTERM to those still alive after ``grace_s`` (they stop
    where they are), and SIGKILL after :data:`INTERRUPT_GRACE_S` more. Each output file is closed. Returns them,
    in order."""
    for r in running:
        r.proc.terminate()
    end = time.time() + grace_s
    for r in running:
        try:
            r.proc.wait(timeout=max(0.0, end - time.time()))
        except subprocess.TimeoutExpired:
            r.proc.terminate()
            try:
                r.proc.wait(timeout=INTERRUPT_GRACE_S)
            except subprocess.TimeoutExpired:
                r.proc.kill()
        r.finish()
    return list(running)


class Terminated(KeyboardInterrupt):
    """The harvester was told to stop by a signal (SIGTERM from ``kill`` or a batch system, SIGHUP when its
    terminal closed, SIGINT also when the shell started it in the background with SIGINT ignored)."""


#: The signals that stop a harvest the way Ctrl-C does.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """While inside, SIGTERM, SIGHUP and SIGINT raise :class:`Terminated` (a ``KeyboardInterrupt``) in the
    harvester, so that it stops its workers and records the jobs that finished, as on Ctrl-C. Without this,
    SIGTERM would end the harvester at once and leave its workers running (those of a ``--nice`` harvest are in
    their own sessions), and a harvest started with ``&`` would ignore ``kill -INT``. A second signal while
    stopping is ignored (SIGKILL remains). Outside the main thread (where handlers cannot be set) nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: Any) -> None:
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise Terminated(f"stopped by {signal.Signals(signum).name}")

    previous = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def harvest(units: list[Unit], config: Mapping[str, Any], budget_s: float, workers: int, work: Path,
            print_fn: Callable[[str], None] = print, min_left_s: float = 0.0,
            on_tick: Callable[[Progress], None] | None = None, clock: Callable[[], float] = time.time,
            poll_s: float = 1.0, grace_s: float = STOP_GRACE_S) -> list[dict[str, Any]]:  # fmt: skip
    """:func:`_harvest` with SIGTERM, SIGHUP and SIGINT stopping it as Ctrl-C does (:func:`stop_signals_interrupt`:
    the workers are stopped, :class:`Terminated` is raised)."""
    with stop_signals_interrupt():
        return _harvest(units, config, budget_s, workers, work, print_fn=print_fn, min_left_s=min_left_s,
                        on_tick=on_tick, clock=clock, poll_s=poll_s, grace_s=grace_s)  # fmt: skip


def _harvest(units: list[Unit], config: Mapping[str, Any], budget_s: float, workers: int, work: Path,
             print_fn: Callable[[str], None] = print, min_left_s: float = 0.0,
             on_tick: Callable[[Progress], None] | None = None, clock: Callable[[], float] = time.time,
             poll_s: float = 1.0, grace_s: float = STOP_GRACE_S) -> list[dict[str, Any]]:  # fmt: skip
    """Run ``units`` (in order) in ``workers`` processes until all are done or ``budget_s`` has passed; a unit is
    started only while more than ``min_left_s`` of the budget is left, and one still running at the end of the
    budget is stopped (:func:`_stop`: within ``grace_s`` a training ends its round and checkpoints there, another
    job may finish): its last checkpoint stays and the next harvest resumes it. A unit that shares an unfinished
    job with a running one waits (the next unit in order that shares none starts instead). Every worker's output file is closed when it ends. ``clock``: the time (``time.time``; tests stop a
    harvest at a chosen moment with it). Returns the per-job log entries of this harvest (``work`` must be this
    harvest's own folder)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.json").write_text(json.dumps(dict(config)))
    t0 = clock()
    deadline = t0 + budget_s
    queue = list(units)
    running: list[Running] = []
    done = cells = started = 0
    env = _worker_env(config)
    total = len(queue)
    # a --nice harvest (niced to 19) starts each worker in its own session, whose scheduler group it lowers
    # (lower_autogroup): a niced process alone would still get an equal share against other sessions
    background = os.nice(0) >= 19

    def tick() -> None:
        if on_tick is not None:
            rounds = tuple(r for r in (last_round(Path(x.out.name)) for x in running) if r is not None)
            on_tick(Progress(done, total, cells, len(running), min(clock() - t0, budget_s), budget_s, rounds))

    try:
        while queue or running:
            while queue and len(running) < workers and deadline - clock() > min_left_s:
                busy = {path for r in running for path in _open_paths(r.unit)}
                free = next((u for u in queue if busy.isdisjoint(_open_paths(u))), None)
                if free is None:
                    break  # every waiting unit shares an unfinished job with a running one: wait for it
                queue.remove(free)
                unit = free
                started += 1
                idx = started
                ufile = work / f"unit{idx:03d}.json"
                ufile.write_text(json.dumps(unit.to_dict()))
                logf = work / f"unit{idx:03d}.jsonl"
                out = open(work / f"unit{idx:03d}.log", "w")  # closed by Running.finish
                try:
                    proc = subprocess.Popen([sys.executable, "-m", "benchmark.harvest", str(ufile),
                                             str(work / "config.json"), str(logf)],
                                            stdout=out, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=background)  # fmt: skip
                except BaseException:
                    out.close()
                    raise
                running.append(Running(unit, proc, clock(), logf, out))
                print_fn(f"[harvest] start {idx}/{total} {unit.root.path} ({len(unit.cells)} cells, "
                         f"est {unit.est_s / 60:.1f} min)")  # fmt: skip
            for r in list(running):
                if r.proc.poll() is not None:
                    running.remove(r)
                    rc = r.finish()
                    if rc == 0:
                        done += 1
                        cells += len(r.unit.cells)
                    what = "done" if rc == 0 else f"FAILED rc={rc} (see {r.log.with_suffix('.log')})"
                    print_fn(f"[harvest] {what} {r.unit.root.path} in {(clock() - r.started) / 60:.1f} min")
            tick()
            if clock() >= deadline:
                if running:
                    print_fn(f"[harvest] budget spent: stopping {len(running)} unit(s): a training after its round in "
                             f"progress, an evaluation if it ends (at most {grace_s:.0f} s)")  # fmt: skip
                for r in _stop(running, grace_s):
                    print_fn(f"[harvest] budget spent: stopped {r.unit.root.path} (the next harvest resumes it from "
                             "its last checkpoint)")  # fmt: skip
                running.clear()
                if queue:
                    print_fn(f"[harvest] budget spent: {len(queue)} unit(s) not started")
                break
            if not running and (not queue or deadline - clock() <= min_left_s):
                break
            time.sleep(poll_s)
    except BaseException:  # interrupted (Ctrl-C, a stop signal, an error): no worker outlives the harvester (their sessions
        _stop(running)  # may be their own, where the terminal's signal does not reach them)
        raise
    tick()
    return logged_entries(work)


def logged_entries(work: Path) -> list[dict[str, Any]]:
    """The per-job log entries the workers of the harvest in ``work`` wrote (also those of an interrupted one)."""
    entries = []
    for f in sorted(work.glob("unit*.jsonl")):
        entries += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return entries


def precision_of(config: Mapping[str, Any]) -> str:
    """The arithmetic the workers ran with, from the config they were given (never from this process's torch
    flags): ``fp32; tf32 off`` unless ``train_precision`` or ``tf32`` say otherwise."""
    return f"{config.get('train_precision', 'fp32')}; tf32 {'on' if config.get('tf32', False) else 'off'}"


def manifest(entries: list[dict[str, Any]], config: Mapping[str, Any], budget_s: float,
             grace_s: float | None = None) -> dict[str, Any]:
    """What a harvest ran, where and how: the jobs' log entries, the machine, the device, the threads per worker
    and the precision the workers were given (:func:`worker_numerics`, from ``config``)."""
    try:
        import torch  # local: torch only in the harvest's workers, not in its planning

        cuda = {"torch_cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()} \
            if torch.cuda.is_available() else {}  # fmt: skip
    except ImportError:  # pragma: no cover
        cuda = {}
    tf32 = bool(config.get("tf32", False))
    return {"kind": "harvest", "machine": machine(), "versions": package_versions(), "git_commit": git_commit(),
            "device": config.get("device"), "cuda": {**cuda, "cudnn_allow_tf32": tf32, "matmul_allow_tf32": tf32},
            "threads_per_worker": config.get("threads_per_worker"), "precision": precision_of(config),
            "budget_s": budget_s, "stop_grace_s": grace_s,
            "config": {k: v for k, v in config.items() if k not in ("data_root", "weights_dir", "cache_dir")},
            "jobs": entries}  # fmt: skip


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
