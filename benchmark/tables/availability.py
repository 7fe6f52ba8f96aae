"""What this machine can run: which datasets are on disk and which weights a model would use.

Checked when the workflow is planned, so a cell that cannot run becomes a ``not_run`` row with the reason
instead of a failing job. Nothing here downloads anything.
"""

from __future__ import annotations

import functools
from pathlib import Path

from benchmark.errors import DataMissingError, UnknownNameError
from benchmark.paths import data_root, weights_dir

# The model and data modules import torch / torchvision; they are imported where needed, so that
# assembling a table whose cells need neither (most of them) starts in a second, not in five.


@functools.cache
def dataset_missing(name: str, root: str | None = None) -> str | None:
    """None when ``name`` loads from the data root (without downloading), else the reason it cannot."""
    from benchmark.data.registry import dataset_info, load_dataset

    try:
        info = dataset_info(name)
    except UnknownNameError as err:
        return f"no loader for dataset {name!r} ({err.what})"
    try:
        for split in info.splits:
            if split in ("train", "test"):
                load_dataset(name, split, root, download=False)
    except DataMissingError as err:
        return f"dataset files absent: {err.what}"
    return None


@functools.cache
def choose_weights(model: str, root: str | None = None, wdir: str | None = None) -> tuple[str | None, str]:
    """The weights a paper cell with ``model`` runs with here: ``(source or None, explanation)``.

    The papers' own (torchvision) checkpoint when it is in the torch hub cache or the network is
    reachable; otherwise the substitute file when one exists; otherwise None.
    """
    from benchmark.data.fetch import network_reachable
    from benchmark.models.backbones import backbone_spec
    from benchmark.models.weights import hub_checkpoint_path

    try:
        spec = backbone_spec(model)
    except UnknownNameError as err:
        return None, f"no backbone {model!r} in the registry ({err.what})"
    ckpt = hub_checkpoint_path(spec.torchvision_url)
    if ckpt.is_file() or network_reachable():
        return "torchvision", f"torchvision checkpoint {ckpt.name}"
    if spec.substitute is not None and (weights_dir(wdir, root) / spec.substitute.filename).is_file():
        return (
            "substitute",
            f"substitute weights {spec.substitute.filename} (torchvision's {ckpt.name} absent)",
        )
    return (
        None,
        f"no weights for {model}: torchvision's {ckpt.name} is not in the torch hub cache and no substitute exists",
    )


def describe_root(root: str | None = None) -> Path:
    return data_root(root)
