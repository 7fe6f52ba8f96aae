"""What this machine can run: which datasets are on disk and which weights a model would use.

Checked when the workflow is planned, so a cell that cannot run becomes a ``not_run`` row with the reason
instead of a failing job. Nothing here downloads anything: a dataset that is absent but has a public
download (:mod:`benchmark.data.download`) is planned with a ``fetch_data`` job when the network is
reachable (:func:`dataset_fetch_planned`), and NOT RUN with the command that gets it otherwise
(:func:`dataset_blocker`); torchvision checkpoints likewise (:func:`weights_fetch_planned`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmark.data.download import NO_DOWNLOAD, SOURCES, fetch_command
from benchmark.data.fetch import network_reachable
from benchmark.data.registry import dataset_info, forget_split_sizes, split_size
from benchmark.errors import DataMissingError, UnknownNameError
from benchmark.paths import data_root, weights_dir
from benchmark.reasons import NotRunReason, ReasonKind

# The model and data modules import torch / torchvision; they are imported where needed, so that
# assembling a table whose cells need neither (most of them) starts in a second, not in five.


def training_allowed(config: Mapping[str, Any]) -> bool:
    """Whether training jobs are planned: a CUDA device asked for, or CPU training opted into explicitly."""
    return str(config.get("device") or "").startswith("cuda") or bool(config.get("cpu_training", False))


def dataset_missing(name: str, root: str | None = None) -> NotRunReason | None:
    """None when ``name`` loads from the data root (without downloading), else the reason it cannot: its
    files are absent (``missing data``) or the suite has no loader for it (``not implemented``).

    Asked once per dataset and *resolved* data root: ``root=None`` means ``$FLB_DATA_ROOT`` (else ``./data``)
    as it is at the call, so a process that changes the variable is not answered for the earlier folder; the key
    is the absolute folder, so a relative root is another folder after a ``chdir`` and one folder named two ways
    is one answer."""
    where = data_root(root)
    return _dataset_missing(name, str(where), str(where.absolute()))


@functools.cache
def _dataset_missing(name: str, root: str, _folder: str) -> NotRunReason | None:
    try:
        info = dataset_info(name)
    except UnknownNameError as err:
        return NotRunReason(ReasonKind.NOT_IMPLEMENTED, f"a loader for {name}",
                            f"no loader for dataset {name!r} ({err.what})")  # fmt: skip
    try:
        for split in info.splits:
            if split in ("train", "test"):
                split_size(name, split, root)
    except DataMissingError as err:
        return NotRunReason(ReasonKind.MISSING_DATA, name, f"dataset files absent: {err.what}")
    return None


@functools.cache
def online() -> bool:
    """Whether downloads can run now (``network_reachable``: ``FLB_OFFLINE``/``FLB_ONLINE``, else a probe),
    asked once per planning process."""
    return network_reachable()


def dataset_fetch_planned(name: str, root: str | None = None) -> bool:
    """True when ``name`` is absent here, has a public download and the network is reachable: the
    workflow then fetches (and verifies) it in a ``fetch_data`` job before the jobs that read it."""
    return name in SOURCES and dataset_missing(name, root) is not None and online()


def dataset_blocker(name: str, root: str | None = None) -> NotRunReason | None:
    """None when the cell's dataset is here or will be fetched; else the NOT RUN reason, whose fix names
    the command that gets the data (``flb data fetch NAME``) or where to get it when there is no download."""
    missing = dataset_missing(name, root)
    if missing is None or dataset_fetch_planned(name, root):
        return None
    if name in SOURCES:
        command = fetch_command(name, root)
        return dataclasses.replace(
            missing,
            fix=f"the network is not reachable (or FLB_OFFLINE=1), so it was not fetched: run `{command}` where "
            "there is network, or set FLB_DATA_ROOT (--config data_root=...) to a folder holding it",
            command=command,
        )
    if name in NO_DOWNLOAD:
        return dataclasses.replace(missing, fix=f"no public download: {NO_DOWNLOAD[name]}")
    return missing


def weights_fetch_planned(model: str) -> bool:
    """True when ``model``'s torchvision checkpoint is not in the torch hub cache but the network is
    reachable: the workflow fetches it (``flb data fetch --weights MODEL``) before extracting with it."""
    from benchmark.models.backbones import backbone_spec  # local: heavy import (torch, torchvision)
    from benchmark.models.weights import hub_checkpoint_path  # local: heavy import (torch)

    try:
        spec = backbone_spec(model)
    except UnknownNameError:
        return False
    return not hub_checkpoint_path(spec.torchvision_url).is_file() and online()


def weights_blocker(model: str, root: str | None = None, wdir: str | None = None) -> NotRunReason | None:
    """None when :func:`choose_weights` finds weights for ``model``; else the NOT RUN reason: no backbone of
    that name, no checkpoint and no substitute, or the substitute file not in the weights folder."""
    from benchmark.models.backbones import backbone_spec  # local: heavy import (torch, torchvision)
    from benchmark.models.weights import hub_checkpoint_path  # local: heavy import (torch)

    try:
        spec = backbone_spec(model)
    except UnknownNameError as err:
        return NotRunReason(ReasonKind.NOT_IMPLEMENTED, f"a backbone {model}",
                            f"no backbone {model!r} in the registry ({err.what})")  # fmt: skip
    ckpt = hub_checkpoint_path(spec.torchvision_url)
    if ckpt.is_file() or online():
        return None
    if spec.substitute is None:
        command = f"flb data fetch --weights {model}"
        return NotRunReason(
            ReasonKind.MISSING_WEIGHTS, model,
            f"no weights for {model}: torchvision's {ckpt.name} is not in the torch hub cache ({ckpt.parent}) and "
            "no substitute exists", fix=f"run `{command}` where there is network", command=command,
        )  # fmt: skip
    folder = weights_dir(wdir, root)
    if (folder / spec.substitute.filename).is_file():
        return None
    return missing_weights_reason(model, ckpt, spec.substitute.filename, folder)


def choose_weights(model: str, root: str | None = None, wdir: str | None = None) -> tuple[str | None, str]:
    """The weights a paper cell with ``model`` runs with here: ``(source or None, explanation)``.

    The papers' own (torchvision) checkpoint when it is in the torch hub cache or the network is
    reachable; otherwise the substitute file when one exists; otherwise None, and the explanation is the
    text of :func:`weights_blocker`'s reason. Asked once per model, *resolved* weights folder and torch hub
    folder (the environment variables as they are at the call, like :func:`dataset_missing`).
    """
    from benchmark.models.weights import torch_hub_dir  # local, like the model imports above

    folder = weights_dir(wdir, root)
    return _choose_weights(model, str(folder), str(folder.absolute()), str(torch_hub_dir().absolute()))


@functools.cache
def _choose_weights(model: str, folder: str, _absolute: str, _hub: str) -> tuple[str | None, str]:
    from benchmark.models.backbones import backbone_spec  # local: heavy import (torch, torchvision)
    from benchmark.models.weights import hub_checkpoint_path  # local: heavy import (torch)

    blocker = weights_blocker(model, None, folder)
    if blocker is not None:
        return None, blocker.render()
    spec = backbone_spec(model)
    ckpt = hub_checkpoint_path(spec.torchvision_url)
    if ckpt.is_file():
        return "torchvision", f"torchvision checkpoint {ckpt.name}"
    if online():
        return (
            "torchvision",
            f"torchvision checkpoint {ckpt.name} (fetched by `flb data fetch --weights {model}`)",
        )
    assert spec.substitute is not None  # weights_blocker: no checkpoint and no substitute is a blocker
    return (
        "substitute",
        f"substitute weights {spec.substitute.filename} (torchvision's {ckpt.name} absent; "
        f"`flb data fetch --weights {model}` gets it where there is network)",
    )


def missing_weights_reason(model: str, ckpt: Path, substitute: str, folder: Path) -> NotRunReason:
    """The NOT RUN reason of a cell whose model has neither torchvision's checkpoint ``ckpt`` nor its
    ``substitute`` file in the weights ``folder``: its fix names both ways to get weights, the substitute
    folder setting (``FLB_WEIGHTS_DIR`` / config ``weights_dir``) and the torchvision fetch."""
    command = f"flb data fetch --weights {model}"
    return NotRunReason(
        ReasonKind.MISSING_SUBSTITUTE, model,
        f"no weights for {model}: torchvision's {ckpt.name} is not in the torch hub cache ({ckpt.parent}) and "
        f"the substitute {substitute} is not in the weights folder {folder}",
        fix=f"point FLB_WEIGHTS_DIR (--config weights_dir=...) at the folder holding {substitute}, or run "
        f"`{command}` where there is network", command=command,
    )  # fmt: skip


def describe_root(root: str | None = None) -> Path:
    return data_root(root)


def clear_caches() -> None:
    """Forget what was found (datasets and their sizes, weights, the network probe): for a process that changes the
    files or the network under a running planner (tests); a changed root or environment variable needs no
    clearing."""
    for cached in _CACHED:
        cached.cache_clear()
    forget_split_sizes()


_CACHED = (_dataset_missing, _choose_weights, online)
