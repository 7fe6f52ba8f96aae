"""Provenance recorded with every result row: git commit, package versions, machine, peak memory."""

from __future__ import annotations

import functools
import platform
import resource
import subprocess
import sys
from importlib import metadata
from pathlib import Path

PACKAGES = ("torch", "torchvision", "numpy", "pandas", "snakemake", "safetensors")


@functools.cache
def git_commit(cwd: str | None = None) -> str:
    """The checkout's HEAD commit (``+dirty`` when there are uncommitted changes), or ``unknown``."""
    where = cwd or str(Path(__file__).resolve().parents[1])
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@functools.cache
def package_versions() -> str:
    """``name=version`` for the packages that determine results, ``;``-separated."""
    out = [f"python={sys.version.split()[0]}", f"fl-pretrain-bench={_version('fl-pretrain-bench')}"]
    out += [f"{p}={_version(p)}" for p in PACKAGES]
    return ";".join(out)


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform.processor()``), or ``unknown cpu``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown cpu"


def machine() -> str:
    """A short description of the machine (CPU count, CPU model, GPU if any)."""
    import os

    desc = f"{platform.machine()} {os.cpu_count()} cpu ({cpu_model()})"
    torch = sys.modules.get("torch")  # a process that computed with torch has imported it; others
    if torch is not None and torch.cuda.is_available():  # (e.g. cost arithmetic) need no GPU line
        desc += f"; {torch.cuda.get_device_name(0)}"
    return desc


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
