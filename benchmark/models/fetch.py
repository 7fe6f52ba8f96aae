"""``flb data fetch --weights MODEL``: a backbone's torchvision checkpoint into the torch hub cache, verified.

The transfer itself (timeouts, retries, resume, the mirror) is :func:`benchmark.data.download.download_checkpoint`,
the one download path of the suite; this module knows which checkpoint a backbone uses and how torchvision names
its checksum (:mod:`benchmark.models.weights`). It moved here from ``benchmark/data/download.py`` so that the data
package does not import the models package that imports it (issue 25).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmark.data.download import download_checkpoint
from benchmark.errors import ChecksumError
from benchmark.io import atomic_write_json, sha256_file
from benchmark.models import backbones  # module attribute: tests replace backbone_spec
from benchmark.models.weights import _hash_prefix, hub_checkpoint_path


def fetch_weights(
    model: str, *, marker: str | Path | None = None, log: Callable[[str], None] = print,
    mirror: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """``flb data fetch --weights MODEL``: torchvision's checkpoint into the torch hub cache, verified.

    The checkpoint goes to a ``.part`` file beside its destination (kept and resumed after a failed
    transfer, removed on a checksum mismatch) and is renamed into place only when its sha256 starts with
    the prefix in torchvision's file name; an existing file is verified, never replaced.
    """
    spec = backbones.backbone_spec(model)
    path = hub_checkpoint_path(spec.torchvision_url)
    prefix = _hash_prefix(path.name)
    if not prefix:
        raise ChecksumError(f"torchvision file name {path.name} carries no sha256 prefix", "cannot verify it")
    downloaded = False
    if not path.is_file():
        download_checkpoint(spec.torchvision_url, path, prefix, log=log, mirror=mirror, label=model)
        downloaded = True
    digest = sha256_file(path)
    if not digest.startswith(prefix):
        raise ChecksumError(
            f"{path} has sha256 {digest[:12]}..., torchvision's file name says {prefix}",
            "delete the file and run the fetch again",
        )
    record = {"model": model, "file": path.name, "path": str(path), "sha256": digest, "downloaded": downloaded,
              "url": spec.torchvision_url,
              "verified_at": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
    if marker:
        atomic_write_json(marker, record)
    return record
