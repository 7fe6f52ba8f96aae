"""The one policy every loader follows: verify present files, download absent ones, or say what is missing.

Verification happens **before** any pickle is read. A file is accepted when it matches either

* a checksum manifest beside the data: ``<data root>/MANIFEST.sha256`` or ``<data root>/<folder>/MANIFEST.sha256``
  in the ``sha256  relative/path`` format of ``shared/data/MANIFEST.sha256`` (paths relative to the data
  root, e.g. ``cifar-10-batches-py/data_batch_1``), or
* the dataset's official md5 (the values torchvision checks).

If a manifest lists the file, the manifest is authoritative (a mismatch there is an error even if the
official md5 would match, so a local rebuild cannot be silently replaced).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from benchmark.errors import ChecksumError, DataMissingError
from benchmark.io import file_digest, read_manifest, sha256_bytes


def network_reachable(host: str = "download.pytorch.org", port: int = 443, timeout: float = 3.0) -> bool:
    """True if a TCP connection to ``host`` opens; ``FLB_OFFLINE=1`` forces False, ``FLB_ONLINE=1`` True.

    ``FLB_ONLINE=1`` is for networks where the TCP probe fails but downloads work (an HTTP proxy).
    """
    if os.environ.get("FLB_OFFLINE", "") not in ("", "0"):
        return False
    if os.environ.get("FLB_ONLINE", "") not in ("", "0"):
        return True
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def manifest_entries(root: Path, folder: str) -> dict[str, str]:
    """All manifest entries that apply under ``root`` (paths relative to ``root``)."""
    entries: dict[str, str] = {}
    for candidate, prefix in (
        (root / "MANIFEST.sha256", ""),
        (root / folder / "MANIFEST.sha256", folder + "/"),
    ):
        if candidate.is_file():
            entries.update({prefix + k: v for k, v in read_manifest(candidate).items()})
    return entries


_CORRUPT_FIX = "the file is corrupt or not the listed version; re-create it (e.g. shared/data/prepare.py)"


def verify_dataset_files(
    root: Path, folder: str, files: Sequence[str], official_md5: Mapping[str, str] | None = None
) -> str:
    """Verify ``root/folder/<file>`` for each file; return a combined identity (sha256 of the digests).

    Raises :class:`ChecksumError` naming the file on a mismatch, or when a file can be checked against
    neither a manifest nor an official md5.
    """
    manifest = manifest_entries(root, folder)
    digests: list[str] = []
    for name in files:
        rel = f"{folder}/{name}"
        path = root / rel
        if rel in manifest:
            digests.append(manifest_checked(path, manifest[rel], _CORRUPT_FIX))
        elif official_md5 and name in official_md5:
            got = file_digest(path, "md5")
            if got != official_md5[name]:
                raise ChecksumError(
                    f"md5 mismatch for {path}: official {official_md5[name]}, file has {got}",
                    f"re-download it, or put a MANIFEST.sha256 listing '{rel}' in {root} if it is a known rebuild",
                )
            digests.append(got)
        else:
            raise ChecksumError(
                f"no checksum known for {path}",
                f"add a line '<sha256>  {rel}' to {root / 'MANIFEST.sha256'}",
            )
    return sha256_bytes("\n".join(digests).encode())


def manifest_checked(path: Path, listed: str, fix: str) -> str:
    """The sha256 of ``path``, which must be ``listed`` (its manifest line), else :class:`ChecksumError` naming
    both digests (``fix``: what it suggests)."""
    got = file_digest(path, "sha256")
    if got != listed:
        raise ChecksumError(
            f"sha256 mismatch for {path}: manifest says {listed}, file has {got}",
            fix,
        )
    return got


def public_downloader(name: str) -> Callable[[Path], None]:
    """The verified downloader of dataset ``name`` (:func:`benchmark.data.download.fetch_files`)."""

    def run(root: Path) -> None:
        # local: download.py imports the loader modules, which call this
        from benchmark.data.download import fetch_files

        fetch_files(name, root)

    return run


def ensure_present(
    root: Path,
    folder: str,
    files: Sequence[str],
    *,
    dataset: str,
    download: bool | None,
    downloader: Callable[[Path], None] | None,
    how_to_get: str,
) -> None:
    """Make sure ``root/folder/<files>`` exist: use them, download them, or raise one clear error."""
    missing = [f for f in files if not (root / folder / f).exists()]
    if not missing:
        return
    if downloader is not None and (download is True or (download is None and network_reachable())):
        downloader(root)
        missing = [f for f in files if not (root / folder / f).exists()]
        if not missing:
            return
    shown = ", ".join(missing[:4]) + (f" (+{len(missing) - 4} more)" if len(missing) > 4 else "")
    raise DataMissingError(
        f"{dataset}: expected {shown} under {root / folder}",
        f"{how_to_get}; set the data root with --data-root, config 'data_root' or FLB_DATA_ROOT",
    )
