"""Device names the suite accepts (``--device``, ``--config device=...``), checked without importing torch.

Valid: ``auto`` or nothing (CUDA when available, else CPU), ``cpu``, ``cuda``, ``cuda:N`` (N a GPU index)
and ``mps`` (Apple GPUs). Anything else is one :class:`~benchmark.errors.ConfigError` listing them, so that a
typo (``gpu``) is never planned or run as a CPU build. Whether a named GPU is *present* needs torch:
:func:`pick_device`, the one device resolver of every training family and of feature extraction.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from benchmark.errors import ConfigError
from benchmark.suggest import did_you_mean

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

DEVICE_SETTING = "--device, or --config device=... in the workflow"

#: The accepted forms, as an error lists them.
VALID_DEVICES = "cpu, cuda, cuda:N (N a GPU index, e.g. cuda:0), mps, or auto"

#: Common names for a device that torch spells otherwise.
_ALIASES = {"gpu": "cuda", "nvidia": "cuda", "cuda0": "cuda:0", "gpu0": "cuda:0", "gpu:0": "cuda:0"}

_VALID = re.compile(r"(auto|cpu|cuda|cuda:\d+|mps)")


def check_device(name: str | None, where: str = "--device") -> str | None:
    """``name`` when it is a valid device (``None``/empty -> ``None``: the default); otherwise a
    :class:`ConfigError` naming ``where`` it was set, listing the valid devices and the one probably meant."""
    if name is None or str(name).strip() == "":
        return None
    text = str(name).strip()
    if _VALID.fullmatch(text):
        return text
    meant = _ALIASES.get(text.lower())
    hint = f"did you mean {meant!r}?" if meant else did_you_mean(text.lower(), ("auto", "cpu", "cuda", "mps"))
    raise ConfigError(
        f"unknown device {text!r} ({where})",
        f"use one of: {VALID_DEVICES}" + (f"; {hint}" if hint else ""),
    )


def pick_device(device: str | None = None, where: str = DEVICE_SETTING) -> torch.device:
    """The device to run on: ``device`` when given (``cpu``, ``cuda``, ``cuda:N``, ``mps``), else (``None``,
    empty or ``auto``) CUDA when available, else CPU.

    A name that is not a device, or a GPU that this machine's torch does not see, is one
    :class:`~benchmark.errors.ConfigError` naming ``where`` it was set; nothing falls back to the CPU silently.
    """
    import torch  # local: planning checks names with this module and must not import torch

    name = check_device(device, where)
    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            raise ConfigError(
                f"device {name!r} ({where}) names a CUDA GPU, but torch sees none here "
                f"(torch {torch.__version__}, {build})",
                "run on a machine with an NVIDIA GPU and a CUDA build of torch, or leave the device unset "
                "(or set cpu) to run on the CPU",
            )
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise ConfigError(
                f"device {name!r} ({where}): torch sees {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}",
                "name one of those (check CUDA_VISIBLE_DEVICES), or use cuda for the first",
            )
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(
            f"device 'mps' ({where}) names an Apple GPU, but torch sees none here (torch {torch.__version__})",
            "leave the device unset to use CUDA when available, else the CPU",
        )
    return dev
