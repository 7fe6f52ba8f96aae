"""Small file utilities: checksums, checksum manifests and atomic writes.

Nothing half-written is ever left behind: writers go to a temporary file in the destination folder and
are renamed into place only once complete (``os.replace`` is atomic on POSIX).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmark.errors import ChecksumError, DataMissingError

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


@contextlib.contextmanager
def atomic_path(dest: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``dest``; rename it onto ``dest`` only if the block succeeds."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix or ".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write_text(dest: str | Path, text: str) -> None:
    """Write text to ``dest`` atomically."""
    with atomic_path(dest) as tmp:
        tmp.write_text(text)


def atomic_write_json(dest: str | Path, obj: Any) -> None:
    """Write JSON (sorted keys, indented) to ``dest`` atomically."""
    atomic_write_text(dest, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
