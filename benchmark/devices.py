"""Device names the suite accepts (``--device``, ``--config device=...``), checked without importing torch.

Valid: ``auto`` or nothing (CUDA when available, else CPU), ``cpu``, ``cuda``, ``cuda:N`` (N a GPU index)
and ``mps`` (Apple GPUs). Anything else is one :class:`~benchmark.errors.ConfigError` listing them, so that a
typo (``gpu``) is never planned or run as a CPU build. Whether a named GPU is *present* needs torch: see
:func:`benchmark.features.extract.pick_device`.
"""

from __future__ import annotations

import re

from benchmark.errors import ConfigError
from benchmark.suggest import did_you_mean

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
