"""Small file utilities: checksums, checksum manifests, atomic writes and verified reads.

What every writer here (:func:`atomic_path` and the functions built on it) guarantees:

* **all or nothing**: the bytes go to a temporary file ``.<name>.<random>.tmp`` beside the destination and
  are renamed onto it (``os.replace``, atomic on POSIX) only once complete; on any error the temporary file
  is removed and the previous file (if any) is left as it was. Writers that make temporary files of their
  own beside the path they are given (safetensors) get a private folder instead (``isolate=True``:
  ``.<name>.<random>.tmp/<name>.tmp``), removed with everything in it;
* **no debris after a kill**: the temporary file (or folder) is locked (``flock``) while its writer lives; the
  next write of the same destination removes the ones whose writer is gone (:func:`clean_stale_temps`). Their
  names end in ``.tmp``, so no glob for results (``*.json``, ``*.csv``, ``*.png``, ``rglob``) ever sees them;
* **the usual mode**: the file gets the mode a plain ``open()`` would give it (``0o666 & ~umask``);
* **one clear error** for a full disk (:class:`~benchmark.errors.DiskFullError`, naming the file) or a
  read-only / unwritable folder (:class:`~benchmark.errors.NotWritableError`, naming the folder);
* with ``checksum=True``, a sidecar ``<name>.sha256`` (``sha256sum`` format) recording the file's sha256,
  which :func:`read_verified_bytes` / :func:`read_verified_json` / :func:`read_verified_csv` check before
  anything is parsed. A write without ``checksum`` removes a stale sidecar, so a sidecar is only ever that of
  the file beside it (a kill between the file's rename and its sidecar's leaves a file without a sidecar:
  complete, and read with the structural checks only).

Binaries a job reads back (training checkpoints) are *sealed* instead (:func:`write_sealed` /
:func:`read_sealed`): one self-verifying file, a header line with the payload's sha256 and size followed by
the payload, on disk (``fsync``) before it gets its name, and checked before the payload is handed to a
loader.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from benchmark.errors import (
    BenchmarkError,
    ChecksumError,
    CorruptFileError,
    DataMissingError,
    DiskFullError,
    NotWritableError,
)

_CHUNK = 1 << 20


def file_digest(path: str | Path, algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in 1 MiB chunks."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def sha256_file(path: str | Path) -> str:
    """sha256 hex digest of a file."""
    return file_digest(path, "sha256")


def sha256_bytes(data: bytes) -> str:
    """sha256 hex digest of a byte string."""
    return hashlib.sha256(data).hexdigest()


def read_manifest(path: str | Path) -> dict[str, str]:
    """Read a ``sha256  relative/path`` manifest (the format of ``shared/data/MANIFEST.sha256``).

    Blank lines and lines starting with ``#`` are ignored. Returns ``{relative_path: sha256}``.
    """
    out: dict[str, str] = {}
    for lineno, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64:
            raise ChecksumError(
                f"{path}:{lineno}: malformed manifest line {raw!r}",
                "each line must be '<64-hex sha256>  <relative/path>'",
            )
        out[parts[1].strip().lstrip("*")] = parts[0].lower()
    return out


def verify_file(path: str | Path, expected: str, algorithm: str = "sha256") -> None:
    """Raise :class:`ChecksumError` unless ``path`` has digest ``expected``; call before unpickling."""
    path = Path(path)
    if not path.is_file():
        raise DataMissingError(f"expected file {path} is missing", "re-create or download it")
    got = file_digest(path, algorithm)
    if got != expected.lower():
        raise ChecksumError(
            f"{algorithm} mismatch for {path}: expected {expected}, got {got}",
            "the file is corrupt or a different version; delete it and re-create or re-download it",
        )


#: The fix of a damaged result file: the job that writes it runs again once it is gone.
RERUN = "delete it and rerun the command that wrote it (for a build, `snakemake --cores all <target>` runs its job again)"

_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
_NOT_WRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
_DISK_FULL_TEXT = ("No space left on device", "os error 28", "Disk quota exceeded", "os error 122")


# ------------------------------------------------------------------------------------------- write errors
def _nearest_folder(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (the folder a failed write could not write into)."""
    for p in (path, *path.parents):
        if p.is_dir():
            return p
    return path


def disk_full_error(dest: Path) -> DiskFullError:
    """The error of a write of ``dest`` that ran out of space."""
    return DiskFullError(
        f"no space left on the device while writing {dest}",
        f"free space on the disk that holds {_nearest_folder(dest.parent)}, then rerun the same command "
        "(nothing half-written was kept)",
    )


def not_writable_error(dest: Path, err: OSError) -> NotWritableError:
    """The error of a write of ``dest`` into a read-only or unwritable folder."""
    folder = _nearest_folder(dest.parent)
    why = "is on a read-only file system" if err.errno == errno.EROFS else "is not writable (permission denied)"
    return NotWritableError(
        f"cannot write {dest}: the folder {folder} {why}",
        f"make {folder} writable (or run from a copy of the project you can write to), then rerun the same command",
    )


@contextlib.contextmanager
def write_errors(dest: str | Path) -> Iterator[None]:
    """Turn the OS errors of writing ``dest`` into one clear error: a full disk (also when a library wraps
    ENOSPC in its own exception, as torch and safetensors do) and a read-only or unwritable folder."""
    dest = Path(dest)
    try:
        yield
    except OSError as err:
        if err.errno in _DISK_FULL:
            raise disk_full_error(dest) from err
        if err.errno in _NOT_WRITABLE:
            raise not_writable_error(dest, err) from err
        raise
    except Exception as err:  # a library's own exception around an OS error: re-raised unless disk full
        if not isinstance(err, BenchmarkError) and any(t in str(err) for t in _DISK_FULL_TEXT):
            raise disk_full_error(dest) from err
        raise


# ------------------------------------------------------------------------------------------- temp files
_UMASK = re.compile(rb"^Umask:\s*([0-7]+)$", re.MULTILINE)


def current_umask() -> int:
    """The process's umask (read without changing it where ``/proc`` tells it)."""
    with contextlib.suppress(OSError):
        with open("/proc/self/status", "rb") as f:
            m = _UMASK.search(f.read())
        if m is not None:
            return int(m.group(1), 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def default_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: ``0o666 & ~umask``."""
    return 0o666 & ~current_umask()


def _temp_pattern(name: str) -> re.Pattern[str]:
    """Names of the temporary files of a destination ``name``: ``.<name>.<8 random>.tmp`` (a file, or a folder
    with ``isolate``; earlier versions of the suite: a file ``.<name>.<8 random><suffix>``)."""
    return re.compile(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}(\.[A-Za-z0-9]+)?")


def _try_lock(fd: int) -> bool | None:
    """Take an exclusive ``flock`` without waiting: True taken, False held by a live process, None when the
    file system does not support it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as err:
        return False if err.errno in (errno.EAGAIN, errno.EACCES) else None
    return True


def clean_stale_temps(dest: str | Path) -> list[Path]:
    """Remove the temporary files of ``dest`` whose writer is gone (killed): those not locked. A live writer's
    (locked) are kept; so is everything where locks are not supported. Returns what was removed."""
    dest = Path(dest)
    pattern = _temp_pattern(dest.name)
    try:
        names = [e.name for e in os.scandir(dest.parent) if pattern.fullmatch(e.name)]
    except OSError:
        return []
    removed = []
    for name in names:
        path = dest.parent / name
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            if _try_lock(fd) is True:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
                removed.append(path)
        finally:
            os.close(fd)
    return removed


def _locked_temp(dest: Path, isolate: bool) -> tuple[Path, int]:
    """A new temporary file (or, with ``isolate``, folder) for ``dest``, locked by this process: its path and
    the open descriptor that holds the lock."""
    for _ in range(8):
        if isolate:
            path = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
            fd = os.open(path, os.O_RDONLY)
        else:
            fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
            path = Path(name)
        if _try_lock(fd) is not False:  # False: a cleaner that saw it before the lock is removing it
            with contextlib.suppress(FileNotFoundError):
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    return path, fd
        os.close(fd)
    raise OSError(errno.EAGAIN, "could not create a temporary file (removed by concurrent writers)", str(dest))


# ------------------------------------------------------------------------------------------- sidecars
def sidecar_path(path: str | Path) -> Path:
    """The checksum sidecar of ``path``: ``<name>.sha256``."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


_SIDECAR = re.compile(r"([0-9a-f]{64}) [ *](.+)\n")


def recorded_sha256(path: str | Path, fix: str = RERUN) -> str | None:
    """The sha256 the sidecar of ``path`` records (None without a sidecar); a malformed or foreign sidecar is
    a :class:`CorruptFileError`."""
    path = Path(path)
    side = sidecar_path(path)
    try:
        text = side.read_text(errors="replace")
    except FileNotFoundError:
        return None
    m = _SIDECAR.fullmatch(text)
    if m is None or m.group(2) != path.name:
        raise CorruptFileError(f"checksum file {side} is damaged (not '<sha256>  {path.name}')", f"{fix}; delete {side} too")
    return m.group(1)


def _remove_stale_sidecar(dest: Path) -> None:
    """Remove ``dest``'s sidecar (only a file that is one: ``<sha256>  <name>``)."""
    side = sidecar_path(dest)
    with contextlib.suppress(OSError):
        if side.is_file() and side.stat().st_size < 512 and _SIDECAR.fullmatch(side.read_text(errors="replace")):
            side.unlink()


# ------------------------------------------------------------------------------------------- writers
@contextlib.contextmanager
def atomic_path(
    dest: str | Path, suffix: str = "", *, checksum: bool = False, isolate: bool = False
) -> Iterator[Path]:
    """Yield a temporary path for ``dest``; rename it onto ``dest`` only if the block succeeds (module
    docstring: all or nothing, no debris after a kill, the usual mode, clear errors, optional sidecar).

    The temporary name ends in ``.tmp``: writers that infer a format from the name must be told it
    (``savefig(format=...)``). ``suffix`` is accepted for compatibility and not used. ``isolate``: the
    writer makes temporary files of its own beside the path (safetensors): give it a private folder.
    """
    del suffix
    dest = Path(dest)
    with write_errors(dest):
        dest.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_temps(dest)
        temp, fd = _locked_temp(dest, isolate)
    tmp = temp / f"{dest.name}.tmp" if isolate else temp
    try:
        with write_errors(dest):
            yield tmp
            os.chmod(tmp, default_mode())
            digest = sha256_file(tmp) if checksum else None
            _remove_stale_sidecar(dest)
            os.replace(tmp, dest)
            if digest is not None:
                atomic_write_text(sidecar_path(dest), f"{digest}  {dest.name}\n")
    finally:
        if isolate:
            shutil.rmtree(temp, ignore_errors=True)
        else:
            temp.unlink(missing_ok=True)
        os.close(fd)


def atomic_write_bytes(dest: str | Path, data: bytes | bytearray | memoryview, *, checksum: bool = False) -> None:
    """Write bytes to ``dest`` atomically (:func:`atomic_path`)."""
    with atomic_path(dest, checksum=checksum) as tmp, open(tmp, "wb") as f:
        f.write(data)


def atomic_write_text(dest: str | Path, text: str, *, checksum: bool = False) -> None:
    """Write text to ``dest`` atomically (:func:`atomic_path`)."""
    with atomic_path(dest, checksum=checksum) as tmp:
        tmp.write_text(text)


def atomic_write_json(dest: str | Path, obj: Any, *, checksum: bool = False) -> None:
    """Write JSON (sorted keys, indented) to ``dest`` atomically (:func:`atomic_path`)."""
    atomic_write_text(dest, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", checksum=checksum)


# ------------------------------------------------------------------------------------------- readers
def read_verified_bytes(path: str | Path, *, fix: str = RERUN) -> bytes:
    """The bytes of ``path``, checked against its sidecar when it has one (:class:`CorruptFileError` naming
    the file on a mismatch, :class:`DataMissingError` when it does not exist)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataMissingError(f"{path} does not exist", "run the job that writes it first") from None
    want = recorded_sha256(path, fix)
    if want is not None and sha256_bytes(data) != want:
        side = sidecar_path(path).name
        raise CorruptFileError(
            f"{path} is damaged or truncated (sha256 mismatch with {side}; if you edited it on purpose, delete "
            f"{side})",
            fix,
        )
    return data


def read_verified_json(path: str | Path, *, fix: str = RERUN) -> Any:
    """The JSON in ``path`` after :func:`read_verified_bytes`; a truncated or damaged one is a
    :class:`CorruptFileError` naming it."""
    data = read_verified_bytes(path, fix=fix)
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError) as err:
        raise CorruptFileError(f"{path} is not valid JSON (truncated or damaged: {err})", fix) from None


def check_csv(
    path: str | Path,
    data: bytes,
    *,
    columns: Iterable[str] = (),
    nonempty: Iterable[str] = (),
    numeric: Iterable[str] = (),
    fix: str = RERUN,
) -> list[str]:
    """Check that ``data`` (the bytes of the CSV ``path``) is complete and well-formed, and return its header.

    Complete: not empty, UTF-8, ends with a newline, every record has as many fields as the header.
    Well-formed: the header has ``columns``; ``nonempty`` fields are never empty; ``numeric`` fields, where
    not empty, parse as numbers. Each failure is one :class:`CorruptFileError` naming the file and the line.
    """
    if not data.strip():
        raise CorruptFileError(f"{path} is empty", fix)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CorruptFileError(f"{path} is not UTF-8 text (byte {err.start}: {err.reason})", fix) from None
    if not text.endswith("\n"):
        raise CorruptFileError(f"{path} is truncated: its last line ends without a newline", fix)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
        missing = [c for c in columns if c not in header]
        if missing:
            raise CorruptFileError(f"{path} lacks the column(s) {', '.join(missing)}", fix)
        must = [(c, header.index(c)) for c in nonempty if c in header]
        nums = [(c, header.index(c)) for c in numeric if c in header]
        for row in reader:
            if len(row) != len(header):
                raise CorruptFileError(
                    f"{path} is truncated or damaged: line {reader.line_num} has {len(row)} fields, the header "
                    f"{len(header)}",
                    fix,
                )
            for c, i in must:
                if not row[i]:
                    raise CorruptFileError(f"{path} line {reader.line_num}: field {c!r} is empty", fix)
            for c, i in nums:
                if row[i]:
                    try:
                        float(row[i])
                    except ValueError:
                        raise CorruptFileError(
                            f"{path} line {reader.line_num}: field {c!r} is {row[i]!r}, not a number", fix
                        ) from None
    except csv.Error as err:
        raise CorruptFileError(f"{path} is not a readable CSV (line {reader.line_num}: {err})", fix) from None
    return header


def read_verified_csv(
    path: str | Path,
    *,
    columns: Iterable[str] = (),
    nonempty: Iterable[str] = (),
    numeric: Iterable[str] = (),
    fix: str = RERUN,
    **read_csv: Any,
):
    """A CSV as a DataFrame after :func:`read_verified_bytes` and :func:`check_csv` (``read_csv``: keywords
    of :func:`pandas.read_csv`). Returns ``pandas.DataFrame``."""
    import pandas as pd  # local: heavy import (pandas)

    data = read_verified_bytes(path, fix=fix)
    check_csv(path, data, columns=columns, nonempty=nonempty, numeric=numeric, fix=fix)
    return pd.read_csv(io.BytesIO(data), **read_csv)


# ------------------------------------------------------------------------------------------- sealed files
_SEAL_MAGIC = b"flb-sealed "
_SEAL = re.compile(rb"flb-sealed 1 sha256=([0-9a-f]{64}) bytes=([0-9]+)\n")


def write_sealed(dest: str | Path, payload: bytes | bytearray | memoryview) -> str:
    """Write ``payload`` to ``dest`` atomically and durably (``fsync`` before the rename) as a self-verifying
    file: one header line ``flb-sealed 1 sha256=<hex> bytes=<n>`` and the payload. Returns its sha256."""
    view = memoryview(payload).cast("B")
    digest = hashlib.sha256(view).hexdigest()
    with atomic_path(dest) as tmp, open(tmp, "wb") as f:
        f.write(b"flb-sealed 1 sha256=%s bytes=%d\n" % (digest.encode(), len(view)))
        f.write(view)
        f.flush()
        os.fsync(f.fileno())  # on disk before the rename gives it the name
    return digest


def read_sealed(path: str | Path, *, kind: str = "file", fix: str = RERUN) -> bytes:
    """The payload of a file written by :func:`write_sealed`, after checking its size and sha256. A file
    without the header (written before files were sealed, or not one of them), a truncated or a corrupt one
    is a :class:`CorruptFileError` naming it; nothing of it is returned."""
    path = Path(path)
    with open(path, "rb") as f:
        head = f.readline(256)
        payload = f.read()
    if not head.startswith(_SEAL_MAGIC):
        raise CorruptFileError(
            f"{kind} {path} has no checksum (written by an older version of the suite, or not a {kind}) and "
            "cannot be verified",
            fix,
        )
    m = _SEAL.fullmatch(head)
    if m is None:
        raise CorruptFileError(f"{kind} {path} is corrupt (damaged checksum header)", fix)
    if len(payload) != int(m.group(2)):
        raise CorruptFileError(
            f"{kind} {path} is truncated or corrupt ({len(payload)} bytes, its header says {int(m.group(2))})", fix
        )
    if hashlib.sha256(payload).hexdigest().encode() != m.group(1):
        raise CorruptFileError(f"{kind} {path} is corrupt (sha256 mismatch)", fix)
    return payload
