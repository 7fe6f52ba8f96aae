"""The target spec of a toy table cell, shared by the tests that run a toy runner plug-in end to end.

One writer instead of a YAML block copied into each test module (issue 25): every toy target is the legate2023
table 3 cell ``cifar10/fedavg/fedncm`` run by one runner; only the names, seeds and options differ."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def write_toy_spec(
    specs: Path,
    target: str,
    runner: str,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    methods: str | None = "{fedncm: toy_ncm}",
    not_run_reason: bool = True,
) -> Path:
    """``specs/<target>.yaml`` (``specs`` made): the cell ``cifar10/fedavg/fedncm`` of legate2023 table 3 run by
    ``runner`` for ``seeds``, with the ``methods`` map (a YAML flow mapping; none when ``None``) and, when
    ``not_run_reason``, a reason for the cells that do not run. Returns the file written."""
    lines = [
        f"target: {target}",
        "paper: legate2023",
        "table: '3'",
        "expected: legate2023/table3.yaml",
        f"seeds: [{', '.join(str(s) for s in seeds)}]",
        *(["not_run_reason: only the toy cell runs here"] if not_run_reason else []),
        "runners:",
        "  - when: {id: cifar10/fedavg/fedncm}",
        f"    runner: {runner}",
        *([f"    methods: {methods}"] if methods is not None else []),
    ]
    specs.mkdir(exist_ok=True)
    path = specs / f"{target}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path
