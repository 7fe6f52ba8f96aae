"""Checkpoints of a federated run: save every few rounds, resume bit-identically after a crash.

Long runs (legate2023 Table 4: up to 3500 rounds for Random) must survive a killed job. A checkpoint is the
complete state the round loop (:func:`benchmark.fl.engine.run_rounds`) needs to continue as if it had never
stopped; the rest is keyed by the round index and needs no saving (client sampling is drawn from the
``client_sampling`` stream keyed by the absolute round, a client's data order from ``data_order`` keyed by
(round, client), local momentum restarts every round). A resumed run therefore gives the same history (wall
time aside) and the same final weights, bit for bit, as an uninterrupted one on the same machine.

Contents (one ``torch.save`` payload, only tensors / numbers / strings / lists / dicts, loaded with
``weights_only=True``), sealed (:func:`benchmark.io.write_sealed`): a header line with the payload's sha256,
checked before anything is unpickled. torch's zip archive does not verify tensor bytes, so without it a flipped
byte would be resumed silently; with it a damaged checkpoint is one :class:`~benchmark.errors.CorruptFileError`
naming the file (delete it: the run restarts from its first round). Checkpoints written before they were sealed
cannot be verified and are refused the same way.

* ``format`` / ``version``: :data:`FORMAT` and :data:`VERSION`;
* ``run``: the identity of the run: ``config`` (:meth:`FLConfig.to_dict`), ``method``, ``stage``,
  ``start_round`` and ``rounds`` of the stage. A checkpoint of any other run is refused, so a changed
  configuration never silently resumes (``progress``, cosmetic, is not compared);
* ``round``: rounds of the stage completed;
* ``trainer``: the trainer's ``state_dict()`` (global model, server optimiser state, ...);
* ``history`` (rows as dicts), ``costs`` (a dict), ``torch_rng`` (the global generators, for modules that
  draw from them while training, e.g. dropout).

Files are written atomically (:func:`benchmark.io.atomic_path`): a crash while saving leaves the previous
checkpoint intact and no partial file; a full disk is one :class:`~benchmark.errors.DiskFullError`.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmark.errors import ConfigError
from benchmark.io import read_sealed, write_sealed

FORMAT = "flb-fl-checkpoint"
VERSION = 1
#: What to do with a checkpoint that cannot be resumed.
START_OVER = "delete it to restart the run from its first round"
#: Config fields that do not change what a run computes (not compared on resume).
COSMETIC_FIELDS = ("progress",)


@dataclass(frozen=True)
class CheckpointSpec:
    """Where to keep a run's checkpoint and how often to write it.

    ``path``: the checkpoint file (its folder is created). ``every``: save after every ``every``-th round
    of a stage (counted within the stage, as ``eval_every``) and after the last round. Two-stage methods keep
    one file per stage (:meth:`for_stage`).
    """

    path: Path
    every: int = 10

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise ConfigError(
                f"checkpoint every must be an integer >= 1, got {self.every!r}", "e.g. every=10 (rounds)"
            )

    def for_stage(self, stage: str) -> CheckpointSpec:
        """The spec of one stage of a multi-stage run: ``run.ckpt`` -> ``run.<stage>.ckpt``."""
        if not stage:
            return self
        p = self.path
        return CheckpointSpec(p.with_name(f"{p.stem}.{stage}{p.suffix}"), self.every)

    def due(self, done: int, rounds: int) -> bool:
        """Whether to save after ``done`` of ``rounds`` rounds of the stage."""
        return done == rounds or done % self.every == 0


def run_identity(
    config: Mapping[str, object], *, method: str, stage: str, start_round: int, rounds: int
) -> dict[str, Any]:
    """What a checkpoint must match to be resumed (module docstring)."""
    return {
        "config": dict(config),
        "method": str(method),
        "stage": str(stage),
        "start_round": int(start_round),
        "rounds": int(rounds),
    }


def rng_state() -> dict[str, Any]:
    """The global torch generators (CPU, and CUDA when it is in use)."""
    out: dict[str, Any] = {"cpu": torch.random.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore :func:`rng_state` (CUDA generators only where the same number of devices is in use)."""
    torch.random.set_rng_state(state["cpu"])
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)


def save_checkpoint(path: str | Path, state: Mapping[str, Any]) -> None:
    """Write ``state`` (plus format and version) to ``path`` sealed and atomically (on disk before the rename
    makes it the checkpoint; :func:`benchmark.io.write_sealed`)."""
    payload = {"format": FORMAT, "version": VERSION, **state}
    buffer = (
        io.BytesIO()
    )  # serialised here, written by write_sealed: a full disk is then an OSError, not torch's
    torch.save(payload, buffer)
    write_sealed(path, buffer.getbuffer())


def _differences(want: Mapping[str, Any], got: Mapping[str, Any]) -> list[str]:
    out = []
    for key in ("method", "stage", "start_round", "rounds"):
        if want.get(key) != got.get(key):
            out.append(f"{key}: checkpoint {got.get(key)!r}, this run {want.get(key)!r}")
    wcfg, gcfg = want.get("config", {}), got.get("config", {})
    if not isinstance(gcfg, Mapping):
        return [*out, "config: missing"]
    for key in sorted(set(wcfg) | set(gcfg)):
        if key in COSMETIC_FIELDS:
            continue
        w, g = wcfg.get(key, "<absent>"), gcfg.get(key, "<absent>")
        if w != g:
            out.append(f"config.{key}: checkpoint {g!r}, this run {w!r}")
    return out


def load_checkpoint(path: str | Path, identity: Mapping[str, Any]) -> dict[str, Any]:
    """Read the checkpoint at ``path`` and check it belongs to the run ``identity`` (:func:`run_identity`).

    Its sha256 is checked first: a corrupt, truncated or unsealed (older) file is one
    :class:`~benchmark.errors.CorruptFileError` naming it, and nothing of it is loaded. Then one
    :class:`ConfigError` naming the file when it cannot be unpickled, has an unknown format version, or
    belongs to another run (the differing fields are listed). Tensors are loaded on the CPU; the trainer moves
    them to its device.
    """
    path = Path(path)
    payload = read_sealed(path, kind="checkpoint", fix=START_OVER)
    try:
        state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except Exception as err:  # a sealed payload that is no checkpoint: all mean the same to the user
        raise ConfigError(
            f"checkpoint {path} cannot be read ({type(err).__name__}: {err})", "delete it to start over"
        ) from err
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ConfigError(f"{path} is not a federated-run checkpoint", "delete it to start over")
    if state.get("version") != VERSION:
        raise ConfigError(
            f"checkpoint {path} has format version {state.get('version')!r}; this code reads version {VERSION}",
            "delete it to start over (or resume with the code that wrote it)",
        )
    missing = [k for k in ("run", "round", "trainer", "history", "costs") if k not in state]
    if missing:
        raise ConfigError(f"checkpoint {path} lacks {', '.join(missing)}", "delete it to start over")
    diff = _differences(identity, state["run"])
    if diff:
        raise ConfigError(
            f"checkpoint {path} belongs to another run ({'; '.join(diff)})",
            "use another checkpoint path for this configuration, or delete the file to start over",
        )
    done = state["round"]
    if not isinstance(done, int) or not 0 <= done <= int(identity["rounds"]):
        raise ConfigError(f"checkpoint {path} has an invalid round {done!r}", "delete it to start over")
    return state


def peek_checkpoint(path: str | Path) -> dict[str, Any] | None:
    """The checkpoint at ``path`` as saved, or None when there is no file or it cannot be read (damaged,
    unsealed, another format, an invalid round): for looking at a run's progress and history without resuming
    it; resuming checks the run's identity (:func:`load_checkpoint`)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        state = torch.load(io.BytesIO(read_sealed(path, kind="checkpoint", fix=START_OVER)), map_location="cpu",
                           weights_only=True)  # fmt: skip
        done, rounds = state["round"], state["run"]["rounds"]
    except Exception:  # unreadable: as no checkpoint; resuming reports what is wrong
        return None
    if not (isinstance(done, int) and isinstance(rounds, int) and 0 <= done <= rounds and rounds > 0):
        return None
    return state


def checkpoint_progress(path: str | Path) -> tuple[int, int] | None:
    """``(rounds done, rounds)`` of the stage the checkpoint at ``path`` holds (:func:`peek_checkpoint`): the
    harvester's estimate of a resumed job (:func:`benchmark.harvest_cli.plan_harvest`)."""
    state = peek_checkpoint(path)
    return None if state is None else (state["round"], state["run"]["rounds"])


def tensors_to(obj: Any, device: torch.device | str) -> Any:
    """``obj`` with every tensor (in nested dicts / lists) moved to ``device`` (a copy when moved)."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, Mapping):
        return {k: tensors_to(v, device) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(tensors_to(v, device) for v in obj)
    return obj
