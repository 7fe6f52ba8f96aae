"""Weight sources and their identities.

Three sources, named in configs as ``weights: <source>``:

* ``torchvision`` - torchvision's official ImageNet checkpoint (what the papers used). Read from the torch
  hub cache (``$TORCH_HOME/hub/checkpoints/<file>``) when present, otherwise downloaded when the network is
  reachable; the sha256 prefix embedded in torchvision's file name is verified before loading.
* ``substitute`` - a local safetensors file in ``$FLB_WEIGHTS_DIR`` with a recorded sha256 (the two
  ImageNet-trained feature extractors described in ``shared/data/README.md``; *not* torchvision's runs).
* ``random`` - torchvision's default initialisation from a seeded generator (legate2023's "Random").

Every feature-cache entry and result row records :class:`WeightsIdentity` (source, file name, sha256).
Checkpoints are loaded with ``torch.load(weights_only=True)`` or from safetensors only, after their
checksum has been verified.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchmark.data.download import download_checkpoint
from benchmark.data.fetch import network_reachable
from benchmark.errors import ChecksumError, ConfigError, DataMissingError
from benchmark.io import sha256_file
from benchmark.paths import weights_dir

if TYPE_CHECKING:
    import torch

# torch is imported where a checkpoint is loaded, not here: planning a workflow reads this module's names and
# paths only, and importing torch costs seconds per process (tests/test_backbones.py checks it stays so).

WEIGHT_SOURCES = ("torchvision", "substitute", "random")


@dataclass(frozen=True)
class WeightsIdentity:
    """What a result was computed with: ``source``, a file or run ``name`` and the ``sha256`` of its bytes."""

    source: str
    name: str
    sha256: str

    @property
    def substitute(self) -> bool:
        return self.source == "substitute"


@dataclass(frozen=True)
class SubstituteFile:
    """A local safetensors feature-extractor file with its recorded sha256 and key prefix."""

    filename: str
    sha256: str
    key_prefix: str
    note: str


def torch_hub_dir() -> Path:
    """``torch.hub.get_dir()`` without importing torch: ``$TORCH_HOME/hub``, ``TORCH_HOME`` defaulting to
    ``$XDG_CACHE_HOME/torch`` and that to ``~/.cache/torch`` (torch.hub's own rule). A process that imported torch
    asks torch, which also knows a folder set by ``torch.hub.set_dir``."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return Path(torch.hub.get_dir())
    cache = os.getenv("XDG_CACHE_HOME", os.path.join("~", ".cache"))
    return Path(os.path.expanduser(os.getenv("TORCH_HOME", os.path.join(cache, "torch")))) / "hub"


def hub_checkpoint_path(url: str) -> Path:
    """Where torch keeps a downloaded checkpoint: ``<torch.hub.get_dir()>/checkpoints/<file name>``."""
    return torch_hub_dir() / "checkpoints" / url.rsplit("/", 1)[-1]


def _hash_prefix(filename: str) -> str | None:
    stem = filename.rsplit(".", 1)[0]
    tail = stem.rsplit("-", 1)[-1]
    return tail if len(tail) >= 6 and all(c in "0123456789abcdef" for c in tail) else None


def load_torchvision_checkpoint(
    url: str, download: bool | None = None
) -> tuple[dict[str, torch.Tensor], WeightsIdentity]:
    """Load an official torchvision checkpoint from the hub cache, downloading it if allowed and needed."""
    path = hub_checkpoint_path(url)
    prefix = _hash_prefix(path.name)
    if not path.is_file():
        if download is False or (download is None and not network_reachable()):
            raise DataMissingError(
                f"torchvision checkpoint {path.name} is not in the torch hub cache ({path})",
                f"run `flb data fetch --weights MODEL` (it downloads {url} to that path; or set TORCH_HOME), or "
                "use weights: substitute (its file in FLB_WEIGHTS_DIR / config 'weights_dir') or random",
            )

        download_checkpoint(url, path, prefix)
    digest = sha256_file(path)
    if prefix and not digest.startswith(prefix):
        raise ChecksumError(
            f"{path} has sha256 {digest[:12]}..., torchvision's file name says {prefix}",
            "delete the file and download it again",
        )
    import torch

    state = torch.load(path, map_location="cpu", weights_only=True)
    return state, WeightsIdentity("torchvision", path.name, digest)


def load_substitute(
    spec: SubstituteFile, folder: str | Path | None = None
) -> tuple[dict[str, torch.Tensor], WeightsIdentity]:
    """Load a substitute safetensors file after verifying its recorded sha256."""
    from safetensors.torch import load_file  # local: heavy import (safetensors)

    path = weights_dir(folder) / spec.filename
    if not path.is_file():
        raise DataMissingError(
            f"substitute weights {spec.filename} not found in {path.parent}",
            "set FLB_WEIGHTS_DIR (or config 'weights_dir', --weights-dir) to the folder holding it "
            "(shared/data/weights), or use weights: torchvision (`flb data fetch --weights MODEL`)",
        )
    digest = sha256_file(path)
    if digest != spec.sha256:
        raise ChecksumError(
            f"sha256 mismatch for {path}: recorded {spec.sha256}, file has {digest}",
            "the file is corrupt or a different file; restore the original",
        )
    return load_file(str(path)), WeightsIdentity("substitute", spec.filename, digest)


def random_identity(module: torch.nn.Module, seed: int) -> WeightsIdentity:
    """Identity of a seeded random init: sha256 over the state dict's names, shapes and bytes."""
    h = hashlib.sha256()
    for k, v in sorted(module.state_dict().items()):
        h.update(k.encode())
        h.update(str(tuple(v.shape)).encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return WeightsIdentity("random", f"torchvision-default-init-seed{seed}", h.hexdigest())


def check_source(source: str) -> str:
    if source not in WEIGHT_SOURCES:
        raise ConfigError(f"unknown weights source {source!r}", f"use one of: {', '.join(WEIGHT_SOURCES)}")
    return source
