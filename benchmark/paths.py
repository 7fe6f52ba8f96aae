"""Where data, weights and caches live.

Precedence for every location: an explicit argument (config file or command line), then the environment
variable, then a default under the working directory.

* data root: ``FLB_DATA_ROOT`` (default ``./data``)
* local weight files: ``FLB_WEIGHTS_DIR`` (default ``<data root>/weights``)
* feature cache: ``FLB_CACHE_DIR`` (default ``./results/cache``)
* torch hub cache: torch's own (``TORCH_HOME``), read by :mod:`benchmark.models.weights`.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmark.errors import DataMissingError


def _pick(explicit: str | Path | None, env: str, default: Path) -> Path:
    if explicit not in (None, ""):
        return Path(explicit).expanduser()
    value = os.environ.get(env)
    return Path(value).expanduser() if value else default


def data_root(explicit: str | Path | None = None) -> Path:
    """The dataset root (argument, else ``$FLB_DATA_ROOT``, else ``./data``)."""
    return _pick(explicit, "FLB_DATA_ROOT", Path("data"))


def weights_dir(explicit: str | Path | None = None, root: str | Path | None = None) -> Path:
    """The folder of local weight files (argument, else ``$FLB_WEIGHTS_DIR``, else ``<data root>/weights``)."""
    return _pick(explicit, "FLB_WEIGHTS_DIR", data_root(root) / "weights")


def cache_dir(explicit: str | Path | None = None) -> Path:
    """The feature-cache folder (argument, else ``$FLB_CACHE_DIR``, else ``./results/cache``)."""
    return _pick(explicit, "FLB_CACHE_DIR", Path("results") / "cache")


def require_dir(path: Path, what: str, fix: str) -> Path:
    """Return ``path`` if it is a directory, else raise one clear :class:`DataMissingError`."""
    if not path.is_dir():
        raise DataMissingError(f"{what}: folder {path} does not exist", fix)
    return path
