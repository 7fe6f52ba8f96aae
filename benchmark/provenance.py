"""Provenance recorded with every result row: git commit, package versions, machine, peak memory."""

from __future__ import annotations

import functools
import os
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


_ISA_FLAGS = ("amx_tile", "avx512f", "avx2", "neon", "asimd", "sve")


def _cpuinfo() -> dict[str, str]:
    """The first processor's ``key: value`` lines of ``/proc/cpuinfo`` (keys lower-case), or ``{}``."""
    out: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        if not line.strip():
            if out:
                break
            continue
        key, _, value = line.partition(":")
        out.setdefault(key.strip().lower(), value.strip())
    return out


def _lscpu_model() -> str:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == "model name" and value.strip() not in ("", "-"):
            return value.strip()
    return ""


def _sysctl_brand() -> str:
    try:
        return subprocess.run(
            ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu_isa() -> str:
    """The widest vector extensions the CPU reports (e.g. ``avx512f avx2``), which decide the float kernels
    torch and BLAS pick; ``""`` when the OS does not say."""
    info = _cpuinfo()
    flags = set((info.get("flags") or info.get("features") or "").split())
    return " ".join(f for f in _ISA_FLAGS if f in flags)


@functools.cache
def cpu_model() -> str:
    """The CPU's model, never ``unknown``: ``/proc/cpuinfo``'s ``model name``, else ``lscpu``, else macOS's
    ``sysctl`` brand string, else ``platform.processor()`` when it is more than the architecture, else the
    vendor / family / model ids (or the architecture alone, said as such)."""
    info = _cpuinfo()
    for cand in (info.get("model name", ""), _lscpu_model(), _sysctl_brand()):
        if cand:
            return cand
    proc = platform.processor()
    if proc and proc != platform.machine():
        return proc
    ids = [
        f"{k} {info[k]}"
        for k in ("vendor_id", "cpu family", "model", "cpu implementer", "cpu part")
        if k in info
    ]
    if ids:
        return ", ".join(ids)
    return f"{platform.machine() or 'unknown architecture'} (model not reported by the OS)"


def cpu_description() -> str:
    """``cpu_model()`` plus the vector extensions (``AMD EPYC; avx512f avx2``)."""
    isa = cpu_isa()
    return f"{cpu_model()}; {isa}" if isa else cpu_model()


def machine() -> str:
    """A short description of the machine (CPU count, CPU model and vector extensions, GPU if any)."""
    desc = f"{platform.machine()} {os.cpu_count()} cpu ({cpu_description()})"
    torch = sys.modules.get("torch")  # a process that computed with torch has imported it; others
    if torch is not None and torch.cuda.is_available():  # (e.g. cost arithmetic) need no GPU line
        desc += f"; {torch.cuda.get_device_name(0)}"
    return desc


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
