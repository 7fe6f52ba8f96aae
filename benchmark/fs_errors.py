"""File-system problems told in one line: what failed, on which path, and what to do.

* :func:`check_output_file` refuses, before any work is done, an output path that is an existing folder or
  that lies under a file (``--out results/x`` where ``results/x`` is a folder).
* :func:`check_folder` refuses a folder setting (the feature cache, a results folder) that is a file or lies
  under one.
* :func:`os_error` turns an :class:`OSError` that reached the command line (disk full, permission denied, a
  read-only file system, a file where a folder is needed or the reverse, a missing file) into a
  :class:`FileSystemError` whose message names the path and the fix (a full disk or a read-only folder with
  the words of :mod:`benchmark.io`'s atomic writer, which reports the same faults while writing).
"""

from __future__ import annotations

import errno
from pathlib import Path

from benchmark.errors import BenchmarkError, ConfigError
from benchmark.io import disk_full_error, not_writable_error


class FileSystemError(BenchmarkError):
    """A file operation failed (an :class:`OSError`), told as what failed, on which path and what to do."""


def blocking_file(path: str | Path) -> Path | None:
    """The outermost existing non-folder among the folders above ``path`` (``path`` itself excluded), or
    ``None`` when every existing one is a folder: the file that stops ``path``'s folders being created."""
    for parent in reversed(Path(path).parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return None


def check_output_file(path: str | Path, option: str) -> Path:
    """``path`` as a :class:`Path` when a file can be written there; a :class:`ConfigError` naming ``option``
    (e.g. ``--out``) and the path when it is an existing folder or lies under a file. Touches nothing."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(
            f"{option} {path} is an existing folder, but {option} names the file to write",
            f"pass the path of a file (e.g. {path / '<name>'}); the folder was left as it is",
        )
    if (blocker := blocking_file(path)) is not None:
        raise ConfigError(
            f"{option} {path} cannot be written: {blocker} is a file, not a folder",
            f"move or delete the file {blocker}, or pass another {option}",
        )
    return path


def check_folder(path: str | Path, what: str, fix: str) -> Path:
    """``path`` as a :class:`Path` when it is a folder or can be created as one; otherwise a
    :class:`ConfigError` saying ``what`` ``path`` is (e.g. "feature cache folder (FLB_CACHE_DIR)"), naming the
    file in the way, with ``fix``. Touches nothing."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} {path} is a file, not a folder", fix)
    if (blocker := blocking_file(path)) is not None:
        raise ConfigError(f"{what} {path} cannot be created: {blocker} is a file, not a folder", fix)
    return path


def os_error(err: OSError, writing: str | None = None) -> FileSystemError:
    """One clear error for ``err``: the path it names (``err.filename``; when the OS gave none, ``writing``,
    e.g. ``"--out results/tidy/x.csv"``, says what the command was writing), what is wrong with it and what
    to do. Every errno gets a message; the common ones get their own fix."""
    path = err.filename
    target = str(path) if path is not None else (writing or "an output")
    folder = str(Path(path).parent) if path is not None else "its folder"
    code = err.errno
    if path is not None and code in (errno.ENOSPC, getattr(errno, "EDQUOT", -1), errno.EROFS):
        failed = disk_full_error(Path(path)) if code != errno.EROFS else not_writable_error(Path(path), err)
        return FileSystemError(failed.what, failed.fix)
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        kind = "disk full" if code == errno.ENOSPC else "disk quota exceeded"
        return FileSystemError(
            f"{kind}: no space left on the device to write {target}",
            "free space on that disk (`df -h` shows it) or point the output elsewhere, then rerun the same "
            "command; outputs are written under a temporary name and renamed only when complete, so no "
            "half-written one was kept",
        )
    if code == errno.EROFS:  # and the OS named no file
        return FileSystemError(
            f"cannot write {target}: {folder} is on a read-only file system",
            "run from a writable checkout or results folder, or point the output (--out, FLB_CACHE_DIR) at a "
            "writable folder",
        )
    if code in (errno.EACCES, errno.EPERM):
        return FileSystemError(
            f"cannot access {target}: permission denied",
            f"make {folder} readable and writable for this user, or point the output (--out, FLB_CACHE_DIR) "
            "at a folder that is",
        )
    if code == errno.ENOTDIR:
        blocker = blocking_file(path) if path is not None else None
        return FileSystemError(
            f"{blocker or target} is a file where a folder is needed" + (f" (for {path})" if blocker else ""),
            f"move or delete the file {blocker or target}, or pass another path",
        )
    if code == errno.EISDIR:
        return FileSystemError(
            f"{target} is a folder where a file is needed", "pass the path of a file, or move the folder away"
        )
    if code == errno.ENOENT:
        return FileSystemError(
            f"{target} does not exist",
            "check the path; if an earlier step writes it, run that step (or the Snakemake target) first",
        )
    name = errno.errorcode.get(code, "") if code is not None else ""
    reason = err.strerror or str(err)
    return FileSystemError(
        f"{reason}{' (' + name + ')' if name else ''} on {target}",
        "check the path and its disk, then rerun the same command (--debug shows the traceback)",
    )
