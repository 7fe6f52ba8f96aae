"""Recover a working directory after a build was killed (``kill -9``, power loss), without ``--unlock``.

Snakemake locks the files a build reads and writes (``.snakemake/locks/``) and removes the locks when it ends; a
killed build leaves them, and the next build then stops with "Directory cannot be locked". Those locks do not say
which process wrote them, so every build of this workflow also holds an ``flock`` on
``.snakemake/flb-build.lock`` for as long as its process lives (the kernel releases it when the process dies,
however it dies) and records its host in ``.snakemake/flb-builds/``. When a new build starts
(:func:`recover_stale_locks`, called while the Snakefile is read, before Snakemake takes its locks):

- no other build holds the ``flock`` and none recorded from another host: the locks are stale; they are removed,
  with a note, and the build goes on (its jobs that the killed build left unfinished run again: the default
  workflow profile, ``workflow/profiles/default``, sets ``rerun-incomplete``);
- a build of this working directory is running: the locks stay, and Snakemake refuses a second build of the
  same files as before;
- a build was recorded from another host (its liveness cannot be checked from here): the locks stay and the
  note names the one command that removes them once that build is known to be gone.

Dry runs (``-n``) and the per-job Snakemake processes of cluster executors change nothing.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Open file descriptors of the flocks this process holds (kept open for the life of the process).
_HELD: list[int] = []


@dataclass(frozen=True)
class Recovery:
    """What :func:`recover` found: ``removed`` stale lock files, or ``note`` (``None``: nothing to say)."""

    removed: tuple[str, ...] = ()
    note: str | None = None


def _snakemake_locks(state: Path) -> list[Path]:
    return sorted((state / "locks").glob("*.lock"))


def _record(state: Path) -> Path:
    return state / "flb-builds" / f"{socket.gethostname()}.{os.getpid()}"


def recover(workdir: str | Path = ".") -> Recovery:
    """Take this build's hold on ``workdir`` (the ``flock`` and the host record, released when the process
    ends) and remove Snakemake's locks when they are provably stale (module docstring). Filesystems without
    ``flock`` are left as they are."""
    state = Path(workdir).resolve() / ".snakemake"
    try:
        state.mkdir(parents=True, exist_ok=True)
        fd = os.open(state / "flb-build.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return Recovery()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        alone = True
    except BlockingIOError:
        alone = False
    except OSError:  # no flock on this filesystem: nothing can be proven
        os.close(fd)
        return Recovery()
    out = Recovery()
    if alone:
        out = _remove_stale(state)
    fcntl.flock(fd, fcntl.LOCK_SH)  # this build's hold, until the process ends
    _HELD.append(fd)
    record = _record(state)
    try:
        record.parent.mkdir(exist_ok=True)
        record.touch()
        atexit.register(record.unlink, missing_ok=True)
    except OSError:
        pass
    return out


def _remove_stale(state: Path) -> Recovery:
    """With no build of this host holding the ``flock``: drop this host's records (their builds are gone), then
    remove Snakemake's locks unless a build of another host is recorded."""
    host = socket.gethostname()
    records = sorted((state / "flb-builds").glob("*")) if (state / "flb-builds").is_dir() else []
    others = sorted({r.name.rsplit(".", 1)[0] for r in records} - {host})
    for r in records:
        if r.name.rsplit(".", 1)[0] == host:
            r.unlink(missing_ok=True)
    locks = _snakemake_locks(state)
    if not locks:
        return Recovery()
    where = state.parent
    if others:
        return Recovery(note=(
            f"flb: note: {where} holds the locks of a build started on {', '.join(others)}, which may still run; "
            f"once it has ended, remove them with `snakemake --unlock` and run again"
        ))  # fmt: skip
    for lock in locks:
        lock.unlink(missing_ok=True)
    return Recovery(
        removed=tuple(str(p) for p in locks),
        note=(f"flb: note: removed the locks of a build in {where} that ended without removing them (killed?); "
              "no build is running there, so its unfinished jobs run again"),
    )  # fmt: skip


def recover_stale_locks(workflow: Any) -> Recovery:
    """The Snakefile's call (``workflow`` is Snakemake's object): :func:`recover` in the working directory of a
    build; nothing for a dry run or a Snakemake process that runs one job of a cluster executor."""
    mode = str(getattr(workflow, "exec_mode", "default")).lower()
    dryrun = bool(getattr(getattr(workflow, "output_settings", None), "dryrun", False))
    if dryrun or not mode.endswith("default"):
        return Recovery()
    out = recover(Path.cwd())
    if out.note:
        print(out.note, file=sys.stderr, flush=True)
    return out
