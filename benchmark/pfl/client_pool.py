"""A round's clients trained side by side in forked CPU processes (``PFLConfig.client_procs``; issue 27).

Why: the CPU harvest runs one unit per core, and a unit whose checkpoint is too large to park between sessions
(Ditto's: 100 personal models, 9 to 45 MiB, above ``harvest_park.PARK_MAX_BYTES``) must finish within one
session's budget; a Ditto unit at f = 0.1 is about two CPU-hours of training on one core. With
``client_procs = 2`` it takes both cores and about half the wall time.

How: the per-client loop's work (:meth:`~benchmark.pfl.trainer.PFLTrainer.local_update`, the reference's
``LocalUpdate.train`` or the algorithm's procedure) runs in ``client_procs`` worker processes forked from the
trainer when its first round starts. Each worker holds the forked copy of the trainer (model, data, split,
procedure) and computes with one torch thread. A task carries what a client's update reads that changes between
rounds: the round, the lr, the broadcast entries and the client's personal entries (None for a client that
has none yet); it returns the client's state, its loss and its personal entries after the update (Ditto keeps
its personal model there). :func:`map` returns them in the clients' order, so the server averages them in the
loop's order.

Bit for bit the loop at one thread, on the same machine: a client's update depends only on what the task carries
(the model is loaded from the state, the optimiser is fresh, every draw comes from the run's streams keyed by
round and client: :mod:`benchmark.pfl.streams`), and each worker runs the loop's code at one thread
(``tests/test_pfl_client_pool.py`` checks FedAvg, FedBABU, LG-FedAvg, FedRep, Ditto and Per-FedAvg). So the
option is execution only: it is in a run's record but not in its checkpoint identity, and a run may resume with
another number of processes.

The harvest's stop signal (SIGTERM) goes to the trainer's process only, which ends the round (its workers finish
their tasks) and checkpoints, as without workers; the workers ignore Ctrl-C's SIGINT, which a terminal sends to
the whole process group, so that the trainer decides there too. A worker ends with its parent (Linux's
parent-death signal), and the pool is terminated when the run ends, however it ends. Workers set one torch
thread before any work: a forked child that computes with several OpenMP threads after its parent did can hang
(seen here with GNU OpenMP). CUDA cannot be forked: the option is for a CPU only.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import signal
from typing import TYPE_CHECKING, Any

import torch

from benchmark.errors import ConfigError

if TYPE_CHECKING:
    from benchmark.pfl.local import State
    from benchmark.pfl.trainer import PFLTrainer

#: The trainer the forked workers run: set while a pool is open (a worker the pool forks again after a crash
#: copies it from there); one pool at a time in a process.
_FORKED: PFLTrainer | None = None

PR_SET_PDEATHSIG = 1  # <sys/prctl.h>

Task = tuple[int, int, float, "State", "State | None"]
Result = tuple["State", float, "State | None"]


def _start_worker() -> None:
    """A worker ignores Ctrl-C (the terminal sends it to the whole group: the trainer's process decides), ends on
    SIGTERM (the pool's terminate; a harvest worker's stop handler, which the fork copies, would keep it alive),
    ends with its parent (Linux's parent-death signal, where it has one) and computes with one thread."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the harvest worker's stop handler, inherited by the fork
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: a worker outliving a killed parent waits idle on its queue
        pass
    torch.set_num_threads(1)


def _update(task: Task) -> Result:
    """One client's update in a worker: the loop's :meth:`local_update` on the task's broadcast and personal
    entries."""
    i, r, lr, broadcast, personal = task
    trainer = _FORKED
    assert trainer is not None, "a client pool worker without its trainer"
    trainer.broadcast = broadcast
    trainer.personal = {} if personal is None else {i: personal}
    state, loss = trainer.local_update(i, r, lr)
    return state, loss, trainer.personal.get(i)


class ClientPool:
    """``procs`` forked workers running clients' updates for ``trainer`` (module docstring); close it."""

    def __init__(self, trainer: PFLTrainer, procs: int) -> None:
        global _FORKED
        if trainer.device.type != "cpu":
            raise ConfigError(f"client_procs={procs} on {trainer.device}",
                              "use client_procs: 1 on a GPU (worker processes are for a CPU)")  # fmt: skip
        if _FORKED is not None:
            raise ConfigError("a second client pool in one process", "close the first pool before opening another")
        _FORKED = trainer
        try:
            self._pool = multiprocessing.get_context("fork").Pool(procs, initializer=_start_worker)
        except BaseException:
            _FORKED = None
            raise
        self.procs = procs

    def map(self, trainer: PFLTrainer, r: int, ids: list[int], lr: float) -> list[Result]:
        """The updates of clients ``ids`` in round ``r`` at ``lr``, in the order of ``ids``."""
        tasks = [(i, r, lr, trainer.broadcast, trainer.personal.get(i)) for i in ids]
        return self._pool.map(_update, tasks, chunksize=1)

    def close(self) -> None:
        global _FORKED
        self._pool.terminate()
        self._pool.join()
        _FORKED = None

    def __enter__(self) -> ClientPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
