"""Machine paths out of the text the suite writes for others to read (issue 23).

Pages that are committed (``docs/results/*.md``, the README's Results, ``docs/report/*.html``) and records
shared between machines quote NOT RUN reasons and notes such as "expected images.txt under <data
root>/CUB_200_2011", the data root spelled as this machine's absolute folder. :func:`portable` writes the
absolute folders of the machine as symbols a reader can resolve on theirs:

* the data root (``FLB_DATA_ROOT``): ``$FLB_DATA_ROOT``;
* the weights folder (``FLB_WEIGHTS_DIR``): ``$FLB_WEIGHTS_DIR``;
* the feature cache (``FLB_CACHE_DIR``): ``$FLB_CACHE_DIR``;
* torch's home (``TORCH_HOME``, where the hub cache is): ``$TORCH_HOME``;
* the papers' texts (:func:`benchmark.papers.papers_dir`): ``../shared/papers``;
* the shared folder above the checkout (``FLB_SHARED``): ``../shared``;
* the checkout and the working directory: a relative path;
* the home folder: ``~``.

The most specific folder wins (the data root inside the home folder is ``$FLB_DATA_ROOT``, not ``~/...``).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from benchmark import paths
from benchmark.papers import papers_dir

#: The checkout this package belongs to.
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class PathAlias:
    """An absolute folder of this machine and how it is written instead (``""``: as a relative path)."""

    path: str
    alias: str


def _torch_home() -> str:
    """torch's home folder, as :func:`torch.hub.get_dir` derives it (without importing torch)."""
    env = os.environ.get("TORCH_HOME")
    if env:
        return env
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "torch")


def _forms(path: str | Path) -> set[str]:
    """The spellings of an existing or configured folder: as given (made absolute) and with links resolved."""
    p = Path(os.path.expanduser(str(path)))
    if not p.is_absolute():
        p = Path.cwd() / p
    out = {os.path.normpath(str(p))}
    try:
        out.add(str(p.resolve()))
    except OSError:  # a loop of links: keep the spelling as given
        pass
    return {s for s in out if s not in ("/", "") and len(s) > 1}


_ENV = ("FLB_DATA_ROOT", "FLB_WEIGHTS_DIR", "FLB_CACHE_DIR", "TORCH_HOME", "XDG_CACHE_HOME", "FLB_PAPERS_DIR",
        "FLB_SHARED", "HOME")  # fmt: skip


def machine_aliases() -> tuple[PathAlias, ...]:
    """Every folder of this machine that :func:`portable` rewrites, most specific (longest) first (computed
    once per environment and working directory)."""
    return _aliases(tuple(os.environ.get(k) for k in _ENV), os.getcwd())


@functools.lru_cache(maxsize=8)
def _aliases(_env: tuple[str | None, ...], _cwd: str) -> tuple[PathAlias, ...]:
    shared = os.environ.get("FLB_SHARED") or next(
        (str(p / "shared") for p in ROOT.parents if (p / "shared").is_dir()), str(ROOT.parent / "shared")
    )
    pairs: list[tuple[str | Path, str]] = [
        (paths.data_root(), "$FLB_DATA_ROOT"),
        (paths.weights_dir(), "$FLB_WEIGHTS_DIR"),
        (paths.cache_dir(), "$FLB_CACHE_DIR"),
        (_torch_home(), "$TORCH_HOME"),
        (papers_dir(), "../shared/papers"),
        (shared, "../shared"),
        (ROOT, ""),
        (Path.cwd(), ""),
        ("~", "~"),
    ]
    seen: dict[str, str] = {}
    for path, alias in pairs:
        for form in _forms(path):
            seen.setdefault(form, alias)
    return tuple(PathAlias(p, a) for p, a in sorted(seen.items(), key=lambda kv: (-len(kv[0]), kv[0])))


def portable(text: str, aliases: Iterable[PathAlias] | None = None) -> str:
    """``text`` with every folder of :func:`machine_aliases` (or ``aliases``) written as its symbol; a folder
    written as a relative path loses its prefix (``/repo/results/x`` -> ``results/x``, ``/repo`` -> ``.``).
    Only whole path components match (``/data`` does not touch ``/database``)."""
    for a in machine_aliases() if aliases is None else aliases:
        if a.path not in text:
            continue
        head = re.escape(a.path)
        end = r"(?![\w.-])"  # the folder itself or a path below it, never a longer sibling name
        if a.alias:
            text = re.sub(head + end, lambda _m, s=a.alias: s, text)
        else:
            text = re.sub(head + r"/(?=[\w.$~-])", "", text)
            text = re.sub(head + end, ".", text)
    return text
