"""Checkpoints that outlive the machine: a harvest parks the checkpoints of the units it stopped in the ledger
folder, and the next harvest, on any machine, restores them before it plans.

A harvest stopped by its budget keeps each running training's last checkpoint in ``results/checkpoints/``, and
the next harvest resumes from it. That only helps on the same machine: this suite's sessions land on a fresh
machine of a pool each time, whose ``results/`` is empty, so a unit longer than one session never finished
(2026-11-26: a FedBABU unit needs about 90 CPU-minutes of one core, and a session's harvest shares the cores).

* :func:`park_checkpoints` (after a harvest): for every unit of the harvest's plan, the checkpoint of each of its
  trainings (the root, and a training it starts from: LG-FedAvg's FedAvg) is copied to
  ``<ledger>/parked/<checkpoint path>`` when the training is not finished, and a parked copy is removed once its
  training's output exists; :func:`clear_recorded` (before a harvest plans) removes those of trainings recorded in
  the ledger, finished elsewhere, except the trainings a planned unit still runs: those of the harvest's whole
  plan and, for a harvest narrowed by ``--seeds``, ``--targets`` or ``--config``, of a plain harvest's
  (:func:`benchmark.harvest_cli.parked_jobs_to_keep`). The files are the checkpoints as written
  (:func:`benchmark.io.write_sealed`: self-verifying; verified when read and copied), small for the pfl networks
  (4convNet: 0.5 MB for FedAvg, 1.4 MB for FedBABU, whose checkpoint holds more state), committed with the records;
  a file larger than :data:`PARK_MAX_BYTES` (Ditto's, with its 100 personal models) is not parked, and the harvest
  says so.
* The weights of a finished training whose unit still has jobs to run (the budget stopped it between them:
  evaluations, or the training that starts from it) are parked too, at their own path
  (``<ledger>/parked/results/runs/...model.pt``: 0.5 MB for a 4convNet): the ledger keeps no weights, so without
  them the next harvest would train again to evaluate. They are removed once every job of the unit is done. Restored, they let the recorded training fill its output
  (:meth:`benchmark.tables.records._Ledger.choose`, :func:`benchmark.harvest.must_run`).
* :func:`restore_parked` (before a harvest plans): every parked checkpoint that is further on than the local one
  (or has none locally) is copied into ``results/checkpoints/``. Resuming then checks the run's identity as for
  any checkpoint (:func:`benchmark.federated.checkpoint.load_checkpoint`): a parked checkpoint of another
  configuration is refused there, by name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.io import atomic_write_bytes, read_sealed, write_sealed
from benchmark.ledger import MARKER_SUFFIX, job_outputs, weight_files

#: The folder under the ledger (``runs/``) that holds the parked checkpoints.
PARK_DIR = "parked"
#: Where the checkpoints are (``results/checkpoints/...``); any other parked file is a training's weights.
CHECKPOINT_PARTS = ("results", "checkpoints")
#: The largest file parked: the parked files are committed to the repository. A 4convNet checkpoint is 0.5-1.4 MB;
#: Ditto's holds its 100 personal models (about 47 MB) and is not parked: it stays in ``results/checkpoints/`` of
#: the machine that wrote it.
PARK_MAX_BYTES = 8 * 2**20


@dataclass
class Parking:
    """What :func:`park_checkpoints` did: checkpoints copied in, parked copies removed (training finished), and
    files not parked because they are larger than :data:`PARK_MAX_BYTES` (with their size in bytes)."""

    parked: list[Path] = field(default_factory=list)
    cleared: list[Path] = field(default_factory=list)
    too_large: list[tuple[Path, int]] = field(default_factory=list)

    def fits(self, local: Path) -> bool:
        """Whether ``local`` is small enough to park; noted in :attr:`too_large` when not."""
        size = local.stat().st_size
        if size > PARK_MAX_BYTES:
            self.too_large.append((local, size))
            return False
        return True


def progress_of(path: Path) -> tuple[int, int] | None:
    """(rounds done, rounds) of the checkpoint file ``path``, or None when it cannot be read."""
    from benchmark.federated.checkpoint import checkpoint_progress  # local: torch, only when there are files

    return checkpoint_progress(path)


def _copy(src: Path, dest: Path) -> None:
    """Copy a sealed checkpoint, verified on the way (a damaged one raises, nothing is written)."""
    write_sealed(dest, read_sealed(src, kind="checkpoint"))


def _park_weights(job: Any, unit: Any, park: Path, root: Path, done: Parking) -> None:
    """The weights of a finished training ``job`` whose unit has jobs still to run (its evaluations, or a training
    that starts from it): parked (the ledger keeps no weights, so without them the next harvest trains again);
    cleared once every job of the unit is done. A training the unit's root starts from (LG-FedAvg's FedAvg) that
    ran here parks its record too: the ledger may hold another run of it (a GPU's), whose record the weights of
    this one would not match."""
    if not (root / job.path).exists():
        return
    files = weight_files(job, root)
    if job.path != unit.root.path and files and not (root / (job.path + MARKER_SUFFIX)).exists():
        files = job_outputs(job, root) + files
    if all((root / j.path).exists() for j in unit.jobs):
        for rel in files:
            if (park / rel).is_file():
                (park / rel).unlink()
                done.cleared.append(park / rel)
        return
    for rel in files:
        if not done.fits(root / rel):
            continue
        if not (park / rel).is_file() or (park / rel).read_bytes() != (root / rel).read_bytes():
            atomic_write_bytes(park / rel, (root / rel).read_bytes())
            done.parked.append(park / rel)


def park_checkpoints(units: Iterable[Any], park: Path, root: Path = Path(".")) -> Parking:
    """Park the checkpoint of each unit's unfinished root training, and the weights of a finished one whose
    evaluations are not all done (module docstring); clear those no longer needed."""
    done = Parking()
    for unit in units:
        for job in _trainings(unit):
            _park_weights(job, unit, park, root, done)
            _park_checkpoint(job, park, root, done)
    return done


def _trainings(unit: Any) -> list[Any]:
    """The jobs of ``unit`` that checkpoint: its root training and a training it starts from (a prerequisite,
    such as the FedAvg training that LG-FedAvg after FedAvg reads), inputs first."""
    return [j for j in unit.jobs if j.path == unit.root.path or j.checkpoint_file() is not None]


def _park_checkpoint(job: Any, park: Path, root: Path, done: Parking) -> None:
    """The checkpoint of ``job``, parked while the training is unfinished, cleared once its output exists."""
    ckpt = job.checkpoint_file()
    if ckpt is not None:
        parked, local = park / ckpt, root / ckpt
        if (root / job.path).exists():
            if parked.is_file():
                parked.unlink()
                done.cleared.append(parked)
        elif local.is_file() and done.fits(local) and progress_of(local) is not None:
            if not parked.is_file() or parked.read_bytes() != local.read_bytes():
                _copy(local, parked)
                done.parked.append(parked)


def clear_recorded(park: Path, recorded: Iterable[Any], running: Iterable[Any] = ()) -> list[Path]:
    """Remove the parked checkpoints of trainings that are recorded in the ledger (``recorded``: their jobs): such
    a training finished, on this machine or another, so its checkpoint is never needed again (and a harvest whose
    plan skips the recorded unit would otherwise never clear it). Except the trainings in ``running`` (the jobs of
    the harvest's planned units): a recorded training whose unit still lacks an evaluation, with no parked weights,
    is trained again for them, and its parked checkpoint is that retraining's progress. Returns the files removed."""
    keep = {str(job.checkpoint_file()) for job in running if hasattr(job, "checkpoint_file")}
    cleared = []
    for job in recorded:
        ckpt = job.checkpoint_file() if hasattr(job, "checkpoint_file") else None
        if ckpt is not None and str(ckpt) not in keep and (park / ckpt).is_file():
            (park / ckpt).unlink()
            cleared.append(park / ckpt)
    return cleared


def restore_parked(park: Path, root: Path = Path(".")) -> list[Path]:
    """Copy every parked checkpoint that is further on than the local one, or has none, into place, and every
    parked weight file that is missing here (with a parked record: in place of the record materialised here from
    the ledger, whose marker goes); returns the local paths written. An unreadable parked checkpoint is
    left where it is and not restored; weights are checked by the evaluation that reads them (the training
    record's sha256)."""
    restored = []
    for parked in sorted(p for p in park.rglob("*") if p.is_file()) if park.is_dir() else []:
        rel = parked.relative_to(park)
        if rel.parts[:2] != CHECKPOINT_PARTS:
            if not (root / rel).exists() or _over_a_record(park, rel, root):
                atomic_write_bytes(root / rel, parked.read_bytes())
                restored.append(root / rel)
            continue
        theirs = progress_of(parked)
        if theirs is None:
            continue
        local = root / parked.relative_to(park)
        mine = progress_of(local) if local.is_file() else None
        if mine is None or mine[0] < theirs[0]:
            _copy(parked, local)
            restored.append(local)
    for path in restored:
        if path.suffix == ".json":  # a parked record replaced the ledger's: computed here, not materialised
            Path(str(path) + MARKER_SUFFIX).unlink(missing_ok=True)
    return restored


def _over_a_record(park: Path, rel: Path, root: Path) -> bool:
    """Whether the parked file ``rel`` belongs to a parked record (a training run here whose ledger record is
    another run's) that replaces a record materialised here: every file of that run is then the parked one."""
    stem = rel.name.split(".")[0]
    record = rel.parent / (stem + ".json")
    return (park / record).is_file() and (root / (str(record) + MARKER_SUFFIX)).exists()
