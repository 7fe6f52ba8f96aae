"""The families of ``flb peer``: one per training family whose paper released code (issue 26).

A family module (``benchmark/peers/<family>.py``) builds a :class:`PeerFamily` and calls :func:`register` at
import; :data:`benchmark.peers.FAMILIES` names the modules, so :func:`get_family` finds every family without a
second list. ``run`` receives a :class:`PeerRequest` and returns a
:class:`benchmark.peers.compare.PeerComparison`; it runs the released code from the user's checkout (never a
copy kept in this repository) and this suite's runner on the same configuration.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.errors import ConfigError, UnknownNameError
from benchmark.peers import FAMILIES

if TYPE_CHECKING:
    from benchmark.peers.compare import PeerComparison


@dataclass(frozen=True)
class PeerRequest:
    """What ``flb peer`` asks a family to run."""

    family: str
    config_name: str
    seeds: tuple[int, ...]
    official_repo: Path  # the user's checkout of the released code
    workdir: Path  # scratch folder of this comparison (the released code's outputs and logs)
    python: str = sys.executable  # interpreter for the released code (its own environment, ``--python``)
    threads: int = 1


@dataclass(frozen=True)
class PeerFamily:
    """One family: its paper, the released code, its configurations (the first is the default) and how to run
    both sides."""

    name: str
    paper: str
    official_url: str
    configs: Mapping[str, Mapping[str, Any]]
    run: Callable[[PeerRequest], PeerComparison]
    install: str = ""
    default_seeds: tuple[int, ...] = field(default=(0, 1))

    @property
    def default_config(self) -> str:
        return next(iter(self.configs))


_FAMILIES: dict[str, PeerFamily] = {}


def register(family: PeerFamily) -> PeerFamily:
    if family.name in _FAMILIES and _FAMILIES[family.name] is not family:
        raise ConfigError(
            f"peer family {family.name!r} is registered twice", "give the new family another name"
        )
    if not family.configs:
        raise ConfigError(f"peer family {family.name!r} has no configuration", "give it at least a tiny one")
    _FAMILIES[family.name] = family
    return family


def load_families() -> dict[str, PeerFamily]:
    """Every family of :data:`benchmark.peers.FAMILIES`, imported (each module registers itself)."""
    for module in FAMILIES:
        importlib.import_module(f"benchmark.peers.{module}")
    return dict(_FAMILIES)


def get_family(name: str) -> PeerFamily:
    families = load_families()
    if name not in families:
        raise UnknownNameError(
            f"no peer family {name!r}", f"use one of {', '.join(sorted(families)) or '(none)'}"
        )
    return families[name]


def check_request(family: PeerFamily, request: PeerRequest) -> None:
    """One clear error for a request the family cannot run (unknown config, missing checkout, no seeds)."""
    if request.config_name not in family.configs:
        raise UnknownNameError(
            f"peer family {family.name!r} has no configuration {request.config_name!r}",
            f"use one of {', '.join(family.configs)}",
        )
    if not request.official_repo.is_dir():
        raise ConfigError(
            f"--official-repo {request.official_repo} is not a folder",
            f"clone {family.official_url} and pass its path",
        )
    if not request.seeds:
        raise ConfigError("--seeds is empty", "give at least one seed")
