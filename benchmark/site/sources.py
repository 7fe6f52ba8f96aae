"""The provenance of every source of numbers the report shows (issue 14): commit, machine, versions, weights
sha256 and data checksums, and whether the source is *fresh* or *recorded*.

* fresh: produced by this checkout's last run: every ``results/tidy/<target>.csv`` (one row per seed and
  metric, with the provenance columns of :mod:`benchmark.tidy`) and every figure manifest's ``provenance``;
* recorded: the committed records of runs made elsewhere or earlier, ``docs/runs/<folder>/`` (each has a
  README; its JSON records carry ``git_commit``, ``machine``, ``versions`` and the identities of their
  weights and data under keys ending in ``sha256`` / ``checksum`` / ``hash``).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.site.inputs import Figure

FRESH = "fresh"
RECORDED = "recorded"
_WEIGHT_WORDS = ("weights", "model", "encoder", "checkpoint")


@dataclass(frozen=True)
class Source:
    """One source of numbers. ``weights`` and ``data`` are ``(label, checksum)`` pairs, distinct values only."""

    id: str  # anchor on provenance.html
    name: str
    kind: str  # FRESH | RECORDED
    where: str  # path it was read from, relative to the repository or results folder
    description: str
    rows: int
    commits: tuple[str, ...]
    machines: tuple[str, ...]
    versions: tuple[str, ...]
    weights: tuple[tuple[str, str], ...]
    data: tuple[tuple[str, str], ...]


def _distinct(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in values if v))


def tidy_source(path: Path) -> Source:
    """A fresh source from one tidy CSV (``results/tidy/<target>.csv``)."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    weights = [
        (f"{r.get('model', '')} ({r.get('weights', '')})", r.get("weights_sha256", ""))
        for r in rows
        if r.get("weights_sha256")
    ]
    data = [
        (f"{r.get('dataset', '')} data", r.get("data_checksum", "")) for r in rows if r.get("data_checksum")
    ]
    data += [
        (
            f"{r.get('dataset', '')} partition {r.get('partition', '')} seed {r.get('seed', '')}",
            r["partition_hash"],
        )
        for r in rows
        if r.get("partition_hash")
    ]
    data += [(f"{r.get('dataset', '')} features", r["features_key"]) for r in rows if r.get("features_key")]
    statuses = _distinct([r.get("status", "") for r in rows])
    return Source(
        id=f"tidy-{path.stem}",
        name=path.stem,
        kind=FRESH,
        where=f"results/tidy/{path.name}",
        description=f"tidy rows of table target {path.stem} (status: {', '.join(statuses) or 'none'})",
        rows=len(rows),
        commits=_distinct([r.get("git_commit", "") for r in rows]),
        machines=_distinct([r.get("machine", "") for r in rows]),
        versions=_distinct([r.get("versions", "") for r in rows]),
        weights=tuple(dict.fromkeys(weights)),
        data=tuple(dict.fromkeys(data)),
    )


def figure_source(fig: Figure) -> Source:
    """A fresh source from a figure manifest's ``provenance`` and ``inputs``."""
    p = fig.provenance
    commit = str(p.get("git_commit") or "")
    if commit and p.get("dirty"):
        commit += "+dirty"
    return Source(
        id=f"figure-{fig.name}",
        name=fig.name,
        kind=FRESH,
        where=f"results/figures/{fig.name}.json",
        description=f"figure {fig.label} of {fig.paper}, created {p.get('created', '?')}",
        rows=len(fig.inputs),
        commits=_distinct([commit]),
        machines=_distinct([str(p.get("machine") or "")]),
        versions=_distinct([_versions_text(p.get("versions"))]),
        weights=(),
        data=tuple((path, sha) for path, sha in fig.inputs if sha),
    )


def _versions_text(v: Any) -> str:
    if isinstance(v, Mapping):
        return ";".join(f"{k}={val}" for k, val in v.items())
    return str(v or "")


def _identities(obj: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, str]]:
    """``(dotted key, value)`` of every string under a key ending in sha256 / checksum / hash (mappings only,
    three levels deep: lists such as per-round histories are not walked)."""
    out: list[tuple[str, str]] = []
    if not isinstance(obj, Mapping) or depth > 3:
        return out
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, str) and str(key).lower().endswith(("sha256", "checksum", "hash")):
            out.append((name, value))
        elif isinstance(value, Mapping):
            out += _identities(value, name + ".", depth + 1)
    return out


def record_source(folder: Path, root: Path) -> Source | None:
    """A recorded source from a ``docs/runs/<folder>/`` (its README's title, its JSON records); ``None`` if the
    folder holds no record with a ``git_commit``."""
    title = folder.name
    readme = folder / "README.md"
    if readme.is_file():
        for line in readme.read_text().splitlines():
            if line.startswith("# "):
                title = line[2:].strip()
                break
    commits, machines, versions = [], [], []
    weights: list[tuple[str, str]] = []
    data: list[tuple[str, str]] = []
    n = 0
    for path in sorted(folder.rglob("*.json")):
        try:
            rec = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if not isinstance(rec, Mapping) or "git_commit" not in rec:
            continue
        n += 1
        rel = path.relative_to(folder).as_posix()
        commits.append(str(rec.get("git_commit") or ""))
        machines.append(str(rec.get("machine") or ""))
        versions.append(_versions_text(rec.get("versions")))
        for key, value in _identities(rec):
            is_weight = any(w in key.lower() for w in _WEIGHT_WORDS)
            (weights if is_weight else data).append((f"{rel}: {key}", value))
    if not n:
        return None
    try:
        where = folder.relative_to(root).as_posix()
    except ValueError:
        where = str(folder)
    return Source(
        id=f"record-{folder.name}",
        name=folder.name,
        kind=RECORDED,
        where=where,
        description=title,
        rows=n,
        commits=_distinct(commits),
        machines=_distinct(machines),
        versions=_distinct(versions),
        weights=tuple(dict.fromkeys(weights)),
        data=tuple(dict.fromkeys(data)),
    )


def collect_sources(results: Path, figures: Sequence[Figure], records: Path | None) -> tuple[Source, ...]:
    """Every source: the fresh tidy CSVs and figure manifests, then the recorded ``docs/runs`` folders."""
    out: list[Source] = []
    tidy = results / "tidy"
    if tidy.is_dir():
        out += [tidy_source(p) for p in sorted(tidy.glob("*.csv"))]
    out += [figure_source(f) for f in figures if f.manifest]
    if records is not None and records.is_dir():
        root = records.parent.parent if records.parent.name == "docs" else records.parent
        for folder in sorted(p for p in records.iterdir() if p.is_dir()):
            src = record_source(folder, root)
            if src is not None:
                out.append(src)
    return tuple(out)
