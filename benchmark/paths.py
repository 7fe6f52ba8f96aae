"""Where data, weights and caches live.

Precedence for every location: an explicit argument (config file or command line), then the environment
variable, then a default under the working directory.

A data root or weights folder that the user **named** (config ``data_root`` / ``weights_dir``, the
``--data-root`` / ``--weights-dir`` flags, ``$FLB_DATA_ROOT`` / ``$FLB_WEIGHTS_DIR``) must be an existing
folder: :func:`check_locations` refuses it otherwise, when the workflow is planned
(:func:`benchmark.workflow.validate_config`) and when an ``flb`` command starts. The defaults may be
absent (the cells that need them are then NOT RUN with the reason), but never a file.

* data root: ``FLB_DATA_ROOT`` (default ``./data``)
* local weight files: ``FLB_WEIGHTS_DIR`` (default ``<data root>/weights``)
* feature cache: ``FLB_CACHE_DIR`` (default ``./results/cache``)
* torch hub cache: torch's own (``TORCH_HOME``), read by :mod:`benchmark.models.weights`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from benchmark.errors import ConfigError, DataMissingError


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


@dataclass(frozen=True)
class Location:
    """One resolved location: its ``path`` and the setting that chose it (``None``: the default)."""

    kind: str  # "data root" | "weights folder"
    path: Path
    setting: str | None


_SETTINGS = {  # kind -> (config key, command-line flag, environment variable, what it holds)
    "data root": ("data_root", "--data-root", "FLB_DATA_ROOT", "the datasets"),
    "weights folder": ("weights_dir", "--weights-dir", "FLB_WEIGHTS_DIR", "the substitute *.safetensors files"),
}  # fmt: skip


def _locate(kind: str, explicit: str | Path | None, via: Literal["config", "flag"], default: Path) -> Location:
    key, flag, env, _ = _SETTINGS[kind]
    if explicit not in (None, ""):
        return Location(kind, Path(explicit).expanduser(), f"config '{key}'" if via == "config" else flag)
    if os.environ.get(env):
        return Location(kind, Path(os.environ[env]).expanduser(), f"${env}")
    return Location(kind, default, None)


def named_locations(
    data_root_: str | Path | None = None, weights_dir_: str | Path | None = None,
    via: Literal["config", "flag"] = "config",
) -> tuple[Location, Location]:  # fmt: skip
    """The data root and the weights folder with the setting that named each (as :func:`data_root` and
    :func:`weights_dir` resolve them); ``via``: whether the explicit values came from the config or flags."""
    root = _locate("data root", data_root_, via, Path("data"))
    return root, _locate("weights folder", weights_dir_, via, root.path / "weights")


def check_locations(
    data_root_: str | Path | None = None, weights_dir_: str | Path | None = None, *,
    via: Literal["config", "flag"] = "config", weights: bool = True, will_create: bool = False,
) -> None:  # fmt: skip
    """Refuse, with one :class:`ConfigError` naming the path and its setting, a data root or weights folder
    that the user named and that does not exist, and any of the two that exists but is not a folder.

    An unnamed default (``./data``, ``<data root>/weights``) may be absent: nothing is refused then.
    ``weights=False``: the command reads no weights (only the data root is checked); ``will_create``: the
    command creates a missing data root (``flb data fetch``), so only one that is not a folder is refused.
    """
    for loc in named_locations(data_root_, weights_dir_, via)[: 2 if weights else 1]:
        _, flag, env, holds = _SETTINGS[loc.kind]
        absent_ok = loc.setting is None or will_create
        if loc.path.is_dir() or (absent_ok and not loc.path.exists()):
            continue
        named = f"named by {loc.setting}" if loc.setting else f"the default: neither {flag} nor ${env} is set"
        if loc.path.exists():
            what, extra = "is not a folder", ""
        elif loc.kind == "data root":
            what, extra = "does not exist", f", or create it (mkdir -p {loc.path}) for `flb data fetch NAME` to fill"
        else:
            what, extra = "does not exist", ", or unset it (default: <data root>/weights)"
        setting = loc.setting or f"${env}"
        raise ConfigError(f"{loc.kind} {loc.path} ({named}) {what}",
                          f"point {setting} at the folder holding {holds}{extra}")  # fmt: skip
